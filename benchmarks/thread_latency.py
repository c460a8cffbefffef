"""The live latency of a prediction made from a new thread, as the app's worker threads are (they are retired
when idle): each thread needs its own tokenizer copy (`loading.Classifier.tokenizer`).

Baseline: a fresh deepcopy per new thread (the spare and ended threads' copies discarded before each thread, as
before copies were reused). Ours: a new thread takes over an ended thread's copy. Offline pair, one sentence,
median of `--threads` new threads, each timing its first prediction (`Prediction.seconds`, what the app shows).

    python benchmarks/thread_latency.py [--threads 9] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import threading
from pathlib import Path

from app.core.execution.pair import Pair
from app.core.ground.data import Example

TEXT = "The cities were beautiful but the hotel was dreadful."


def first_prediction_ms(pair: Pair, reuse: bool) -> list[float]:
    out: list[float] = []

    def run():
        out.extend(p.seconds * 1000 for p in pair.predict([Example((TEXT,))]))

    if not reuse:
        for clf in pair.models:
            clf._copies.clear()
            clf._spare.clear()
    th = threading.Thread(target=run)
    th.start()
    th.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=9)
    ap.add_argument("--json")
    args = ap.parse_args()
    pair = Pair.resolve("offline")
    names = [m.name for m in pair.models]
    pair.predict([Example((TEXT,))])  # the main thread's first call, out of the measurement
    res = {}
    for label, reuse in (("fresh copy per thread (baseline)", False), ("ended thread's copy reused", True)):
        if reuse:  # as the app does before serving
            for clf in pair.models:
                clf.reserve_tokenizer()
        runs = [first_prediction_ms(pair, reuse) for _ in range(args.threads)]
        res[label] = {n: statistics.median(r[k] for r in runs) for k, n in enumerate(names)}
    base, ours = res.values()
    res["baseline / ours"] = {n: base[n] / ours[n] for n in names}
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
