"""Capabilities declared once: what a capability is called, the options it takes (each with one name, a type, a
default, a range or choices, the hosted cap that bounds it and its help), the engine job that answers it and
whether that job needs gradients. The facade checks a request against the declaration and runs it through the
engine (`api.run`); the command line's subcommand and its flags (`app/cli.py`) and the app's endpoint with its
gradio_client parameters (`app/ui`) are generated from it, so one option has one name everywhere.

Importable without PyTorch (the CLI's `--help` reads it): a declaration names its job as "module:function",
imported on first use. Adding a capability is one module with its job plus one `register` call (see
docs/architecture.md):

    register(Capability("length", "Each model's tokens per input.", "app.core.length:length_batch",
                        options=(Option("unit", str, "tokens", "what to count", choices=("tokens", "words")),)))

A job is an engine job (`engine.py`): `job(pair, examples, **options)` with its `combine`; a capability on one
input ("text") gets that one example, a capability over a dataset ("dataset") the dataset's examples.
"""
from __future__ import annotations

import importlib
import keyword
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import InputError
from .policy import OPERATOR_CAP, check_length, count, integer, limits, number

KINDS = (str, int, float, bool)
INPUTS = ("text", "dataset")
# names the front ends give every capability (its inputs, the pair, where it runs): no option may take one
RESERVED = {"text", "text2", "dataset", "limit", "pair", "models", "task", "device", "precision", "json", "png",
            "engine", "address", "workers", "progress", "visitor", "name", "capability", "ctx", "func", "verbose"}
_TRUE, _FALSE = {"true", "yes", "1", "on"}, {"false", "no", "0", "off"}


@dataclass(frozen=True)
class Option:
    """One option of a capability, as every front end names and checks it."""

    name: str
    kind: type
    default: Any
    help: str
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    cap: str | None = None  # the `policy.limits()` key that bounds it for a visitor (hosted mode lowers it)

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or keyword.iskeyword(self.name):
            raise ValueError(f"option {self.name!r}: a name must be a Python identifier")
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name!r}: kind must be one of {[k.__name__ for k in KINDS]}")

    def check(self, value, *, visitor: bool = True):
        """The value a request sent (a form's text, a script's number, None for the default), checked: a value
        outside the range or choices is refused with the field's name and what it may be."""
        if value is None or (isinstance(value, str) and not value.strip() and self.kind is not str):
            return self.default
        if self.choices:
            if value not in self.choices:
                raise InputError(f"{self.name}: {str(value)[:40]!r} is not one of {list(self.choices)}")
            return value
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            word = str(value).strip().lower()
            if word not in _TRUE | _FALSE:
                raise InputError(f"{self.name}: {str(value)[:40]!r} is not true or false")
            return word in _TRUE
        if self.kind is int:
            cap = self.high if self.high is not None else OPERATOR_CAP
            if self.cap and visitor:
                cap = min(cap, limits()[self.cap])
            low = 1 if self.low is None else int(self.low)
            if self.high is not None and not self.cap:  # an index: out of range is refused, never clamped
                return integer(self.name, value, low=low, high=int(self.high))
            return count(self.name, value, cap=int(cap), default=self.default, lower=low)
        if self.kind is float:
            high = self.high if self.high is not None else float("inf")
            if self.cap and visitor:
                high = min(high, float(limits()[self.cap]))
            return number(self.name, value, low=-float("inf") if self.low is None else self.low, high=high,
                          default=self.default)
        if not isinstance(value, str):
            raise InputError(f"{self.name}: expected text, got {type(value).__name__}")
        check_length(self.name, value, limits()["max_chars"])
        return value

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class Capability:
    """A capability's one declaration: every front end is generated from it."""

    name: str
    help: str
    job: str | Callable  # "module:function" (imported on first use) or the engine job itself
    options: tuple[Option, ...] = ()
    inputs: str = "text"  # "text": one input (text, text2); "dataset": a dataset's first `limit` examples
    needs_gradients: bool = False  # run on the pair's fp32 twin (`Pair.fp32`), whatever its batch precision
    _resolved: list = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or keyword.iskeyword(self.name):
            raise ValueError(f"capability {self.name!r}: a name must be a Python identifier")
        if self.inputs not in INPUTS:
            raise ValueError(f"capability {self.name!r}: inputs must be one of {INPUTS}")
        names = [o.name for o in self.options]
        if len(set(names)) != len(names) or RESERVED & set(names):
            raise ValueError(f"capability {self.name!r}: options {names} repeat a name or take one of "
                             f"{sorted(RESERVED)}")

    def function(self) -> Callable:
        """The engine job, imported on first use."""
        if not self._resolved:
            if callable(self.job):
                self._resolved.append(self.job)
            else:
                module, _, name = self.job.partition(":")
                self._resolved.append(getattr(importlib.import_module(module), name))
        return self._resolved[0]

    def check(self, options: dict, *, visitor: bool = True) -> dict:
        """Every option checked, the ones not sent at their defaults; a name the capability doesn't take is
        refused (a typo would otherwise be a silently ignored setting)."""
        known = {o.name: o for o in self.options}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise InputError(f"{unknown[0]}: {self.name} takes no such option; it takes {sorted(known) or 'none'}")
        return {name: o.check(options.get(name), visitor=visitor) for name, o in known.items()}


_REGISTRY: dict[str, Capability] = {}


def register(capability: Capability) -> Capability:
    """Declare a capability: from here on the facade runs it and the front ends built afterwards show it."""
    if capability.name in _REGISTRY and _REGISTRY[capability.name] != capability:
        raise ValueError(f"capability {capability.name!r} is declared already")
    _REGISTRY[capability.name] = capability
    return capability


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def declared() -> list[Capability]:
    return list(_REGISTRY.values())


def get(name: str) -> Capability:
    if not isinstance(name, str) or name not in _REGISTRY:
        raise InputError(f"capability: {str(name)[:40]!r} is not one of {sorted(_REGISTRY)}")
    return _REGISTRY[name]


# ------------------------------------------------------------------ the catalogue: capabilities declared here
register(Capability(
    "tokens", "How each model's tokenizer reads the input: its tokens, the words it splits into pieces and the "
    "ones it reads as [UNK].", "app.core.tokens:tokens_batch",
    options=(Option("special", bool, False, "show the tokens the tokenizer adds ([CLS], [SEP]) too"),)))
