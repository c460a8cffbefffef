"""The core's saliency methods in LIT, one interpreter per method under the name the app gives it (`Method.label`:
"integrated gradients", "LIME", a plugin's "word length"), each answered by the facade (`api.run("saliency", ...)`:
the pair's fp32 twin, the server's caps and the request's deadline applied there, once) and explaining each
model's own prediction, as LIT's salience does. Its settings are the method's declared options (`output`, and
those the method reads: integrated gradients' `tolerance`, a plugin's own), offered in LIT's config and checked by
the declaration. LIT's own implementations stay beside them under names that say so ("LIME (LIT's)",
`lit_models.server`). One token salience over the input's words (both texts' for a pair task)."""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
from lit_nlp.api import components as lit_components
from lit_nlp.api import dtypes as lit_dtypes
from lit_nlp.api import types as lit_types

from app.core.api import METHODS, Pair, capabilities, run

from .models import lens_of

FIELD = "salience"
KEPT = 64  # inputs' answers kept: LIT asks once per model, and the facade answers both at once
# the saliency capability's options LIT does not offer, and why: the interpreter is the method; LIT's salience
# explains each model's own prediction
FIXED = {"method": "the interpreter is the method", "target": "each model explains its own prediction, as in LIT"}


def lit_name(method: str) -> str:
    """The interpreter's name in LIT's menus: the method's name for people, as the app's menu shows it."""
    return METHODS[method].label


def offered(method: str) -> list:
    """The saliency capability's options this method's interpreter offers in LIT: `output` and the method's own."""
    own = {o.name for o in METHODS[method].options}
    return [o for o in capabilities.get("saliency").options
            if o.name not in FIXED and (o.name == "output" or o.name in own)]


def lit_type(option) -> lit_types.LitType:
    """An option's control in LIT's settings, from its declaration (never required: not sent, its default)."""
    if option.choices:
        return lit_types.CategoryLabel(vocab=[str(c) for c in option.choices], default=option.default,
                                       required=False)
    if option.kind is bool:
        return lit_types.Boolean(default=option.default, required=False)
    if option.kind in (int, float):
        low, high = option.span()
        low = 0 if low is None else low
        high = max(low, 1) if high is None else high
        step = 1 if option.kind is int else low or 0.001
        return lit_types.Scalar(min_val=low, max_val=high, default=option.default, step=step, required=False)
    return lit_types.TextSegment(default=option.default, required=False)


class LensSalience(lit_components.Interpreter):
    """One of the core's saliency methods (`METHODS[method]`) as a LIT interpreter of the pair's models."""

    def __init__(self, method: str, pair: Pair):
        self.method, self.pair = method, pair
        self._kept: OrderedDict[tuple, dict] = OrderedDict()
        self._lock = threading.Lock()

    def description(self) -> str:
        cls = METHODS[self.method]
        return f"albert-lens's {cls.label}, as the app computes it: {(cls.__doc__ or '').strip().splitlines()[0]}"

    def is_compatible(self, model, dataset) -> bool:
        lens = lens_of(model)
        return lens is not None and any(lens.clf is m for m in self.pair.models)

    def config_spec(self) -> lit_types.Spec:
        return {o.name: lit_type(o) for o in offered(self.method)}

    def meta_spec(self) -> lit_types.Spec:
        return {FIELD: lit_types.TokenSalience(autorun=False, signed=METHODS[self.method].signed)}

    def _answer(self, texts: tuple[str, ...], options: dict) -> dict:
        key = (texts, tuple(sorted(options.items())))
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        res = run("saliency", self.pair, *texts, method=self.method, target="own", **options).to_dict()
        with self._lock:
            self._kept[key] = res
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        return res

    def run(self, inputs, model, dataset, model_outputs=None, config=None) -> list[dict]:
        lens = lens_of(model)
        given = {o.name: (config or {}).get(o.name) for o in offered(self.method)}
        options = {k: v for k, v in given.items() if v is not None}
        out = []
        for ex in inputs:
            res = self._answer(lens.example(ex).texts, options)
            m = next(m for m in res["maps"] if m["model"] == lens.clf.name)
            out.append({FIELD: lit_dtypes.TokenSalience(list(m["words"]), np.asarray(m["scores"], dtype=np.float32))})
        return out
