"""How fast a model answers, measured one way for every front end: single-example latency (median, p95),
batched throughput, and a paired comparison of two models' latency. Model facts, the benchmark and the app's
Compare tab all read these, so their figures can be set side by side."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from .data import Example
from .errors import InputError
from .inference import predict
from .significance import compare_means

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


def speed(clf, examples: Sequence[Example], batch_size: int = 32, clock: Clock | None = None) -> dict:
    """Live latency (one example at a time, median) and throughput (batched: the prediction's own seconds, as
    the benchmark reads them) on the given examples."""
    lat = latency(clf, examples, n=10, clock=clock)
    pred = predict(clf, examples, batch_size=batch_size)
    return {"latency_ms": lat["latency_ms_median"], "throughput_per_s": len(examples) / pred.seconds}


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


def latency_batch(pair, batch: Sequence[Example]) -> dict:
    """Engine job (the whole sample on one worker): the paired latency comparison of the pair's two models."""
    return latency_comparison(pair.models, batch)


latency_batch.combine = "whole"
