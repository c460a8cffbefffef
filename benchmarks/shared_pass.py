"""Find slices after Benchmark on the same rows, against Find slices alone (the baseline, measured in the same run):
Benchmark's timed pass keeps each model's predictions and top-layer [CLS] vectors by content, so Find slices on
the same rows runs no model.

Each step in a fresh, empty cache folder; the pair is loaded and warmed on 20 rows first, so no figure pays the
imports. The CPU is printed with the figures.

    python benchmarks/shared_pass.py [--pair offline] [--dataset "sst2 dev (released GLUE)"] [--limit 1000]
"""
from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pair", default="offline")
    ap.add_argument("--dataset", default="sst2 dev (released GLUE)")
    ap.add_argument("--limit", type=int, default=1000)
    args = ap.parse_args()
    from app.core import api
    from app.core.execution.pair import Pair
    from app.core.ground.device import cpu_name

    pair = Pair.resolve(args.pair)
    os.environ["ALBERT_LENS_CACHE"] = tempfile.mkdtemp()
    api.benchmark(pair, args.dataset, 20)
    api.slices(pair, args.dataset, limit=20, min_size=5)

    def timed(fn) -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    os.environ["ALBERT_LENS_CACHE"] = tempfile.mkdtemp()
    alone = timed(lambda: api.slices(pair, args.dataset, limit=args.limit))
    os.environ["ALBERT_LENS_CACHE"] = tempfile.mkdtemp()
    bench = timed(lambda: api.benchmark(pair, args.dataset, args.limit))
    after = timed(lambda: api.slices(pair, args.dataset, limit=args.limit))
    print(f"{cpu_name()} ({platform.machine()}), pair {args.pair}, {args.dataset}, up to {args.limit} rows")
    print(f"Find slices alone (baseline): {alone:.2f} s")
    print(f"Benchmark: {bench:.2f} s; Find slices after it: {after:.2f} s ({after / alone:.2f}x the baseline)")


if __name__ == "__main__":
    main()
