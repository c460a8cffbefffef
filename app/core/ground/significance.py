"""Is a gap between the two models more than chance?

Both models answer the same items, so every comparison is paired: two accuracies 0.88 and 0.84 on 300 sentences
may be a real gap or the luck of which sentences were drawn, and unpaired intervals (one per model) overlap far
more than the gap's own interval does. Yes/no events (a right answer, a failed CheckList case, a flipped label,
a successful attack) get McNemar's exact test on the items exactly one model has the event on, with exact
(Clopper-Pearson) intervals, or, when items come in groups (several edits of one sentence), a bootstrap over
whole groups; per-item scores (faithfulness, timings) a paired permutation test; a regression pair (STS-B)
bootstrap intervals of each Pearson correlation and of their difference. `holm` corrects a suite of tests for
their number.

A verdict and its interval come from the same method, so that they cannot contradict each other: the interval of
a difference holds exactly the differences its test would not reject (the permutation test inverted; McNemar's
exact test, conditional on the items the models disagree on, inverted), and a p-value below 0.05 goes with a 95%
interval that excludes zero. A bootstrap percentile interval beside a permutation p had said "-21.3 to -5.4" and
"p = 0.0505, not distinguishable from chance" of one throughput gap on six rounds; and a bootstrap of 29 edits
none of which flipped said "+0.000 to +0.000". Small counts get exact intervals, never a zero-width one.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from .errors import InputError

CONFIDENCE = 0.95
RESAMPLES = 2000
EXACT_FLIPS = 16  # up to this many pairs the permutation test runs over all 2**n sign flips (65,536), exactly
_CHUNK = 200  # regression resamples drawn at a time: 200 x 20,000 indices stay small


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """Two-sided exact p-value of McNemar's test: if both models were equally accurate, each example that
    exactly one of them gets right would be the first model's with probability 1/2."""
    from scipy.stats import binomtest  # deferred: scipy: loaded on first use

    n = int(only_first) + int(only_second)
    return 1.0 if n == 0 else float(binomtest(int(only_first), n, 0.5).pvalue)


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> list[float]:
    """The exact interval of a rate of `k` events in `n` items: every rate the two one-sided binomial tests at
    (1 - confidence) / 2 would not reject. 0 of 29 gives 0 to 0.119, not 0 to 0."""
    from scipy.stats import beta  # deferred: scipy: loaded on first use

    tail = (1 - confidence) / 2
    lo = 0.0 if k <= 0 else float(beta.ppf(tail, k, n - k + 1))
    hi = 1.0 if k >= n else float(beta.ppf(1 - tail, k + 1, n - k))
    return [lo, hi]


def mcnemar_interval(only_first: int, only_second: int, n: int, confidence: float = CONFIDENCE) -> list[float]:
    """The interval of the difference in rates (second minus first) that goes with McNemar's exact test: the
    difference is d (2q - 1), d the share of the `n` items exactly one model has the event on and q the second
    model's share of those; q's exact interval is the test inverted (it excludes 1/2 exactly when p < 1 -
    confidence), d's exact interval bounds the scale. With no such items the difference is within d's reach
    either way (0 of 800 discordant: -0.0046 to +0.0046)."""
    m = int(only_first) + int(only_second)
    d_lo, d_hi = clopper_pearson(m, n, confidence)
    if m == 0:
        return [-d_hi, d_hi]
    q_lo, q_hi = clopper_pearson(int(only_second), m, confidence)
    ends = [d * (2 * q - 1) for d in (d_lo, d_hi) for q in (q_lo, q_hi)]
    return [min(ends), max(ends)]


def _check(gold: Sequence, first: Sequence, second: Sequence) -> int:
    n = len(gold)
    if n == 0:
        raise InputError("dataset: no labelled examples to compare the models on")
    if len(first) != n or len(second) != n:
        raise InputError(f"predictions: {len(first)} and {len(second)} predictions for {n} gold labels")
    return n


def _chunks(resamples: int) -> list[int]:
    """Resamples drawn at a time, so that resamples x items indices stay small for long inputs."""
    return [min(_CHUNK, resamples - k) for k in range(0, resamples, _CHUNK)]


def _bootstrap_p(diff: np.ndarray) -> float:
    """Two-sided p-value of "no difference" from resampled differences: twice the share on the smaller side of 0."""
    below, above = np.sum(diff <= 0), np.sum(diff >= 0)
    return float(min(1.0, 2 * (min(below, above) + 1) / (len(diff) + 1)))


