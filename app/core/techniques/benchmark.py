"""Accuracy and speed of both models on one dataset, measured in the same run so the ratio means something."""
from __future__ import annotations

import time

import numpy as np

from ..execution.engine import Engine
from ..execution.inference import DEFAULT_BATCH, from_logits, predict_both
from ..execution.pair import Pair
from ..ground.data import Dataset, Example
from ..ground.errors import InputError
from ..ground.significance import compare_accuracy, compare_correlation
from ..models.loading import generic_labels
from .facts import count_parameters, parameter_split
from .projection import keep
from .timing import LATENCY_SAMPLES, latency


def quality(clf, pred, gold: list) -> dict:
    """Accuracy for classifiers; Pearson and Spearman for regression (STS-B)."""
    if clf.is_regression:
        from scipy.stats import pearsonr, spearmanr  # deferred: scipy: loaded on first use

        y = np.asarray(gold, dtype=float)
        return {"pearson": float(pearsonr(pred.scores, y)[0]), "spearman": float(spearmanr(pred.scores, y)[0])}
    check_labels(clf, gold)
    hits = [p == g for p, g in zip(pred.predicted, gold)]
    return {"accuracy": float(np.mean(hits))}


def check_labels(clf, gold: list) -> None:
    """Refuse gold labels a classifier can't give before any prediction runs (AG News on a sentiment pair would
    otherwise fail only after all 7,600 examples were predicted)."""
    if clf.is_regression:
        return
    unknown = sorted({g for g in gold if g not in clf.labels})
    if unknown:
        hint = ("; its config names no labels: give the pair's task with --task (e.g. --task sst2)"
                if generic_labels(clf.labels) else "")
        raise InputError(f"dataset: gold labels {unknown[:5]} are not among {clf.name}'s labels {list(clf.labels)}"
                         + hint)


def profile(clf, examples) -> dict:
    """What a benchmark row needs besides predictions: parameter counts and single-example latency."""
    return {"parameters": count_parameters(clf.model),
            **{f"parameters_{k}": v for k, v in parameter_split(clf.model).items()}, **latency(clf, examples)}


def profile_batch(pair, batch) -> list[dict]:
    """Batch function (the whole sample on one worker): both models' parameters and latency."""
    return [profile(clf, batch) for clf in pair.models]


profile_batch.combine = "whole"


def timed_batch(pair, batch, batch_size: int = DEFAULT_BATCH, progress=None) -> list[dict]:
    """Batch function: both models' logits for one batch and the seconds each model spent on it. The same pass
    gives the top layer's [CLS] vectors, and both are kept by content (`projection.keep`): Find slices and a
    projection of the same rows then predict nothing (a second pass of each model on SST-2 dev took 51-57 s
    for Find slices after Benchmark's). Benchmark itself always times a pass of its own: it is a measurement."""
    preds = predict_both(pair, batch, batch_size=batch_size, progress=progress, top_cls=True)
    for clf, pred in zip(pair.models, preds):
        keep(clf, batch, pred)
    return [{"logits": p.logits, "seconds": p.seconds} for p in preds]


timed_batch.combine = "timed"
timed_batch.sorts = True  # in process: the whole sample in one call, as the cache keys it
timed_batch.reports_progress = True


