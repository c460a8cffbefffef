"""What a very long input costs (issue 9's "huge text"): occlusion, LIME, ablation flips and a DeepWordBug attack
on a 100,000-character review, against the same calls on the part of it the models read (its first window).

Before the window (one copy of the whole text per perturbation), occlusion of such a review was killed for
memory at 24 GB and the attack ran for minutes; the figures say what it costs now. Each case runs in a fresh
process so that its peak resident memory is its own. Offline pair; time and peak RSS per case, and the ratio
long / window.

    python benchmarks/long_input.py [--chars 100000] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SENTENCE = "The acting was superb but the plot dragged, and the ending felt rushed. "
CASES = ("occlusion", "lime", "ablation_flip", "deepwordbug")


def run_case(case: str, chars: int) -> dict:
    """In this process: load the pair, time one call of `case` on a `chars`-long input."""
    from app.core import api
    from app.core.execution.pair import Pair

    pair = Pair.resolve("offline")
    text = (SENTENCE * (chars // len(SENTENCE) + 1))[:chars]
    _ = pair.models  # loading is not part of the figure
    t0 = time.perf_counter()
    if case in ("occlusion", "lime"):
        api.saliency(pair, text, None, method=case)
    elif case == "ablation_flip":
        api.counterfactual(pair, text, None, generator="ablation_flip")
    else:
        api.attack(pair, text, None, recipe="deepwordbug", label="negative", n=1, query_budget=200,
                   time_limit=120)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def window_chars() -> int:
    """Characters of the input that the models read (the longer of the two windows), plus its margin."""
    from app.core.execution.inference import encode_one
    from app.core.execution.pair import Pair
    from app.core.ground.data import Example

    text = SENTENCE * 200
    ends = []
    for clf in Pair.resolve("offline").models:
        _, al = encode_one(clf, Example((text,)))
        ends.append(al.words[al.seen[-1]].end)
    return max(ends)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chars", type=int, default=100_000)
    ap.add_argument("--json")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # internal: one case in a child process
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.chars)))
        return
    short = window_chars()
    res: dict = {"long_chars": args.chars, "window_chars": short, "cases": {}}
    for case in CASES:
        row = {}
        for label, n in (("window", short), ("long", args.chars)):
            out = subprocess.run([sys.executable, __file__, "--case", case, "--chars", str(n)], cwd=ROOT,
                                 capture_output=True, text=True, timeout=1800)
            if out.returncode != 0:
                raise SystemExit(f"{case} on {n} characters failed:\n{out.stderr[-2000:]}")
            row[label] = json.loads(out.stdout.strip().splitlines()[-1])
        row["long / window"] = {k: row["long"][k] / row["window"][k] for k in ("seconds", "peak_rss_mb")}
        res["cases"][case] = row
        print(case, json.dumps(row), file=sys.stderr)
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
