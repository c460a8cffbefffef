"""The real workloads at each precision under each instruction-set cap this CPU can run, and what the product
chose for each asked precision against the fastest option measured (issue 57).

Caps: PyTorch's ATEN_CPU_CAPABILITY, oneDNN's ONEDNN_MAX_CPU_ISA and MKL's MKL_ENABLE_INSTRUCTIONS, together (MKL
does the fp32 products and ignores the other two). They do not reach fbgemm (the int8 engine's kernels pick their
own instructions from the CPU's flags), the tokenizers' Rust code, numba or NumPy's OpenBLAS: an int8 figure under
the AVX2 caps is still VNNI's where the CPU has it (see benchmarks/README.md, CPUs).

Each cap runs in its own process with a fresh cache (so the product times its choices as a new machine would):
embed 1,000 AG News texts, benchmark SST-2 dev, integrated gradients on 5 sentences (always fp32: gradients) and
Compare's one-text p50, in fp32 and in bf16 and int8 forced, and which precision the product picks when asked for
bf16 and for int8. `--cli` times `albert-lens embed --json` as a user runs it instead (1,000 texts minus 8:
start-up subtracted), each asked precision in two processes, uncapped and under the AVX2 caps.

    python benchmarks/cpus.py [--caps all|avx2,...] [--cli] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CAPS = {  # name: (the CPU flags it needs, the variables that cap the libraries to it)
    "avx2": ({"avx2", "fma"}, {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                               "MKL_ENABLE_INSTRUCTIONS": "AVX2"}),
    "avx512": ({"avx512f", "avx512bw", "avx512vl", "avx512dq"},
               {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
                "MKL_ENABLE_INSTRUCTIONS": "AVX512"}),
    "avx512_vnni": ({"avx512_vnni"}, {"ATEN_CPU_CAPABILITY": "avx512_vnni", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI",
                                      "MKL_ENABLE_INSTRUCTIONS": "AVX512_E1"}),
    "avx512_bf16": ({"avx512_bf16"}, {"ATEN_CPU_CAPABILITY": "avx512_bf16", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16",
                                      "MKL_ENABLE_INSTRUCTIONS": "AVX512_E1"}),
    "uncapped": (set(), {}),
}
AG_NEWS = ROOT.parent / "shared" / "data" / "ag_news" / "test.csv"
SST2 = ROOT.parent / "shared" / "data" / "glue" / "sst2" / "dev.tsv"
IG_TEXTS = ["The cities were beautiful but the hotel was dreadful.", "a gorgeous , witty , seductive movie .",
            "unflinchingly bleak and desperate", "it 's a charming and often affecting journey .",
            "the acting , costumes , music , cinematography and sound are all astounding ."]


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def one_cap() -> dict:
    """In the capped process: every workload at every option, and the product's choices."""
    import numpy as np
    import torch

    from app.core import api
    from app.core.execution.pair import Pair
    from app.core.ground import kernels, tuning

    torch.set_num_threads(2)
    t0 = time.perf_counter()
    base = Pair.resolve("offline", device="cpu")
    _ = base.models
    out: dict = {"machine": tuning.machine(), "load_s": round(time.perf_counter() - t0, 2),
                 "kernels": {m.name: kernels.describe(m.model) for m in base.models}, "chosen": {}, "options": {}}
    pairs = {"fp32": base}
    for asked in ("bf16", "int8"):
        t0 = time.perf_counter()
        auto = base.with_precision(asked, force=False)
        out["chosen"][asked] = {**auto.precision_asked, "choose_s": round(time.perf_counter() - t0, 2)}
        pairs[asked] = base.with_precision(asked, force=True)
        out["options"][asked] = pairs[asked].precision_asked
    times: dict = {}
    for name, pair in pairs.items():
        t = times[name] = {}
        api.embed(pair, str(AG_NEWS), 16, visitor=False)  # first-call set-up, as the benchmarks' baselines get
        t0 = time.perf_counter()
        api.embed(pair, str(AG_NEWS), 1000, visitor=False)
        t["embed_1000_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        api.benchmark(pair, str(SST2), None, visitor=False)
        t["benchmark_sst2_s"] = time.perf_counter() - t0
        lat = []
        for i in range(31):
            t1 = time.perf_counter()
            api.predict(pair, f"{IG_TEXTS[i % 5]} {i}")
            lat.append(time.perf_counter() - t1)
        t["compare_p50_ms"] = statistics.median(lat[1:]) * 1000
        if name == "fp32":  # gradients run on fp32 weights whatever the batch precision
            api.saliency(pair, IG_TEXTS[0], method="integrated_gradients")
            t0 = time.perf_counter()
            for text in IG_TEXTS:
                api.saliency(pair, text, method="integrated_gradients")
            t["ig_5_s"] = time.perf_counter() - t0
    out["times"] = {k: {w: round(v, 3) for w, v in t.items()} for k, t in times.items()}
    rows = []
    for asked in ("bf16", "int8"):
        for work in ("embed_1000_s", "benchmark_sst2_s", "compare_p50_ms"):
            used = out["chosen"][asked]["used"]  # Compare: one input at a time, its own choice (`one_input`)
            if work == "compare_p50_ms":
                used = (out["chosen"][asked].get("one_input") or {}).get("used", used)
            options = {"fp32": times["fp32"][work], asked: times[asked][work]}
            fastest = min(options.values())
            rows.append({"asked": asked, "work": work, "fp32": options["fp32"], asked: options[asked],
                         "used": used, "chosen_over_fastest": round(options[used] / fastest, 3)})
    out["rows"] = rows
    del np
    return out


def run_cap(name: str) -> dict:
    env = {**os.environ, **CAPS[name][1]}
    for k in ("ALBERT_LENS_FORCE_PRECISION", "ALBERT_LENS_INT8"):
        env.pop(k, None)
    with tempfile.TemporaryDirectory(prefix="albert-lens-cpus-") as cache:
        env["ALBERT_LENS_CACHE"] = cache
        proc = subprocess.run([sys.executable, __file__, "--one"], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=3600)
    if proc.returncode:
        raise SystemExit(f"{name}: {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cli_runs(name: str) -> dict:
    """`albert-lens embed --json` as a user runs it: 1,000 texts minus 8 (start-up subtracted), each precision;
    bf16 and int8 in two processes each (the second reads the first's choice)."""
    env = {**os.environ, **CAPS[name][1]}
    for k in ("ALBERT_LENS_FORCE_PRECISION", "ALBERT_LENS_INT8"):
        env.pop(k, None)
    exe = str(Path(sys.executable).with_name("albert-lens"))
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="albert-lens-cli-") as cache:
        env["ALBERT_LENS_CACHE"] = cache

        def embed(precision: str, limit: int) -> tuple[float, dict]:
            t0 = time.perf_counter()
            proc = subprocess.run([exe, "embed", "--pair", "offline", "--dataset", str(AG_NEWS), "--limit",
                                   str(limit), "--precision", precision, "--out", f"{cache}/e.npz", "--json"],
                                  env=env, cwd=ROOT, capture_output=True, text=True, timeout=3600)
            if proc.returncode:
                raise SystemExit(f"{name} {precision}: {proc.stderr[-3000:]}")
            return time.perf_counter() - t0, json.loads(proc.stdout)["hardware"]["precision"]

        embed("fp32", 8)  # the offline pair's assets and the kernels' timing, once, as any first run
        for precision in ("fp32", "bf16", "int8"):
            # the first process to ask decides (its timing is part of its start-up); then two pairs of processes
            # (8 texts, 1,000 texts), each reading that decision, start-up subtracted
            first = embed(precision, 8)[1]
            runs = []
            for _ in range(2):
                small, said = embed(precision, 8)
                big, said_big = embed(precision, 1000)
                runs.append({"work_s": round(big - small, 2), "said": said_big, "said_small": said, "first": first})
            out[precision] = runs
    fp = statistics.mean(r["work_s"] for r in out["fp32"])
    for precision in ("bf16", "int8"):
        for r in out[precision]:
            r["over_fp32"] = round(r["work_s"] / fp, 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--caps", default="all")
    ap.add_argument("--cli", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_cap()))
        return
    from app.core.ground.device import cpu_name

    flags = cpu_flags()
    names = [n for n in CAPS if CAPS[n][0] <= flags] if args.caps == "all" else args.caps.split(",")
    res: dict = {"cpu": cpu_name(), "caps": {}}
    for name in (["uncapped", "avx2"] if args.cli and args.caps == "all" else names):
        print(f"{name} ...", file=sys.stderr, flush=True)
        res["caps"][name] = cli_runs(name) if args.cli else run_cap(name)
        print(json.dumps(res["caps"][name])[:3000], file=sys.stderr, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    print(f"CPU: {res['cpu']}")
    for name, r in res["caps"].items():
        if args.cli:
            fp = statistics.mean(x["work_s"] for x in r["fp32"])
            for p in ("bf16", "int8"):
                said = "; ".join(f"{x['said']['used']} ({x['over_fp32']:.2f}x fp32's {fp:.1f} s)" for x in r[p])
                print(f"{name:12} embed 1,000 --precision {p}: {said} | {r[p][0]['said']['why']}")
            continue
        for row in r["rows"]:
            a = row["asked"]
            print(f"{name:12} {row['work']:17} fp32 {row['fp32']:8.2f} {a} {row[a]:8.2f}  asked {a} -> "
                  f"{row['used']:4}  chosen/fastest {row['chosen_over_fastest']:.2f}")
        print(f"{name:12} ig_5_s (fp32) {r['times']['fp32']['ig_5_s']:.2f}; kernels "
              + "; ".join(f"{k}: {v['matmul']}, fused GELU {v['fused_gelu']}" for k, v in r["kernels"].items()))


if __name__ == "__main__":
    main()
