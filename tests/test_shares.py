"""Fair shares of the slots: one client holds at most its share, the rest is refused at once, and a freed slot
goes to the client holding fewest (issue 58: 60 flooding clients took every /predict slot and thread)."""
from __future__ import annotations

import threading

import pytest

from app.core.execution.shares import Busy, Shares, TooMany, client_key


class Held:
    """A request that takes its slot in a thread and holds it until released."""

    def __init__(self, shares: Shares, client: str, order: list):
        self.got, self.release, self.error = threading.Event(), threading.Event(), None
        self.thread = threading.Thread(target=self._run, args=(shares, client, order), daemon=True)
        self.thread.start()

    def _run(self, shares, client, order):
        try:
            with shares.slot(client):
                order.append(client)
                self.got.set()
                assert self.release.wait(30)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            self.error = exc
            self.got.set()

    def done(self):
        self.release.set()
        self.thread.join(30)


def _waiting(shares: Shares, n: int) -> None:
    for _ in range(3000):
        if sum(shares.state()["waiting"].values()) == n:
            return
        threading.Event().wait(0.01)
    raise AssertionError(shares.state())


def test_a_client_holds_at_most_its_share_and_past_its_queue_is_refused_at_once():
    shares = Shares(slots=4, per_client=2, waiting=1, what="predict")
    order: list = []
    a = [Held(shares, "attacker", order) for _ in range(2)]
    assert all(h.got.wait(10) for h in a) and shares.state()["running"] == {"attacker": 2}
    queued = Held(shares, "attacker", order)  # its one waiting request: waits although two slots are free
    _waiting(shares, 1)
    with pytest.raises(TooMany, match="predict: your address already has 2 running and 1 waiting, its share here"):
        with shares.slot("attacker"):
            pass
    visitor = Held(shares, "visitor", order)  # another client gets a free slot at once
    assert visitor.got.wait(10) and order[-1] == "visitor" and not queued.got.is_set()
    a[0].done()
    assert queued.got.wait(10) and queued.error is None
    for h in (a[1], queued, visitor):
        h.done()
    assert shares.state() == {"busy": 0, "running": {}, "waiting": {}}


def test_a_freed_slot_goes_to_the_waiting_client_holding_fewest():
    """All slots taken by one client with more of its requests waiting: a visitor who arrives later is served
    before them as soon as a slot frees."""
    shares = Shares(slots=2, per_client=2, waiting=5)
    order: list = []
    first = [Held(shares, "flood", order) for _ in range(2)]
    assert all(h.got.wait(10) for h in first)
    more = [Held(shares, "flood", order) for _ in range(3)]
    _waiting(shares, 3)
    visitor = Held(shares, "visitor", order)
    _waiting(shares, 4)
    first[0].done()
    assert visitor.got.wait(10) and order[2] == "visitor"
    first[1].done()
    visitor.done()
    for h in more:
        assert h.got.wait(10)
        h.done()
    assert order == ["flood", "flood", "visitor", "flood", "flood", "flood"]


def test_a_request_that_waits_past_its_time_is_told_busy_and_leaves_the_queue():
    shares = Shares(slots=1, per_client=1, waiting=2, wait_s=0.2)
    order: list = []
    holder = Held(shares, "a", order)
    assert holder.got.wait(10)
    with pytest.raises(Busy, match="the server's 1 slots stayed busy for 0.2 s"):
        with shares.slot("b"):
            pass
    assert shares.state()["waiting"] == {}
    holder.done()
    with pytest.raises(RuntimeError):  # an error inside gives the slot back
        with shares.slot("b"):
            raise RuntimeError("inside")
    assert shares.state() == {"busy": 0, "running": {}, "waiting": {}}


def test_the_client_is_the_peer_or_the_address_the_trusted_proxy_saw():
    assert client_key("10.0.0.5", {"x-forwarded-for": "1.2.3.4"}) == "10.0.0.5"  # no proxy: the header is forged
    headers = {"x-forwarded-for": "6.6.6.6, 1.2.3.4"}  # the client wrote 6.6.6.6; the proxy appended 1.2.3.4
    assert client_key("10.0.0.5", headers, proxies=1) == "1.2.3.4"
    assert client_key("10.0.0.5", headers, proxies=2) == "6.6.6.6"
    assert client_key("10.0.0.5", {}, proxies=1) == "10.0.0.5" and client_key(None) == "unknown"


