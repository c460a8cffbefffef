"""Heavy calls in a worker process answer as they do in this one, stop as they do here (deadline, Stop, a
client that left), report progress, carry errors back as themselves, and a dead worker is replaced."""
from __future__ import annotations

import os
import time

import pytest

from app.core import api
from app.core.execution import workers
from app.core.ground import jobs, policy
from app.core.ground.errors import InputError

from .conftest import free_port, gradio_client

pytestmark = pytest.mark.slow


# called in the child by reference: module-level functions of an importable module
def slow_count(n: int, pause: float, progress=None) -> int:
    for k in range(n):
        jobs.checkpoint(k, n, "steps")
        if progress is not None:
            progress(k + 1, n)
        time.sleep(pause)
    return n


def refuse(field: str) -> None:
    raise InputError(f"{field}: refused in the child")


def child_nice() -> int:
    return os.nice(0)


def die() -> None:
    os._exit(3)


def unpicklable_answer():
    return lambda: None


@pytest.fixture(scope="module")
def pool():
    p = workers.Pool(1, name="test", nice=workers.DEFAULT_NICE)  # the suite runs other workers at nice 0
    yield p
    p.close()


def test_a_worker_answers_reports_progress_and_runs_at_lower_priority(pool):
    seen = []
    assert pool.call(slow_count, 5, 0.0, progress=lambda d, n: seen.append((d, n))) == 5
    assert seen == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    assert pool.call(child_nice) >= os.nice(0) + min(workers.DEFAULT_NICE, 19 - os.nice(0))


def test_the_childrens_priority_is_10_below_the_servers_unless_the_operator_says(monkeypatch):
    monkeypatch.delenv("ALBERT_LENS_WORKER_NICE", raising=False)
    assert workers.worker_nice() == workers.DEFAULT_NICE == 10
    monkeypatch.setenv("ALBERT_LENS_WORKER_NICE", "0")
    assert workers.worker_nice() == 0
    for bad, says in (("ten", "'ten' is not a whole number"), ("25", "25 is outside 0 to 19")):
        monkeypatch.setenv("ALBERT_LENS_WORKER_NICE", bad)
        with pytest.raises(ValueError, match=f"ALBERT_LENS_WORKER_NICE: {says}"):
            workers.worker_nice()


def test_errors_come_back_as_themselves_and_the_worker_goes_on(pool):
    with pytest.raises(InputError, match="limit: refused in the child"):
        pool.call(refuse, "limit")
    with pytest.raises(RuntimeError, match="could not be sent back"):
        pool.call(unpicklable_answer)
    assert pool.call(slow_count, 2, 0.0) == 2


def test_the_deadline_stop_and_a_client_that_left_stop_the_child_at_its_next_check(pool):
    # a deadline: the child gets the time the request has left
    job = jobs.Job(seconds=0.3, name="deadline")
    with jobs.running(job, record=False), pytest.raises(jobs.Stopped, match="time budget") as info:
        pool.call(slow_count, 10_000, 0.01)
    assert info.value.done is not None and info.value.done < 10_000
    assert job.stopped and "time budget" in job.stopped and job.reached["steps"][0] == info.value.done

    # the Stop button: the parent's job is cancelled while the child works
    job = jobs.Job(name="stop")
    seen = []

    def progress(d, n):
        seen.append(d)
        if d == 20:
            job.cancel()

    with jobs.running(job, record=False), pytest.raises(jobs.Stopped, match="Stop button") as info:
        pool.call(slow_count, 10_000, 0.005, progress=progress)
    assert 20 <= info.value.done <= max(seen) + 1 < 10_000  # stopped within a check of the cancel being seen

    # a client that left: the parent's alive() turns false
    gone = {"now": False}
    job = jobs.Job(alive=lambda: not gone["now"], name="gone")
    with jobs.running(job, record=False), pytest.raises(jobs.Stopped, match="client disconnected"):
        pool.call(slow_count, 10_000, 0.005, progress=lambda d, n: gone.update(now=d >= 10))
    # the next call is not stopped by the last one's events
    assert pool.call(slow_count, 3, 0.0) == 3


