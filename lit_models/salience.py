"""Our saliency methods that LIT has no implementation of (occlusion, and any method registered later), served in
LIT as interpreters of their own, computed by the core's method on the model's classifier: one token salience
over the input's words (both texts' words for a pair task), explaining the model's predicted class."""
from __future__ import annotations

import numpy as np
from lit_nlp.api import components as lit_components
from lit_nlp.api import dtypes as lit_dtypes
from lit_nlp.api import types as lit_types

from app.core.api import METHODS, capabilities, limits

from .models import lens_of

FIELD = "salience"


def lit_name(method: str) -> str:
    """The interpreter's name in LIT's menus: the method's own name for people, marked as ours."""
    return f"{METHODS[method].label} (albert-lens)"


class LensSalience(lit_components.Interpreter):
    """One of the core's saliency methods (`METHODS[method]`) as a LIT interpreter. It takes no settings
    (LIT's request config is dropped by the gate): the method's own defaults, capped as the app caps them."""

    def __init__(self, method: str):
        self.method = method

    def description(self) -> str:
        cls = METHODS[self.method]
        return f"albert-lens's {cls.label}: {(cls.__doc__ or '').strip().splitlines()[0]}"

    def is_compatible(self, model, dataset) -> bool:
        return lens_of(model) is not None

    def config_spec(self) -> lit_types.Spec:
        return {}

    def meta_spec(self) -> lit_types.Spec:
        return {FIELD: lit_types.TokenSalience(autorun=False, signed=METHODS[self.method].signed)}

    def run(self, inputs, model, dataset, model_outputs=None, config=None) -> list[dict]:
        lens = lens_of(model)
        cls = METHODS[self.method]
        declared = capabilities.get("saliency")  # the request LIT can't make: the declared defaults
        method = cls(lens.clf, **cls.settings({o.name: o.default for o in declared.options}, limits()))
        out = []
        for ex in inputs:
            res = method.attribute(lens.example(ex))
            out.append({FIELD: lit_dtypes.TokenSalience(list(res.words), np.asarray(res.scores, dtype=np.float32))})
        return out
