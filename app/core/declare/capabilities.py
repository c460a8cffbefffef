"""Capabilities declared once: what a capability is called, the options it takes (each with one name, a type, a
default, a range or choices, the hosted cap that bounds it and its help), the batch function (or the runner) that
answers it and whether that needs gradients. The facade checks a request against the declaration and runs it through the
engine (`api.run`); the command line's subcommand and its flags (`app/cli.py`) and the app's endpoint with its
gradio_client parameters (`app/ui`) are generated from it, so one option has one name everywhere.

This module is the declarations' vocabulary and the registry; what albert-lens itself offers is registered by the
built-in catalogue (`app/core/catalogue.py`, which the package imports first), a plugin's by `load_plugins`.
Importable without PyTorch (the CLI's `--help` reads it): a built-in declaration names its technique's function as
an object imported on first use (`Later(lambda: _explanation().run_saliency)`: go-to-definition and renames follow
it); a plugin's may give the function itself, or "module:function". Adding a capability is one module with its
batch function plus one `register` call (see docs/architecture.md):

    register(Capability("length", "Each model's tokens per input.", length_batch,
                        options=(Option("unit", str, "tokens", "what to count", choices=("tokens", "words")),)))

A batch function is what the engine runs (`engine.py`): `fn(pair, examples, **options)` with its `combine`; a
capability on one input ("text") gets that one example, a capability over a dataset ("dataset") the dataset's examples.
"""
from __future__ import annotations

import importlib
import keyword
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..ground.errors import InputError
from ..ground.policy import OPERATOR_CAP, check_length, count, integer, limits, number
from . import plugins, results

