"""What one LIT request may ask of this server, checked before any work or memory is taken.

LIT validates an interpreter's settings only for their presence: one `/get_interpretations` with integrated
gradients' "Interpolation steps" at 100,000 grew the server to 18.8 GB and the kernel killed it, and UMAP's
`proj_kw` went into `umap.UMAP(**kw)` unread (a huge `n_epochs` held both work slots for four minutes). Here each
served component declares the settings it reads, with their ranges (`SETTINGS`); a setting out of range is
refused naming it, one not declared is dropped before the component sees it, and a projection's settings are an
allow-list that must name the request's own model and dataset. The checks themselves are the core's
(`app.core.ground.policy`), as for every other front end; only which LIT field maps to which cap is declared here.

Also here: the request's body and texts (`check_inputs`), LIT's prediction cache bounded in bytes
(`BoundedCache`), projections cached by everything that decides them and bounded in bytes (`Projections`), UMAP's
fit stopped at the request's deadline (`UmapWithDeadline`), and LIT's static files served without its
traceback on a bad path (`QuietStatic`).
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from lit_nlp.api import components as lit_components
from lit_nlp.components import projection as lit_projection
from lit_nlp.components import umap as lit_umap
from lit_nlp.lib import wsgi_app

from app.core.api import bounded_number, check_length, checkpoint, integer, limits
from app.core.ground.errors import InputError

from .models import lens_of

Caps = Mapping[str, Any]


# ------------------------------------------------------------------ declared settings
@dataclass(frozen=True)
class Whole:
    """A whole number in [low, high]; `high` may read this server's caps. `text`: LIT's spec is a text box, so
    the value goes on as text (LIME parses it itself); `empty`: "" is allowed (LIME's seed)."""
    low: int
    high: int | Callable[[Caps], int]
    text: bool = False
    empty: bool = False

    def check(self, field: str, value, caps: Caps):
        if self.empty and (value is None or (isinstance(value, str) and not value.strip())):
            return ""
        high = self.high(caps) if callable(self.high) else self.high
        x = integer(field, value, low=self.low, high=high)
        return str(x) if self.text else x


@dataclass(frozen=True)
class Real:
    """A finite number in [low, high], refused (not clamped) outside."""
    low: float
    high: float
    text: bool = False

    def check(self, field: str, value, caps: Caps):
        # policy.number takes (low, high]; a tiny step below makes low itself allowed
        x = bounded_number(field, value, low=self.low - 1e-12, high=self.high, clamp=False)
        return str(x) if self.text else x


@dataclass(frozen=True)
class Flag:
    def check(self, field: str, value, caps: Caps):
        if isinstance(value, bool):
            return value
        if value in (0, 1, "0", "1", "true", "false", "True", "False"):
            return str(value).lower() in ("1", "true")
        raise InputError(f"{field}: {str(value)[:40]!r} is not true or false")


@dataclass(frozen=True)
class Text:
    """Text of at most `chars` characters (`None`: the server's text cap)."""
    chars: int | None = 100

    def check(self, field: str, value, caps: Caps):
        if not isinstance(value, str):
            raise InputError(f"{field}: expected text, got {type(value).__name__}")
        check_length(field, value, self.chars or int(caps["max_chars"]))
        return value


@dataclass(frozen=True)
class Names:
    """A list of at most `most` short names (fields to flip, tokens never to flip, concept-set ids)."""
    most: int = 100
    chars: int = 100

    def check(self, field: str, value, caps: Caps):
        if isinstance(value, str):  # LIT's Tokens setting may arrive as its comma-separated text
            value = [v for v in value.split(",") if v.strip()]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise InputError(f"{field}: expected a list of names")
        if len(value) > self.most:
            raise InputError(f"{field}: {len(value):,} names; the limit here is {self.most:,}")
        for v in value:
            check_length(field, v, self.chars)
        return list(value)


@dataclass(frozen=True)
class Small:
    """LIT's own small structures (a salience target, the thresholder's facets), kept whole but at most `size`
    bytes of JSON."""
    size: int = 10_000

    def check(self, field: str, value, caps: Caps):
        try:
            size = len(json.dumps(value))
        except (TypeError, ValueError):
            raise InputError(f"{field}: not a JSON value") from None
        if size > self.size:
            raise InputError(f"{field}: {size:,} bytes of settings; the limit here is {self.size:,}")
        return value


@dataclass(frozen=True)
class Output:
    """One of the model's output fields, by name (HotFlip's and ablation flip's "Prediction key"): required, since
    LIT asserts it deep in the generator."""
    required: bool = True

    def check(self, field: str, value, caps: Caps):
        outputs = caps.get("outputs") or ()
        if not isinstance(value, str) or value not in outputs:
            raise InputError(f"{field}: {str(value)[:40]!r} is not one of the model's outputs {list(outputs)[:8]}")
        return value


@dataclass(frozen=True)
class Declared:
    """A setting that is one of albert-lens's declared options (`capabilities.Option`): checked by the
    declaration, as every front end checks it."""
    option: Any

    def check(self, field: str, value, caps: Caps):
        return self.option.check(value)


SEED = Whole(0, 2**32 - 1)
# every component this server serves, with the settings it reads; a name missing here is not served
SETTINGS: dict[str, dict[str, Any]] = {
    # interpreters
    # (LIT's own salience methods under the names `server.theirs` gives them; ours are added by `make_server`)
    "Grad L2 Norm (LIT's)": {}, "Grad ⋅ Input (LIT's)": {}, "classification": {}, "regression": {},
    "Model-provided salience": {},
    "Integrated Gradients (LIT's)": {"Class to explain": Text(), "Normalize": Flag(),
                                     # LIT's own range is 5-100; hosted, the app's integrated-gradients cap too
                                     "Interpolation steps": Whole(5, lambda c: min(100, int(c["max_ig_steps"])))},
    "LIME (LIT's)": {"_salience_target": Small(), "Output field to explain": Text(), "Class index to explain":
                     Whole(-1, 1000, text=True), "Mask": Text(50), "Kernel width": Whole(1, 10**6, text=True),
                     "Number of samples": Whole(1, lambda c: int(c["max_lime_samples"]), text=True),
                     "Seed": Whole(0, 2**32 - 1, text=True, empty=True)},
    "Salience Clustering": {"Salience Mapper": Text(), "Number of clusters": Whole(2, 100),
                            "Number of top salient tokens to consider per data point": Whole(1, 20),
                            "Number of tokens to display per cluster": Whole(5, 50), "Clustering seed":
                            Whole(0, 2**32 - 1, text=True), "REUSE_CLUSTERING": Flag()},
    "Tabular SHAP": {"Prediction key": Text(), "Sample size": Whole(0, 50)},
    "curves": {"Label": Text(), "Prediction field": Small()},
    "thresholder": {"cost_ratio": Real(0, 10**6), "facets": Small()},
    "pdp": {"feature": Text()},
    "tcav": {"concept_set_ids": Names(10_000), "negative_set_ids": Names(10_000),
             "class_to_explain": Text(), "grad_layer": Text(), "test_size": Real(0.01, 0.99),
             "random_state": SEED, "dataset_name": Text()},
    "nearest neighbors": {"embedding_name": Text(), "num_neighbors": Whole(1, 1000), "use_input": Flag()},
    # generators
    "Ablation Flip": {"Max number of counterfacuals to generate": Whole(1, 50, text=True),
                      "Max number of token ablations": Whole(1, 5, text=True),  # combinations grow as n^k
                      "Comma-separated list of tokens to never flip": Names(), "Prediction key": Output(),
                      "Regression threshold": Real(-10**6, 10**6, text=True), "Fields to ablate": Names(10)},
    "Hotflip": {"Max number of counterfactuals to generate": Whole(1, 50, text=True),
                "Max number of token flips": Whole(1, 5, text=True),
                "Comma-separated list of tokens to never flip": Names(), "Prediction key": Output(),
                "Regression threshold": Real(-10**6, 10**6, text=True), "Fields to flip tokens in": Names(10)},
    "Scrambler": {"Fields to scramble": Names(10)},
    "Word Replacer": {"Substitutions": Text(None), "Fields to replace": Names(10), "ignore_casing": Flag()},
}
PROJECTORS = ("pca", "umap")
# a projection's proj_kw, by projector: what LIT's page sends (n_components) and UMAP's shape knobs, bounded
PROJ_KW: dict[str, dict[str, Any]] = {
    "pca": {"n_components": Whole(2, 3)},
    "umap": {"n_components": Whole(2, 3), "n_neighbors": Whole(2, 100), "min_dist": Real(0, 1),
             "n_epochs": Whole(10, 1000), "random_state": SEED},
}


def settings(component: str, config: Mapping | None, caps: Caps | None = None,
             spec: Mapping | None = None, outputs: Sequence[str] = ()) -> dict | None:
    """`config` with each declared setting checked (and normalised), the undeclared dropped; with the component's
    `spec` (its config_spec), a required setting missing is named; `outputs`, the model's output fields, for the
    settings that name one. Raises InputError naming the component and the setting."""
    if component not in SETTINGS:
        raise InputError(f"{component[:60]!r}: not served here")
    declared = SETTINGS[component]
    required = {k for k, t in (spec or {}).items() if getattr(t, "required", False)}
    required |= {k for k, t in declared.items() if getattr(t, "required", False)}
    if config is None:
        if not required:
            return None
        config = {}
    if not isinstance(config, Mapping):
        raise InputError(f"{component}: its settings must be a JSON object")
    caps = {**(caps or limits()), "outputs": list(outputs)}
    if missing := sorted(k for k in required if k not in config):
        raise InputError(f"{component}: missing settings {missing}; LIT's page sends every one")
    return {k: declared[k].check(f"{component}: {k}", v, caps) for k, v in config.items() if k in declared}


def projection_settings(projector: str, config: Mapping | None, model: str, dataset: str,
                        embeddings: Sequence[str]) -> dict:
    """A projection's settings, an allow-list: its model and dataset are the request's own (LIT keyed its cache by
    the config alone, so one request for ALBERT naming BERT made every later visitor's BERT PCA show ALBERT's
    coordinates), its field one of the model's embeddings, its `proj_kw` bounded. Anything else is refused."""
    what = f"{projector} projection"
    if not isinstance(config, Mapping):
        raise InputError(f"{what}: its settings must be a JSON object")
    allowed = {"dataset_name", "model_name", "field_name", "use_input", "proj_kw"}
    if extra := sorted(set(config) - allowed, key=str):
        raise InputError(f"{what}: {str(extra[0])[:40]!r} is not a setting here; use {sorted(allowed)}")
    if config.get("model_name", model) != model:
        raise InputError(f"{what}: model_name {str(config['model_name'])[:60]!r} is not this request's model "
                         f"{model!r}")
    if config.get("dataset_name", dataset) != dataset:
        raise InputError(f"{what}: dataset_name {str(config['dataset_name'])[:60]!r} is not this request's "
                         f"dataset {dataset!r}")
    field = config.get("field_name")
    if field not in embeddings:
        raise InputError(f"{what}: field_name {str(field)[:60]!r} is not one of the model's embeddings "
                         f"{list(embeddings)}")
    if Flag().check(f"{what}: use_input", config.get("use_input", False), {}):
        raise InputError(f"{what}: use_input: this server's datasets carry no embeddings; project the model's")
    kw = config.get("proj_kw") or {}
    if not isinstance(kw, Mapping):
        raise InputError(f"{what}: proj_kw must be a JSON object")
    declared = PROJ_KW[projector]
    if extra := sorted(set(kw) - set(declared), key=str):
        raise InputError(f"{what}: proj_kw {str(extra[0])[:40]!r} is not allowed here; use {sorted(declared)}")
    kw = {k: declared[k].check(f"{what}: proj_kw {k}", v, {}) for k, v in kw.items()}
    return {"dataset_name": dataset, "model_name": model, "field_name": field, "use_input": False, "proj_kw": kw}


# ------------------------------------------------------------------ a request's inputs
def check_inputs(inputs, most: int | None, what: str = "inputs") -> None:
    """A request's datapoints: a list of at most `most` (hosted: the model's input cap). Their texts are checked
    where they are read (`LensModel`), their count here, before LIT copies or annotates any."""
    if inputs is None:
        return
    if not isinstance(inputs, list):
        raise InputError(f"{what}: expected a list of datapoints")
    if most is not None and len(inputs) > most:
        raise InputError(f"{what}: {len(inputs):,} datapoints in one request; the limit here is {most:,}")


# ------------------------------------------------------------------ bounded caches
def size_of(value, depth: int = 0) -> int:
    """Bytes a cached answer holds, roughly: arrays by their buffers, containers by their items."""
    if isinstance(value, np.ndarray):
        return value.nbytes + 112
    if depth > 6:
        return sys.getsizeof(value)
    if isinstance(value, Mapping):
        return 64 + sum(size_of(k, depth + 1) + size_of(v, depth + 1) for k, v in value.items())
    if isinstance(value, list | tuple):
        return 56 + 8 * len(value) + sum(size_of(v, depth + 1) for v in value)
    return sys.getsizeof(value)


class BoundedCache(OrderedDict):
    """A dict that forgets its least recently used entries past `budget` bytes: LIT's prediction cache kept every
    visitor's datapoints (each with every layer's attention) for the server's life (+626 MB from 30 texts)."""

    def __init__(self, budget: int, items=()):
        super().__init__()
        self.budget, self.used = budget, 0
        self._sizes: dict = {}
        self._lock = threading.RLock()
        for k, v in dict(items).items():
            self[k] = v

    def __setitem__(self, key, value) -> None:
        with self._lock:
            if key in self:
                self.used -= self._sizes.pop(key, 0)
                super().__delitem__(key)
            size = size_of(value)
            super().__setitem__(key, value)
            self._sizes[key] = size
            self.used += size
            while self.used > self.budget and len(self) > 1:
                old, _ = self.popitem(last=False)
                self.used -= self._sizes.pop(old, 0)

    def get(self, key, default=None):
        with self._lock:
            if key not in self:
                return default
            self.move_to_end(key)
            return super().__getitem__(key)

    def __delitem__(self, key) -> None:
        with self._lock:
            super().__delitem__(key)
            self.used -= self._sizes.pop(key, 0)


class _Deadline:
    """UMAP's progress bar's file: each write (at most every 0.1 s of its epochs) checks the request's job, so a
    fit stops at the deadline, a Stop or a client that left, between epochs."""

    def write(self, text: str) -> int:
        checkpoint()
        return len(text)

    def flush(self) -> None:
        checkpoint()


def _held(lock) -> int:
    """How many times this thread holds `lock`, a threading or a multiprocessing RLock (tqdm's console lock is
    one of each)."""
    if hasattr(lock, "_recursion_count"):
        return lock._recursion_count()  # 0 where another thread holds it
    semlock = getattr(lock, "_semlock", None)
    return semlock._count() if semlock is not None and semlock._is_mine() else 0


@contextlib.contextmanager
def _console_lock_given_back():
    """tqdm's `refresh()` takes its console lock, draws, and releases it without try/finally: a deadline raised
    from the bar's file (`_Deadline`) left the lock held by the request's thread, and every later progress bar in
    the process, in any thread (another fit, a model's loading), waited for it forever. What the fit took and
    kept, it gives back."""
    from tqdm import tqdm

    locks = tqdm.get_lock().locks
    before = [_held(lock) for lock in locks]
    try:
        yield
    finally:
        for lock, n in reversed(list(zip(locks, before))):  # in the reverse order of tqdm's acquire
            for _ in range(_held(lock) - n):
                lock.release()


class UmapWithDeadline(lit_umap.UmapModel):
    """LIT's UMAP model, its epochs checked against the running request's deadline."""

    def __init__(self, **umap_kw):
        super().__init__(**umap_kw, tqdm_kwds={"disable": False, "file": _Deadline(), "mininterval": 0.1})

    def fit_transform(self, inputs):
        with _console_lock_given_back():  # UMAP fits here, before the points are handed out
            return super().fit_transform(inputs)

    def predict_minibatch(self, inputs, **kw):
        with _console_lock_given_back():  # a transform runs epochs too
            return super().predict_minibatch(inputs, **kw)


class Projections(lit_projection.ProjectionManager):
    """LIT's projection manager, its fitted projections keyed by the checked settings and the model's weights,
    and forgotten least recently used first past `budget` bytes (each holds its dataset's points and, for UMAP,
    their neighbour graph)."""

    def __init__(self, model_class, budget: int):
        super().__init__(model_class)
        self.budget = budget
        self._instances = OrderedDict()
        self._sizes: dict[Hashable, int] = {}

    def run(self, inputs, model, dataset, model_outputs=None, config=None):
        with self._lock:
            stamp = getattr(getattr(lens_of(model), "clf", None), "weights_stamp", None)
            key = (lit_projection._key_from_dict(config), repr(stamp))
            if key not in self._instances:
                self._instances[key] = self._train_instance(model, dataset, config, name=str(key[0]))
                kw = (config or {}).get("proj_kw") or {}
                points = len(dataset.examples)
                self._sizes[key] = points * 8 * (1024 + int(kw.get("n_components", 3)) +
                                                 2 * int(kw.get("n_neighbors", 15)))
                while sum(self._sizes.values()) > self.budget and len(self._instances) > 1:
                    old, _ = self._instances.popitem(last=False)
                    self._sizes.pop(old, None)
            self._instances.move_to_end(key)
            return self._instances[key].run(inputs, model, dataset, model_outputs, config)


def projectors(budget: int) -> dict[str, lit_components.Interpreter]:
    from lit_nlp.components import pca as lit_pca

    return {"pca": Projections(lit_pca.PCAModel, budget), "umap": Projections(UmapWithDeadline, budget)}


class QuietStatic(wsgi_app.App):
    """LIT's WSGI app, its static files served with a one-line 4xx on a bad path. LIT answered `GET /%00` with
    "Uncaught error: embedded null byte" and a traceback naming the server's paths, and its path check compared
    string prefixes, so a sibling folder whose name began like the client root's ("default-old") was served."""

    def _PathIsSafe(self, path):  # noqa: N802 - LIT's name
        base = os.path.abspath(self._project_root)
        try:
            return os.path.commonpath([base, os.path.abspath(path)]) == base
        except ValueError:  # another drive, a mix of absolute and relative
            return False

    def _ServeStaticFile(self, request, path):  # noqa: N802 - LIT's name
        try:  # (a control character in the URL never gets here: LensLitApp answers it 400 first)
            return super()._ServeStaticFile(request, path)
        except Exception:  # noqa: BLE001 - an unreadable name: no traceback, no path
            return self.respond(request, "not found", "text/plain", 404)
