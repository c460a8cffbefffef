"""CKA between every layer of the offline BERT and ALBERT on AG News test (issue 31): seconds, peak memory and the
cost per 1,000 sentences as the number of sentences grows, for the facade's minibatch estimator
(`api.similarity`, unbiased HSIC over minibatches of 128, embedded 1,024 at a time) against the full-batch
formula that holds every layer's embeddings of every sentence (the named baseline: `similarity.linear_cka` on the
whole (n, width) matrices).

Each (size, estimator) runs in its own process, so its peak is its own: "extra peak" is the peak RSS during the
computation above the RSS after the pair and the data were loaded (sampled every 20 ms). glibc's malloc is held to
a fixed mmap threshold (128 kB) in both: by default it raises the threshold after the first large frees, and the
heap then keeps the freed batches of differently padded lengths, so RSS measured the allocator's history (the same
minibatch run peaked at 551 and at 872 MB above its base across two runs) rather than the memory in use.

    python benchmarks/cka_scaling.py [--sizes 1000 2500 5000 7600] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def one(n: int, estimator: str) -> dict:
    """One measurement, in this process."""
    import psutil
    import torch

    from app.core import api
    from app.core.ground.runtime import SHARED_DATA
    from app.core.techniques.embeddings import embed_layers
    from app.core.techniques.similarity import linear_cka

    torch.set_num_threads(2)
    pair = api.Pair.resolve("offline")
    dataset = str(SHARED_DATA / "ag_news" / "test.csv")
    ds = api.resolve_dataset(pair, dataset, n, visitor=False)
    _ = [m.model for m in pair.models]
    api.similarity(pair, dataset, limit=16, visitor=False)  # warm-up: first calls, allocator pools
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    if estimator == "minibatch":
        res = api.similarity(pair, dataset, limit=n, visitor=False)
        cross = res["cross"]["cka"]
    else:  # every layer's embeddings of every sentence (one call: length-sorted batches), then the closed form
        a, b = (embed_layers(clf, ds.examples) for clf in pair.models)
        cross = [[linear_cka(x, y) for y in b] for x in a]
    seconds = time.perf_counter() - t0
    done.set()
    sampler.join()
    return {"n": len(ds), "estimator": estimator, "seconds": seconds, "per_1000_s": 1000 * seconds / len(ds),
            "extra_peak_mb": (peak[0] - base) / 2**20, "rss_after_load_mb": base / 2**20,
            "cross_diagonal": [row[i] for i, row in enumerate(cross)]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2500, 5000, 7600])
    ap.add_argument("--one", nargs=2, metavar=("N", "ESTIMATOR"))
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1])))
        return
    runs = []
    for n in args.sizes:
        for estimator in ("minibatch", "full"):
            env = os.environ | {"MALLOC_MMAP_THRESHOLD_": "131072"}
            out = subprocess.run([sys.executable, __file__, "--one", str(n), estimator], cwd=ROOT, env=env,
                                 capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            r = runs[-1]
            print(f"{r['n']:>6} {estimator:<9} {r['seconds']:7.1f} s  {r['per_1000_s']:5.2f} s/1000  "
                  f"extra peak {r['extra_peak_mb']:7.1f} MB", flush=True)
    res = {"dataset": "ag_news/test", "pair": "offline", "runs": runs}
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
