"""How each model errs on a labelled dataset, side by side: both confusion matrices, split by what a researcher
splits on (length, a marker such as negation, whether the two models agree), and both ROC and precision-recall
curves for one class on one plot, with each area's interval and the paired test of the two.

LIT draws a confusion matrix and PR/ROC curves for one model at a time, with no interval; here both models answer
the same examples, so every part of a facet carries the paired test of their accuracies (McNemar's) and the areas
are compared paired (DeLong's test for the ROC AUC, a paired bootstrap for average precision). Predictions come
from the cache a benchmark, Find slices or a projection of the same rows filled (`projection.cached_predictions`):
after Benchmark, neither runs a model.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..declare.capabilities import FACETS
from ..declare.results import ConfusionResult, CurvesResult
from ..execution.engine import Engine
from ..execution.inference import from_logits
from ..execution.pair import Pair
from ..ground.errors import InputError
from ..ground.significance import compare_accuracy, compare_auc, compare_average_precision, threshold_counts
from .slices import MARKERS, labelled_answers, length_bins, marker_name, words

CURVE_POINTS = 400  # points kept per curve: enough to draw it, however many distinct scores the dataset has


def _answers(pair: Pair, what: str, dataset, limit, progress, engine, visitor: bool):
    """(dataset name, labelled examples, their rows in the dataset, the labels, each model's predictions)."""
    name, labelled, rows, logits = labelled_answers(pair, what, dataset, limit, progress=progress, engine=engine,
                                                    visitor=visitor)
    preds = [from_logits(clf, lg) for clf, lg in zip(pair.heads, logits[:2])]
    return name, labelled, rows, list(pair.heads[0].labels), preds


def facets(texts: Sequence[str], agree: np.ndarray, facet: str) -> list[tuple[str, np.ndarray]]:
    """The parts a dataset is split into for `facet` (`FACETS`), each (its name, its members); empty parts left
    out. Length bins and marker groups are the slices' own (`slices.length_bins`, `slices.MARKERS`), so a facet
    and a slice of the same name hold the same examples."""
    n = len(texts)
    if facet == "none":
        return [("all examples", np.ones(n, dtype=bool))]
    if facet == "length":
        return length_bins([len(words(t)) for t in texts])
    if facet == "agreement":
        return [(name, m) for name, m in (("the models agree", agree), ("the models differ", ~agree)) if m.any()]
    if facet not in MARKERS:
        raise InputError(f"facet: {facet!r} is not one of {list(FACETS)}")
    has = np.asarray([bool(set(words(t)) & MARKERS[facet]) for t in texts])
    return [(name, m) for name, m in ((f"with {marker_name(facet)}", has), (f"without {facet}", ~has)) if m.any()]


def confusion(gold: Sequence[int], predicted: Sequence[Sequence[int]], rows: Sequence[int], members: np.ndarray,
              n_labels: int) -> dict:
    """Each model's confusion matrix (gold rows, predicted columns) of the examples in `members`, the dataset
    rows in every cell, each model's accuracy and the paired test of the two."""
    idx = np.flatnonzero(members)
    g = np.asarray(gold)[idx]
    out = {"n": int(len(idx)), "matrices": [], "cells": [], "accuracy": []}
    for p in predicted:
        p = np.asarray(p)[idx]
        out["matrices"].append(np.bincount(g * n_labels + p, minlength=n_labels * n_labels)
                               .reshape(n_labels, n_labels).astype(int).tolist())
        out["cells"].append([[[int(rows[i]) for i in idx[(g == t) & (p == q)]] for q in range(n_labels)]
                             for t in range(n_labels)])
        out["accuracy"].append(float(np.mean(g == p)))
    out["comparison"] = compare_accuracy(g.tolist(), *(np.asarray(p)[idx].tolist() for p in predicted))
    return out


def run_confusion(pair: Pair, *, facet: str, dataset: str | None = None, limit: int | str | None = None,
                  progress=None, engine: Engine | None = None, visitor: bool = True) -> ConfusionResult:
    """Both models' confusion matrices on a labelled dataset, per part of `facet`."""
    name, labelled, rows, labels, preds = _answers(pair, "confusion matrices", dataset, limit, progress, engine,
                                                   visitor)
    index = {label: k for k, label in enumerate(labels)}
    gold = [index[ex.label] for ex in labelled]
    predicted = [[index[a] for a in p.predicted] for p in preds]
    agree = np.asarray(predicted[0]) == np.asarray(predicted[1])
    texts = [" ".join(ex.texts) for ex in labelled]
    parts = [{"name": part, **confusion(gold, predicted, rows, members, len(labels))}
             for part, members in facets(texts, agree, facet)]
    return ConfusionResult(dataset=name, n=len(labelled), models=[p.model for p in preds], labels=labels,
                           facet=facet, facets=parts)


def curve_points(positive: np.ndarray, scores: np.ndarray) -> dict[str, np.ndarray]:
    """The ROC and precision-recall points of one scorer, one per distinct score from the highest down (tied
    scores are one threshold): false- and true-positive rates from (0, 0) to (1, 1), recall and precision."""
    thresholds, tp, fp = threshold_counts(positive, scores)
    tp, fp = tp[0], fp[0]
    return {"thresholds": thresholds, "fpr": np.r_[0.0, fp / max(fp[-1], 1)], "tpr": np.r_[0.0, tp / max(tp[-1], 1)],
            "recall": tp / max(tp[-1], 1), "precision": tp / (tp + fp)}


def _thinned(*columns: np.ndarray, most: int = CURVE_POINTS) -> list[list[float]]:
    """Columns of a curve's points, at most `most` of them, evenly along the curve, its first and last kept."""
    n = len(columns[0])
    keep = np.unique(np.linspace(0, n - 1, most).round().astype(int)) if n > most else np.arange(n)
    return [[round(float(v), 6) for v in c[keep]] for c in columns]


def run_curves(pair: Pair, *, positive: str, dataset: str | None = None, limit: int | str | None = None,
               progress=None, engine: Engine | None = None, visitor: bool = True) -> CurvesResult:
    """Both models' ROC and precision-recall curves for the class `positive` against the rest, with their
    areas' intervals and paired tests."""
    name, labelled, _, labels, preds = _answers(pair, "curves", dataset, limit, progress, engine, visitor)
    chosen = positive or (labels[1] if len(labels) == 2 else labels[0])
    if chosen not in labels:
        raise InputError(f"positive: {str(chosen)[:40]!r} is not one of the models' labels {labels}")
    k = labels.index(chosen)
    y = np.asarray([ex.label == chosen for ex in labelled])
    if y.all() or not y.any():
        raise InputError(f"dataset: {name}'s {len(y)} labelled examples are all {'' if y.any() else 'not '}"
                         f"{chosen!r}; curves need examples of both")
    scores = [p.probs[:, k] for p in preds]
    roc, pr = [], []
    for p, s in zip(preds, scores):
        pts = curve_points(y, s)
        x, t, th = _thinned(pts["fpr"], pts["tpr"], np.r_[1.0, pts["thresholds"]])
        roc.append({"model": p.model, "x": x, "y": t, "thresholds": th})
        r, q, th = _thinned(pts["recall"], pts["precision"], pts["thresholds"])
        pr.append({"model": p.model, "x": r, "y": q, "thresholds": th})
    return CurvesResult(dataset=name, n=len(labelled), models=[p.model for p in preds], positive=chosen,
                        positives=int(y.sum()), roc=roc, pr=pr, auc=compare_auc(y, *scores),
                        average_precision=compare_average_precision(y, *scores))