def test_a_dead_worker_is_replaced(pool):
    before = pool.pids()
    with pytest.raises(workers.WorkerGone, match="ended"):
        pool.call(die)
    assert pool.call(slow_count, 1, 0.0) == 1
    assert pool.pids() != before and len(pool.pids()) == 1


def test_a_worker_killed_while_idle_is_replaced_before_the_next_call(pool):
    """Issue 58: `kill -9` of the idle worker left every later call failing with BrokenPipeError, since sending
    to a dead child raised it and the pool did not read it as a dead worker. The call that finds it dead never
    reached a child, so it runs on a fresh one: the visitor sees an answer, not an error."""
    import signal

    (pid,) = pool.pids()
    os.kill(pid, signal.SIGKILL)
    # at once: the pipe may still look open, the process not yet reaped
    assert pool.call(slow_count, 2, 0.0) == 2
    (new,) = pool.pids()
    assert new != pid
    os.kill(new, signal.SIGKILL)
    time.sleep(0.5)  # dead and gone: the send itself fails now (BrokenPipeError)
    seen = []
    assert pool.call(slow_count, 3, 0.0, progress=lambda d, n: seen.append(d)) == 3
    assert seen == [1, 2, 3] and pool.pids() not in ([pid], [new]) and len(pool.pids()) == 1


def test_a_pool_whose_fresh_workers_all_die_says_so_instead_of_looping(monkeypatch):
    p = workers.Pool(1, name="doomed", nice=0)
    try:
        monkeypatch.setattr(workers.Worker, "call", lambda self, *a: (_ for _ in ()).throw(
            workers.NeverStarted("gone before the call")))
        with pytest.raises(workers.WorkerGone, match="3 fresh worker processes ended before they could take"):
            p.call(slow_count, 1, 0.0)
        assert len(p.pids()) == 1
    finally:
        p.close()


def test_a_worker_killed_mid_call_answers_its_caller_and_is_replaced(pool):
    """SIGKILL from outside (the OOM killer, an operator) while the child works and reports progress: the caller
    hears WorkerGone at the parent's next poll of the pipe, not at the work's end, and the next call gets a new
    child."""
    import signal

    (pid,) = pool.pids()
    seen = []

    def kill_at_third(done, total):
        seen.append(done)
        if done == 3:
            os.kill(pid, signal.SIGKILL)

    with pytest.raises(workers.WorkerGone, match="ended"):
        pool.call(slow_count, 100_000, 0.01, progress=kill_at_third)  # 1,000 s of work had it run on
    assert 3 <= max(seen) < 100_000
    assert pool.call(slow_count, 2, 0.0) == 2
    assert pool.pids() != [pid] and len(pool.pids()) == 1


def test_the_facade_in_a_worker_answers_as_here(tiny_pair, tmp_path, monkeypatch):
    """The app's pools: a pair travels as its spec, the upload folders this process may read go along."""
    rows = tmp_path / "uploads" / "rows.csv"
    rows.parent.mkdir()
    rows.write_text("text,label\n" + "".join(f"a {'fine' if i % 2 else 'awful'} film number {i},{i % 2}\n"
                                             for i in range(12)))
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    monkeypatch.setattr(policy, "_READABLE", [])
    api.allow_reads_under(rows.parent)
    pools = api.worker_pools(tiny_pair, {"dataset": 1})
    try:
        here = api.benchmark(tiny_pair, str(rows), 10)
        there = pools["dataset"].call(api.benchmark, tiny_pair, str(rows), 10)
        assert there["n"] == here["n"] == 10
        for a, b in zip(here["models"], there["models"]):
            assert a["accuracy"] == b["accuracy"]
        sal_here = api.saliency(tiny_pair, "a fine film", None, method="gradient_x_input")
        sal_there = pools["dataset"].call(api.saliency, tiny_pair, "a fine film", method="gradient_x_input")
        for a, b in zip(sal_here["maps"], sal_there["maps"]):
            assert a["words"] == b["words"]
            assert a["scores"] == pytest.approx(b["scores"], rel=1e-5, abs=1e-7)
        monkeypatch.setattr(policy, "_READABLE", [])  # the child keeps what it was given at its start
        with pytest.raises(InputError, match="dataset"):
            api.benchmark(tiny_pair, str(rows), 10)
        assert pools["dataset"].call(api.benchmark, tiny_pair, str(rows), 10)["n"] == 10
    finally:
        for p in pools.values():
            p.close()


