"""Plugins: a researcher's own saliency methods, counterfactual generators and capabilities, from any installed
package that names them under one of three Python entry-point groups (docs/plugins.md):

    [project.entry-points."albert_lens.saliency_methods"]
    word_length = "my_package.methods:WordLength"        # a `saliency.Method` subclass
    [project.entry-points."albert_lens.counterfactual_generators"]
    repeat_word = "my_package.generators:REPEAT_WORD"     # a `capabilities.Part` whose code is the generator
    [project.entry-points."albert_lens.capabilities"]
    lengths = "my_package.lengths:LENGTHS"               # a `capabilities.Capability`

Loaded once per process, the first time the catalogue is read (`capabilities.get` / `declared`): in the main
process and in every worker process alike, since each reads the catalogue before it runs anything. What a plugin
declares then reaches every front end the way a built-in does. A plugin that fails to load is named in one
warning line and left out; the others load.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from importlib.metadata import entry_points

log = logging.getLogger("albert_lens.plugins")

METHODS_GROUP = "albert_lens.saliency_methods"
GENERATORS_GROUP = "albert_lens.counterfactual_generators"
CAPABILITIES_GROUP = "albert_lens.capabilities"
GROUPS = (METHODS_GROUP, GENERATORS_GROUP, CAPABILITIES_GROUP)


@dataclass(frozen=True)
class Loaded:
    """One entry point, loaded or not: its group, its name, the package that declares it and, where it failed,
    why."""

    group: str
    name: str
    package: str
    error: str = ""


_LOCK = threading.RLock()
_STATE: dict = {"done": False, "loading": False, "seen": []}


def load() -> list[Loaded]:
    """Every installed plugin registered, once (later calls answer what the first found). Re-entrant: a plugin's
    module that reads the catalogue while it is imported finds it as loaded so far."""
    with _LOCK:
        if _STATE["done"] or _STATE["loading"]:
            return list(_STATE["seen"])
        _STATE["loading"] = True
        try:
            for group in GROUPS:
                for ep in sorted(entry_points(group=group), key=lambda e: e.name):
                    _STATE["seen"].append(_load_one(group, ep))
        finally:
            _STATE["loading"] = False
            _STATE["done"] = True
        return list(_STATE["seen"])


def _load_one(group: str, ep) -> Loaded:
    package = getattr(getattr(ep, "dist", None), "name", None) or ep.value.partition(":")[0]
    try:
        register(group, ep.name, ep.load())
    except Exception as exc:  # noqa: BLE001 - one broken plugin must not take the others (or the app) down
        why = f"{type(exc).__name__}: {str(exc)[:300]}"
        log.warning("plugin %s (%s %r) not loaded: %s", package, group, ep.name, why)
        return Loaded(group, ep.name, package, why)
    return Loaded(group, ep.name, package)


def register(group: str, name: str, obj) -> None:
    """`obj`, what entry point `name` of `group` names, registered where its group says: a method class with
    `saliency.register`, a generator's `Part` among the counterfactual generators, a capability with
    `capabilities.register`. Its name must be the entry point's."""
    from . import capabilities

    if group == METHODS_GROUP:
        from . import saliency

        if getattr(obj, "name", None) != name:
            raise ValueError(f"the entry point is named {name!r}, the method {getattr(obj, 'name', None)!r}")
        saliency.register(obj)
    elif group == GENERATORS_GROUP:
        if not isinstance(obj, capabilities.Part) or obj.code is None or obj.edits is not None:
            raise TypeError("a generator's entry point names a capabilities.Part whose code is the generator "
                            "function (fn(models, example, **its options) -> CounterfactualResult)")
        capabilities.register_part(capabilities.COUNTERFACTUAL_GENERATORS, name, obj, "counterfactual generator")
    elif group == CAPABILITIES_GROUP:
        if not isinstance(obj, capabilities.Capability) or obj.name != name:
            raise TypeError(f"a capability's entry point names a capabilities.Capability called {name!r}")
        capabilities.register(obj)
    else:
        raise ValueError(f"group: {group!r} is not one of {GROUPS}")


def loaded() -> list[Loaded]:
    """What `load` found: every plugin entry point of this process, with why where one failed."""
    return load()


def forget() -> None:
    """Tests: what `load` registered taken out again, so the next `load` reads the entry points afresh."""
    from . import capabilities, saliency

    with _LOCK:
        for item in _STATE["seen"]:
            if item.error:
                continue
            if item.group == METHODS_GROUP:
                saliency.unregister(item.name)
            elif item.group == GENERATORS_GROUP:
                capabilities.COUNTERFACTUAL_GENERATORS.pop(item.name, None)
            else:
                capabilities.unregister(item.name)
        _STATE.update(done=False, loading=False, seen=[])
