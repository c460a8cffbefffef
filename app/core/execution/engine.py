"""Batch functions run in process (default) or on a Ray cluster: one model pair per worker, data split in batches,
results put back in input order, identical to the local run.

A batch function is a module-level function `fn(pair, batch, **params)` of the technique that owns it
(`embeddings.embed_batch`, `inference.logits_batch`, `benchmark.timed_batch`, `attacks.attack_batch`,
`benchmark.profile_batch`, `facts.facts_batch`, `timing.latency_batch`, `explanation.explain_batch`); its `combine`
attribute says how batches join: "concat" (per-model arrays), "timed" (arrays joined, seconds summed), "rows"
(rows with a batch-relative "index") or "whole" (the whole sample in one call, on one worker). The engine is
given the function, local and Ray alike, so it knows no technique and the same function runs a batch in both
engines. An `Engine` keeps its Ray workers between runs, so a report's sections load each model pair once per
worker.

In process a batch function can do more than a Ray worker can, which can't call back into this process: one whose
`reports_progress` is set takes the caller's `progress` and reports its own steps (examples, not batches); one
whose `sorts` is set gets the whole sample in one call (it orders its inputs by length itself, and 256-example
chunks would pad more); and the caller's `hooks` (a cancel event, a callback per finished row) reach it. The
facade therefore calls every batch function the same way, whichever engine runs it.
"""
from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..ground import runtime
from ..ground.data import Example
from ..ground.errors import InputError, WorkerFailed
from ..models.registry import PairSpec
from .pair import Pair

COMBINES = ("concat", "timed", "rows", "whole")
ENGINES = ("local", "ray")
WORKER_PREFIX = "albert-lens-worker-"
BatchFn = Callable[..., object]


def combine_of(fn: BatchFn) -> str:
    """How the batches of `fn` join; a function that declares none is refused before any work."""
    how = getattr(fn, "combine", None)
    if not callable(fn) or how not in COMBINES:
        raise InputError(f"fn: {getattr(fn, '__name__', fn)!r} is not a batch function (a function whose `combine` "
                         f"is one of {COMBINES})")
    return how


def run_batch(pair, fn: BatchFn, batch: list[Example], params: dict):
    """One batch through one batch function on a loaded Pair; the unit of work of both engines."""
    return fn(pair, batch, **params)


def _offset_rows(hook: Callable[[dict], None], offset: int) -> Callable[[dict], None]:
    """A per-row callback of a "rows" batch function, its batch-relative index made the sample's."""
    return lambda row: hook(row | {"index": row["index"] + offset})


def _combine(how: str, parts: list, offsets: list[int]):
    if how == "whole":
        return parts[0]
    if how == "concat":
        return [np.concatenate([p[k] for p in parts]) for k in range(len(parts[0]))]
    if how == "timed":
        return [{"logits": np.concatenate([p[k]["logits"] for p in parts]),
                 "seconds": float(sum(p[k]["seconds"] for p in parts))} for k in range(len(parts[0]))]
    rows = []
    for part, off in zip(parts, offsets):
        for r in part:
            rows.append(r | {"index": r["index"] + off})
    return rows