log = logging.getLogger("albert_lens.plugins")
KINDS = (str, int, float, bool)
# either: one input, or a dataset when the options ask for one; both: one input placed in a dataset
INPUTS = ("text", "dataset", "either", "both")
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
    validator: Callable | None = None  # `validator(name, value)`: a check of its own (a range this server sets)
    optional: bool = False  # None (nothing sent) stays None: "not given" means something (no head: their mean)
    clamp: bool = False  # a count above `high` is lowered to it (a size of work), not refused (an index)

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or keyword.iskeyword(self.name):
            raise ValueError(f"option {self.name!r}: a name must be a Python identifier")
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name!r}: kind must be one of {[k.__name__ for k in KINDS]}")

    def span(self, *, visitor: bool = True) -> tuple[float | None, float | None]:
        """The range a front end's control offers for a number: the validator's own where it sets one
        (`validator.span()`, a range this server decides), else the declared one under this server's cap for a
        visitor; None where that end is open."""
        if callable(getattr(self.validator, "span", None)):
            return self.validator.span()
        low = self.low if self.low is not None else (1 if self.kind is int else None)
        high = self.high
        if self.cap and visitor:
            high = min(float("inf") if high is None else high, limits()[self.cap])
        return low, high

    def check(self, value, *, visitor: bool = True):
        """The value a request sent (a form's text, a script's number, None for the default), checked: a value
        outside the range or choices is refused with the field's name and what it may be."""
        if value is None or (isinstance(value, str) and not value.strip() and self.kind is not str):
            return None if self.optional and value is None else self.default
        if self.validator is not None:
            return self.validator(self.name, value)
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
            if self.high is not None and not self.cap and not self.clamp:  # an index: refused, never clamped
                return integer(self.name, value, low=low, high=int(self.high))
            return count(self.name, value, cap=int(cap), default=self.default, lower=low, clamp=self.clamp)
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
    batch_fn: str | Callable | Later | None = None  # the batch function, a `Later` of it, or "module:function"
    options: tuple[Option, ...] = ()
    inputs: str = "text"  # "text": one input (text, text2); "dataset": a dataset's first `limit` examples
    needs_gradients: bool = False  # run on the pair's fp32 twin (`Pair.fp32`), whatever its batch precision
    # (given as `batch_fn` is) answers the capability itself where its answer takes more than one batch function
    # (maps and their faithfulness, a projection and its alignment). `api.run` calls it by keyword with the options
    # checked against this declaration, the pair (its fp32 twin where `needs_gradients`), the request's raw inputs
    # (text, text2, dataset, limit) and progress, engine and visitor, those its signature names.
    runner: str | Callable | Later | None = None
    writes: str = ""  # what the command line's --out writes (a runner's `out`, else the result's export)
    saves: str = ""  # what the command line's --save-as keeps as a saved set (the result's `saved_edits()`)
    # the declared answer (`results.py`, frozen dataclasses whose to_dict() is the JSON), or "module:Class"
    result: str | type = results.CapabilityResult
    # the named variants it offers (`SALIENCY_METHODS`, `COUNTERFACTUAL_GENERATORS`): each variant's options are
    # the capability's too (`get` merges them in, each name once), and `chooses` names the option that picks one
    # (its choices the variants registered now); without `chooses`, every variant runs (saliency_methods)
    parts: dict | None = field(default=None, repr=False, compare=False, hash=False)
    chooses: str | None = None
    # LIT's own component that answers it, where one does (LIT's projector, its salience interpreters): said in
    # `lit_models` instead of a metric of ours; "" where LIT shows it as our metric or interpreter
    lit_counterpart: str = ""
    _resolved: list = field(default_factory=list, repr=False, compare=False)
    merged: bool = field(default=False, repr=False, compare=False)  # `complete`'s: its variants' options merged in

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or keyword.iskeyword(self.name):
            raise ValueError(f"capability {self.name!r}: a name must be a Python identifier")
        if self.inputs not in INPUTS:
            raise ValueError(f"capability {self.name!r}: inputs must be one of {INPUTS}")
        if (self.batch_fn is None) == (self.runner is None):
            raise ValueError(f"capability {self.name!r}: give a batch function or a runner, one of the two")
        names = [o.name for o in self.options]
        if self.chooses is not None and self.chooses not in names:
            raise ValueError(f"capability {self.name!r}: chooses names no option of its own ({self.chooses!r})")
        if len(set(names)) != len(names) or RESERVED & set(names):
            raise ValueError(f"capability {self.name!r}: options {names} repeat a name or take one of "
                             f"{sorted(RESERVED)}")

    def result_type(self) -> type:
        """The declared answer's class (imported on first use where it is given as "module:Class")."""
        return resolve(self.result)

    def batch_function(self) -> Callable:
        """The batch function, imported on first use."""
        if not self._resolved:
            self._resolved.append(resolve(self.batch_fn))
        return self._resolved[0]

    def option(self, name: str) -> Option:
        return next(o for o in self.options if o.name == name)

    def check(self, options: dict, *, visitor: bool = True) -> dict:
        """Every option checked, the ones not sent at their defaults; a name the capability doesn't take is
        refused (a typo would otherwise be a silently ignored setting)."""
        known = {o.name: o for o in self.options}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise InputError(f"{unknown[0]}: {self.name} takes no such option; it takes {sorted(known) or 'none'}")
        return {name: o.check(options.get(name), visitor=visitor) for name, o in known.items()}


@dataclass(frozen=True, eq=False)
class Later:
    """Code named as an object but imported when first used: `get` returns it (a lambda over a function that
    imports its module), so reading a declaration loads no technique, and no PyTorch, until it runs. The built-in
    catalogue (`app/core/catalogue.py`) names its techniques' functions so; go-to-definition follows them."""

    get: Callable[[], Any]

    def __repr__(self) -> str:  # without importing: printing a declaration must not load PyTorch
        return f"Later({'.'.join(self.get.__code__.co_names) or '?'})"


def resolve(path: str | Callable | Later) -> Callable:
    """A `Later` imported, "module:attribute" imported, or a callable as it is."""
    if isinstance(path, Later):
        return path.get()
    if callable(path):
        return path
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


_REGISTRY: dict[str, Capability] = {}
_COMPLETE: dict[str, tuple[tuple, Capability]] = {}  # name -> (what it was completed from, the completed one)


def register(capability: Capability) -> Capability:
    """Declare a capability: from here on the facade runs it and the front ends built afterwards show it."""
    if capability.name in _REGISTRY and _REGISTRY[capability.name] != capability:
        raise ValueError(f"capability {capability.name!r} is declared already")
    _REGISTRY[capability.name] = capability
    complete(capability)  # a variant's option that clashes with the capability's own is refused now
    return capability


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)
    _COMPLETE.pop(name, None)


