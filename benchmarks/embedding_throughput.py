"""Embedding throughput on AG News test (7,600 texts): the core's batched, length-sorted `embed` against
sentence-transformers' `encode` of the same model on the same texts, in the same run (issue 4).

Both use mean pooling over all unmasked tokens and max length 128, so the vectors must agree (cosine >= 0.999).
sentence-transformers loads its own copy with PyTorch's linear layers; ours run through oneDNN where the core
chose it (`app/core/ground/kernels.py`), so ours is timed once more on stock layers: the kernels' share of the ratio.

    python benchmarks/embedding_throughput.py [--limit N] [--json out.json]
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

from app.core.execution.pair import Pair  # noqa: E402
from app.core.ground import kernels  # noqa: E402
from app.core.ground.data import load_dataset  # noqa: E402
from app.core.ground.runtime import SHARED_DATA as SHARED  # noqa: E402
from app.core.techniques.embeddings import embed  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(2)
    from sentence_transformers import SentenceTransformer

    ds = load_dataset(SHARED / "ag_news" / "test.csv").head(args.limit)
    texts = [e.text for e in ds.examples]
    pair = Pair.resolve("offline")
    res = {"dataset": ds.name, "n": len(texts), "kernels": {m.name: kernels.describe(m.model) for m in pair.models},
           "models": {}}
    for clf in pair.models:
        st = SentenceTransformer(clf.path, device="cpu")
        st.max_seq_length = clf.max_length
        st.encode(texts[:32], batch_size=args.batch)  # warm-up both
        embed(clf, ds.examples[:32], pooling="mean", batch_size=args.batch)
        t0 = time.perf_counter()
        ref = st.encode(texts, batch_size=args.batch, convert_to_numpy=True)
        t_st = time.perf_counter() - t0
        t0 = time.perf_counter()
        ours = embed(clf, ds.examples, pooling="mean", batch_size=args.batch)
        t_ours = time.perf_counter() - t0
        with kernels.stock(clf.model):
            t0 = time.perf_counter()
            embed(clf, ds.examples, pooling="mean", batch_size=args.batch)
            t_stock = time.perf_counter() - t0
        cos = (ours * ref).sum(1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(ref, axis=1))
        res["models"][clf.name] = {
            "ours_per_s": len(texts) / t_ours, "sentence_transformers_per_s": len(texts) / t_st,
            "speedup": t_st / t_ours, "ours_stock_layers_per_s": len(texts) / t_stock,
            "speedup_stock_layers": t_st / t_stock, "cosine_min": float(cos.min()), "cosine_mean": float(cos.mean()),
        }
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