class Engine:
    """Where batch functions run. `Engine()` is in process; `Engine("ray", address, workers)` uses a Ray cluster
    (a local one when no address is given). Use as a context manager, or call `close()`, to free the workers."""

    def __init__(self, kind: str = "local", address: str | None = None, workers: int = 2, batch_size: int = 256):
        if kind not in ENGINES:
            raise InputError(f"engine: {kind!r} is not 'local' or 'ray'")
        if workers < 1:
            raise InputError(f"workers: {workers} must be at least 1")
        if batch_size < 1:
            raise InputError(f"batch: {batch_size} must be at least 1")
        self.kind, self.address, self.workers, self.batch_size = kind, address, workers, batch_size
        self._actors: dict[str, list] = {}

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    def describe(self) -> dict:
        if self.is_local:
            return {"engine": "local"}
        return {"engine": "ray", "workers": self.workers, "address": self.address or "local Ray instance"}

    def run(self, pair: Pair | PairSpec, fn: BatchFn, examples: Sequence[Example], *, params: dict | None = None,
            batch_size: int | None = None, progress: Callable[[int, int], None] | None = None,
            hooks: dict | None = None):
        """Run `fn` over `examples`; returns what its batches return, joined as its `combine` says, in input
        order. `pair`: a loaded Pair (in process its models answer) or a spec (Ray's workers load either's).
        `hooks`: keyword arguments `fn` takes in process only (see the module's docstring); `on_row`, a
        "rows" function's callback, sees each row's index in `examples`."""
        params = params or {}
        how = combine_of(fn)
        if not examples:
            raise InputError("dataset: no examples to process")
        spec = pair.spec if isinstance(pair, Pair) else pair
        whole = how == "whole" or (self.is_local and getattr(fn, "sorts", False))
        size = len(examples) if whole else (batch_size or self.chunk(len(examples), spec))
        batches = [list(examples[i : i + size]) for i in range(0, len(examples), size)]
        offsets = [i * size for i in range(len(batches))]
        if self.is_local:
            loaded = pair if isinstance(pair, Pair) else Pair(spec)
            own = bool(progress) and getattr(fn, "reports_progress", False) and len(batches) == 1
            parts = []
            for k, b in enumerate(batches):
                kw = dict(params)
                for name, hook in (hooks or {}).items():
                    kw[name] = _offset_rows(hook, offsets[k]) if name == "on_row" and how == "rows" else hook
                if own:
                    kw["progress"] = progress
                parts.append(run_batch(loaded, fn, b, kw))
                if progress and not own:
                    progress(k + 1, len(batches))
            return _combine(how, parts, offsets)
        return _combine(how, self._run_ray(spec, fn, batches, params, progress), offsets)

    GPU_CHUNK = 16384  # examples per local run on a GPU pair: each chunk is tokenised and length-sorted alone

    def chunk(self, n: int, spec: PairSpec | None = None) -> int:
        """Batch size: at most `batch_size`, small enough that every Ray worker gets about two batches; in
        process on a GPU pair, GPU_CHUNK (its batches fill the device only when many texts sort together)."""
        if self.is_local:
            on_gpu = spec is not None and torch.device(spec.models[0].device).type != "cpu"
            return max(self.batch_size, self.GPU_CHUNK) if on_gpu else self.batch_size
        return max(1, min(self.batch_size, -(-n // (2 * self.workers))))

    # ------------------------------------------------------------------ Ray
    def _workers(self, spec: PairSpec) -> list:
        import ray  # deferred: optional: only --engine ray

        key = repr(spec)
        if key in self._actors:
            return self._actors[key]
        if not ray.is_initialized():
            if self.address:
                ray.init(address=self.address, ignore_reinit_error=True, log_to_driver=False)
            else:
                ray.init(num_cpus=self.workers, include_dashboard=False, ignore_reinit_error=True,
                         log_to_driver=False)
        tag = uuid.uuid4().hex[:8]
        spec, gpus = worker_device(spec, float(ray.cluster_resources().get("GPU", 0)), self.workers)
        actors = [_worker_class().options(name=f"{WORKER_PREFIX}{tag}-{i}", num_gpus=gpus).remote(spec)
                  for i in range(self.workers)]
        self._actors[key] = actors
        return actors

    def _run_ray(self, spec, fn, batches, params, progress):
        import ray  # deferred: optional: only --engine ray

        actors = self._workers(spec)
        pending = {actors[k % len(actors)].run.remote(fn, b, params): k for k, b in enumerate(batches)}
        parts: list = [None] * len(batches)
        done = 0
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    k = pending.pop(ref)
                    try:
                        parts[k] = ray.get(ref)
                    except ray.exceptions.RayActorError as exc:
                        raise WorkerFailed(
                            f"engine: a Ray worker died while processing batch {k + 1} of {len(batches)} "
                            f"({type(exc).__name__}); nothing was written, run it again to retry") from None
                    done += 1
                    if progress:
                        progress(done, len(batches))
        except BaseException:
            self.close()  # a dead or interrupted worker set is not reused
            raise
        return parts

    def close(self) -> None:
        if not self._actors:
            return
        import ray  # deferred: optional: only --engine ray

        for actors in self._actors.values():
            for a in actors:
                try:
                    ray.kill(a)
                except Exception:  # noqa: BLE001 - already gone
                    pass
        self._actors.clear()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_WORKER = None


def worker_device(spec: PairSpec, cluster_gpus: float, workers: int) -> tuple[PairSpec, float]:
    """(the spec a Ray worker loads, the GPUs it asks for). A pair on a GPU asks each worker for its share of
    the cluster's GPUs (whole ones when there are enough) and loads on the one Ray gives it, which the worker
    sees as cuda:0; a cluster without GPUs runs the pair's work on its workers' CPUs, at fp32 where the
    precision is a GPU one."""
    device = spec.models[0].device
    if torch.device(device).type != "cuda":
        return spec, 0.0
    if cluster_gpus > 0:
        share = min(1.0, cluster_gpus / max(1, workers))
        share = float(int(share)) if share >= 1 else share
        where, precision = "cuda:0", spec.models[0].precision
    else:
        share, where = 0.0, "cpu"
        precision = "fp32" if spec.models[0].precision == "fp16" else spec.models[0].precision
    models = tuple(dataclasses.replace(m, device=where, precision=precision) for m in spec.models)
    return dataclasses.replace(spec, models=models), share


def _worker_class():
    """The Ray actor class, defined once (Ray registers it on first use)."""
    global _WORKER
    if _WORKER is None:
        import ray  # deferred: optional: only --engine ray

        @ray.remote(num_cpus=1)
        class PairWorker:
            def __init__(self, spec):
                runtime.prepare()
                torch.set_num_threads(1)
                self.pair = Pair(spec)
                _ = self.pair.models  # load once per worker

            def run(self, fn, batch, params):
                return run_batch(self.pair, fn, batch, params)

        _WORKER = PairWorker
    return _WORKER


def run(spec: PairSpec, fn: BatchFn, examples: Sequence[Example], *, params: dict | None = None,
        engine: str = "local", address: str | None = None, workers: int = 1, batch_size: int = 256,
        progress: Callable[[int, int], None] | None = None):
    """One batch function's run on a fresh engine (workers freed afterwards)."""
    with Engine(engine, address, workers, batch_size) as e:
        return e.run(spec, fn, examples, params=params, progress=progress)
