"""The public extension API: what a plugin (docs/plugins.md) builds a saliency method, a counterfactual generator
or a capability from. Everything here is the core's own; a plugin imports this module, never the facade (which
reads the plugins, so a plugin importing it would import itself) and never a front end.

    from app.core import extension as lens

    class WordLength(lens.Method): ...                         # a saliency method, its options on the class
    REPEAT_WORD = lens.Part(repeat_word, options=(...))        # a counterfactual generator
    LENGTHS = lens.Capability("lengths", ..., runner=run_lengths, result=LengthsResult, inputs="dataset")

A capability's runner is called by the facade (`api.run`) with its options checked against the declaration, the
pair (its fp32 twin where `needs_gradients`), and those of text, text2, dataset, limit, progress, engine, visitor
and cancel that its signature names. Its result is a frozen dataclass subclassing `Result`; an `as_text(show=)` and an
`as_figure()` method of its own are what the command line prints and saves and the app shows.
"""
from __future__ import annotations

from dataclasses import dataclass, field  # noqa: F401 - a plugin's result types are frozen dataclasses

from .declare.capabilities import Capability, Option, Part  # noqa: F401 - the declarations
from .declare.results import CounterfactualResult, Result  # noqa: F401 - the result types
from .execution.inference import predict_both  # noqa: F401 - both models' predictions of examples
from .execution.inputs import dataset_of, example_from  # noqa: F401 - a request's dataset (capped for visitors), one input
from .ground.alignment import split_words  # noqa: F401 - a text's words, as saliency maps and edits count them
from .ground.data import Dataset, Example  # noqa: F401
from .ground.errors import InputError  # noqa: F401 - a refusal naming the field, shown to the visitor as it is
from .ground.jobs import checkpoint  # noqa: F401 - long work stops here when its client leaves or its time is up
from .ground.significance import compare_accuracy, compare_events  # noqa: F401 - the paired tests
from .techniques.counterfactuals import compare  # noqa: F401 - one edit scored on both models (a generator's Change)
from .techniques.saliency import Method, WordSaliency  # noqa: F401 - a saliency method's base and its map


def result(cls: type) -> type:
    """`cls` as a result type: a frozen dataclass (`@lens.result class LengthsResult(lens.Result): ...`)."""
    return dataclass(frozen=True)(cls)