def _interval(samples: np.ndarray, confidence: float) -> list[float]:
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(samples, [tail, 100 - tail])
    return [float(lo), float(hi)]


def compare_events(first: Sequence[bool], second: Sequence[bool], groups: Sequence | None = None, *,
                   metric: str = "rate", group_name: str = "groups", resamples: int = RESAMPLES,
                   confidence: float = CONFIDENCE, seed: int = 0) -> dict:
    """How often a yes/no event (a right answer, a label flip, a successful attack) happens to each model on the
    same items: both rates with paired bootstrap intervals, their difference (second minus first) and a p-value
    for "equally often".

    Independent items get McNemar's exact test, and the bootstrap draws the 2x2 table's cells from a multinomial
    (resampling items only moves counts between the cells: the same distribution as resampling indices).
    Items in `groups` (several edits of one sentence) are not independent: then whole groups are resampled,
    and the p-value is the bootstrap's own (two-sided)."""
    a, b = np.asarray(first, dtype=bool), np.asarray(second, dtype=bool)
    n = len(a)
    if n == 0:
        raise InputError("items: nothing to compare the models on")
    if len(b) != n or (groups is not None and len(groups) != n):
        raise InputError(f"items: {n} and {len(b)} outcomes" + ("" if groups is None else f", {len(groups)} groups"))
    cells = np.array([np.sum(a & b), np.sum(a & ~b), np.sum(~a & b), np.sum(~a & ~b)])
    rng = np.random.default_rng(seed)
    codes = None if groups is None else np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)[1]
    values = [float(a.mean()), float(b.mean())]
    if codes is None or codes.max() + 1 == n:
        test, p = "McNemar, exact", mcnemar_exact(cells[1], cells[2])
        intervals = [clopper_pearson(int(a.sum()), n, confidence), clopper_pearson(int(b.sum()), n, confidence)]
        between = mcnemar_interval(int(cells[1]), int(cells[2]), n, confidence)
        drawn = 0
    else:  # a resample of groups is a multinomial count per group
        g = codes.max() + 1
        size, sa, sb = (np.bincount(codes, weights=w, minlength=g) for w in (np.ones(n), a, b))
        w = rng.multinomial(g, np.full(g, 1 / g), size=resamples)
        ra, rb = (w @ sa) / (w @ size), (w @ sb) / (w @ size)
        test, drawn = f"bootstrap over {g:,} {group_name}", resamples
        # the p-value is read from the very draws the interval is: 0 outside it is p below 1 - confidence
        p = 1.0 if cells[1] == cells[2] else _bootstrap_p(rb - ra)
        intervals = [_interval(ra, confidence), _interval(rb, confidence)]
        between = _interval(rb - ra, confidence)
        # none (or every one) of the events: every resample says the same, a zero-width interval that claims
        # certainty; then the exact bound over the groups (each as if one item: the fewest the data can be)
        for k, count in enumerate((a.sum(), b.sum())):
            if intervals[k][0] == intervals[k][1] and count in (0, n):
                intervals[k] = clopper_pearson(0 if count == 0 else int(g), int(g), confidence)
        if cells[1] == cells[2] == 0:
            reach = clopper_pearson(0, int(g), confidence)[1]
            between = [-reach, reach]
    out = {"metric": metric, "n": n, "confidence": confidence, "resamples": drawn,
           "values": values, "intervals": intervals,
           "difference": values[1] - values[0], "difference_interval": between,
           "test": test, "p_value": p, "both": int(cells[0]), "only": [int(cells[1]), int(cells[2])],
           "neither": int(cells[3])}
    if codes is not None:
        out["groups"] = int(codes.max() + 1)
    return out


def compare_accuracy(gold: Sequence, first: Sequence, second: Sequence, *, resamples: int = RESAMPLES,
                     confidence: float = CONFIDENCE, seed: int = 0) -> dict:
    """Accuracies compared as events (`compare_events`: a right answer), the 2x2 table of right and wrong,
    and how often the two predictions agree (Cohen's kappa)."""
    _check(gold, first, second)
    g, a, b = (np.asarray(x, dtype=object) for x in (gold, first, second))
    cmp = compare_events(a == g, b == g, metric="accuracy", resamples=resamples, confidence=confidence, seed=seed)
    cmp["both_right"], cmp["only_right"], cmp["both_wrong"] = cmp.pop("both"), cmp.pop("only"), cmp.pop("neither")
    return cmp | {"agreement": float(np.mean(a == b)), "kappa": _kappa(a, b)}


