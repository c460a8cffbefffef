"""Batch jobs in process (default) or on a Ray cluster: one model pair per worker, data split in batches,
results put back in input order, identical to the local run.

Jobs: `embed` (sentence embeddings of both models), `predict` (logits of both models), `attack` (paired attacks).
The same function runs a batch in both engines, so the two cannot drift apart.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .data import Example
from .errors import InputError, LensError
from .registry import PairSpec

JOBS = ("embed", "predict", "attack")


def run_batch(pair, job: str, batch: list[Example], params: dict):
    """One batch of one job on a loaded Pair; the unit of work of both engines."""
    if job == "embed":
        from .embeddings import embed

        return [embed(clf, batch, layer=params.get("layer", -1), pooling=params.get("pooling", "cls"))
                for clf in pair.models]
    if job == "predict":
        from .inference import predict

        return [predict(clf, batch).logits for clf in pair.models]
    if job == "attack":
        from .attacks import attack_pair

        return attack_pair(pair.models, params["recipe"], batch, query_budget=params.get("query_budget", 200),
                           time_limit=params.get("time_limit", 60.0))
    raise InputError(f"job: {job!r} is not one of {JOBS}")


def _combine(job: str, parts: list, offsets: list[int]):
    if job in ("embed", "predict"):
        return [np.concatenate([p[k] for p in parts]) for k in range(len(parts[0]))]
    rows = []
    for part, off in zip(parts, offsets):
        for r in part:
            rows.append(r | {"index": r["index"] + off})
    return rows


def run(spec: PairSpec, job: str, examples: Sequence[Example], *, params: dict | None = None,
        engine: str = "local", address: str | None = None, workers: int = 1, batch_size: int = 256,
        progress: Callable[[int, int], None] | None = None):
    """Run `job` over `examples` with the pair `spec`; returns per-model arrays (embed/predict) or attack rows."""
    params = params or {}
    if job not in JOBS:
        raise InputError(f"job: {job!r} is not one of {JOBS}")
    batches = [list(examples[i : i + batch_size]) for i in range(0, len(examples), batch_size)]
    offsets = [i * batch_size for i in range(len(batches))]
    if not batches:
        raise InputError("dataset: no examples to process")
    if engine == "local":
        from .pair import Pair

        pair = Pair(spec)
        parts = []
        for k, b in enumerate(batches):
            parts.append(run_batch(pair, job, b, params))
            if progress:
                progress(k + 1, len(batches))
        return _combine(job, parts, offsets)
    if engine == "ray":
        return _combine(job, _run_ray(spec, job, batches, params, address, workers, progress), offsets)
    raise InputError(f"engine: {engine!r} is not 'local' or 'ray'")


def _run_ray(spec, job, batches, params, address, workers, progress):
    import ray

    if not ray.is_initialized():
        if address:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        else:
            ray.init(num_cpus=max(workers, 1), include_dashboard=False, ignore_reinit_error=True,
                     log_to_driver=False)

    @ray.remote(num_cpus=1)
    class PairWorker:
        def __init__(self, spec):
            import torch

            from app.core.pair import Pair

            torch.set_num_threads(1)
            self.pair = Pair(spec)
            _ = self.pair.models  # load once per worker

        def run(self, job, batch, params):
            return run_batch(self.pair, job, batch, params)

    import uuid

    tag = uuid.uuid4().hex[:8]
    actors = [PairWorker.options(name=f"{WORKER_PREFIX}{tag}-{i}").remote(spec) for i in range(max(1, workers))]
    pending = {actors[k % len(actors)].run.remote(job, b, params): k for k, b in enumerate(batches)}
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
                        f"({type(exc).__name__}); nothing was written, re-run the job to retry") from None
                done += 1
                if progress:
                    progress(done, len(batches))
    finally:
        for a in actors:
            ray.kill(a)
    return parts


WORKER_PREFIX = "albert-lens-worker-"


class WorkerFailed(LensError):
    pass