def test_the_app_with_workers_answers_as_without(tiny_pair, tmp_path, monkeypatch):
    """Hosted mode's app: explanations and batch jobs run in its workers, an upload included, and answer as the
    facade does in this process; a worker's error reaches the visitor as its message."""
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    from app.ui import build

    rows = tmp_path / "rows.csv"
    rows.write_text("text,label\n" + "".join(f"a {'fine' if i % 2 else 'awful'} film number {i},{i % 2}\n"
                                             for i in range(12)))
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    monkeypatch.setattr(policy, "_READABLE", [])
    sent = []
    real_call = workers.Pool.call
    monkeypatch.setattr(workers.Pool, "call", lambda self, fn, *a, **k: sent.append((self.name, fn.__name__))
                        or real_call(self, fn, *a, **k))
    demo = build(tiny_pair, workers=True)
    assert set(demo.heavy.pools) == {"single", "dataset"}
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        client = gradio_client(url)
        res = client.predict("a fine film", "", "gradient_x_input", "predicted", api_name="/saliency")[0]
        here = api.saliency(tiny_pair, "a fine film", "", method="gradient_x_input", target="predicted")
        for a, b in zip(here["maps"], res["maps"]):
            assert a["words"] == b["words"] and a["scores"] == pytest.approx(b["scores"], rel=1e-5, abs=1e-7)
        res = client.predict("sentiment_plain", handle_file(str(rows)), 10, api_name="/benchmark")[0]
        assert res["n"] == 10
        with pytest.raises(AppError, match="limit: 0 is too small"):
            client.predict("sentiment_plain", handle_file(str(rows)), 0, api_name="/benchmark")
        assert sent == [("single worker", "saliency"), ("dataset worker", "benchmark"), ("dataset worker", "benchmark")]
        pids = demo.heavy.pools["dataset"].pids()
        assert pids and os.getpid() not in pids
    finally:
        demo.close()
        demo.heavy.close()


def test_a_server_beside_workers_keeps_one_openmp_thread_and_its_workers_their_share(monkeypatch):
    """The serving process gives itself one OpenMP thread (before PyTorch loads); a worker it starts still gets
    its share of the cores, and an operator's own setting is left alone in both."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(workers, "_SERVER_SET", set())
    workers.serve_beside_workers()
    assert os.environ["OMP_NUM_THREADS"] == "1"
    with workers._child_environment({"OMP_NUM_THREADS": "3"}):
        assert os.environ["OMP_NUM_THREADS"] == "3"  # what the child starts with
    assert os.environ["OMP_NUM_THREADS"] == "1"

    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # the operator's
    monkeypatch.setattr(workers, "_SERVER_SET", set())
    workers.serve_beside_workers()
    assert os.environ["OMP_NUM_THREADS"] == "4"
    with workers._child_environment({"OMP_NUM_THREADS": "3"}):
        assert os.environ["OMP_NUM_THREADS"] == "4"


def test_the_app_command_serves_beside_workers_only_when_they_run(monkeypatch):
    """`albert-lens app` with worker processes (hosted mode) calls it before loading anything; without workers
    the heavy work runs in the server, whose threads are then its own."""
    import sys
    import types

    from app import cli

    real = policy.limits
    for on in (True, False):
        calls = []
        monkeypatch.setattr(workers, "serve_beside_workers", lambda calls=calls: calls.append("threads"))
        monkeypatch.setattr(policy, "limits", lambda on=on: {**real(), "worker_processes": on})
        monkeypatch.setattr(cli, "_pair", lambda args, calls=calls: calls.append("pair") or types.SimpleNamespace(
            banner=str))
        monkeypatch.setitem(sys.modules, "app.ui", types.SimpleNamespace(
            launch=lambda *a, calls=calls, **k: calls.append("up")))
        assert cli.main(["app"]) == 0
        assert calls == (["threads", "pair", "up"] if on else ["pair", "up"])
