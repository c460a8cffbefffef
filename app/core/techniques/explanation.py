"""Explanations of one input, or of a dataset, by both models of a pair: each model's saliency map, its
faithfulness, and the two models' agreement, compared on one class; over a dataset, the numbers one map can't give
(means with intervals, the paired test of faithfulness, the examples where the models agree least)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..declare.results import SaliencyDatasetResult, SaliencyMethodsResult, SaliencyResult
from ..execution.engine import Engine
from ..execution.inputs import dataset_of, example_from
from ..execution.pair import Pair
from ..ground import jobs
from ..ground.data import Example
from ..ground.errors import InputError
from ..ground.policy import limits
from ..ground.significance import compare_means, mean_interval
from ..models.loading import Classifier
from .faithfulness import agreement, faithfulness, shuffled, top_words
from .saliency import METHODS, WordSaliency, method


def on_class(clf: Classifier, example: Example, sal: WordSaliency, label: str | None, method_name: str,
             **kw) -> WordSaliency | None:
    """`sal` (this model's map) restated for class `label`, so two models' maps are compared on one class: the
    same map when it already explains it; with two classes and probabilities, the map negated (a class's
    probability is one minus the other's, so every method's signed scores change sign exactly; gradient norms
    are the same); else (more classes, or logits, which are not tied that way) a new attribution. None when the
    model has no such class."""
    if sal.target_label == label:
        return sal
    if label not in (clf.labels or ()):
        return None
    if len(clf.labels) == 2 and sal.output == "prob":
        sign = -1.0 if METHODS[method_name].signed else 1.0
        return replace(sal, scores=[sign * x for x in sal.scores], token_scores=[sign * x for x in sal.token_scores],
                       target=clf.labels.index(label), target_label=label,
                       probability=None if sal.probability is None else 1.0 - sal.probability)
    return method(method_name, clf, **kw).attribute(example, label)


def explain(models, example: Example, method_name: str, target: int | str | None = None, *,
            same_class: bool = True, **kw) -> dict:
    """Saliency, faithfulness and the cross-model agreement for every model of a pair. With no `target`, every
    map explains the class the first model predicts (`same_class`, as LIT explains one class for all models):
    when the models disagree, one panel red for "negative" beside another red for "positive" reads as
    disagreement exactly where they agree. `same_class=False`: each its own prediction (the faithfulness of a
    model's own answer, over a dataset). The agreement is always computed on the first model's class."""
    maps, faith = [], []
    for clf in models:
        own = target
        if same_class and target is None and maps and maps[0].target_label in (clf.labels or ()):
            own = maps[0].target_label
        sal = method(method_name, clf, **kw).attribute(example, own)
        maps.append(sal)
        faith.append(faithfulness(clf, example, sal))
    agree, label = None, None
    if len(maps) == 2:
        label = maps[0].target_label
        other = on_class(models[1], example, maps[1], label, method_name, **kw)
        agree = None if other is None else agreement(maps[0], other)
    return {"maps": maps, "faithfulness": faith, "agreement": agree, "agreement_label": label}


def explain_dataset(models, examples, method_name: str, *, seed: int = 0, progress=None, shown: int = 10,
                    target: int | str | None = None, **kw) -> dict:
    """Saliency over many examples, the numbers one map can't give: each model's faithfulness (against a random
    ranking of the same words), whether one model's explanations are more faithful than the other's (a paired
    permutation test), and how far the two agree on which words matter, with the examples where they agree least.
    Each model explains its own prediction, or `target` (a class by name or index) where one is asked."""
    if not examples:
        raise InputError("dataset: no examples to explain")
    rng = np.random.default_rng(seed)
    rows = []
    stopped = None
    for i, ex in enumerate(examples):
        try:  # a job stopped between examples keeps what it explained: the answer says where it was cut
            jobs.checkpoint(i, len(examples), "examples explained")
            out = explain(models, ex, method_name, target, same_class=False, **kw)
            rand = [faithfulness(clf, ex, shuffled(sal, rng))["comprehensiveness"]
                    for clf, sal in zip(models, out["maps"])]
        except jobs.Stopped as exc:
            if not rows:
                raise
            stopped = jobs.cut(exc, len(rows), len(examples), "examples explained")
            break
        rows.append({"index": i, "texts": list(ex.texts), "label": out["agreement_label"],
                     "comprehensiveness": [f["comprehensiveness"] for f in out["faithfulness"]],
                     "sufficiency": [f["sufficiency"] for f in out["faithfulness"]],
                     "random_comprehensiveness": rand, "agreement": out["agreement"],
                     "top_words": [top_words(m) for m in out["maps"]]})
        if progress:
            progress(i + 1, len(examples))
    names = [clf.name for clf in models]
    per_model = {key: [mean_interval([r[key][k] for r in rows], seed=seed) for k in range(len(models))]
                 for key in ("comprehensiveness", "sufficiency", "random_comprehensiveness")}
    res = {"method": method_name, "n": len(rows), "models": names, **per_model,
           "agreement": mean_interval([r["agreement"] for r in rows], seed=seed), "examples": rows,
           "stopped": stopped}
    if len(models) == 2:
        res["comprehensiveness_comparison"] = compare_means(*([r["comprehensiveness"][k] for r in rows]
                                                              for k in range(2)), metric="comprehensiveness")
        defined = [r for r in rows if r["agreement"] is not None]
        res["lowest_agreement"] = [r["index"] for r in sorted(defined, key=lambda r: r["agreement"])[:shown]]
    return res


def explain_batch(pair, batch, method: str = "integrated_gradients", progress=None, **options) -> dict:
    """Batch function (the whole sample on one worker): `explain_dataset` of both models; `progress`: examples."""
    return explain_dataset(pair.models, batch, method, progress=progress, **options)


explain_batch.combine = "whole"
explain_batch.reports_progress = True


# ------------------------------------------------------------------ the capabilities' runners (`api.run` calls them)


OWN = "own"  # the target that asks each model to explain its own prediction


def asked_class(target: int | str) -> int | str | None:
    """The class a request asks to explain: a class index as given, a label's name, or none ("" or "predicted":
    the first model's prediction; "own": each model's own)."""
    return None if target in ("", "predicted", OWN) else target


def run_saliency(pair: Pair, text: str | None = None, text2: str | None = None, *, method: str, target: int | str,
                 output: str, dataset: str | None = None, limit: int | str | None = None,
                 progress=None, engine: Engine | None = None, visitor: bool = True,
                 **method_options) -> SaliencyResult | SaliencyDatasetResult:
    """Per-word maps of both models on one input; with `dataset`, over its first `limit` examples
    (`explain_dataset`: faithfulness per model against a random ranking, the paired comparison of the two and the
    models' agreement), on a Ray `engine`'s worker where one is given. `method_options`: every method's declared
    options, checked (`api.run`); the chosen method is built with those it declares."""
    settings = METHODS[method].settings({"output": output, **method_options}, limits())
    if dataset is not None:
        if text:
            raise InputError("text: give either an input or a dataset, not both")
        ds = dataset_of(pair, dataset, limit, default=50, visitor=visitor, cap="max_saliency_examples")
        res = (engine or Engine()).run(pair, explain_batch, ds.examples, progress=progress,
                                       params={"method": method, "target": asked_class(target), **settings})
        for e, row in zip(res["examples"], ds.row_numbers()):  # the dataset's own row, through a slice too
            e["row"] = row
        return SaliencyDatasetResult.of(res, dataset=ds.name, output=settings["output"])
    ex = example_from(pair, text, text2)
    out = explain(pair.models, ex, method, asked_class(target), same_class=target != OWN, **settings)
    return SaliencyResult(method=method, output=settings["output"], fields=list(pair.task.fields),
                          maps=[m.to_dict() for m in out["maps"]], faithfulness=out["faithfulness"],
                          agreement=out["agreement"], agreement_label=out["agreement_label"],
                          signed=METHODS[method].signed)


def run_saliency_methods(pair: Pair, text: str | None = None, text2: str | None = None, *, target: int | str,
                         output: str, progress=None, **method_options) -> SaliencyMethodsResult:
    """Every method on one input, both models explaining one class (the first model's prediction, or `target`;
    "own": each model its own prediction, `target_labels`), with each map's faithfulness: where the methods agree
    on a model's reasons, and which to trust. Each method is built with the options it declares, from
    `method_options` (every method's, checked). `progress`: methods done."""
    ex = example_from(pair, text, text2)
    tgt, own = asked_class(target), target == OWN
    rows, agreed, words, label, explained, labels = [], {}, [], None, "prob", None
    for name in sorted(METHODS):
        settings = METHODS[name].settings({"output": output, **method_options}, limits())
        out = explain(pair.models, ex, name, tgt if tgt is not None or own else label, same_class=not own,
                      **settings)
        label = out["maps"][0].target_label  # the first method's class, asked of every later one
        if own:
            labels = {m.model: m.target_label for m in out["maps"]}
        words, explained = out["maps"][0].words, settings["output"]
        agreed[name] = out["agreement"]
        rows += [{"method": name, "model": m.model, "scores": m.scores, "unread": m.unread,
                  "comprehensiveness": f["comprehensiveness"], "sufficiency": f["sufficiency"],
                  "seconds": m.seconds, "delta": m.delta, "signed": METHODS[name].signed}
                 for m, f in zip(out["maps"], out["faithfulness"])]
        if progress:
            progress(len(agreed), len(METHODS))
    return SaliencyMethodsResult(fields=list(pair.task.fields), words=words, target_label=label, output=explained,
                                 rows=rows, agreement=agreed, target_labels=labels)