def _kappa(a: np.ndarray, b: np.ndarray) -> float | None:
    """Cohen's kappa of the two models' predictions: agreement beyond what their label frequencies give by
    chance. None when chance agreement is already total (both always answer the same one label)."""
    from sklearn.metrics import cohen_kappa_score  # deferred: scikit-learn: loaded on first use

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
    for size in _chunks(resamples):
        idx = rng.integers(0, n, size=(size, n))
        ra.append(_pearson_rows(y[idx], a[idx]))
        rb.append(_pearson_rows(y[idx], b[idx]))
    ra, rb = np.concatenate(ra), np.concatenate(rb)
    ok = np.isfinite(ra) & np.isfinite(rb)  # a resample of identical gold scores has no correlation
    ra, rb = ra[ok], rb[ok]
    diff = rb - ra
    values = [float(_pearson_rows(y[None], a[None])[0]), float(_pearson_rows(y[None], b[None])[0])]
    return {
        "metric": "pearson", "n": n, "confidence": confidence, "resamples": int(ok.sum()),
        "values": values, "intervals": [_interval(ra, confidence), _interval(rb, confidence)],
        "difference": values[1] - values[0], "difference_interval": _interval(diff, confidence),
        "test": "paired bootstrap", "p_value": _bootstrap_p(diff),
        "agreement": float(np.corrcoef(a, b)[0, 1]),
    }


def _mean_draws(values: np.ndarray, resamples: int, rng) -> np.ndarray:
    """Bootstrap means of `values`, resampled with replacement, in chunks that stay small for long inputs."""
    n = len(values)
    return np.concatenate([values[rng.integers(0, n, size=(size, n))].mean(1) for size in _chunks(resamples)])


def compare_means(first: Sequence[float], second: Sequence[float], *, metric: str = "mean",
                  resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = 0) -> dict:
    """Two models' per-item scores on the same items (a faithfulness per sentence): both means with bootstrap
    intervals, the mean paired difference (second minus first) with its interval, and a paired permutation test
    of "no difference" (each item's difference keeps or flips its sign at random): a test of the same mean
    the interval is about, with no assumption that the scores, bounded and skewed, are normal."""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    n = len(a)
    if n == 0 or len(b) != n:
        raise InputError(f"items: {n} and {len(b)} scores; both models need one per item, at least one item")
    rng = np.random.default_rng(seed)
    idx_draws = [rng.integers(0, n, size=(size, n)) for size in _chunks(resamples)]
    ma = np.concatenate([a[i].mean(1) for i in idx_draws])
    mb = np.concatenate([b[i].mean(1) for i in idx_draws])
    d = b - a
    flips = _sign_flips(n, resamples, rng)
    p = 1.0 if not np.any(d) else _flip_p(d, flips)
    return {"metric": metric, "n": n, "confidence": confidence, "resamples": len(flips),
            "values": [float(a.mean()), float(b.mean())], "intervals": [_interval(ma, confidence),
                                                                    _interval(mb, confidence)],
            "difference": float(d.mean()), "difference_interval": _flip_interval(d, flips, confidence),
            "test": "paired permutation, exact" if n <= EXACT_FLIPS else "paired permutation", "p_value": p}


def _sign_flips(n: int, resamples: int, rng) -> np.ndarray:
    """The sign flips the permutation test draws: all 2**n of them up to `EXACT_FLIPS` pairs (the test is then
    exact), else `resamples` at random, the same ones for the p-value and for every shift its interval tries."""
    if n <= EXACT_FLIPS:
        return np.array(list(itertools.product((-1.0, 1.0), repeat=n)))
    return rng.choice((-1.0, 1.0), size=(resamples, n))


def _flip_p(d: np.ndarray, flips: np.ndarray) -> float:
    """Two-sided p of "the differences are centred on 0": the share of sign flips whose mean is as far from 0
    (a tolerance so that flips giving the same mean up to rounding count as "as extreme")."""
    observed = abs(d.mean())
    extreme = sum(int(np.sum(np.abs(flips[k:k + _CHUNK] @ d) / len(d) >= observed - 1e-12))
                  for k in range(0, len(flips), _CHUNK))
    if len(d) <= EXACT_FLIPS:  # every flip, the identity among them
        return extreme / len(flips)
    return (extreme + 1) / (len(flips) + 1)