def declared() -> list[Capability]:
    """Every capability as the front ends show it (plugins' included: `load_plugins`), its variants' options
    merged in."""
    load_plugins()
    return [complete(c) for c in list(_REGISTRY.values())]


def get(name: str) -> Capability:
    """One capability as the front ends show it, its variants' options merged in."""
    load_plugins()
    if not isinstance(name, str) or name not in _REGISTRY:
        raise InputError(f"capability: {str(name)[:40]!r} is not one of {sorted(_REGISTRY)}")
    return complete(_REGISTRY[name])


# ------------------------------------------------------------------ plugins (docs/plugins.md)
_PLUGINS_LOCK = threading.RLock()
_PLUGINS: dict = {"done": False, "loading": False, "seen": []}


def load_plugins() -> list[plugins.Loaded]:
    """Every installed plugin's entry points registered (`plugins.found`), once per process: the first read of
    the catalogue does it, in the main process and in each worker process alike. Re-entrant: a plugin's module
    that reads the catalogue while it is imported finds it as registered so far. A plugin that fails to import,
    or names the wrong kind of object, is named in one warning line and left out; the others load."""
    with _PLUGINS_LOCK:
        if _PLUGINS["done"] or _PLUGINS["loading"]:
            return list(_PLUGINS["seen"])
        _PLUGINS["loading"] = True
        try:
            for item in plugins.found():
                try:
                    register_plugin(item.group, item.name, item.load())
                    _PLUGINS["seen"].append(plugins.Loaded(item.group, item.name, item.package))
                except Exception as exc:  # noqa: BLE001 - one broken plugin must not take the others down
                    why = plugins.failure(exc)
                    log.warning("plugin %s (%s %r) not loaded: %s", item.package, item.group, item.name, why)
                    _PLUGINS["seen"].append(plugins.Loaded(item.group, item.name, item.package, why))
        finally:
            _PLUGINS.update(loading=False, done=True)
        return list(_PLUGINS["seen"])


def register_plugin(group: str, name: str, obj) -> None:
    """What entry point `name` of `group` names, registered where its group says: a saliency method's class (a
    `saliency.Method`: a class with `attribute`, named as the entry point) among `SALIENCY_METHODS`, a generator's
    `Part` among `COUNTERFACTUAL_GENERATORS`, a `Capability` in the catalogue."""
    if group == plugins.METHODS_GROUP:
        if not (isinstance(obj, type) and callable(getattr(obj, "attribute", None))) or \
                getattr(obj, "name", None) != name:
            raise TypeError(f"a saliency method's entry point names a saliency.Method subclass called {name!r}")
        options = tuple(getattr(obj, "options", ()))
        if not all(isinstance(o, Option) for o in options):
            raise TypeError(f"saliency method {name!r}: its options must be capabilities.Option declarations")
        register_part(SALIENCY_METHODS, name, Part(obj, options), "saliency method")
    elif group == plugins.GENERATORS_GROUP:
        if not isinstance(obj, Part) or obj.code is None or obj.edits is not None:
            raise TypeError("a generator's entry point names a capabilities.Part whose code is the generator "
                            "function (fn(models, example, **its options) -> CounterfactualResult)")
        register_part(COUNTERFACTUAL_GENERATORS, name, obj, "counterfactual generator")
    elif group == plugins.CAPABILITIES_GROUP:
        if not isinstance(obj, Capability) or obj.name != name:
            raise TypeError(f"a capability's entry point names a capabilities.Capability called {name!r}")
        register(obj)
    else:
        raise ValueError(f"group: {group!r} is not one of {plugins.GROUPS}")


def forget_plugins() -> None:
    """Tests: what `load_plugins` registered taken out again, so that the next read loads the entry points
    afresh."""
    with _PLUGINS_LOCK:
        for item in _PLUGINS["seen"]:
            if item.error:
                continue
            if item.group == plugins.METHODS_GROUP:
                SALIENCY_METHODS.pop(item.name, None)
            elif item.group == plugins.GENERATORS_GROUP:
                COUNTERFACTUAL_GENERATORS.pop(item.name, None)
            else:
                unregister(item.name)
        _PLUGINS.update(done=False, loading=False, seen=[])


