"""Is one model's lead on a dataset more than chance?

Both models answer the same examples, so the comparison is paired: two accuracies 0.88 and 0.84 on 300 sentences
may be a real gap or the luck of which sentences were drawn, and unpaired intervals (one per model) overlap far
more than the gap's own interval does. Accuracy gets McNemar's exact test on the examples exactly one model gets
right, paired bootstrap intervals and the models' agreement (Cohen's kappa); a regression pair (STS-B) gets
bootstrap intervals of each Pearson correlation and of their difference, with a bootstrap p-value.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .errors import InputError

CONFIDENCE = 0.95
RESAMPLES = 2000
_CHUNK = 200  # regression resamples drawn at a time: 200 x 20,000 indices stay small


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """Two-sided exact p-value of McNemar's test: if both models were equally accurate, each example that
    exactly one of them gets right would be the first model's with probability 1/2."""
    from scipy.stats import binomtest

    n = int(only_first) + int(only_second)
    return 1.0 if n == 0 else float(binomtest(int(only_first), n, 0.5).pvalue)


def _check(gold: Sequence, first: Sequence, second: Sequence) -> int:
    n = len(gold)
    if n == 0:
        raise InputError("dataset: no labelled examples to compare the models on")
    if len(first) != n or len(second) != n:
        raise InputError(f"predictions: {len(first)} and {len(second)} predictions for {n} gold labels")
    return n


def _interval(samples: np.ndarray, confidence: float) -> list[float]:
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(samples, [tail, 100 - tail])
    return [float(lo), float(hi)]


def compare_accuracy(gold: Sequence, first: Sequence, second: Sequence, *, resamples: int = RESAMPLES,
                     confidence: float = CONFIDENCE, seed: int = 0) -> dict:
    """Accuracies with paired bootstrap intervals, their difference (second minus first), McNemar's exact
    p-value, the 2x2 table of right and wrong, and how often the two predictions agree.

    Resampling examples with replacement only moves counts between the table's four cells, so the bootstrap
    draws the cells from a multinomial: the same distribution as resampling indices, at any dataset size."""
    n = _check(gold, first, second)
    g, a, b = (np.asarray(x, dtype=object) for x in (gold, first, second))
    right_a, right_b = a == g, b == g
    cells = np.array([np.sum(right_a & right_b), np.sum(right_a & ~right_b), np.sum(~right_a & right_b),
                      np.sum(~right_a & ~right_b)])
    draws = np.random.default_rng(seed).multinomial(n, cells / n, size=resamples)
    acc_a, acc_b = (draws[:, 0] + draws[:, 1]) / n, (draws[:, 0] + draws[:, 2]) / n
    values = [float(right_a.mean()), float(right_b.mean())]
    return {
        "metric": "accuracy", "n": n, "confidence": confidence, "resamples": resamples,
        "values": values, "intervals": [_interval(acc_a, confidence), _interval(acc_b, confidence)],
        "difference": values[1] - values[0], "difference_interval": _interval(acc_b - acc_a, confidence),
        "test": "McNemar, exact", "p_value": mcnemar_exact(cells[1], cells[2]),
        "both_right": int(cells[0]), "only_right": [int(cells[1]), int(cells[2])], "both_wrong": int(cells[3]),
        "agreement": float(np.mean(a == b)), "kappa": _kappa(a, b),
    }


def _kappa(a: np.ndarray, b: np.ndarray) -> float | None:
    """Cohen's kappa of the two models' predictions: agreement beyond what their label frequencies give by
    chance. None when chance agreement is already total (both always answer the same one label)."""
    from sklearn.metrics import cohen_kappa_score

    labels = sorted(set(a.tolist()) | set(b.tolist()), key=str)
    if len(labels) < 2:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        k = cohen_kappa_score(a.astype(str), b.astype(str), labels=[str(x) for x in labels])
    return None if not np.isfinite(k) else float(k)


def _pearson_rows(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of x with the same row of y."""
    xc = x - x.mean(1, keepdims=True)
    yc = y - y.mean(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (xc * yc).sum(1) / np.sqrt((xc * xc).sum(1) * (yc * yc).sum(1))


def compare_correlation(gold: Sequence[float], first: Sequence[float], second: Sequence[float], *,
                        resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = 0) -> dict:
    """Pearson correlations of each model's scores with the gold scores, paired bootstrap intervals of each
    and of the difference (second minus first), and a two-sided bootstrap p-value for "no difference"."""
    n = _check(gold, first, second)
    if n < 3:
        raise InputError(f"dataset: {n} scored examples; a correlation needs at least 3")
    y, a, b = (np.asarray(x, dtype=float) for x in (gold, first, second))
    if np.ptp(y) == 0:
        raise InputError("dataset: every gold score is the same, so no correlation is defined")
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        raise InputError("predictions: a model gives every example the same score, so its correlation is undefined")
    rng = np.random.default_rng(seed)
    ra, rb = [], []
    for start in range(0, resamples, _CHUNK):
        idx = rng.integers(0, n, size=(min(_CHUNK, resamples - start), n))
        ra.append(_pearson_rows(y[idx], a[idx]))
        rb.append(_pearson_rows(y[idx], b[idx]))
    ra, rb = np.concatenate(ra), np.concatenate(rb)
    ok = np.isfinite(ra) & np.isfinite(rb)  # a resample of identical gold scores has no correlation
    ra, rb = ra[ok], rb[ok]
    diff = rb - ra
    values = [float(_pearson_rows(y[None], a[None])[0]), float(_pearson_rows(y[None], b[None])[0])]
    below, above = np.sum(diff <= 0), np.sum(diff >= 0)
    return {
        "metric": "pearson", "n": n, "confidence": confidence, "resamples": int(ok.sum()),
        "values": values, "intervals": [_interval(ra, confidence), _interval(rb, confidence)],
        "difference": values[1] - values[0], "difference_interval": _interval(diff, confidence),
        "test": "paired bootstrap", "p_value": float(min(1.0, 2 * (min(below, above) + 1) / (len(diff) + 1))),
        "agreement": float(np.corrcoef(a, b)[0, 1]),
    }


def verdict(cmp: dict, names: Sequence[str], alpha: float = 0.05) -> str:
    """One sentence a reader can act on: who leads, by how much, and whether that is more than chance."""
    metric, (a, b), d = cmp["metric"], names, cmp["difference"]
    lo, hi = cmp["difference_interval"]
    pct = f"{int(round(100 * cmp['confidence']))}%"
    lead = f"{b} − {a} {metric}: {d:+.3f} ({pct} CI {lo:+.3f} to {hi:+.3f}), {cmp['test']} p = {cmp['p_value']:.3g}"
    if cmp["p_value"] < alpha:
        winner = b if d > 0 else a
        return f"{lead}: {winner} is ahead beyond chance on these {cmp['n']:,} examples"
    return f"{lead}: not distinguishable from chance on these {cmp['n']:,} examples"
