"""LIT's cost per text (issue 58.10): what a hosted LIT server estimates at start-up, against what a text then
costs it, on several fresh starts. Each start is its own process, as `albert-lens lit --hosted` runs: the
estimate sets the up-front refusal ("send at most N"), so it should be within 2x of the real cost on every
start (it was 407-2,123 ms against 127-187 ms measured).

    python benchmarks/lit_cost.py [--starts 3] [--texts 20] [--json out.json]

Per start, model and kind of text (`--texts` new SST-2 dev sentences; half as many texts of 1,999 characters,
what a hostile visitor sends): the start-up estimate of their cost (`LensModel.cost`, right after `make_server`)
against their real cost as LIT predicts them (one request, timed per text inside the model), both per text.
The CPU is named in the output.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def one_start(n_texts: int) -> dict:
    """In this process: a hosted LIT server's start-up estimate, then the real cost of new texts."""
    os.environ["ALBERT_LENS_HOSTED"] = "1"
    from app.core.execution.pair import Pair
    from app.core.ground.data import load_dataset
    from app.core.ground.runtime import SHARED_DATA
    from lit_models.server import make_server

    t0 = time.perf_counter()
    pair = Pair.resolve("offline")
    dev = SHARED_DATA / "glue" / "sst2" / "dev.tsv"
    server = make_server(pair, [str(dev)], limit=40, port=None, server_type="external")
    started = time.perf_counter() - t0
    app = server.serve()
    dev_texts = [e.texts[0] for e in load_dataset(dev, task="sst2", limit=400).examples[100:]]
    short = dev_texts[:n_texts]
    # what a hostile visitor sends: texts at the hosted cap, from dev sentences run together
    joined = " ".join(dev_texts)
    long = [joined[k * 1999:(k + 1) * 1999] for k in range(1, 1 + n_texts // 2)]
    out = {"start_s": round(started, 2)}
    for clf in pair.models:
        model = app._models[clf.name].wrapped
        row = {}
        for kind, texts in (("short", short), ("long", long)):
            # before: what the start-up measured
            estimate = sum(model.cost.seconds(model.tokens(model.example({"sentence": t}))) for t in texts)
            one = type(model)._one
            times = []

            def timed(self, ex, one=one, times=times):
                t = time.perf_counter()
                try:
                    return one(self, ex)
                finally:
                    times.append(time.perf_counter() - t)

            type(model)._one = timed
            try:
                list(model.predict([{"sentence": t} for t in texts]))
            finally:
                type(model)._one = one
            real = sum(times)
            row[kind] = {"chars": round(statistics.mean(len(t) for t in texts)),
                         "estimate_ms": round(1000 * estimate / len(texts), 1),
                         "real_ms": round(1000 * real / len(texts), 1), "ratio": round(estimate / real, 2)}
        out[clf.name] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--texts", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_start(args.texts)))
        return
    rows = []
    for k in range(args.starts):
        res = subprocess.run([sys.executable, __file__, "--one", "--texts", str(args.texts)], capture_output=True,
                             text=True, cwd=ROOT, timeout=900)
        if res.returncode != 0:
            sys.exit(res.stderr[-3000:])
        row = json.loads(res.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"start {k + 1} ({row['start_s']} s): " + "; ".join(
            f"{m} {kind} ({v['chars']} chars): estimate {v['estimate_ms']} ms, real {v['real_ms']} ms ({v['ratio']}x)"
            for m, r in row.items() if isinstance(r, dict) for kind, v in r.items()), flush=True)
    ratios = [v["ratio"] for r in rows for m in r.values() if isinstance(m, dict) for v in m.values()]
    summary = {"cpu": cpu_name(), "starts": rows, "worst_ratio": max(max(ratios), 1 / min(ratios))}
    print(f"{summary['cpu']}: estimate/real {min(ratios):.2f}-{max(ratios):.2f}x over {len(rows)} starts "
          f"(target: within 2x)")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
