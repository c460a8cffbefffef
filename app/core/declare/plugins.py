"""Plugins: a researcher's own saliency methods, counterfactual generators and capabilities, from any installed
package that names them under one of three Python entry-point groups (docs/plugins.md):

    [project.entry-points."albert_lens.saliency_methods"]
    word_length = "my_package.methods:WordLength"        # a `saliency.Method` subclass
    [project.entry-points."albert_lens.counterfactual_generators"]
    repeat_word = "my_package.generators:REPEAT_WORD"     # a `capabilities.Part` whose code is the generator
    [project.entry-points."albert_lens.capabilities"]
    lengths = "my_package.lengths:LENGTHS"               # a `capabilities.Capability`

This module only reads the entry points; the catalogue (`capabilities.load_plugins`) registers what they name, once
per process, the first time it is read: in the main process and in every worker process alike.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points

METHODS_GROUP = "albert_lens.saliency_methods"
GENERATORS_GROUP = "albert_lens.counterfactual_generators"
CAPABILITIES_GROUP = "albert_lens.capabilities"
GROUPS = (METHODS_GROUP, GENERATORS_GROUP, CAPABILITIES_GROUP)


@dataclass(frozen=True)
class Loaded:
    """One entry point, registered or not: its group, its name, the package that declares it and, where it
    failed, why."""

    group: str
    name: str
    package: str
    error: str = ""


@dataclass(frozen=True)
class Found:
    """An entry point as read: what it names (`load()` imports it), and the package that declares it."""

    group: str
    name: str
    package: str
    entry: object

    def load(self):
        return self.entry.load()


def found() -> Iterator[Found]:
    """Every installed entry point of the three groups, in a fixed order (group, then name)."""
    for group in GROUPS:
        for ep in sorted(entry_points(group=group), key=lambda e: e.name):
            package = getattr(getattr(ep, "dist", None), "name", None) or ep.value.partition(":")[0]
            yield Found(group, ep.name, package, ep)


def failure(exc: BaseException) -> str:
    """Why an entry point was left out, in one line."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
