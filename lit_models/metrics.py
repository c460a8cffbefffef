"""LIT's Metrics table, paired: for each model, the gap to the pair's other model on the selected examples and
whether it is more than chance.

LIT shows each model's accuracy on a slice, side by side, but not whether two models' accuracies on the same
examples differ beyond chance, which is what a slice ("negations", "long reviews") is selected to find out. An
adapter only: predictions come from the core (`predict`), the test from `app.core.ground.significance` (McNemar's
exact test for classifiers, a paired bootstrap of Pearson's r for regression), as in the app and the CLI.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence

from lit_nlp.api import components as lit_components
from lit_nlp.api import dataset as lit_dataset
from lit_nlp.api import model as lit_model
from lit_nlp.api import types as lit_types

from app.core.api import Example, compare_accuracy, compare_correlation, views
from app.core.api import predict_examples as predict
from app.core.ground.errors import InputError

from .models import LABEL, LensModel, lens_of

CACHED = 100_000  # texts whose prediction is kept per model (a LIT session re-asks on every selection)


class PairedComparison(lit_components.Metrics):
    """Registered as LIT metrics: each model's row compares it with the pair's other model (a model loaded
    from the LIT page, with the pair's first)."""

    def __init__(self, pair_models: Sequence[LensModel]):
        self._pair = list(pair_models)
        self._cache: dict[str, dict[tuple[str, ...], object]] = {}
        self._lock = threading.Lock()

    def _other(self, model: LensModel) -> LensModel:
        if model is self._pair[0]:
            return self._pair[1]
        return self._pair[0]

    def is_field_compatible(self, pred_spec: lit_types.LitType, parent_spec: lit_types.LitType | None) -> bool:
        if isinstance(pred_spec, lit_types.MulticlassPreds):
            return isinstance(parent_spec, lit_types.CategoryLabel)
        return isinstance(pred_spec, lit_types.RegressionScore) and isinstance(parent_spec, lit_types.Scalar)

    def is_compatible(self, model: lit_model.Model, dataset: lit_dataset.Dataset) -> bool:
        return lens_of(model) is not None and super().is_compatible(model, dataset)

    def meta_spec(self) -> dict[str, lit_types.LitType]:
        other = "the pair's other model (for a model loaded from this page, the pair's first)"
        return {
            "other − this": lit_types.MetricResult(
                description=f"accuracy (Pearson's r for regression) of {other} minus this model's, on the same "
                            "labelled examples"),
            "95% low": lit_types.MetricResult(description="lower end of the paired bootstrap 95% interval of the gap"),
            "95% high": lit_types.MetricResult(description="upper end of the paired bootstrap 95% interval of the gap"),
            "p": lit_types.MetricResult(
                description="two-sided p-value of 'no gap': McNemar's exact test on the examples exactly one "
                            "model gets right (regression: paired bootstrap); small ones in scientific notation"),
            "n": lit_types.MetricResult(description="labelled examples compared"),
        }

    def _outputs(self, model: LensModel, texts: list[tuple[str, ...]]) -> list:
        """Each text's predicted label (score for regression), from the core, cached per model (by its source
        and weights: a model loaded again from the page under the same name is not answered from the old one)."""
        clf = model.clf
        key = repr((clf.spec.source, clf.path, clf.weights_stamp))
        with self._lock:
            cache = self._cache.setdefault(key, {})
            known = {t: cache[t] for t in texts if t in cache}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:  # the model's own checks first: this path once predicted 30 texts of 1 MB each, uncapped
            model.admit([dict(zip(model.task.fields, t)) for t in missing])
            known.update(zip(missing, predict(clf, [Example(t) for t in missing]).predicted))
            with self._lock:
                if len(cache) + len(missing) > CACHED:
                    cache.clear()
                cache.update((t, known[t]) for t in missing)
        return [known[t] for t in texts]

    def run(self, inputs: Sequence[dict], model: lit_model.Model, dataset: lit_dataset.Dataset,
            model_outputs: list[dict] | None = None, config: dict | None = None) -> list[dict]:
        this = lens_of(model)
        if this is None or LABEL not in dataset.spec():
            return []
        other = self._other(this)
        key = "score" if this.clf.is_regression else "probas"
        labelled = [ex for ex in inputs if ex.get(LABEL) not in (None, "")]
        texts = [tuple(str(ex.get(f, "")) for f in this.task.fields) for ex in labelled]
        metrics: dict[str, float | None] = {}
        if labelled and other.task.fields == this.task.fields:
            gold = [ex[LABEL] for ex in labelled]
            mine, theirs = self._outputs(this, texts), self._outputs(other, texts)  # a refusal reaches the visitor
            # one test per pair, in the pair's order: the second model's row is the first's mirrored (its interval
            # negated end for end), not a second bootstrap whose ends differ by chance
            flip = len(self._pair) > 1 and this is self._pair[1]
            a, b = (theirs, mine) if flip else (mine, theirs)
            try:
                if this.clf.is_regression:
                    cmp = compare_correlation([float(g) for g in gold], a, b)
                else:
                    cmp = compare_accuracy(gold, a, b)
            except InputError:  # too few examples, or a constant score: the gap is undefined
                cmp = None
            if cmp is not None:
                sign = -1.0 if flip else 1.0
                low, high = sorted((sign * cmp["difference_interval"][0], sign * cmp["difference_interval"][1]))
                metrics |= {"other − this": sign * cmp["difference"], "95% low": low, "95% high": high,
                            "p": views.p_text(cmp["p_value"])}
        metrics["n"] = float(len(labelled))  # LIT's own N counts the unlabelled too
        return [{"pred_key": key, "label_key": LABEL, "metrics": metrics}]
