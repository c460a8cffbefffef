"""The core's one-input counterfactual generators (word replacement, WordNet synonym and antonym swaps, ablation
flip, HotFlip, a plugin's generator) as LIT generators, named as ours ("hotflip (albert-lens)"): each answered by
the facade (`api.run("counterfactual", ...)`), its settings the generator's declared options, its new datapoints
the edited inputs it made. LIT's own generators (Word Replacer, Hotflip, Ablation Flip, Scrambler) are served
beside them under LIT's names: one name, one algorithm."""
from __future__ import annotations

from lit_nlp.api import components as lit_components
from lit_nlp.lib import utils as lit_utils

from app.core.api import Pair, capabilities, run
from app.core.ground.errors import InputError

from .models import lens_of
from .salience import lit_type


def ours() -> list[str]:
    """The declared one-input generators (a dataset_* one edits a dataset, which LIT's generators don't)."""
    capabilities.get("counterfactual")  # the plugins' generators registered
    return [name for name, part in capabilities.COUNTERFACTUAL_GENERATORS.items() if part.code is not None]


def lit_name(generator: str) -> str:
    """Its name in LIT's generator menu: the capability's name for it, marked as ours."""
    return f"{generator} (albert-lens)"


def offered(generator: str) -> list:
    """The options this generator reads (`capabilities.Part.options`), as the counterfactual capability checks
    them."""
    declared = capabilities.get("counterfactual")
    own = {o.name for o in capabilities.COUNTERFACTUAL_GENERATORS[generator].options}
    return [o for o in declared.options if o.name in own]


class LensGenerator(lit_components.Generator):
    """One of the core's one-input generators as a LIT generator of the pair's models' datapoints."""

    def __init__(self, generator: str, pair: Pair):
        self.generator, self.pair = generator, pair

    def description(self) -> str:
        return f"albert-lens's {self.generator} counterfactuals, as the app makes them"

    def is_compatible(self, model, dataset) -> bool:
        lens = lens_of(model)
        return lens is not None and any(lens.clf is m for m in self.pair.models)

    def config_spec(self):
        return {o.name: lit_type(o) for o in offered(self.generator)}

    def generate(self, example, model, dataset, config=None) -> list[dict]:
        lens = lens_of(model)
        if lens is None:
            raise InputError(f"model: {self.generator} runs on the pair's models only")
        options = {o.name: (config or {}).get(o.name) for o in offered(self.generator)}
        texts = lens.example(example).texts
        res = run("counterfactual", self.pair, *texts, generator=self.generator,
                  **{k: v for k, v in options.items() if v is not None})
        fields = lens.task.fields
        return [lit_utils.make_modified_input(example, dict(zip(fields, change["edited"])), lit_name(self.generator))
                for change in res["changes"] or ()]
