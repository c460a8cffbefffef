"""How close a reduced precision's answers stay to fp32, measured beside the result it qualifies.

A run in int8, bf16 or fp16 says, on a sample of its own inputs, how often each model's predictions agree with
its fp32 weights' and the smallest cosine between the two precisions' sentence embeddings: the same two checks
that held int8 to its bounds (tests/test_precision.py), reported with every embed and benchmark result.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ground.data import Example
from .embeddings import embed_and_predict

SAMPLE = 64  # inputs the check reruns in both precisions: four small batches per model


def against_fp32(pair, examples: Sequence[Example], sample: int = SAMPLE, pooling: str = "cls") -> dict | None:
    """{"against": "fp32", "n", "agreement": {model: share}, "min_cosine": {model: value}} on the first `sample`
    examples (a regression's scores agree within 1%); None for an fp32 pair (nothing to check)."""
    if pair.precision == "fp32" or not examples:
        return None
    exs = list(examples[:sample])
    out = {"against": "fp32", "precision": pair.precision, "n": len(exs), "agreement": {}, "min_cosine": {}}
    for low, ref in zip(pair.models, pair.fp32.models):
        # one pass over the encoder per precision gives both checks (two cost a quarter of a 1,000-text embed)
        (e, a), (f, b) = (embed_and_predict(m, exs, pooling=pooling) for m in (low, ref))
        if low.is_regression:
            same = (np.abs(a - b) <= 0.01 * np.maximum(1, np.abs(b))).all(1)
        else:
            same = a.argmax(1) == b.argmax(1)
        out["agreement"][low.name] = float(same.mean())
        cos = (e * f).sum(1) / np.maximum(np.linalg.norm(e, axis=1) * np.linalg.norm(f, axis=1), 1e-12)
        out["min_cosine"][low.name] = float(cos.min())
    return out
