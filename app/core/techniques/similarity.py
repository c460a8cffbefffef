"""Representational similarity of two models, layer by layer: linear CKA (Kornblith et al., 2019, "Similarity of
Neural Network Representations Revisited").

CKA compares two sets of representations of the same examples through their example-by-example similarity
(Gram) matrices, so two models of different widths compare directly, and it is unchanged by an orthogonal rotation
or an isotropic scaling of either. Over many examples it is accumulated in minibatches with the unbiased HSIC
estimator (Nguyen, Raghu and Kornblith, 2021, "Do Wide and Deep Networks Learn the Same Things?"): memory is a
batch's Gram matrices, whatever the number of examples, and the estimate does not depend on the batch size in
expectation. The interval of each cell is a bootstrap over the minibatches; where there are fewer than
`INTERVAL_MINIBATCHES` of them (a brushed slice of 40 sentences is one, whose "interval" was its value), it comes
from half-samples of the examples inside each minibatch instead (`HALF_SAMPLES` draws of half the rows without
replacement: the spread of a half-sample's estimate about the full one's is the full estimate's own, as for a
mean, and no row is repeated, which the unbiased estimator would read as a perfect match).
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable

import numpy as np

from ..declare.results import SimilarityResult
from ..execution.engine import Engine
from ..execution.inputs import dataset_of
from ..execution.pair import Pair
from ..ground.errors import InputError

# a layer whose centred vectors are this small a share of the vectors themselves is constant across examples
# (float32 rounding of one vector repeated leaves ~1e-7)
CONSTANT = 1e-5


def _spread(layers: np.ndarray) -> np.ndarray:
    """Per layer: ||X - mean(X)|| / ||X||, 0 for a vector repeated for every example."""
    x = np.asarray(layers, dtype=np.float64)
    centred = np.linalg.norm(x - x.mean(1, keepdims=True), axis=(1, 2))
    return centred / np.maximum(np.linalg.norm(x, axis=(1, 2)), 1e-300)


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Full-batch linear CKA of (n, p) and (n, q) representations (the biased, closed form): ||YᵀX||² /
    (||XᵀX|| ||YᵀY||) on column-centred features."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    x = x - x.mean(0)
    y = y - y.mean(0)
    xy = np.linalg.norm(y.T @ x) ** 2
    return float(xy / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)))


def gram(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x @ x.T


def hsic1(k: np.ndarray, lm: np.ndarray) -> float:
    """The unbiased HSIC estimator of Song et al. (2012) for two n × n Gram matrices (n ≥ 4)."""
    return float(hsic_table(np.asarray(k)[None], np.asarray(lm)[None])[0, 0])


def hsic_table(gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """`hsic1` of every pair of Gram matrices, (layers X, n, n) × (layers Y, n, n) -> (layers X, layers Y), as
    matrix products over the stacks: a run of few minibatches takes hundreds of half-samples, each a table of
    layers², and one call per cell (`hsic1`) spent most of a CKA's time in Python."""
    # copies: the caller's matrices keep their diagonals
    k, lm = (_zero_diagonal(np.array(g, dtype=np.float64)) for g in (gx, gy))
    return _hsic_table(k, lm)


def _hsic_table(k: np.ndarray, lm: np.ndarray) -> np.ndarray:
    """`hsic_table` of Gram stacks whose diagonals are zero already (a principal submatrix's are too)."""
    n = k.shape[-1]
    if n < 4:
        raise InputError(f"minibatch: the unbiased HSIC needs at least 4 examples per minibatch, got {n}")
    sk, sl = k.sum(1), lm.sum(1)  # (layers, n): column sums (the matrices are symmetric)
    term = (k.reshape(len(k), -1) @ lm.reshape(len(lm), -1).T
            + np.outer(sk.sum(1), sl.sum(1)) / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * (sk @ sl.T))
    return term / (n * (n - 3))


def _zero_diagonal(g: np.ndarray) -> np.ndarray:
    """`g`, a stack of square matrices, with each diagonal set to zero in place."""
    idx = np.arange(g.shape[-1])
    g[:, idx, idx] = 0.0
    return g


