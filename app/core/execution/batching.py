"""Concurrent requests for one item each, answered together: whoever runs next runs everyone who is waiting.

A server answers /predict for many visitors at once, each with one text. Run one by one, each forward pass pays
the whole per-layer overhead for a single row, and 16 clients on two cores queued behind each other (p50 ~0.5 s).
`Combiner` lets the threads that wait for the model while it is busy go through in the next pass, as one batch:
a lone request runs alone, exactly as before; under load the passes grow and the waiting shrinks.

The leader/follower scheme needs no thread of its own: each caller puts its item on the list and takes the run
lock; the one that gets it runs every item listed (up to `max_items`), and the others, when they get the lock,
find their answer already there. A batch that fails is retried by each caller alone, in its own thread, so one
visitor's bad input or stopped job never becomes another's error.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

_WAITING, _DONE, _ALONE = "waiting", "done", "alone"


@dataclass(eq=False)
class _Slot:
    item: Any
    state: str = _WAITING
    value: Any = None


@dataclass
class Combiner:
    """Calls of `fn` on one item each, answered by calls of `fn` on the items waiting together.

    Args:
        fn: maps a list of items to the list of their answers, in order; on one item it must answer as it would
            within a batch (up to floating-point noise).
        max_items: the most items one call of `fn` gets.
    """

    fn: Callable[[Sequence[Any]], Sequence[Any]]
    max_items: int = 32
    passes: int = 0  # calls of `fn` so far
    largest: int = 0  # the most items one call got
    _pending: list[_Slot] = field(default_factory=list, repr=False)
    _mu: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _run: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, item: Any) -> Any:
        """`fn([item])[0]`, computed alone or beside other callers' items."""
        slot = _Slot(item)
        with self._mu:
            self._pending.append(slot)
        while slot.state == _WAITING:
            with self._run:
                if slot.state == _WAITING:
                    with self._mu:
                        batch = self._pending[: self.max_items]
                        del self._pending[: self.max_items]
                    self._answer(batch)
        if slot.state == _ALONE:  # the batch failed: this caller's own item, in its own context
            return self.fn([item])[0]
        return slot.value

    def _answer(self, batch: list[_Slot]) -> None:
        self.passes += 1
        self.largest = max(self.largest, len(batch))
        try:
            values = self.fn([s.item for s in batch])
        except BaseException:  # noqa: BLE001 - each caller meets its own error when it retries alone
            for s in batch:
                s.state = _ALONE
            return
        for s, v in zip(batch, values, strict=True):
            s.value, s.state = v, _DONE
