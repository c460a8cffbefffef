"""Memory of a long-running process on the oneDNN layers: predictions on 200 input shapes (lengths 1-100, batches
of 1 and 3) on both offline models, three rounds, resident memory after each; each case in a fresh process:
PyTorch's default layers, oneDNN with its own primitive cache (1,024 shapes), and oneDNN with the core's cap
(`app/core/ground/kernels.py`, 64). Same-run baseline: the default layers.

    python benchmarks/kernel_memory.py [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
from app.core.ground import kernels
from app.core.ground.data import Example
from app.core.execution.inference import predict
from app.core.execution.pair import Pair

def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20

pair = Pair.resolve("offline")
words = "the film was a quiet and lovely surprise with moments of real grace".split()
rounds = []
for _ in range(3):
    t0 = time.perf_counter()
    for n in range(1, 101):
        for bs in (1, 3):
            exs = [Example((" ".join((words * 20)[: n + i]),)) for i in range(bs)]
            for clf in pair.models:
                predict(clf, exs)
    rounds.append({"rss_mb": rss_mb(), "seconds": time.perf_counter() - t0})
print(json.dumps({"backend": kernels.backend(), "cache": kernels.os.environ.get(kernels.PRIMITIVE_CACHE),
                  "rounds": rounds}))
"""


def run(env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT)], env={**os.environ, **env}, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    cases = {"default_layers": {"ALBERT_LENS_MATMUL": "blas"},
             "onednn_cache_1024": {"ALBERT_LENS_MATMUL": "onednn", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024"},
             "onednn_cache_64": {"ALBERT_LENS_MATMUL": "onednn", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64"}}
    res = {name: run(env) for name, env in cases.items()}
    base = res["default_layers"]["rounds"][-1]["rss_mb"]
    for r in res.values():
        r["extra_mb_vs_default_layers"] = r["rounds"][-1]["rss_mb"] - base
        r["growth_mb_round1_to_3"] = r["rounds"][-1]["rss_mb"] - r["rounds"][0]["rss_mb"]
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
