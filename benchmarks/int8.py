"""int8 against fp32 for forward-only batch work (issue 30), per model of a pair, in one run:

- throughput of `embed` ([CLS], top layer) on the first 3,000 AG News test texts, int8 against the fp32 path as
  the app runs it (oneDNN linear layers where the core chose them) and against stock PyTorch layers (the share a
  plain install would see), start-up excluded, best of `--reps` alternating runs;
- the cosine of every int8 vector to its fp32 one over all 7,600 AG News test texts (minimum, 0.1% quantile,
  mean);
- SST-2 dev: agreement of the predictions, and the accuracy change with its paired interval and McNemar p
  (`significance.compare_accuracy`, fp32 first);
- the UMAP k-NN overlap between the fp32 and int8 projections of SST-2 dev (how much of each point's
  neighbourhood survives) beside the chance level;
- the study's 120,000 AG News sentences extrapolated from the 7,600 of the cosine pass (same batches), on one
  machine in fp32 and int8, and on 4 Ray workers of one such machine each.

    python benchmarks/int8.py [--pair offline | --models A B --task sst2] [--json out.json]

int8 is measured even on a CPU where the app would answer in fp32 (`ALBERT_LENS_INT8=always`); the JSON records
the CPU and the app's own load-time choice there (`precision.int8_speed`).

At base size, `--models` takes the tests' fixtures (tests/base_fixtures.py builds them).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from app.core.execution.inference import predict  # noqa: E402
from app.core.execution.pair import Pair  # noqa: E402
from app.core.ground import kernels  # noqa: E402
from app.core.ground.data import load_dataset  # noqa: E402
from app.core.ground.runtime import SHARED_DATA as SHARED  # noqa: E402
from app.core.ground.significance import compare_accuracy  # noqa: E402
from app.core.techniques.embeddings import embed  # noqa: E402
from app.core.techniques.projection import knn_chance, knn_overlap, project  # noqa: E402

RAY_OVERHEAD = 72.3 / 68.5


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pair", default="offline")
    ap.add_argument("--models", nargs=2)
    ap.add_argument("--task", help="the task of --models (their configs name no labels)")
    ap.add_argument("--timed", type=int, default=3000, help="AG News texts embedded for the throughput")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(2)
    import os

    os.environ["ALBERT_LENS_INT8"] = "always"  # int8 itself is measured; what the app would choose is recorded
    fp = Pair.resolve(None if args.models else args.pair, args.models, args.task)
    q = fp.with_precision("int8")
    load_s = [_timed(lambda c=c: c.models) for c in (fp, q)]
    news = load_dataset(SHARED / "ag_news" / "test.csv").examples
    sst2 = load_dataset(SHARED / "glue" / "sst2" / "dev.tsv").examples
    gold = [e.label for e in sst2]
    timed = news[: args.timed]
    rows = []
    for f, i in zip(fp.models, q.models):
        for c in (f, i):  # start-up (first calls, allocator pools) excluded
            embed(c, news[:64])
        fp32_s, stock_s, int8_s = [], [], []
        for _ in range(args.reps):  # alternating: the machine's drift falls on both
            fp32_s.append(_timed(lambda: embed(f, timed)))
            with kernels.stock(f.model):
                stock_s.append(_timed(lambda: embed(f, timed)))
            int8_s.append(_timed(lambda: embed(i, timed)))
        all_s = {}
        vecs = {}
        for tag, c in (("fp32", f), ("int8", i)):
            all_s[tag] = _timed(lambda c=c, tag=tag: vecs.__setitem__(tag, embed(c, news)))
        cos = _cosines(vecs["fp32"], vecs["int8"])
        pf, pi = predict(f, sst2), predict(i, sst2)
        cmp = compare_accuracy(gold, pf.predicted, pi.predicted)
        ef, ei = embed(f, sst2), embed(i, sst2)
        uf, ui = project(ef, "umap"), project(ei, "umap")
        row = {
            "model": f.name, "timed_texts": len(timed),
            "fp32_s": min(fp32_s), "fp32_stock_s": min(stock_s), "int8_s": min(int8_s),
            "speedup_vs_fp32": min(fp32_s) / min(int8_s), "speedup_vs_stock_fp32": min(stock_s) / min(int8_s),
            "cosine_min": float(cos.min()), "cosine_q001": float(np.quantile(cos, 0.001)),
            "cosine_mean": float(cos.mean()), "cosine_below_099": int((cos < 0.99).sum()), "cosine_n": len(cos),
            "sst2_agreement": cmp["agreement"], "sst2_accuracy_fp32": cmp["values"][0],
            "sst2_accuracy_int8": cmp["values"][1], "sst2_accuracy_change": cmp["difference"],
            "sst2_change_interval": cmp["difference_interval"], "sst2_mcnemar_p": cmp["p_value"],
            "umap_knn_overlap": knn_overlap(uf, ui), "umap_knn_chance": knn_chance(len(sst2)),
            "embedding_knn_overlap": knn_overlap(ef, ei),
            "ag_news_7600_s": all_s,
            "ag_news_120k_one_machine_min": {k: v * 120_000 / len(news) / 60 for k, v in all_s.items()},
            # 4 workers, each with a machine like this one: a quarter of the work each, Ray's overhead as measured
            # in-process against 2 Ray workers (benchmarks/README.md, Batch engine: 68.5 against 72.3 s), plus a
            # worker's loading of the pair
            "ag_news_120k_4_ray_workers_min": {
                k: (v * 120_000 / len(news) / 4 * RAY_OVERHEAD + load_s[k == "int8"]) / 60 for k, v in all_s.items()},
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    from app.core.ground.device import cpu_name
    from app.core.ground.precision import int8_speed

    res = {"pair": fp.name, "cpu": cpu_name(), "int8_speed": int8_speed(),  # the load-time choice on this CPU
           "load_s": {"fp32": load_s[0], "int8": load_s[1]},
           "linear_layers_fp32": kernels.describe(), "quantized_engine":
           torch.backends.quantized.engine, "models": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
