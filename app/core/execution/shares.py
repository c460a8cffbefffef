"""Fair shares of a server's slots among its clients: no client can take them all.

A cheap route served outside Gradio's queue (the app's /predict) held 16 slots for whoever asked first: 60
clients sending 507 hostile texts in 60 s took every slot and every server thread, and other visitors' p50 went
from ~0.1 s to 9.7 s. Here each client (its address, `client_key`) may hold at most `per_client` slots and keep at
most `waiting` more requests waiting; a request past that is refused at once (it would only hold a server thread
while it waited), and a freed slot goes to the waiting client that holds fewest, the longest-waiting first among
equals. What a client asks can then cost the others at most its share of the slots.

The queued jobs (explanations, work over datasets) are shared by the same rules (`turns`, `over_share`): 30
queued /saliency calls from one client made another visitor's wait 185 s where it took 0.5 s alone.
"""
from __future__ import annotations

import itertools
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from ..ground.errors import LensError


class TooMany(LensError):
    """This client already holds its share of the slots and has its share of requests waiting."""


class Busy(LensError):
    """Every slot stayed taken for the whole wait."""


class Shares:
    """`slots` at once, at most `per_client` of them for one client, `waiting` more of its requests queued."""

    def __init__(self, slots: int, per_client: int, waiting: int, wait_s: float = 60.0, what: str = "request"):
        if not 1 <= per_client <= slots:
            raise ValueError(f"per_client: {per_client} is not from 1 to slots ({slots})")
        self.slots, self.per_client, self.waiting, self.wait_s, self.what = slots, per_client, waiting, wait_s, what
        self._cond = threading.Condition()
        self._busy = 0
        self._running: Counter[str] = Counter()
        self._queued: dict[str, deque[int]] = {}
        self._tickets = itertools.count()

    def _next(self) -> tuple[str, int] | None:
        """The waiting request whose turn it is: its client holds fewest slots, then it has waited longest."""
        best = None
        for client, queue in self._queued.items():
            if queue and self._running[client] < self.per_client:
                key = (self._running[client], queue[0])
                if best is None or key < best[0]:
                    best = (key, client)
        return None if best is None else (best[1], best[0][1])

    @contextmanager
    def slot(self, client: str) -> Iterator[None]:
        with self._cond:
            queue = self._queued.setdefault(client, deque())
            if self._running[client] + len(queue) >= self.per_client + self.waiting:
                raise TooMany(f"{self.what}: your address already has {self._running[client]} running and "
                              f"{len(queue)} waiting, its share here; wait for an answer before sending more")
            ticket = next(self._tickets)
            queue.append(ticket)
            deadline = time.monotonic() + self.wait_s
            try:
                while not (self._busy < self.slots and self._next() == (client, ticket)):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise Busy(f"{self.what}: the server's {self.slots} slots stayed busy for {self.wait_s:g} s; "
                                   "try again in a moment")
                    self._cond.wait(left)
            except BaseException:
                queue.remove(ticket)
                self._forget(client)
                self._cond.notify_all()
                raise
            queue.popleft()
            self._running[client] += 1
            self._busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._running[client] -= 1
                self._busy -= 1
                self._forget(client)
                self._cond.notify_all()

    def _forget(self, client: str) -> None:
        if self._running[client] <= 0:
            del self._running[client]
            if not self._queued.get(client):
                self._queued.pop(client, None)

    def state(self) -> dict:
        """What is running and waiting, per client (for tests and the log)."""
        with self._cond:
            return {"busy": self._busy, "running": dict(self._running),
                    "waiting": {c: len(q) for c, q in self._queued.items() if q}}


def turns(waiting: Sequence[str], running: Mapping[str, int]) -> list[int]:
    """The order in which waiting jobs get a freed slot, as positions into `waiting` (each job's client, oldest
    first); `running`: each client's jobs running now. A job's place is its client's running jobs plus that
    client's jobs waiting ahead of it, ties oldest first: whoever holds fewest goes next, and every client's next
    job comes before anyone's second (one client's 30 queued jobs no longer stand before another's one)."""
    ahead: Counter[str] = Counter()
    keys = []
    for i, client in enumerate(waiting):
        keys.append((running.get(client, 0) + ahead[client], i))
        ahead[client] += 1
    return [i for _, i in sorted(keys)]


def retry_after(wait_s: float | None) -> int | None:
    """Whole seconds to wait (at least 1) for a wait of `wait_s`; None where it is not known."""
    return None if wait_s is None else max(1, math.ceil(wait_s))


def over_share(running: int, waiting: int, most: int, wait_s: float | None, queued: int = 0,
               room: int | None = None) -> str | None:
    """Why a client holding `running` and `waiting` jobs may not queue another (`most`: its share, running and
    waiting together; `room`: the jobs the queue takes from clients that have one there already, `queued` of them
    waiting now, so that a newcomer still finds a place when many addresses fill it), with how long until one of
    its jobs should end (`wait_s`, from the server's own timings; None: not known yet); None where it may."""
    when = (f"the next of them should end in about {retry_after(wait_s)} s" if wait_s is not None
            else "wait for one of them to end")
    if running + waiting >= most:
        return (f"your address already has {running} jobs running and {waiting} waiting here, its share of "
                f"{most}; {when}, then send more")
    if room is not None and running + waiting > 0 and queued >= room:
        return (f"the queue is full ({queued} jobs waiting; the places left are kept for addresses with none) and "
                f"your address has {running} running and {waiting} waiting; {when}, then send more")
    return None


def client_key(peer: str | None, headers: Mapping[str, str] | None = None, proxies: int | tuple = 0) -> str:
    """The address a request came from. X-Forwarded-For is read only from a trusted proxy: with a count of
    `proxies`, when the peer is a private or loopback address (a proxy on the host's own network: a Space's), the
    address the nearest of them saw, from the header's right end (entries to its left are the client's own to
    forge); with the proxies' networks, when the peer is one of them, the right-most entry that is not. From
    anyone else the header is ignored: a client reaching the server directly can write any address in it."""
    peer_key = (peer or "unknown")[:64]
    if not proxies or headers is None:
        return peer_key
    forwarded = [h.strip() for h in str(headers.get("x-forwarded-for", "")).split(",") if h.strip()]
    if isinstance(proxies, int):
        if _private(peer) and len(forwarded) >= proxies:
            return forwarded[-proxies][:64]
        return peer_key
    if not _within(peer, proxies):
        return peer_key
    for hop in reversed(forwarded):
        if not _within(hop, proxies):
            return hop[:64]
    return (forwarded[0] if forwarded else peer_key)[:64]


def _address(text: str | None):
    import ipaddress

    try:
        return ipaddress.ip_address(str(text or "").strip())
    except ValueError:
        return None


def _private(peer: str | None) -> bool:
    ip = _address(peer)
    return ip is not None and (ip.is_private or ip.is_loopback)


def _within(address: str | None, networks: tuple) -> bool:
    ip = _address(address)
    return ip is not None and any(ip.version == n.version and ip in n for n in networks)
