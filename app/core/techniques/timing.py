"""How fast a model answers, measured one way for every front end: single-example latency (median, p95),
batched throughput, and a paired comparison of two models' latency. Model facts, the benchmark and the app's
Compare tab all read these, so their figures can be set side by side."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from ..execution.inference import predict
from ..ground.data import Example
from ..ground.errors import InputError
from ..ground.significance import compare_means

LATENCY_SAMPLES = 20


Clock = Callable[[], float]


def latency(clf, examples: Sequence[Example], n: int = LATENCY_SAMPLES, clock: Clock | None = None) -> dict:
    """Single-example latency (batch of one), median and p95 over `n` examples, after one warm-up call. `clock`
    (seconds) is injectable for tests."""
    clock = clock or time.perf_counter
    sample = examples[: max(1, n)]
    predict(clf, sample[:1])
    times = []
    for ex in sample:
        t0 = clock()
        predict(clf, [ex])
        times.append(clock() - t0)
    times.sort()
    return {"latency_ms_median": 1000 * statistics.median(times),
            "latency_ms_p95": 1000 * times[min(len(times) - 1, int(0.95 * len(times)))]}


def latency_comparison(models, examples: Sequence[Example], warm_up: int = 2, clock: Clock | None = None) -> dict:
    """Is one model faster one example at a time? Each input is timed on both models back to back, in turns
    (the first model first on even inputs, second on odd), so that a machine getting busier slows both alike;
    the per-input differences go to a paired permutation test. `clock` (seconds) is injectable for tests."""
    clock = clock or time.perf_counter
    if len(models) != 2 or not examples:
        raise InputError("texts: a latency comparison needs two models and at least one input")
    for clf in models:
        for ex in examples[:warm_up]:
            predict(clf, [ex])
    times: list[list[float]] = [[], []]
    for i, ex in enumerate(examples):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for k in order:
            t0 = clock()
            predict(models[k], [ex])
            times[k].append(1000 * (clock() - t0))
    return compare_means(*times, metric="latency (ms)")


THROUGHPUT_ROUNDS = 6


def throughput_comparison(models, examples: Sequence[Example], rounds: int = THROUGHPUT_ROUNDS,
                          batch_size: int = 32) -> dict:
    """Is one model faster over a batch? Both models predict the whole sample, batched, `rounds` times in turns
    (the first model first on even rounds), each round's examples a second from the prediction's own seconds;
    the rounds' means with their intervals and the paired test, as for latency (one run each read 0.85x, 1.20x
    and 0.90x on the same machine)."""
    if len(models) != 2 or not examples:
        raise InputError("texts: a throughput comparison needs two models and at least one input")
    for clf in models:
        predict(clf, examples[:batch_size], batch_size=batch_size)
    rates: list[list[float]] = [[], []]
    for r in range(max(2, rounds)):
        for k in ((0, 1) if r % 2 == 0 else (1, 0)):
            rates[k].append(len(examples) / predict(models[k], examples, batch_size=batch_size).seconds)
    return compare_means(*rates, metric="throughput (inputs/s)")


def latency_batch(pair, batch: Sequence[Example]) -> dict:
    """Batch function (the whole sample on one worker): the paired latency comparison of the pair's two models, and
    the paired throughput comparison."""
    return latency_comparison(pair.models, batch) | {"throughput": throughput_comparison(pair.models, batch)}


latency_batch.combine = "whole"


class TextCost:
    """Seconds one text costs a model here, as `a + b * tokens` (tokens as the model reads them: truncated at its
    maximum length), fitted robustly (Theil-Sen: the median of the pairwise slopes, then the median intercept) to
    the start-up measurements (`anchors`, kept) and the last `WINDOW` texts served. A server refuses up front the
    work its time budget can't cover from this, so one slow start-up measurement (a hosted LIT server once
    estimated 2,123 ms a text against 127-187 ms measured later) is outvoted by what the texts then cost, and a
    long text is priced as long. Characters were no measure: past the maximum length a text costs no more, and
    sentences' slope per character priced a 2,000-character text 2.3-3.1x too dear. Only pairs of texts whose
    sizes differ by half the larger (and `SPREAD_MIN`) give a slope: near-equal sizes give timing noise."""

    WINDOW = 64
    SPREAD = 0.5
    SPREAD_MIN = 8

    def __init__(self, anchors: Sequence[tuple[int, float]] = ()):
        from collections import deque

        self._anchors: list[tuple[int, float]] = [(int(c), float(s)) for c, s in anchors if c >= 0 and s >= 0]
        self._points: deque[tuple[int, float]] = deque(maxlen=self.WINDOW)
        self._fit: tuple[float, float] | None = None

    @classmethod
    def fixed(cls, seconds: float) -> TextCost:
        """Every text costs `seconds`, whatever its size (until measured texts say otherwise)."""
        return cls([(0, seconds), (1000, seconds)])

    def anchor(self, tokens: int, seconds: float) -> None:
        """A start-up measurement: kept while the served texts come and go."""
        if seconds >= 0 and tokens >= 0:
            self._anchors.append((int(tokens), float(seconds)))
            self._fit = None

    def observe(self, tokens: int, seconds: float) -> None:
        """A served text's cost: among the last WINDOW."""
        if seconds >= 0 and tokens >= 0:
            self._points.append((int(tokens), float(seconds)))
            self._fit = None

    def __len__(self) -> int:
        return len(self._anchors) + len(self._points)

    def line(self) -> tuple[float, float]:
        """(a, b): seconds for an empty text, and per token; both at least 0."""
        if self._fit is None:
            pts = self._anchors + list(self._points)
            if not pts:
                raise InputError("text cost: nothing measured yet")
            slopes = [(s2 - s1) / (c2 - c1) for i, (c1, s1) in enumerate(pts) for c2, s2 in pts[i + 1:]
                      if abs(c2 - c1) >= max(self.SPREAD_MIN, self.SPREAD * max(c1, c2))]
            b = max(0.0, statistics.median(slopes)) if slopes else 0.0
            a = max(0.0, statistics.median(s - b * c for c, s in pts))
            self._fit = (a, b)
        return self._fit

    def seconds(self, tokens: int) -> float:
        a, b = self.line()
        return a + b * tokens
