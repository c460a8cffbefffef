"""One-off costs the app pays at launch in a background thread (`app.ui._warm_up`), measured in fresh processes.

For each step: the first use in a cold process, and the first use in a process that ran the warm-up first (the
warm-up's own time shown beside it; the app spends it while starting, before anyone clicks).
- UMAP: `projection.project` of 500 random 384-d vectors (the compile cost does not depend on the data).
- WordNet: `counterfactuals.wordnet_alternatives("film")`, the call behind a synonym swap.

    python benchmarks/warm_up.py [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FIRST_USE = {
    "umap": ("from app.core.techniques import projection as m",
             "import numpy as np; m.project(np.random.default_rng(1).normal(size=(500, 384)).astype(np.float32))"),
    "wordnet": ("from app.core.techniques import counterfactuals as m", "m.wordnet_alternatives('film')"),
}


def run(step: str, warm: bool) -> dict:
    setup, use = FIRST_USE[step]
    code = (f"import time; {setup}\n"
            f"t = time.perf_counter(); {'m.warm_up()' if warm else 'pass'}; w = time.perf_counter() - t\n"
            f"t = time.perf_counter(); {use}; u = time.perf_counter() - t\n"
            "t = time.perf_counter(); " + use + "; again = time.perf_counter() - t\n"
            "print(w, u, again)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    w, u, again = map(float, out.stdout.split()[-3:])
    return {"warm_up_s": w, "first_use_s": u, "second_use_s": again}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    res = {}
    for step in FIRST_USE:
        cold, warmed = run(step, False), run(step, True)
        res[step] = {"cold_first_use_s": cold["first_use_s"], "second_use_s": cold["second_use_s"],
                     "warm_up_s": warmed["warm_up_s"], "first_use_after_warm_up_s": warmed["first_use_s"],
                     "first_use_speedup": cold["first_use_s"] / warmed["first_use_s"]}
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
