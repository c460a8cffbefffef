"""Work that stops: a request's deadline and its client's presence, checked between batches.

A front end runs a request inside `running(Job(...))`; the loops that can take long (inference batches, attack
queries, saliency per example, WordNet swaps per example) call `checkpoint()`, which raises `Stopped` once the job's
budget is spent, its client has gone or its Stop button was pressed. Without this a visitor who closed the tab
left a 246 s job holding a worker slot, and CheckList had no deadline at all. The check is a context variable
read, so code run without a job (the CLI, tests, Ray workers) pays nothing and is never stopped.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from .errors import Stopped


@dataclass(eq=False)  # a job is itself, hashable: the app keeps each session's running jobs in a set
class Job:
    """One request's budget (`seconds`, None: none) and liveness (`alive()`, e.g. the client is still there);
    `clock` is injectable so a test can move time instead of waiting for it."""

    seconds: float | None = None
    alive: Callable[[], bool] | None = None
    name: str = "job"
    clock: Callable[[], float] = time.monotonic
    cancelled: threading.Event = field(default_factory=threading.Event)
    checkpoints: int = 0  # how often the work asked whether to go on: a stopped job asked once more, not a batch more
    stopped: str | None = None
    progress: tuple[int, int] | None = None  # the last (done, total) a check carried
    reached: dict[str, tuple[int, int]] = field(default_factory=dict)  # per kind of work ("examples explained")
    parent: "Job | None" = None  # a nested budget (one attack inside a request) stops with its request too

    def __post_init__(self) -> None:
        self.started = self.clock()

    @property
    def deadline(self) -> float | None:
        return None if self.seconds is None else self.started + self.seconds

    def overdue(self) -> bool:
        return self.seconds is not None and self.clock() > self.started + self.seconds

    def reason(self) -> str | None:
        """Why the work must stop now, or None."""
        if self.cancelled.is_set():
            return "cancelled (the Stop button)"
        if self.alive is not None and not self.alive():
            return "the client disconnected"
        if self.overdue():
            return f"the request's {self.seconds:g} s time budget on this server ran out; ask for fewer examples"
        return None

    def checkpoint(self, done: int | None = None, total: int | None = None, what: str = "items") -> None:
        if self.parent is not None:
            self.parent.checkpoint(done, total, what)
        self.checkpoints += 1
        if done is not None and total is not None:
            self.progress = self.reached[what] = (done, total)
        why = self.reason()
        if why is not None:
            self.stopped = why
            raise Stopped(why, done, total, what, self)

    def cancel(self) -> None:
        self.cancelled.set()


_CURRENT: ContextVar[Job | None] = ContextVar("albert_lens_job", default=None)
finished: deque[Job] = deque(maxlen=64)  # the last jobs that ended, newest last: logs, tests and the load test read it


def current() -> Job | None:
    return _CURRENT.get()


def checkpoint(done: int | None = None, total: int | None = None, what: str = "items") -> None:
    """Raise `Stopped` if the running job must stop; a no-op outside a job."""
    job = _CURRENT.get()
    if job is not None:
        job.checkpoint(done, total, what)


@contextmanager
def running(job: Job, *, record: bool = True) -> Iterator[Job]:
    """Run the body as `job`: every `checkpoint()` inside it (in this thread) asks `job`."""
    token = _CURRENT.set(job)
    try:
        yield job
    finally:
        _CURRENT.reset(token)
        if record:
            finished.append(job)


def cut(exc: Stopped, done: int, total: int, what: str) -> dict:
    """What a partial answer says about the cut: why, and how far the work got."""
    return {"reason": exc.reason, "done": done, "total": total, "what": what}