def test_forwarded_for_is_trusted_only_from_a_proxy():
    """With ALBERT_LENS_PROXIES=1 (the Dockerfile's) and the server reached directly from a public address, a
    rotating X-Forwarded-For made every request a new client (no 429 at all): a count is trusted only from a
    private or loopback peer (a proxy on the host's own network), and named proxies only from themselves."""
    import ipaddress

    rotating = [{"x-forwarded-for": f"9.9.9.{i}"} for i in range(5)]
    assert {client_key("8.8.8.8", h, proxies=1) for h in rotating} == {"8.8.8.8"}  # public peer: header ignored
    assert {client_key("10.1.2.3", h, proxies=1) for h in rotating} == {f"9.9.9.{i}" for i in range(5)}
    assert client_key("::1", {"x-forwarded-for": "1.2.3.4"}, proxies=1) == "1.2.3.4"  # loopback, IPv6
    assert client_key("not an address", {"x-forwarded-for": "1.2.3.4"}, proxies=1) == "not an address"
    named = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("172.17.0.1/32"))
    chain = {"x-forwarded-for": "6.6.6.6, 1.2.3.4, 10.0.0.9"}  # forged, the client, an inner proxy
    assert client_key("172.17.0.1", chain, proxies=named) == "1.2.3.4"
    assert client_key("8.8.8.8", chain, proxies=named) == "8.8.8.8"  # not a named proxy: header ignored
    assert client_key("10.0.0.2", {"x-forwarded-for": "10.0.0.7"}, proxies=named) == "10.0.0.7"  # all proxies


@pytest.mark.parametrize("raw, want", [("", 0), ("1", 1),
                                       ("10.0.0.0/8, 172.17.0.1", ("10.0.0.0/8", "172.17.0.1/32"))])
def test_the_proxies_setting_is_a_count_or_addresses(monkeypatch, raw, want):
    from app.core.ground import policy

    monkeypatch.setenv("ALBERT_LENS_PROXIES", raw)
    got = policy.limits()["proxies"]
    assert (got if isinstance(got, int) else tuple(str(n) for n in got)) == want


@pytest.mark.parametrize("raw, says", [("11", "'11' is more than 10 proxies"),
                                       ("proxy.local", "'proxy.local' is neither a count of proxies")])
def test_a_bad_proxies_setting_names_itself(monkeypatch, raw, says):
    from app.core.ground import policy
    from app.core.ground.errors import InputError

    monkeypatch.setenv("ALBERT_LENS_PROXIES", raw)
    with pytest.raises(InputError, match=f"^ALBERT_LENS_PROXIES: {says}"):
        policy.limits()
    with pytest.raises(ValueError, match="per_client: 3 is not from 1 to slots"):
        Shares(slots=2, per_client=3, waiting=0)


def _turns_by_freeing_slots(waiting: list[str], running: dict[str, int]) -> list[int]:
    """The reference: slots freed one at a time, each given to the client holding fewest (running, plus what it
    was given here), the one whose next job has waited longest first among equals."""
    held, left, out = dict(running), list(enumerate(waiting)), []
    while left:
        i, client = min(left, key=lambda job: (held.get(job[1], 0), job[0]))
        left.remove((i, client))
        held[client] = held.get(client, 0) + 1
        out.append(i)
    return out


def test_a_flood_of_queued_jobs_stands_behind_another_clients_one():
    """Issue 70: one client's 30 queued /saliency calls stood before another visitor's one (185 s against 0.5 s).
    Each client's next job now comes before anyone's second; who holds fewest goes first."""
    from app.core.execution.shares import turns

    waiting = ["flood"] * 30 + ["visitor"]
    order = turns(waiting, {"flood": 1})
    assert order[0] == 30 and order[1:] == list(range(30))  # the visitor's one job first, then the flood's, in order
    # two clients and a third running one job already: alternate, the one holding nothing first
    assert turns(["a", "a", "b", "b", "c"], {"c": 1}) == [0, 2, 1, 3, 4]
    assert turns([], {"a": 3}) == []


@pytest.mark.parametrize("seed", range(20))
def test_turns_are_what_freeing_one_slot_at_a_time_gives(seed):
    import random

    from app.core.execution.shares import turns

    rng = random.Random(seed)
    clients = [f"c{k}" for k in range(rng.randint(1, 5))]
    waiting = [rng.choice(clients) for _ in range(rng.randint(0, 40))]
    running = {c: rng.randint(0, 3) for c in clients if rng.random() < 0.7}
    order = turns(waiting, running)
    assert order == _turns_by_freeing_slots(waiting, running)
    assert sorted(order) == list(range(len(waiting)))
    for c in clients:  # each client's jobs keep their own order
        mine = [i for i in order if waiting[i] == c]
        assert mine == sorted(mine)


