"""One minibatch's CKA statistics (`similarity.minibatch_stats`: the unbiased HSIC of every pair of layers, A x B,
A x A and B x B) as the core computes them, one set of matrix products over the stacked Gram matrices
(`similarity.hsic_table`), against the named baseline: the same statistics one cell at a time (Song et al.'s
estimator per pair of Gram matrices, the core's code before), measured in the same run on the same arrays.

The shapes are the offline pair's: 7 layers each (embeddings + 6), 384 wide; a minibatch of 128 sentences, and a
slice of 40 with the 200 half-samples a run of few minibatches takes for its interval (Inside's brushed points).

    python benchmarks/hsic_tables.py [--repeats 5] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def per_cell(a: np.ndarray, b: np.ndarray, halves: int = 0, seed: int = 0) -> dict:
    """The baseline: one estimator call per pair of layers, in Python loops."""

    def hsic1(k, lm):
        n = k.shape[0]
        k, lm = k.copy(), lm.copy()
        np.fill_diagonal(k, 0.0)
        np.fill_diagonal(lm, 0.0)
        ones_k, ones_l = k.sum(0), lm.sum(0)
        term = (np.sum(k * lm) + ones_k.sum() * ones_l.sum() / ((n - 1) * (n - 2))
                - 2.0 / (n - 2) * float(ones_k @ ones_l))
        return float(term / (n * (n - 3)))

    ga = [x.astype(np.float64) @ x.astype(np.float64).T for x in a]
    gb = [x.astype(np.float64) @ x.astype(np.float64).T for x in b]

    def table(gx, gy):
        return [[hsic1(k, lm) for lm in gy] for k in gx]

    from app.core.techniques.similarity import _spread

    out = {"ab": table(ga, gb), "aa": table(ga, ga), "bb": table(gb, gb), "spread_a": _spread(a).tolist(),
           "spread_b": _spread(b).tolist()}  # as the core's, which says how much each layer varies
    if halves:
        rng, m, draws = np.random.default_rng(seed), a.shape[1], []
        for _ in range(halves):
            pick = np.ix_(*(2 * [np.sort(rng.choice(m, m // 2, replace=False))]))
            ha, hb = [g[pick] for g in ga], [g[pick] for g in gb]
            draws.append({"ab": table(ha, hb), "aa": table(ha, ha), "bb": table(hb, hb)})
        out["halves"] = draws
    return out


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    from app.core.techniques.similarity import minibatch_stats

    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for label, n, halves in (("a minibatch of 128", 128, 0), ("a slice of 40, 200 half-samples", 40, 200)):
        a = rng.normal(size=(7, n, 384)).astype(np.float32)
        b = rng.normal(size=(7, n, 384)).astype(np.float32)
        ours, ref = minibatch_stats(a, b, halves=halves), per_cell(a, b, halves=halves)
        for key in ("ab", "aa", "bb"):  # the same numbers, to float64 rounding
            np.testing.assert_allclose(ours[key], ref[key], rtol=1e-9, atol=1e-12)
        if halves:
            np.testing.assert_allclose(ours["halves"][-1]["ab"], ref["halves"][-1]["ab"], rtol=1e-9, atol=1e-12)
        base = timed(lambda: per_cell(a, b, halves=halves), args.repeats)
        core = timed(lambda: minibatch_stats(a, b, halves=halves), args.repeats)
        rows.append({"case": label, "baseline_s": round(base, 4), "core_s": round(core, 4),
                     "speedup": round(base / core, 1)})
        print(f"{label}: per cell {base * 1000:.1f} ms, stacked {core * 1000:.1f} ms, {base / core:.1f}x faster")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