class MinibatchCKA:
    """CKA of every layer of A against every layer of B, accumulated batch by batch: per batch, the unbiased
    HSIC of each pair of Gram matrices; CKA = Σ HSIC(A_i, B_j) / √(Σ HSIC(A_i, A_i) · Σ HSIC(B_j, B_j))."""

    def __init__(self):
        self.cross: list[np.ndarray] = []  # per batch: (layers A, layers B)
        self.self_a: list[np.ndarray] = []  # per batch: (layers A,)
        self.self_b: list[np.ndarray] = []
        self.spread_a: np.ndarray | None = None  # per layer: how far its vectors vary across examples, at most
        self.spread_b: np.ndarray | None = None
        self.n = 0

    def update(self, a: np.ndarray, b: np.ndarray) -> None:
        """`a`: (layers A, batch, width A); `b`: (layers B, batch, width B), the same examples in order."""
        self.add_stats(minibatch_stats(a, b))

    def add_stats(self, st: dict, cells: str = "ab", left: str = "a", right: str = "b") -> None:
        """One minibatch's `minibatch_stats` (computed here or on a Ray worker): its A × B cells, or with
        ("aa", "a", "a") / ("bb", "b", "b") a model against itself."""
        own = {"a": np.diag(np.asarray(st["aa"])), "b": np.diag(np.asarray(st["bb"]))}
        self.add(st[cells], own[left], own[right], st[f"spread_{left}"], st[f"spread_{right}"], st["n"])

    def add(self, cross, self_a, self_b, spread_a, spread_b, n: int) -> None:
        """One minibatch's statistics, computed here or elsewhere (a Ray worker's `minibatch_stats`)."""
        self.cross.append(np.asarray(cross, dtype=np.float64))
        self.self_a.append(np.asarray(self_a, dtype=np.float64))
        self.self_b.append(np.asarray(self_b, dtype=np.float64))
        sa, sb = np.asarray(spread_a), np.asarray(spread_b)
        self.spread_a = sa if self.spread_a is None else np.maximum(self.spread_a, sa)
        self.spread_b = sb if self.spread_b is None else np.maximum(self.spread_b, sb)
        self.n += int(n)

    def _ratio(self, cross, self_a, self_b) -> np.ndarray:
        """NaN where a layer's vectors don't vary across examples (the [CLS] embedding before the first layer
        is the same vector for every input): there CKA is undefined. A layer whose vectors vary little is not
        such a layer: CKA doesn't depend on scale."""
        defined = np.outer(self.spread_a > CONSTANT, self.spread_b > CONSTANT)
        den = np.sqrt(np.outer(np.where(self_a > 0, self_a, np.nan), np.where(self_b > 0, self_b, np.nan)))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(defined, cross / den, np.nan)

    def value(self) -> np.ndarray:
        if not self.cross:
            raise InputError("dataset: no minibatch was seen")
        return self._ratio(np.sum(self.cross, 0), np.sum(self.self_a, 0), np.sum(self.self_b, 0))

    def interval(self, rounds: int = 1000, confidence: float = 0.95, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Percentile bootstrap over the minibatches (each a group of examples): the spread the sample gives."""
        k = len(self.cross)
        if k < 2:
            v = self.value()
            return v, v
        rng = np.random.default_rng(seed)
        cross, sa, sb = np.array(self.cross), np.array(self.self_a), np.array(self.self_b)
        draws = []
        for _ in range(rounds):
            pick = rng.integers(0, k, k)
            draws.append(self._ratio(cross[pick].sum(0), sa[pick].sum(0), sb[pick].sum(0)))
        return _bounds(np.array(draws), confidence)


def _bounds(draws: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's percentile bounds over `draws` (draws x cells); an undefined cell (a constant layer) is NaN in
    every draw, and its bounds too."""
    tail = (1 - confidence) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanquantile(draws, tail, axis=0), np.nanquantile(draws, 1 - tail, axis=0)


def spans(n: int, size: int) -> list[tuple[int, int]]:
    """Minibatches of n examples; a last one too small for the unbiased estimator (under 4) joins the one before."""
    if n < 8:
        raise InputError(f"limit: CKA needs at least 8 examples, got {n}")
    starts = list(range(0, n, max(4, size)))
    if len(starts) > 1 and n - starts[-1] < 4:
        starts.pop()
    return [(s, starts[k + 1] if k + 1 < len(starts) else n) for k, s in enumerate(starts)]


def minibatches(n: int, size: int) -> list[tuple[int, int]]:
    """`spans` for a part of a dataset (a Ray worker's share, a batch's words): under 4 rows none (the unbiased
    estimator needs 4), under 8 one."""
    if n < 4:
        return []
    return [(0, n)] if n < 8 else spans(n, size)


INTERVAL_MINIBATCHES = 8  # fewer minibatches than this: the interval from half-samples of the examples
HALF_SAMPLES = 200


def minibatch_stats(a: np.ndarray, b: np.ndarray, halves: int = 0, seed: int = 0) -> dict:
    """One minibatch's unbiased HSIC of every pair of layers, A × B, A × A and B × B (each Gram matrix computed
    once), and how much each layer varies: all `summarise` needs, a few kB whatever the batch. With `halves`, the
    same tables on that many half-samples of its rows (at least 8 rows), for a run of few minibatches."""
    if a.shape[1] != b.shape[1]:
        raise InputError("minibatch: both models must see the same examples")
    # each Gram matrix once, its diagonal zeroed once (a half-sample's matrices are principal submatrices: theirs
    # stay zero)
    ga = _zero_diagonal(np.stack([gram(layer) for layer in a]))
    gb = _zero_diagonal(np.stack([gram(layer) for layer in b]))

    def table(gx, gy):
        return _hsic_table(gx, gy).tolist()

    out = {"n": int(a.shape[1]), "ab": table(ga, gb), "aa": table(ga, ga), "bb": table(gb, gb),
           "spread_a": _spread(a).tolist(), "spread_b": _spread(b).tolist()}
    m = a.shape[1]
    if halves and m >= 8:
        rng = np.random.default_rng(seed)
        draws = []
        for _ in range(halves):
            rows = np.sort(rng.choice(m, m // 2, replace=False))
            ha, hb = (g[:, rows][:, :, rows] for g in (ga, gb))
            draws.append({"ab": table(ha, hb), "aa": table(ha, ha), "bb": table(hb, hb)})
        out["halves"] = draws
    return out


def summarise(stats: Iterable[dict]) -> dict:
    """CKA matrices from minibatches' `minibatch_stats`, in any order of arrival: A × B, A × A and B × B, each
    with its bootstrap interval, and for every layer of A the layer of B most like it (and back)."""
    stats = list(stats)
    pairs = {"cross": MinibatchCKA(), "a": MinibatchCKA(), "b": MinibatchCKA()}
    for st in stats:
        pairs["cross"].add_stats(st)
        pairs["a"].add_stats(st, "aa", "a", "a")
        pairs["b"].add_stats(st, "bb", "b", "b")
    k = len(pairs["cross"].cross)
    halved = k < INTERVAL_MINIBATCHES and any(st.get("halves") for st in stats)
    out = {}
    for key, acc in pairs.items():
        value = acc.value()
        lo, hi = _half_interval(stats, key, value) if halved else acc.interval()
        out[key] = {"cka": _plain(value), "low": _plain(lo), "high": _plain(hi)}
    out["interval"] = ("half-samples of the examples" if halved else
                       "a bootstrap over the minibatches" if k > 1 else None)
    cross = np.nan_to_num(pairs["cross"].value(), nan=-np.inf)
    out["best_b_for_a"] = [None if np.isneginf(r).all() else int(r.argmax()) for r in cross]
    out["best_a_for_b"] = [None if np.isneginf(c).all() else int(c.argmax()) for c in cross.T]
    out["n"], out["minibatches"] = pairs["cross"].n, len(pairs["cross"].cross)
    return out


def _half_interval(stats: list[dict], key: str, value: np.ndarray, confidence: float = 0.95):
    """Each cell's interval from the minibatches' half-samples (`minibatch_stats(halves=...)`): draw r sums every
    minibatch's r-th half-sample, and the draws' spread about their median is laid about the full estimate."""
    cells = {"cross": ("ab", "a", "b"), "a": ("aa", "a", "a"), "b": ("bb", "b", "b")}[key]
    draws = []
    for r in range(min(len(st["halves"]) for st in stats if st.get("halves"))):
        acc = MinibatchCKA()
        for st in stats:  # a minibatch under 8 rows has no half-samples: it adds its whole self to every draw
            acc.add_stats({**st, **st["halves"][r]} if st.get("halves") else st, *cells)
        draws.append(acc.value())
    draws = np.array(draws)
    lo, hi = _bounds(draws, confidence)
    with warnings.catch_warnings():  # an undefined cell is NaN in every draw
        warnings.simplefilter("ignore", RuntimeWarning)
        mid = np.nanmedian(draws, axis=0)
    return np.minimum(value + lo - mid, value), np.maximum(value + hi - mid, value)


def layer_similarity(minibatches: Iterable[tuple[np.ndarray, np.ndarray]]) -> dict:
    """`summarise` of two models' layer embeddings given minibatch by minibatch ((layers, rows, width) for each model,
    the same examples; memory is one minibatch's)."""
    return summarise(minibatch_stats(a, b) for a, b in minibatches)


def similarity_batch(pair, batch: list, pooling: str = "cls", minibatch: int = 128, halves: int = 0) -> list[dict]:
    """Batch function: the minibatch statistics of one batch of examples, for both models. Rows are sentences
    (pooled) or the words both models read (`embeddings.word_layers`); only the statistics leave a worker, so
    the driver's memory doesn't grow with the dataset."""
    from .embeddings import embed_layers, word_layers  # the technique's own inputs; this module stays numpy

    if pooling == "words":
        (a, seen_a), (b, seen_b) = (word_layers(clf, batch) for clf in pair.models)
        keep = seen_a & seen_b
        a, b = a[:, keep], b[:, keep]
    else:
        a, b = (embed_layers(clf, batch, pooling=pooling) for clf in pair.models)
    # a minibatch's half-samples are seeded by its own texts: the same draws however the engine splits the work
    return [minibatch_stats(a[:, s:e], b[:, s:e], halves=halves, seed=_seed(batch[s:e]) if halves else 0)
            | {"index": s}
            for s, e in minibatches(a.shape[1], minibatch)]


def _seed(examples: list) -> int:
    import zlib

    return zlib.crc32("\x1f".join("\x1e".join(e.texts) for e in examples).encode("utf-8", "replace"))


similarity_batch.combine = "rows"


def in_minibatches(a: np.ndarray, b: np.ndarray, size: int = 128):
    """Two models' layer embeddings held whole ((layers, n, width) each), as `layer_similarity`'s minibatches."""
    if a.shape[1] != b.shape[1]:
        raise InputError("dataset: both models must see the same examples")
    for s, e in spans(a.shape[1], size):
        yield a[:, s:e], b[:, s:e]


def _plain(m: np.ndarray) -> list[list[float | None]]:
    """A matrix for JSON: undefined cells (NaN) as None."""
    return [[None if np.isnan(v) else float(v) for v in row] for row in np.asarray(m, dtype=np.float64)]


# ------------------------------------------------------------------ the capability's runner (`api.run` calls it)


def run_similarity(pair: Pair, *, pooling: str, minibatch: int, dataset: str | None = None,
                   limit: int | str | None = None, progress=None, engine: Engine | None = None,
                   visitor: bool = True) -> SimilarityResult:
    """Linear CKA of every layer of the first model against every layer of the second (and each against
    itself) on a dataset, streamed in minibatches of `minibatch` rows: memory is one minibatch's, however many
    examples. Rows are sentence vectors ("cls", "mean") or words ("words": each word's tokens' mean, the words
    both models read). On a Ray `engine` the batches run on its workers and only their statistics come back."""
    ds = dataset_of(pair, dataset, limit, default=500, visitor=visitor)
    few = len(spans(len(ds), minibatch)) < INTERVAL_MINIBATCHES  # at least 8 examples, before any work
    # few minibatches of sentences: their interval from half-samples of the examples (words are many)
    params = {"pooling": pooling, "minibatch": minibatch,
              "halves": HALF_SAMPLES if few and pooling != "words" else 0}
    # whole minibatches per engine batch, so the minibatches are the same in process and on Ray; in process
    # sentences are embedded 8 minibatches at a time, sorted by length inside (one minibatch at a time padded
    # each to its longest text: AG News took twice as long); the minibatches keep the dataset's order, so each
    # is a random draw as the estimator needs. A minibatch of sentences is already ~20 minibatches of words.
    per = minibatch * 8 if pooling != "words" else minibatch
    eng = engine or Engine(batch_size=per)
    whole = minibatch * max(1, min(eng.chunk(len(ds), pair.spec), per) // minibatch)
    rows = eng.run(pair, similarity_batch, ds.examples, params=params, batch_size=whole, progress=progress)
    return SimilarityResult.of(summarise(rows), dataset=ds.name, pooling=pooling, models=[m.name for m in pair.heads])