def test_a_client_past_its_share_of_the_queue_is_told_how_long_to_wait():
    from app.core.execution.shares import over_share

    assert over_share(1, 2, 4, 3.2) is None
    assert over_share(1, 3, 4, 3.2) == ("your address already has 1 jobs running and 3 waiting here, its share of "
                                        "4; the next of them should end in about 4 s, then send more")
    assert over_share(0, 4, 4, None).endswith("its share of 4; wait for one of them to end, then send more")
    assert "about 1 s" in over_share(2, 2, 4, 0.0)


def test_a_full_queue_keeps_its_last_places_for_addresses_with_nothing_there():
    """Many addresses each filling their share left a new visitor "queue full": the queue takes `room` jobs from
    addresses that have one there already, and its other places only from addresses that have none."""
    from app.core.execution.shares import over_share

    assert over_share(0, 1, 4, 2.0, queued=63, room=64) is None
    assert over_share(0, 1, 4, 2.0, queued=64, room=64) == (
        "the queue is full (64 jobs waiting; the places left are kept for addresses with none) and your address "
        "has 0 running and 1 waiting; the next of them should end in about 2 s, then send more")
    assert over_share(0, 0, 4, None, queued=100, room=64) is None  # a newcomer
    assert over_share(4, 0, 4, None, queued=100, room=64).startswith("your address already has 4 jobs running")


class _GradioQueue:
    """The parts of Gradio's `Queue` the fair queue reads and wraps, first come first served as Gradio's."""

    def __init__(self):
        from types import SimpleNamespace

        self.event_queue_per_concurrency_id = {"single": SimpleNamespace(queue=[])}
        self.active_jobs: list = [None]
        self.process_time_per_fn: dict = {}

    def __len__(self):
        return sum(len(g.queue) for g in self.event_queue_per_concurrency_id.values())

    def get_events(self):
        waiting = self.event_queue_per_concurrency_id["single"].queue
        return ([waiting.pop(0)], False, "single") if waiting else None


def _event(host: str, fn: str = "saliency"):
    from types import SimpleNamespace

    return SimpleNamespace(request=SimpleNamespace(client=SimpleNamespace(host=host), headers={}), fn=fn)


def test_the_fair_queue_orders_gradios_queue_counts_each_client_and_keeps_room_for_newcomers():
    from types import SimpleNamespace

    from app.ui.fair_queue import FairQueue

    gq = _GradioQueue()
    fair = FairQueue(gq, most=4, room=6)
    waiting = gq.event_queue_per_concurrency_id["single"].queue
    waiting += [_event("10.0.0.1") for _ in range(3)]
    (first,), _, _ = gq.get_events()  # the flood's first
    gq.active_jobs = [[first], None]  # running while another slot frees
    waiting.append(_event("10.0.0.2"))  # a visitor's one job, after the flood's
    (nxt,), _, _ = gq.get_events()
    assert fair.client(first) == "10.0.0.1" and fair.client(nxt) == "10.0.0.2"  # before the flood's waiting ones
    waiting.insert(0, nxt)  # back in the queue, for the counts below
    assert fair.held("10.0.0.1")[:2] == (1, 2) and fair.held("10.0.0.2")[:2] == (0, 1)
    gq.process_time_per_fn["saliency"] = SimpleNamespace(count=3, avg_time=10.0)
    assert 9.0 < fair.held("10.0.0.1")[2] <= 10.0  # the mean time less what the running job has taken
    fair.joining["10.0.0.1"] += 1  # a join under way counts as waiting
    why, retry = fair.refusal("10.0.0.1")
    assert why.startswith("your address already has 1 jobs running and 3 waiting") and retry == 10
    fair.joining.clear()
    waiting += [_event(f"10.0.1.{k}") for k in range(3)]  # six waiting: the room for holders is taken
    assert fair.refusal("10.0.0.1")[0].startswith("the queue is full (6 jobs waiting")
    assert fair.refusal("10.0.1.0")[0].startswith("the queue is full") and fair.refusal("10.0.9.9") is None
