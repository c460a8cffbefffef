"""Heavy requests in child processes, so a cheap prediction never shares an interpreter, or the cores' time, with
an explanation or a batch job.

Why: with every request in one process, a public Space's /predict waited behind the running explanation and batch
job for the two cores and the GIL (16 users: browser-like p95 290-495 ms against p50 146-161 ms). Concurrency
groups, one PyTorch thread per job and a shorter GIL switch interval did not move that tail; a child process at a
lower CPU priority (`nice`) does, because the kernel then gives a prediction the cores the moment it asks for them
and the heavy job the rest (benchmarks/README.md, "Load").

A `Pool` holds a few `Worker`s, each one child process started with the "spawn" method (a forked PyTorch with
live threads can deadlock) that loads the pair once and then runs one call at a time. A call is a module-level
function and its arguments, pickled by reference (a `Pair` travels as its spec; the child loads its own weights).
The request's job goes along: the child runs the call inside a job with the time that is left, and the parent
forwards the Stop button and a client that left through two shared events, so the child stops at its next batch
exactly as it would in one process. Progress comes back as messages; so do the result, or the error, and what
the child's job reached.
"""
from __future__ import annotations

import itertools
import logging
import multiprocessing as mp
import os
import pickle
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..ground import jobs
from ..ground.errors import LensError, WorkerGone
from ..ground.runtime import restore_environment

log = logging.getLogger("albert_lens")

# the children's CPU priority below the server's: the kernel's scheduler then gives a woken /predict ~90% of a
# contended core, and the children the rest
DEFAULT_NICE = 10


def worker_nice() -> int:
    """How far below the server's CPU priority the children run: ALBERT_LENS_WORKER_NICE when set (read when a
    worker starts; 0 keeps them at the server's, as the test suite does beside its other busy processes), else 10."""
    raw = os.environ.get("ALBERT_LENS_WORKER_NICE", "").strip()
    if not raw:
        return DEFAULT_NICE
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"ALBERT_LENS_WORKER_NICE: {raw[:20]!r} is not a whole number (0 to 19)") from None
    if not 0 <= value <= 19:
        raise ValueError(f"ALBERT_LENS_WORKER_NICE: {value} is outside 0 to 19")
    return value

POLL_S = 0.05  # how often the parent checks its client while a child works: within a batch's time
_CTX = mp.get_context("spawn")
Setup = Sequence[tuple[Callable[..., Any], tuple]]