def benchmark(pair: Pair, dataset: Dataset, *, batch_size: int = 32, progress=None, engine=None) -> dict:
    """Accuracy (or correlation), parameters, throughput and latency of both models, through the engine: in
    process the whole sample in one call, on Ray in batches across its workers; throughput is each model's own
    compute time (summed over batches), latency and parameters come from one worker, and the wall time of the
    predictions is reported beside them. Accuracy is the same either way."""
    own = dataset.row_numbers()  # each example's row as the dataset numbers it (a slice's: the whole dataset's)
    labelled = [ex for ex in dataset.examples if ex.label is not None]
    numbers = [r for r, ex in zip(own, dataset.examples) if ex.label is not None]
    if not labelled:
        raise InputError(f"dataset: {dataset.name} has no labelled examples to score")
    gold = [ex.label for ex in labelled]
    for clf in pair.heads:  # labels from the configs: a Ray driver holds no weights
        check_labels(clf, gold)
    engine = engine or Engine()
    t0 = time.perf_counter()
    timed = engine.run(pair, timed_batch, labelled, params={"batch_size": batch_size}, progress=progress)
    wall = time.perf_counter() - t0
    prof = engine.run(pair, profile_batch, labelled[:LATENCY_SAMPLES])
    rows, preds = [], []
    for clf, t, p in zip(pair.heads, timed, prof):
        pred = from_logits(clf, t["logits"], t["seconds"])
        preds.append(pred)
        rows.append({"model": clf.name, "source": clf.spec.source, "n": len(labelled), **quality(clf, pred, gold),
                     "throughput_per_s": len(labelled) / t["seconds"], "seconds": t["seconds"], **p})
    return _result(pair, dataset.name, labelled, rows, engine.describe() | {
        "wall_seconds": wall, "examples_per_s_both_models": 2 * len(labelled) / wall}, preds, numbers)


def _result(pair, name, labelled, rows, engine_info, preds, numbers: list[int] | None = None) -> dict:
    a, b = rows
    gold = [ex.label for ex in labelled]
    return {"pair": pair.name, "dataset": name, "n": len(labelled), "models": rows, "engine": engine_info,
            "comparison": compare(gold, preds), "disagreements": disagreements(labelled, preds, rows=numbers),
            "ratios": {"parameters_b_over_a": b["parameters"] / a["parameters"],
                       "throughput_b_over_a": b["throughput_per_s"] / a["throughput_per_s"],
                       "latency_b_over_a": b["latency_ms_median"] / a["latency_ms_median"]}}


def compare(gold: list, preds) -> dict:
    """The paired test of the two models' lead (`significance`): accuracy, or Pearson for regression. When
    it is undefined (constant scores), the reason instead, under "undefined": the rows still stand."""
    a, b = (p.predicted for p in preds)
    try:
        if preds[0].labels is None:
            return compare_correlation([float(g) for g in gold], a, b)
        return compare_accuracy(gold, a, b)
    except InputError as exc:
        return {"undefined": str(exc)}


DISAGREEMENTS_SHOWN = 100


def disagreements(labelled: list[Example], preds, most: int = DISAGREEMENTS_SHOWN,
                  rows: list[int] | None = None) -> dict:
    """The examples the two models answer differently, for reading: those exactly one model gets right first
    (they are what McNemar's test counts), then those both get wrong, each in dataset order; for regression the
    largest gaps between the two scores first. `total` counts them all, `examples` holds at most `most`, each
    with its `index` among the labelled examples and its `row` in the dataset (`rows`; else index + 1)."""
    own = rows if rows is not None else list(range(1, len(labelled) + 1))
    first, second = preds
    if first.labels is None:
        gap = np.abs(first.scores - second.scores)
        order = [int(i) for i in np.argsort(-gap, kind="stable")]
        found = [{"index": i, "row": own[i], "texts": list(labelled[i].texts), "gold": labelled[i].label,
                  "predictions": [float(first.scores[i]), float(second.scores[i])], "gap": float(gap[i])}
                 for i in order[:most]]
        return {"total": len(order), "examples": found}
    a, b = first.predicted, second.predicted
    differ = [i for i in range(len(labelled)) if a[i] != b[i]]
    right = {i: [a[i] == labelled[i].label, b[i] == labelled[i].label] for i in differ}
    differ.sort(key=lambda i: sum(right[i]) != 1)  # stable: one model right first, dataset order within
    found = [{"index": i, "row": own[i], "texts": list(labelled[i].texts), "gold": labelled[i].label,
              "predictions": [a[i], b[i]], "confidence": [float(first.probs[i].max()), float(second.probs[i].max())],
              "right": [first.model, second.model][right[i].index(True)] if sum(right[i]) == 1 else None}
             for i in differ[:most]]
    return {"total": len(differ), "examples": found}
