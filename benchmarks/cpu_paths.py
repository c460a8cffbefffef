"""The CPU figures of the thirty-first session's changes, each beside a baseline measured in the same run, on the
offline pair (one process; the threads PyTorch is given):

- attention statistics over 200 SST-2 dev sentences: one input a batch (the budget at one cell, as the old loop
  forwarded each example alone) against the length-sorted batches the core takes now, and the largest difference
  between the two results;
- bf16 autocast against fp32: [CLS] embeddings of the first 500 AG News test texts, alternating, two rounds, with
  the smallest cosine to fp32;
- tokenising CheckList's sentiment suite (every distinct input, one model), and the suite's bookkeeping with the
  predictions stubbed, its checks over all of a test's cases at once against one case at a time (the baseline);
- the word rows CKA reads (`embeddings.word_layers`) for 400 SST-2 dev sentences.

    python benchmarks/cpu_paths.py [--threads 1] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from app.core.execution.inference import tokenize  # noqa: E402
from app.core.execution.pair import Pair  # noqa: E402
from app.core.ground.data import Example, load_dataset  # noqa: E402
from app.core.ground.device import cpu_name  # noqa: E402
from app.core.ground.runtime import SHARED_DATA as SHARED  # noqa: E402
from app.core.techniques import attention  # noqa: E402
from app.core.techniques import checklist as cl  # noqa: E402
from app.core.techniques.embeddings import embed, word_layers  # noqa: E402


def timed(fn, reps: int = 3) -> tuple[object, float]:
    """(the last result, the best of `reps` wall times after one warm call)."""
    out = fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    pair = Pair.resolve("offline")
    sst2 = load_dataset(SHARED / "glue" / "sst2" / "dev.tsv").examples
    news = load_dataset(SHARED / "ag_news" / "test.csv").examples[:500]
    res: dict = {"cpu": cpu_name(), "threads": args.threads}

    for clf in pair.models:
        row = {}
        kept = attention.ATT_CELLS["cpu"]
        attention.ATT_CELLS["cpu"] = 1  # one input a batch
        alone, row["attention_one_input_a_batch_s"] = timed(lambda c=clf: attention.attention_stats(c, sst2[:200]))
        attention.ATT_CELLS["cpu"] = kept
        batched, row["attention_batched_s"] = timed(lambda c=clf: attention.attention_stats(c, sst2[:200]))
        row["attention_speedup"] = row["attention_one_input_a_batch_s"] / row["attention_batched_s"]
        row["attention_max_difference"] = max(float(np.abs(np.subtract(alone[k], batched[k])).max())
                                              for k in ("entropy", "cls", "sep", "punct", "neighbour_js"))
        _, row["word_rows_400_s"] = timed(lambda c=clf: word_layers(c, sst2[:400]))
        res[clf.name] = row

    bf = pair.with_precision("bf16")
    for f, b in zip(pair.models, bf.models):
        for c in (f, b):  # start-up excluded
            embed(c, news[:32])
        fp32_s, bf16_s, cosines = [], [], []
        for _ in range(2):
            t0 = time.perf_counter()
            ef = embed(f, news)
            fp32_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            eb = embed(b, news)
            bf16_s.append(time.perf_counter() - t0)
            cosines.append(float(((ef * eb).sum(1) / np.linalg.norm(ef, axis=1) / np.linalg.norm(eb, axis=1)).min()))
        res[f.name].update(bf16_fp32_s=fp32_s, bf16_s=bf16_s, bf16_speedups=[a / c for a, c in zip(fp32_s, bf16_s)],
                           bf16_min_cosine=min(cosines))

    suite = cl.load_suite(SHARED / "checklist" / "sentiment_suite.json.gz")
    texts = sorted({x for t in suite.tests for i in range(len(t.data)) for x in cl.case_inputs(t, i, suite.kind)})
    exs = [Example((x,)) for x in texts]
    clf = pair.models[0]
    tokenize(clf, exs[:100])
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        tokenize(clf, exs)
        times.append(time.perf_counter() - t0)
    res["checklist_inputs"] = len(exs)
    res["checklist_tokenize_one_model_median_s"] = statistics.median(times)

    def stubbed(inputs):
        rng = np.random.default_rng(0)
        return [(lambda p: p / p.sum(1, keepdims=True))(rng.random((len(inputs), len(m.labels)))) for m in pair.models]

    cl.VECTORISED = False  # the baseline: every case's check one at a time, as before the checks over all cases
    _, res["checklist_bookkeeping_per_case_s"] = timed(lambda: cl.run_suite(suite, pair.models, probabilities=stubbed))
    cl.VECTORISED = True
    _, res["checklist_bookkeeping_stubbed_s"] = timed(lambda: cl.run_suite(suite, pair.models, probabilities=stubbed))
    res["checklist_bookkeeping_speedup"] = (res["checklist_bookkeeping_per_case_s"]
                                            / res["checklist_bookkeeping_stubbed_s"])
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
