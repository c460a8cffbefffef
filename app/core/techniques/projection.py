"""Project both models' sentence embeddings to 2-D, aligned so that agreement is visible.

UMAP (the study's settings: random_state=0, transform_seed=0, metric cosine) or PCA per model; the second
projection is then aligned to the first by orthogonal Procrustes, since rotation and reflection are arbitrary
in either projection. Agreement is also measured in the original spaces: the share of k nearest neighbours the two
models have in common. Embeddings are cached on disk per model, dataset, layer and pooling.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..declare.capabilities import PROJECTIONS
from ..declare.results import ProjectionResult
from ..execution.engine import Engine
from ..execution.inference import Prediction, from_logits, predict
from ..execution.inputs import dataset_of
from ..execution.pair import Pair
from ..ground.data import Dataset, Example
from ..ground.errors import InputError
from ..ground.policy import integer
from ..ground.runtime import cache_dir
from ..models.loading import Classifier, ModelHead
from .embeddings import embed, embed_and_predict

# PROJECTIONS: UMAP or PCA, as the capabilities declare them


log = logging.getLogger("albert_lens.projection")
CACHE_MB = 1024.0  # embeddings kept on disk (ALBERT_LENS_EMBEDDING_CACHE_MB): the least recently used go first


def _key(clf: ModelHead, examples: Sequence[Example], layer: int | str, pooling: str) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([*clf.identity, layer, pooling, clf.max_length]).encode())  # retrained: embedded again
    for ex in examples:
        h.update("\x1f".join(ex.texts).encode("utf-8", "surrogatepass") + b"\x1e")
    return h.hexdigest()[:24]


def _cache_path(clf: ModelHead, examples: Sequence[Example], layer: int | str, pooling: str) -> Path:
    return cache_dir() / "embeddings" / f"{_key(clf, examples, layer, pooling)}.npy"


_WARNED: set[str] = set()  # cache folders already reported unusable


def _broken_cache(path: Path, exc: OSError) -> None:
    """A cache folder that can't be used (replaced by a file, a link to nowhere, a full or read-only disk): the work
    is done without it, and the operator is told once per folder."""
    folder = str(path.parent)
    if folder not in _WARNED:
        _WARNED.add(folder)
        log.warning("embedding cache %s is unusable (%s: %s); computing without it", folder, type(exc).__name__,
                    exc.strerror or exc)


def _is_cached(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError as exc:
        _broken_cache(path, exc)
        return False


def _load_cached(path: Path, n: int) -> np.ndarray | None:
    if _is_cached(path):
        try:
            arr = np.load(path, allow_pickle=False)
            if arr.shape[0] == n:
                os.utime(path)  # used: the last to be pruned
                return arr
        except (OSError, ValueError):
            try:
                path.unlink(missing_ok=True)  # a torn write: recompute
            except OSError as exc:
                _broken_cache(path, exc)
    return None


def _store(path: Path, arr: np.ndarray) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, arr)
        tmp.replace(path)
        _prune(path.parent, keep=path)
    except OSError as exc:
        _broken_cache(path, exc)


def _cache_cap_bytes() -> float:
    raw = os.environ.get("ALBERT_LENS_EMBEDDING_CACHE_MB", "").strip()
    try:
        mb = float(raw) if raw else CACHE_MB
    except ValueError:
        log.warning("ALBERT_LENS_EMBEDDING_CACHE_MB=%r is not a number of megabytes; using %s", raw, CACHE_MB)
        mb = CACHE_MB
    return mb * 2**20


def _prune(folder: Path, keep: Path) -> None:
    """Keep the cache under its cap, least recently used first: a long-running app (a Space whose visitors
    upload their own datasets) would otherwise fill its disk."""
    cap = _cache_cap_bytes()
    files = []
    for f in folder.glob("*.npy"):
        try:
            st = f.stat()
        except OSError:  # pruned by another thread
            continue
        files.append((st.st_mtime_ns, st.st_size, f))
    total = sum(size for _, size, _ in files)
    for _, size, f in sorted(files, key=lambda t: t[0]):
        if total <= cap:
            break
        if f != keep:
            f.unlink(missing_ok=True)
            total -= size


def in_cache(clf: ModelHead, examples: Sequence[Example], layer: int | str, pooling: str) -> bool:
    """Whether these embeddings are on disk already (a projection says which of its vectors it computed)."""
    return _is_cached(_cache_path(clf, examples, layer, pooling))


def cached_embeddings(clf: Classifier, examples: Sequence[Example], *, layer: int = -1, pooling: str = "cls",
                      progress=None) -> tuple[np.ndarray, bool]:
    """(embeddings, came_from_cache)."""
    path = _cache_path(clf, examples, layer, pooling)
    arr = _load_cached(path, len(examples))
    if arr is not None:
        return arr, True
    arr = embed(clf, examples, layer=layer, pooling=pooling, progress=progress)
    _store(path, arr)
    return arr, False


def cached_predictions(clf: Classifier, examples: Sequence[Example], progress=None, *,
                       embedding: tuple[int, str] | None = None) -> tuple[Prediction, bool]:
    """(prediction, came_from_cache): the logits kept beside the embeddings, since a projection re-run with
    another projection, layer or colour would otherwise predict the whole dataset again (6 s for SST-2 dev).
    `embedding` (layer, pooling): the embeddings a projection is about to ask for, computed in the same pass
    when neither is cached (one pass over the encoder, not two) and cached for it."""
    path = _cache_path(clf, examples, "logits", "")
    arr = _load_cached(path, len(examples))
    if arr is not None:
        return from_logits(clf, arr), True
    vectors = None if embedding is None else _cache_path(clf, examples, *embedding)
    if vectors is not None and not _is_cached(vectors):
        t0 = time.perf_counter()
        emb, logits = embed_and_predict(clf, examples, layer=embedding[0], pooling=embedding[1], progress=progress)
        _store(vectors, emb)
        _store(path, logits)
        return from_logits(clf, logits, time.perf_counter() - t0), False
    pred = predict(clf, examples, progress=progress)
    _store(path, pred.logits)
    return pred, False


def keep(clf: Classifier, examples: Sequence[Example], pred: Prediction) -> None:
    """Keep a pass made elsewhere (Benchmark's timed predictions, with `Prediction.cls`) for whoever reads these
    examples next by content: Find slices and a projection at the top layer's [CLS] then run no model."""
    _store(_cache_path(clf, examples, "logits", ""), pred.logits)
    if pred.cls is not None:
        _store(_cache_path(clf, examples, -1, "cls"), pred.cls)


def vectors_batch(pair, batch: Sequence[Example], layer: int = -1, pooling: str = "cls", progress=None
                  ) -> list[np.ndarray]:
    """Batch function: each model's logits, then each model's embeddings at (`layer`, `pooling`), through this
    process's cache (one pass over the encoder for both when neither is cached). `progress`: the predictions
    two thirds, the embeddings (when the predictions' pass didn't make them) the rest."""
    models = pair.models
    top = min(clf.model.config.num_hidden_layers for clf in models)  # checked before any forward pass
    layer = integer("layer", layer, low=-1, high=top)
    logits = []
    for k, clf in enumerate(models):
        step = (lambda d, n, k=k: progress(2 * (k * n + d), 6 * n)) if progress else None
        logits.append(cached_predictions(clf, batch, progress=step, embedding=(layer, pooling))[0].logits)
    step = (lambda d, n: progress(2 * n + d, 3 * n)) if progress else None
    embs, _ = pair_embeddings(models, batch, layer=layer, pooling=pooling, progress=step)
    if progress:
        progress(1, 1)
    return logits + embs


vectors_batch.combine = "concat"
vectors_batch.sorts = True  # in process: the whole sample at once, as the cache keys it
vectors_batch.reports_progress = True


def pair_embeddings(models: Sequence[ModelHead], examples: Sequence[Example], *, layer: int = -1,
                    pooling: str = "cls", progress=None,
                    compute: Callable[[Sequence[Example]], list[np.ndarray]] | None = None
                    ) -> tuple[list[np.ndarray], list[bool]]:
    """Both models' embeddings through the same cache; `compute` (examples -> one array per model, e.g. a Ray
    engine's `embed` batch function) replaces the in-process computation of what is missing; then `models` may be heads
    (`loading.ModelHead`), which key the cache as the loaded models do."""
    if compute is None:
        embs, cached = [], []
        for m, clf in enumerate(models):
            step = (lambda d, n, m=m: progress(m * n + d, 2 * n)) if progress else None
            e, c = cached_embeddings(clf, examples, layer=layer, pooling=pooling, progress=step)
            embs.append(e)
            cached.append(c)
        return embs, cached
    paths = [_cache_path(clf, examples, layer, pooling) for clf in models]
    found = [_load_cached(p, len(examples)) for p in paths]
    if all(f is not None for f in found):
        return found, [True] * len(models)
    embs = compute(examples)
    for p, e in zip(paths, embs):
        _store(p, e)
    return embs, [False] * len(models)


def project(x: np.ndarray, projection: str = "umap", *, n_neighbors: int = 15, seed: int = 0) -> np.ndarray:
    if projection not in PROJECTIONS:
        raise InputError(f"projection: {projection!r} is not one of {list(PROJECTIONS)}")
    if len(x) < 4:
        raise InputError(f"dataset: {len(x)} examples are too few to project; give at least 4")
    if projection == "pca":
        from sklearn.decomposition import PCA  # deferred: scikit-learn: loaded on first use

        return PCA(n_components=2, random_state=seed).fit_transform(x).astype(np.float32)
    import umap  # deferred: umap-learn compiles with numba on first use

    _cache_umap_kernels()
    reducer = umap.UMAP(n_components=2, metric="cosine", random_state=seed, transform_seed=seed,
                        n_neighbors=min(n_neighbors, len(x) - 1), n_jobs=1)
    with _torch_threads_kept():
        return reducer.fit_transform(x).astype(np.float32)


@contextlib.contextmanager
def _torch_threads_kept() -> Iterator[None]:
    """UMAP's numba loops on PyTorch's thread count, and PyTorch's count as it was afterwards. numba's OpenMP
    layer shares PyTorch's libgomp, and each parallel loop it starts sets the calling thread's OpenMP team to
    numba's own count (every core unless NUMBA_NUM_THREADS says less): after a process's first UMAP, a process
    that held PyTorch to fewer threads with `torch.set_num_threads` alone (a test worker; the app's workers also
    get NUMBA_NUM_THREADS) ran PyTorch on every core for the rest of its life, its spinning team slowing the
    processes beside it (benchmarks/README.md, the test suite)."""
    import torch

    threads = torch.get_num_threads()
    try:
        import numba  # deferred: umap-learn's compiler, loaded with it

        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    except (ImportError, ValueError, RuntimeError) as exc:  # numba's count is only a share; PyTorch's is kept below
        log.debug("numba threads: %s", exc)
    try:
        yield
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


_UMAP_CACHED = False


def _cache_umap_kernels() -> None:
    """Have numba keep UMAP's compiled kernels on disk: umap-learn compiles most of them without numba's cache,
    so every process (each app worker, each CLI run, each test worker) spent 9-16 s of CPU compiling the same
    code on its first fit. Numba writes its cache beside the package's sources, or in the user's cache folder
    where those are read-only; a process that cannot write it compiles as before."""
    global _UMAP_CACHED
    if _UMAP_CACHED:
        return
    _UMAP_CACHED = True
    import importlib

    from numba.core.dispatcher import Dispatcher

    for name in ("umap.umap_", "umap.layouts", "umap.distances", "umap.utils", "umap.sparse", "umap.spectral"):
        try:
            module = importlib.import_module(name)
        except ImportError:  # another umap-learn's layout: nothing to cache there
            continue
        for obj in vars(module).values():
            if isinstance(obj, Dispatcher) and obj._cache.__class__.__name__ == "NullCache":
                try:
                    obj.enable_caching()
                except Exception as exc:  # noqa: BLE001 - no cache is only slower
                    log.debug("numba cache for %s: %s", getattr(obj, "__name__", obj), exc)


def warm_up() -> None:
    """Fit UMAP once on 64 random points: numba compiles its kernels on a process's first fit, or loads them from
    its cache (`_cache_umap_kernels`), which the app's first Projection click would otherwise wait for."""
    project(np.random.default_rng(0).normal(size=(64, 16)).astype(np.float32), "umap")


def procrustes_align(reference: np.ndarray, moving: np.ndarray) -> tuple[np.ndarray, float]:
    """Rotate/reflect (and scale, translate) `moving` onto `reference`; returns it, drawn at the reference's
    size, and the disparity left after the best rotation, reflection and scale, as `scipy.spatial.procrustes`
    defines it (0 = identical shapes, 1 = unrelated): one minus the squared sum of the singular values."""
    from scipy.linalg import orthogonal_procrustes  # deferred: scipy: loaded on first use

    ref_c = reference - reference.mean(0)
    mov_c = moving - moving.mean(0)
    ref_n = np.linalg.norm(ref_c) or 1.0
    mov_n = np.linalg.norm(mov_c) or 1.0
    r, fit = orthogonal_procrustes(mov_c / mov_n, ref_c / ref_n)  # fit: the sum of the singular values
    aligned = (mov_c / mov_n) @ r * ref_n + reference.mean(0)
    return aligned.astype(np.float32), float(max(0.0, 1.0 - fit ** 2))


def neighbours_k(n: int, k: int) -> int:
    """The k the overlap can use on n points: at most n - 2, since with n - 1 every point's neighbours are all
    the others and any two spaces agree (0 when fewer than 3 points: no score)."""
    return max(0, min(k, n - 2))


def knn_overlap(a: np.ndarray, b: np.ndarray, k: int = 10) -> float:
    """Mean share of each point's k nearest neighbours (cosine) that both embedding spaces agree on; k is capped
    by `neighbours_k`, NaN when no k is informative."""
    from sklearn.neighbors import NearestNeighbors  # deferred: scikit-learn: loaded on first use

    k = neighbours_k(len(a), k)
    if k < 1:
        return float("nan")
    sets = []
    for x in (a, b):
        nn = NearestNeighbors(n_neighbors=k + 1, metric="cosine").fit(x)
        idx = nn.kneighbors(x, return_distance=False)
        sets.append([set(row[row != i][:k]) for i, row in enumerate(idx)])
    return float(np.mean([len(s & t) / k for s, t in zip(*sets)]))


def knn_chance(n: int, k: int = 10) -> float:
    """The overlap two unrelated spaces would score: each point's k neighbours drawn at random from the other
    n - 1 points share k * k / (n - 1) of them on average, a share of k / (n - 1). An overlap means something only
    well above it (NaN when no k is informative)."""
    k = neighbours_k(n, k)
    return float("nan") if k < 1 else k / (n - 1)


@dataclass
class Projection:
    coords: list[np.ndarray]  # per model, (n, 2); the second aligned to the first
    embeddings_cached: list[bool]
    disparity: float
    knn_overlap: float
    k: int
    projection: str
    layer: int
    pooling: str


def project_pair(models: Sequence[ModelHead], examples: Sequence[Example], *, projection: str = "umap",
                 layer: int = -1, pooling: str = "cls", k: int = 10, progress=None,
                 compute: Callable[[Sequence[Example]], list[np.ndarray]] | None = None) -> Projection:
    embs, cached = pair_embeddings(models, examples, layer=layer, pooling=pooling, progress=progress,
                                   compute=compute)
    coords = [project(e, projection) for e in embs]
    aligned, disparity = procrustes_align(coords[0], coords[1])
    return Projection([coords[0], aligned], cached, disparity, knn_overlap(embs[0], embs[1], k),
                      neighbours_k(len(examples), k), projection, layer, pooling)


def projection_table(proj: Projection, models: Sequence[ModelHead], examples: Sequence[Example],
                     predictions: Sequence, rows: Sequence[int] | None = None) -> list[dict]:
    """Long-format rows (one per model and example) for plots and CSV export; each row also carries every
    model's prediction of its example and whether they differ, for hover text and colouring by disagreement, its
    position (`index`) and its row in the dataset (`row`: `rows`, the dataset's own numbers; else index + 1)."""
    numbers = list(rows) if rows is not None else list(range(1, len(examples) + 1))
    labels = [[str(p) for p in pred.predicted] for pred in predictions]
    out = []
    for clf, xy, own, pred in zip(models, proj.coords, labels, predictions):
        for i, ex in enumerate(examples):
            gold = ex.label
            out.append({"model": clf.name, "index": i, "row": numbers[i], "x": float(xy[i, 0]), "y": float(xy[i, 1]),
                         "text": " / ".join(ex.texts), "gold": "" if gold is None else str(gold),
                         "prediction": own[i], "correct": "" if gold is None else str(pred.predicted[i] == gold),
                         **{f"{m.name} prediction": lab[i] for m, lab in zip(models, labels)},
                         "models": "disagree" if len({lab[i] for lab in labels}) > 1 else "agree"})
    return out


# ------------------------------------------------------------------ the capability's runner (`api.run` calls it)


def run_project(pair: Pair, *, projection: str, layer: int, pooling: str, dataset: str | None = None,
                limit: int | str | None = None, progress=None, engine: Engine | None = None,
                visitor: bool = True) -> ProjectionResult:
    """Both models' sentence embeddings projected to 2-D and aligned, with how far their neighbourhoods agree;
    on a Ray `engine` the predictions and embeddings are computed on its workers (the driver holds no weights).
    The layer is checked again where the weights are, before any forward pass (`vectors_batch`)."""
    ds = dataset_of(pair, dataset, limit, default=500, visitor=visitor)
    _, preds, proj = projected(pair, ds, projection=projection, layer=layer, pooling=pooling, progress=progress,
                               engine=engine)
    return projection_result(pair.heads, ds, proj, preds)


def projected(pair: Pair, ds: Dataset, *, projection: str, layer: int, pooling: str, progress=None,
              engine: Engine | None = None) -> tuple[list[np.ndarray], list[Prediction], Projection]:
    """(each model's logits then embeddings, their predictions, the aligned projection) of `ds`, through the
    engine: what a projection and an input placed in it (`locate`) both read."""
    heads = pair.heads  # a Ray driver reads labels and names, not weights
    had = [in_cache(h, ds.examples, layer, pooling) for h in heads]
    arrays = (engine or Engine()).run(pair, vectors_batch, ds.examples, params={"layer": layer, "pooling": pooling},
                                      progress=progress)
    preds = [from_logits(h, lg) for h, lg in zip(heads, arrays[:2])]
    proj = project_pair(heads, ds.examples, projection=projection, layer=layer, pooling=pooling,
                        compute=lambda exs: arrays[2:])
    proj.embeddings_cached = had  # whether each model's vectors were on disk before this request
    return arrays, preds, proj


def projection_result(models, ds: Dataset, proj: Projection, preds) -> ProjectionResult:
    return ProjectionResult(
        dataset=ds.name, n=len(ds), projection=proj.projection, layer=proj.layer, pooling=proj.pooling,
        knn_overlap=proj.knn_overlap, k=proj.k, knn_chance=knn_chance(len(ds), proj.k),
        procrustes_disparity=proj.disparity, embeddings_cached=proj.embeddings_cached,
        points=projection_table(proj, models, ds.examples, preds, ds.row_numbers()),
        texts=[list(e.texts) for e in ds.examples])