def _portable(exc: BaseException) -> BaseException:
    """The child's error as the parent can unpickle it: itself when it survives the trip, else its message (the
    child has logged the traceback)."""
    try:
        return pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - an exception whose constructor takes other arguments than its message
        if isinstance(exc, LensError):
            return LensError(str(exc))
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _child(conn, cancelled, gone, nice: int, threads: int | None, setup: Setup) -> None:
    """The child's loop: set up once, then answer (call id, function, args, kwargs, seconds, progress?) messages
    until the pipe closes."""
    try:
        os.nice(nice)
    except OSError:  # not allowed here: the child still runs, at the server's priority
        pass
    if threads:
        import torch  # deferred: PyTorch is the child's to load, after its thread settings

        torch.set_num_threads(threads)
    parent = os.getppid()  # a server killed outright leaves its workers orphaned: their jobs then stop
    for fn, args in setup:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - a failed warm-up only leaves its cost to the first call
            log.exception("worker set-up %s failed", getattr(fn, "__name__", fn))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        call, fn, args, kwargs, seconds, name, wants_progress = msg
        try:
            conn.send(("started", call))  # the parent knows the call reached a live child
        except OSError:
            return
        job = jobs.Job(seconds, alive=lambda: not gone.is_set() and os.getppid() == parent, name=name,
                       cancelled=cancelled)
        if wants_progress:
            kwargs = {**kwargs, "progress": lambda done, total, call=call: conn.send(("progress", call, done, total))}
        try:
            with jobs.running(job, record=False):
                out: tuple = ("ok", call, fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - every error goes back to the parent, which decides
            if not isinstance(exc, LensError):
                log.exception("worker call %s failed", name)
            out = ("error", call, _portable(exc))
        state = {"checkpoints": job.checkpoints, "stopped": job.stopped, "progress": job.progress,
                 "reached": job.reached}
        try:
            conn.send((*out, state))
        except Exception as exc:  # noqa: BLE001 - an answer that can't be pickled
            log.exception("worker call %s: its answer could not be sent", name)
            conn.send(("error", call, RuntimeError(f"the answer could not be sent back ({type(exc).__name__})"),
                       state))


# Thread pools that wait for work by spinning burn the cores the other processes need: profiled under a busy
# server, 85% of a worker's CPU went to libgomp's spin-wait (OpenMP teams of numba and the BLAS libraries, which
# torch.set_num_threads does not reach) and a benchmark job took 4-7 CPU seconds instead of 0.4-0.9.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
_ENV_LOCK = threading.Lock()
_SERVER_SET: set[str] = set()  # thread settings this process gave itself, not its children's to inherit


def serve_beside_workers() -> None:
    """Called before PyTorch loads, in a server whose heavy work runs in worker processes: what stays here is
    one input at a time (/predict), as fast on one thread as on two, while a second thread's OpenMP team spins
    against the workers for the same cores. 16 users' load test: the server 0.79-0.89 -> 0.54-0.63 cores, ~10% more
    requests served, gradio_client /predict p95 320-354 -> 276-277 ms (benchmarks/README.md). The spinning pool was
    NumPy's OpenBLAS, loaded with the CLI before this runs (`torch.set_num_threads` alone changed nothing), so
    it is limited here at run time; OpenMP's (PyTorch's) by the environment it reads when it loads. An
    operator's OMP_NUM_THREADS wins; the workers still get their share."""
    if "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = "1"
        _SERVER_SET.add("OMP_NUM_THREADS")
        from threadpoolctl import threadpool_limits

        threadpool_limits(1, user_api="blas")


@contextmanager
def _child_environment(env: dict[str, str]) -> Iterator[None]:
    """`env` in the environment a spawned child starts with (its libraries read it when they load), and this
    process's environment as it was afterwards. An operator's own setting wins."""
    with _ENV_LOCK:
        old = {k: os.environ.get(k) for k in env}
        for k, v in env.items():
            if k in _SERVER_SET:
                os.environ[k] = v
            else:
                os.environ.setdefault(k, v)
        try:
            yield
        finally:
            restore_environment(old)


class NeverStarted(WorkerGone):
    """The worker was dead before its child took the call (killed while idle: the OOM killer, an operator): the
    call never ran, so the pool runs it on a fresh worker instead of failing the visitor."""


class Worker:
    """One child process and the two events through which its running job is stopped."""

    _calls = itertools.count(1)

    def __init__(self, setup: Setup = (), nice: int | None = None, threads: int | None = None,
                 name: str = "worker"):
        self.name = name
        nice = worker_nice() if nice is None else nice
        self.conn, child_conn = _CTX.Pipe()
        self.cancelled, self.gone = _CTX.Event(), _CTX.Event()
        self.proc = _CTX.Process(target=_child, name=f"albert-lens {name}", daemon=True,
                                 args=(child_conn, self.cancelled, self.gone, nice, threads, list(setup)))
        with _child_environment({k: str(threads) for k in THREAD_VARS} if threads else {}):
            self.proc.start()
        child_conn.close()

    def call(self, fn: Callable, args: tuple, kwargs: dict, progress: Callable[[int, int], Any] | None = None):
        """Run `fn(*args, **kwargs)` in the child as part of the current job; its answer, or its error, here."""
        job = jobs.current()
        seconds = None if job is None or job.deadline is None else max(0.0, job.deadline - job.clock())
        call = next(self._calls)
        self.cancelled.clear()
        self.gone.clear()
        name = job.name if job is not None else getattr(fn, "__name__", "call")
        if not self.proc.is_alive():
            raise NeverStarted(f"{name}: the worker process had ended (exit code {self.proc.exitcode})")
        try:
            self.conn.send((call, fn, args, kwargs, seconds, name, progress is not None))
        except OSError:  # BrokenPipeError: the child's end closed, its process gone
            raise NeverStarted(f"{name}: the worker process had ended") from None
        started = False
        while True:
            if job is not None:  # the deadline the child keeps itself: it got the time left
                if job.cancelled.is_set():
                    self.cancelled.set()
                elif job.alive is not None and not job.alive():
                    self.gone.set()
            if self.conn.poll(POLL_S):
                try:
                    msg = self.conn.recv()
                except (EOFError, OSError):
                    if not started:
                        raise NeverStarted(f"{name}: the worker process ended before the call") from None
                    raise WorkerGone(f"{name}: the worker process ended during the call; try again") from None
                if msg[1] != call:  # a message of a call abandoned earlier
                    continue
                if msg[0] == "started":
                    started = True
                    continue
                if msg[0] == "progress":
                    if progress is not None:
                        progress(msg[2], msg[3])
                    continue
                kind, _, value, state = msg
                if job is not None:
                    job.checkpoints += state["checkpoints"]
                    job.reached.update(state["reached"])
                    job.progress = state["progress"] or job.progress
                    job.stopped = state["stopped"] or job.stopped
                if kind == "ok":
                    return value
                raise value
            if not self.proc.is_alive() and not self.conn.poll(0):
                if not started:
                    raise NeverStarted(f"{name}: the worker process ended before the call")
                raise WorkerGone(f"{name}: the worker process ended (exit code {self.proc.exitcode}); try again")

    def close(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
        self.conn.close()


class Pool:
    """`size` workers; a call takes an idle one (waiting for one if all are busy) and gives it back."""

    def __init__(self, size: int = 1, setup: Setup = (), nice: int | None = None, threads: int | None = None,
                 name: str = "pool"):
        self.setup, self.nice, self.threads, self.name = list(setup), nice, threads, name
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._all: list[Worker] = []
        self._lock = threading.Lock()
        for k in range(size):
            self._add(f"{name} {k + 1}")

    def _add(self, name: str) -> None:
        worker = Worker(self.setup, self.nice, self.threads, name)
        with self._lock:
            self._all.append(worker)
        self._idle.put(worker)

    def call(self, fn: Callable, *args, progress: Callable[[int, int], Any] | None = None, **kwargs):
        """Run `fn` on an idle worker. A worker found dead (busy or idle) is replaced; a call that never reached
        its child runs on the replacement, and one whose child died while running it says so (it may have been
        the call that killed it: running it again could kill the next one)."""
        for _ in range(self.RETRIES + 1):
            worker = self._idle.get()
            try:
                out = worker.call(fn, args, kwargs, progress)
            except NeverStarted:
                self._replace(worker)
                continue
            except WorkerGone:
                self._replace(worker)
                raise
            except BaseException:
                self._idle.put(worker)
                raise
            self._idle.put(worker)
            return out
        raise WorkerGone(f"{getattr(fn, '__name__', 'call')}: {self.RETRIES + 1} fresh worker processes ended "
                         "before they could take the call; the server logged it")

    RETRIES = 2  # fresh workers tried for a call whose worker had died before taking it

    def _replace(self, worker: Worker) -> None:
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
        worker.close()
        self._add(worker.name)

    def pids(self) -> list[int]:
        with self._lock:
            return [w.proc.pid for w in self._all if w.proc.pid is not None]

    def close(self) -> None:
        with self._lock:
            workers, self._all = self._all, []
        for w in workers:
            w.close()