def _flip_interval(d: np.ndarray, flips: np.ndarray, confidence: float) -> list[float | None]:
    """The shifts `delta` the permutation test of `d - delta` does not reject at 1 - confidence: the interval
    that agrees with the test's p by construction. An end no shift reaches (five pairs or fewer: no flip of five
    signs is rarer than 1/16) is None: so few pairs bound nothing at this confidence."""
    alpha, centre = 1 - confidence, float(d.mean())
    if not np.any(d - centre):  # every pair differs by the same amount: no spread to test against
        return [centre, centre]
    span = float(d.max() - d.min()) + abs(centre) + 1e-9

    def rejected(delta: float) -> bool:
        return _flip_p(d - delta, flips) <= alpha

    ends: list[float | None] = []
    for far in (float(d.min()) - span, float(d.max()) + span):
        if not rejected(far):
            ends.append(None)
            continue
        inside, outside = centre, far
        for _ in range(60):
            mid = (inside + outside) / 2
            inside, outside = (inside, mid) if rejected(mid) else (mid, outside)
        ends.append(inside)
    return ends


def mean_interval(values: Sequence[float], *, resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                  seed: int = 0) -> dict:
    """A mean with its bootstrap interval (None for no values)."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if not len(v):
        return {"mean": None, "interval": None, "n": 0}
    draws = _mean_draws(v, resamples, np.random.default_rng(seed))
    return {"mean": float(v.mean()), "interval": _interval(draws, confidence), "n": int(len(v))}


def _midranks(x: np.ndarray) -> np.ndarray:
    """Ranks from 1 with ties given their mean rank (what DeLong's components count a tie as: one half)."""
    from scipy.stats import rankdata  # deferred: scipy: loaded on first use

    return rankdata(x, method="average")


def delong(positive: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each scorer's ROC AUC, their covariance matrix): DeLong, DeLong & Clarke-Pearson (1988), in Sun & Xu's
    (2014) midrank form. `scores` is (scorers, items), `positive` one bool per item. An AUC is the share of
    (positive, negative) pairs the scorer orders right, ties counting one half; its variance comes from each
    item's own share (its "structural component") and, for two scorers of the same items, so does their
    covariance, which is what makes their comparison paired."""
    pos = np.asarray(positive, dtype=bool)
    s = np.atleast_2d(np.asarray(scores, dtype=float))
    m, n = int(pos.sum()), int((~pos).sum())
    if m < 2 or n < 2:
        raise InputError(f"dataset: {m} positive and {n} negative examples; a ROC AUC's interval needs at least "
                         "2 of each")
    x, y = s[:, pos], s[:, ~pos]
    tx, ty = (np.stack([_midranks(r) for r in a]) for a in (x, y))
    tz = np.stack([_midranks(r) for r in np.concatenate([x, y], axis=1)])
    auc = (tz[:, :m].sum(1) - m * (m + 1) / 2) / (m * n)
    v10 = (tz[:, :m] - tx) / n  # each positive's share of negatives ranked below it
    v01 = 1.0 - (tz[:, m:] - ty) / m  # each negative's share of positives ranked above it
    cov = np.atleast_2d(np.cov(v10)) / m + np.atleast_2d(np.cov(v01)) / n
    return auc, cov


def compare_auc(positive: Sequence[bool], first: Sequence[float], second: Sequence[float], *,
                confidence: float = CONFIDENCE) -> dict:
    """Two models' ROC AUCs on the same items (their scores for one class), each with DeLong's interval, and
    DeLong's paired test of the difference (second minus first) with the interval of the same normal statistic:
    it excludes 0 exactly when p < 1 - confidence. Where a variance is 0 (a model that ranks every positive
    above every negative) no normal interval exists: its ends are None, and the text says so."""
    from scipy.stats import norm  # deferred: scipy: loaded on first use

    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    n = len(a)
    if len(b) != n or len(positive) != n:
        raise InputError(f"items: {n} and {len(b)} scores for {len(positive)} labels")
    auc, cov = delong(np.asarray(positive, dtype=bool), np.stack([a, b]))
    z = float(norm.ppf(1 - (1 - confidence) / 2))

    def around(centre: float, var: float, low: float, high: float) -> list[float | None]:
        if not var > 1e-15:
            return [None, None]
        se = float(np.sqrt(var))
        return [max(low, centre - z * se), min(high, centre + z * se)]

    diff, var = float(auc[1] - auc[0]), float(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    if var > 1e-15:
        p = float(2 * norm.sf(abs(diff) / np.sqrt(var)))
    else:
        p = 1.0 if abs(diff) < 1e-12 else 0.0
    out = {"metric": "ROC AUC", "n": n, "confidence": confidence, "resamples": 0,
           "values": [float(auc[0]), float(auc[1])],
           "intervals": [around(float(auc[k]), float(cov[k, k]), 0.0, 1.0) for k in (0, 1)],
           "difference": diff, "difference_interval": around(diff, var, -1.0, 1.0),
           "test": "DeLong, paired", "p_value": p}
    if None in out["difference_interval"] or None in out["intervals"][0] + out["intervals"][1]:
        out["no_interval"] = "DeLong's variance is 0 (every positive is ranked above every negative, or none is)"
    return out


def threshold_counts(positive, scores, weights=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each distinct score from the highest down, the true and the false positives at or above it): what a
    ROC and a precision-recall curve are made of, tied scores one threshold. Under `weights` ((draws, items)
    counts, a bootstrap's resamples) one row of counts per weighting; without, one row of plain counts."""
    y = np.asarray(positive, dtype=float)
    s = np.asarray(scores, dtype=float)
    w = np.ones((1, len(s))) if weights is None else np.atleast_2d(np.asarray(weights, dtype=float))
    order = np.argsort(-s, kind="mergesort")
    s, y, w = s[order], y[order], w[:, order]
    ends = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # the last item of each distinct score
    return s[ends], np.cumsum(w * y, axis=1)[:, ends], np.cumsum(w * (1 - y), axis=1)[:, ends]


def average_precision(positive: np.ndarray, scores: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Average precision (the area under the precision-recall steps, scikit-learn's definition) of one scorer,
    under one or many weightings of the items at once (`weights`: (draws, items) counts, a bootstrap's
    resamples); one value per weighting. Tied scores form one threshold."""
    _, tp, fp = threshold_counts(positive, scores, weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = tp / (tp + fp)
        recall = tp / tp[:, -1:]
    steps = np.diff(np.concatenate([np.zeros((len(tp), 1)), recall], axis=1), axis=1)
    return np.nansum(steps * np.nan_to_num(precision), axis=1)


def compare_average_precision(positive: Sequence[bool], first: Sequence[float], second: Sequence[float], *,
                              resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = 0) -> dict:
    """Two models' average precisions on the same items, with a paired bootstrap (items resampled together for
    both models) for each interval, the difference's, and its two-sided p, read from the same draws. No exact
    test exists for it; resamples with no positive item are left out."""
    y = np.asarray(positive, dtype=bool)
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    n = len(y)
    if len(a) != n or len(b) != n or not y.any():
        raise InputError(f"items: {n} labels, {len(a)} and {len(b)} scores, {int(y.sum())} positive; average "
                         "precision needs one score per item and a positive item")
    rng = np.random.default_rng(seed)
    ra, rb = [], []
    for size in _chunks(resamples):
        w = rng.multinomial(n, np.full(n, 1 / n), size=size)
        w = w[(w * y).sum(1) > 0]
        ra.append(average_precision(y, a, w))
        rb.append(average_precision(y, b, w))
    ra, rb = np.concatenate(ra), np.concatenate(rb)
    values = [float(average_precision(y, a)[0]), float(average_precision(y, b)[0])]
    diff = rb - ra
    return {"metric": "average precision", "n": n, "confidence": confidence, "resamples": len(diff),
            "values": values, "intervals": [_interval(ra, confidence), _interval(rb, confidence)],
            "difference": values[1] - values[0], "difference_interval": _interval(diff, confidence),
            "test": "paired bootstrap", "p_value": 1.0 if not np.any(diff) else _bootstrap_p(diff)}


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: a suite of 38 tests at 0.05 each would call about two differences real by
    chance alone; adjusted p-values below 0.05 keep the chance of any false call under 0.05."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    out, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        out[i] = running
    return out