def part_options(parts: dict, own: tuple[Option, ...] = ()) -> tuple[Option, ...]:
    """The options a capability's variants declare, each name once, in the order they were registered: two
    variants may share an option only if they declare it alike, and none may take one of the capability's own
    names or a front end's (`RESERVED`)."""
    seen: dict[str, tuple[str, Option]] = {}
    taken = {o.name for o in own}
    for variant, part in parts.items():
        for o in getattr(part, "options", ()):
            if o.name in taken or o.name in RESERVED:
                raise ValueError(f"{variant!r}: option {o.name!r} is already the capability's or a front end's")
            if o.name in seen and seen[o.name][1] != o:
                raise ValueError(f"{variant!r}: option {o.name!r} is declared otherwise by {seen[o.name][0]!r}")
            seen.setdefault(o.name, (variant, o))
    return tuple(o for _, o in seen.values())


def complete(capability: Capability) -> Capability:
    """`capability` with its variants' options merged in and the choosing option's choices the variants
    registered now (a method or generator registered later is offered at once)."""
    if capability.parts is None or capability.merged:
        return capability
    key = (id(capability), tuple((n, id(p)) for n, p in capability.parts.items()))
    done = _COMPLETE.get(capability.name)
    if done is not None and done[0] == key:
        return done[1]
    own = tuple(replace(o, choices=tuple(capability.parts)) if o.name == capability.chooses else o
                for o in capability.options)
    merged = replace(capability, options=own + part_options(capability.parts, own), merged=True)
    _COMPLETE[capability.name] = (key, merged)
    return merged


@dataclass(frozen=True)
class Part:
    """A named variant a capability offers, a saliency method or a counterfactual generator: its code (the object,
    a `Later` of it, or "module:attribute"), the options it reads (declared here, with it: the
    capability takes every variant's, `complete`), and for a generator over a dataset the one-input edit it makes
    to every example (`edits`; its code is then `counterfactuals.flip_rate`'s)."""

    code: str | Callable | type | Later | None = None
    options: tuple[Option, ...] = ()
    edits: str | None = None

    def reads(self, name: str) -> bool:
        return any(o.name == name for o in self.options)

    def load(self):
        return None if self.code is None else resolve(self.code)


OUTPUTS = ("prob", "logit")
# A capability's variants, by name (filled by the built-in catalogue, `app/core/catalogue.py`, and by plugins):
# saliency methods, each a `saliency.Method` class with the options it reads; counterfactual generators over one
# input, `fn(models, example, **the options it reads)` returning a `CounterfactualResult`, and over a dataset, the
# one-input edit each makes to every example (`Part.edits`). `saliency.METHODS` and every front end's list read these.
SALIENCY_METHODS: dict[str, Part] = {}
COUNTERFACTUAL_GENERATORS: dict[str, Part] = {}
Generator = Part  # a counterfactual generator's declaration


def register_part(parts: dict, name: str, part: Part, kind: str) -> None:
    """A variant added to a capability's `parts` (a plugin's method or generator): refused, leaving the catalogue
    as it was, when the name is taken by another or its options clash with the capabilities that offer it."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{kind} {name!r}: a name must be a Python identifier")
    if name in parts and parts[name] != part:
        raise ValueError(f"{kind} {name!r} is declared already")
    parts[name] = part
    try:
        for c in list(_REGISTRY.values()):
            if c.parts is parts:
                complete(c)
    except ValueError:
        del parts[name]
        raise


PROJECTIONS = ("umap", "pca")
POOLINGS = ("cls", "mean")
LAYER_POOLINGS = (*POOLINGS, "words")
SLICE_METRICS = ("accuracy", "agreement")
# what a dataset's confusion matrices are split by: nothing, length bins, a marker group present or not (the slices'
# `MARKERS`), whether the two models agree
FACETS = ("none", "length", "negation", "contrast", "intensifier", "comparison", "agreement")

