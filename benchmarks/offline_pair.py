"""The offline pair's bars (issue 3): accuracy on SST-2 dev and the IMDB sample, parameter counts, latency and
throughput of both models measured in the same run, via the core's `benchmark`.

    python benchmarks/offline_pair.py [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.benchmark import benchmark  # noqa: E402
from app.core.data import load_dataset  # noqa: E402
from app.core.loading import clear_cache  # noqa: E402
from app.core.pair import Pair  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    clear_cache()
    t0 = time.perf_counter()
    pair = Pair.resolve("offline")
    _ = pair.models
    load_s = time.perf_counter() - t0
    out = {"load_seconds_both": load_s, "datasets": {}}
    for path in (SHARED / "glue" / "sst2" / "dev.tsv", SHARED / "imdb" / "test_1000.tsv"):
        out["datasets"][path.parent.name] = benchmark(pair, load_dataset(path))
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
