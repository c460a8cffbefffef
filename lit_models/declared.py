"""Declared capabilities LIT has no counterpart of, in LIT's Metrics table, from their declarations alone.

A capability over a dataset (`capabilities.py`: a batch function's, or a runner's with a result type of its own, a
plugin's among them) that declares no LIT counterpart (`Capability.lit_counterpart`: LIT's projector, its
salience and generators, which serve the others) runs through the facade on LIT's selected examples, with its
declared defaults (LIT's metrics table sends no settings), and each model's row holds the numbers of that model's
record (the whole answer's where it answers for the pair).
LIT's table shows the columns a component's `meta_spec` names, read once when the page loads: they are the numbers
the capability answers on the served datasets' first rows at start-up (a number another selection adds, such as a
label not predicted there, is in the JSON but has no column). LIT asks once per model; the pair is run once per
selection.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence

from lit_nlp.api import components as lit_components
from lit_nlp.api import dataset as lit_dataset
from lit_nlp.api import model as lit_model
from lit_nlp.api import types as lit_types

from app.core.api import Dataset, Example, Pair, capabilities, run
from app.core.ground.errors import LensError

from .models import LABEL, lens_of
from .salience import lit_type

log = logging.getLogger("albert_lens.lit")
NUMBERS = 200  # numbers a row may hold: LIT's table has a column per number
PROBE = 100  # rows of the served datasets the start-up run reads to learn the columns
KEPT = 4  # selections answered and kept (LIT asks for the whole dataset and the selection, per model)


Row = tuple[tuple[str, ...], str | float | None]  # a datapoint's texts and its gold label (None: none)


def row_of(datapoint, fields: Sequence[str]) -> Row:
    """A LIT datapoint as the core reads it: its texts, and its gold label where it has one (a slice or a length
    bucket compares right answers)."""
    label = datapoint.get(LABEL)
    return tuple(str(datapoint.get(f, "")) for f in fields), (None if label in (None, "") else label)


def served() -> list[capabilities.Capability]:
    """The declared capabilities LIT shows as metrics: those that read a dataset and have no counterpart in LIT."""
    return [c for c in capabilities.declared() if c.inputs in ("dataset", "either") and not c.lit_counterpart]


def metric_name(capability: str) -> str:
    """The component's name in LIT's metrics table (its columns read "NAME: number")."""
    return f"{capability} (albert-lens)"


def numbers(value, prefix: str = "") -> dict[str, float]:
    """A JSON answer's numbers, each named by where it sits: keys joined by ".", a list's items by position,
    except a [name, number] pair, named by its name (a label and its count), and records whose first field is a
    distinct text, named by it ("buckets.short.accuracy.0")."""
    out: dict[str, float] = {}
    if isinstance(value, bool):
        return out
    if isinstance(value, int | float):
        return {prefix or "value": float(value)}
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        named = all(isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) for v in value)
        # records named by their first field where it is a distinct text (a length bucket, a model)
        first = [next(iter(v.values()), None) if isinstance(v, dict) and v else None for v in value]
        records = all(isinstance(f, str) for f in first) and len(set(first)) == len(first)
        items = ((v[0], v[1]) if named else (first[i], {k: x for k, x in list(v.items())[1:]}) if records
                 else (str(i), v) for i, v in enumerate(value))
    else:
        return out
    for key, v in items:
        out |= numbers(v, f"{prefix}.{key}" if prefix else str(key))
    return out


class DeclaredMetrics(lit_components.Metrics):
    """One declared capability (`served()`) as LIT metrics on the pair's models, its columns the numbers it
    answers on `probe` (the served datasets' first rows)."""

    def __init__(self, capability: str, pair: Pair, probe: Sequence[Row]):
        self.capability, self.pair = capabilities.get(capability), pair
        self._kept: OrderedDict[tuple, dict] = OrderedDict()  # selections answered, newest last
        self._lock = threading.Lock()
        names: dict[str, None] = {}
        if probe:
            try:
                res = self._answer(list(probe)[:PROBE], visitor=False)
            except LensError as exc:  # it can't answer on these rows (no gold labels, say): no columns, said once
                log.warning("LIT metrics %s: not served, the served rows gave it no answer (%s)", capability, exc)
                res = None
            for clf in pair.models if res is not None else ():
                names |= dict.fromkeys(self._numbers(res, clf.name))
        self._columns = list(names)[:NUMBERS]

    def description(self) -> str:
        return f"albert-lens's {self.capability.name}: {self.capability.help}"

    @property
    def columns(self) -> list[str]:
        """The numbers it shows (none where the served rows gave it no answer: then it is not served)."""
        return list(self._columns)

    def is_field_compatible(self, pred_spec: lit_types.LitType, parent_spec: lit_types.LitType | None) -> bool:
        return isinstance(pred_spec, lit_types.MulticlassPreds | lit_types.RegressionScore)

    def is_compatible(self, model: lit_model.Model, dataset: lit_dataset.Dataset) -> bool:
        return self._ours(lens_of(model))

    def _ours(self, lens) -> bool:
        return lens is not None and any(lens.clf is m for m in self.pair.models)

    def meta_spec(self) -> dict[str, lit_types.LitType]:
        return {k: lit_types.MetricResult(description=f"{self.capability.name}'s {k} on these examples (declared "
                                                      "defaults unless the request's config sets them)")
                for k in self._columns}

    def config_spec(self) -> lit_types.Spec:
        """The capability's declared options, as every front end offers them (LIT's metrics table sends none:
        the declared defaults; a request that sends them is checked by the declaration)."""
        return {o.name: lit_type(o) for o in self.capability.options}

    def _answer(self, rows: list[Row], visitor: bool = True, options: dict | None = None) -> dict:
        options = {k: v for k, v in (options or {}).items() if v is not None}
        key = (tuple(rows), tuple(sorted(options.items())))
        with self._lock:  # LIT asks for each model in turn: the second is answered from the first's run
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        ds = Dataset("LIT's selection", [Example(t, label) for t, label in rows], self.pair.task.name)
        res = run(self.capability.name, self.pair, dataset=ds, limit=len(rows), visitor=visitor,
                  **options).to_dict()
        with self._lock:
            self._kept[key] = res
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        return res

    @staticmethod
    def _numbers(res: dict, model: str) -> dict[str, float]:
        """The answer's numbers for `model`: its own record's where the answer is a record per model."""
        body = res["result"] if "capability" in res and "result" in res else res  # a batch function's, or a result type
        if isinstance(body, list) and body and all(isinstance(r, dict) and "model" in r for r in body):
            body = next((r for r in body if r["model"] == model), {})
            body = {k: v for k, v in body.items() if k != "model"}
        return dict(list(numbers(body).items())[:NUMBERS])

    def run(self, inputs: Sequence[dict], model: lit_model.Model, dataset: lit_dataset.Dataset,
            model_outputs: list[dict] | None = None, config: dict | None = None) -> list[dict]:
        lens = lens_of(model)
        if not self._ours(lens) or not inputs:
            return []
        lens.admit(list(inputs))  # the model's own checks of a visitor's datapoints first
        key = "score" if lens.clf.is_regression else "probas"
        given = {o.name: (config or {}).get(o.name) for o in self.capability.options}
        try:
            res = self._answer([row_of(ex, lens.task.fields) for ex in inputs], options=given)
        except LensError as exc:  # this selection can't be answered (too few labelled rows for a slice, say): no
            # numbers for it, and the table's other metrics still answer
            log.info("LIT metrics %s on %d datapoints: %s", self.capability.name, len(inputs), exc)
            return [{"pred_key": key, "label_key": LABEL, "metrics": {}}]
        return [{"pred_key": key, "label_key": LABEL, "metrics": self._numbers(res, lens.clf.name)}]
