"""The offline pair's bars (issue 3): accuracy on SST-2 dev and the IMDB sample, parameter counts, latency and
throughput of both models measured in the same run, via the core's `benchmark`.

    python benchmarks/offline_pair.py [--json out.json]
    python benchmarks/offline_pair.py --pair offline-rte --dataset ../shared/data/glue/rte/dev.tsv   # any pair
                                                                      # train-offline --task exported
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.execution.pair import Pair  # noqa: E402
from app.core.ground.data import load_dataset  # noqa: E402
from app.core.ground.runtime import SHARED_DATA as SHARED  # noqa: E402
from app.core.models.loading import clear_cache  # noqa: E402
from app.core.techniques.benchmark import benchmark  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--pair", default="offline", help="offline (SST-2, shipped) or offline-<task>")
    ap.add_argument("--models", nargs=2, help="two train-offline --export folders instead of --pair")
    ap.add_argument("--dataset", action="append", help="labelled data (default: SST-2 dev and the IMDB sample)")
    args = ap.parse_args()
    clear_cache()
    t0 = time.perf_counter()
    pair = Pair.resolve(None if args.models else args.pair, models=args.models)
    _ = pair.models
    load_s = time.perf_counter() - t0
    out = {"pair": pair.name, "load_seconds_both": load_s, "datasets": {}}
    paths = [Path(d) for d in args.dataset or (SHARED / "glue" / "sst2" / "dev.tsv", SHARED / "imdb" / "test_1000.tsv")]
    for path in paths:
        out["datasets"][path.parent.name] = benchmark(pair, load_dataset(path, task=pair.task.name))
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
