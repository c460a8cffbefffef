"""Where the two models differ: interpretable slices of a labelled dataset, found and tested for you.

Errudite (Wu et al. 2019), SliceFinder (Chung et al. 2019) and Domino (Eyuboglu et al. 2022) look for the subsets
where one model errs; here every candidate subset is tested for a *paired* difference between the two models on
it. Candidates: each word and bigram the dataset holds often enough, length bins, negation / contrast /
intensifier / comparison / question and exclamation markers, digits, capitalised words, the gold label, and
clusters of either model's sentence embeddings named by their most distinctive words.

- `accuracy`: McNemar's exact test on the slice's examples that exactly one model gets right (the gap's size in
  examples, `gap_examples`, is what slices are ranked by: a big slice with a moderate gap explains more of the two
  models' difference than a small one with a big gap).
- `agreement`: Fisher's exact test of the slice's disagreements against the rest of the dataset's.

Every candidate tested counts in Benjamini-Hochberg's false-discovery rate (`q`): slices with q < alpha are the
findings; on two models whose errors differ by chance alone, a run reports one in about alpha of runs
(tests/test_slices.py). Candidates with the same examples are tested once, under the simplest name.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..declare.capabilities import SLICE_METRICS
from ..declare.results import SlicesResult
from ..execution.engine import Engine
from ..execution.inference import from_logits
from ..execution.inputs import dataset_of
from ..execution.pair import Pair
from ..ground.errors import InputError
from ..ground.significance import mcnemar_exact
from .benchmark import check_labels

METRICS = SLICE_METRICS  # as the capability declares them
MARKERS = {  # word groups a researcher would look at first (CheckList's capabilities, the study's negation rows)
    "negation": {"not", "n't", "no", "never", "nothing", "none", "nobody", "neither", "nor", "without", "hardly",
                 "cannot", "isn't", "doesn't", "don't", "didn't", "wasn't", "aren't", "won't", "can't"},
    "contrast": {"but", "although", "though", "however", "yet", "despite", "while", "whereas"},
    "intensifier": {"very", "really", "extremely", "so", "too", "truly", "utterly", "quite", "incredibly", "most"},
    "comparison": {"more", "less", "than", "better", "worse", "best", "worst", "most", "least"},
}
_WORD = re.compile(r"n't|'\w+|\w+(?:'\w+)?")


def words(text: str) -> list[str]:
    """Lower-cased words, SST-2's split contractions ("is n't") kept as their own word."""
    return _WORD.findall(text.lower())


def marker_name(marker: str) -> str:
    """A marker group as a slice (and a facet) is named: "negation (aren't, can't, cannot, didn't, ...)"."""
    return f"{marker} ({', '.join(sorted(MARKERS[marker])[:4])}, ...)"


def length_bins(lengths: Sequence[int]) -> list[tuple[str, np.ndarray]]:
    """The quartiles of the inputs' word counts as bins, each (its name, its members): "length: 1-8 words"."""
    lengths = np.asarray(lengths)
    if not len(lengths):
        return []
    edges = np.unique(np.quantile(lengths, [0, 0.25, 0.5, 0.75, 1.0]).round().astype(int))
    if len(edges) == 1:
        return [(f"length: {edges[0]} words", lengths == edges[0])]
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        top = hi if hi == edges[-1] else hi - 1
        if top >= lo:
            out.append((f"length: {lo}-{top} words", (lengths >= lo) & (lengths <= top)))
    return out


@dataclass
class Candidate:
    name: str  # what a researcher reads: "word: funny", "length: 1-8 words", "cluster 3 of BERT: war, iraq"
    kind: str  # word, bigram, length, marker, punctuation, digits, capitalised, gold, cluster
    members: np.ndarray  # bool, one per example


def benjamini_hochberg(p: Sequence[float]) -> np.ndarray:
    """q-values: the smallest false-discovery rate at which each test would be called a discovery."""
    p = np.asarray(p, dtype=float)
    if p.size == 0:
        return p
    order = np.argsort(p)
    ranked = p[order] * p.size / np.arange(1, p.size + 1)
    q = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty_like(q)
    out[order] = np.minimum(q, 1.0)
    return out


def candidates(texts: Sequence[str], gold: Sequence[int], label_names: Sequence[str], min_size: int,
               embeddings: dict[str, np.ndarray] | None = None, clusters: int = 0, seed: int = 0
               ) -> list[Candidate]:
    """Every candidate slice with at least `min_size` examples and at least `min_size` outside it, simplest kinds
    first (a later candidate with the same examples is dropped)."""
    n = len(texts)
    toks = [words(t) for t in texts]
    sets = [set(w) for w in toks]
    bigram_sets = [{f"{a} {b}" for a, b in zip(w, w[1:])} for w in toks]
    fits = lambda m: min_size <= int(m.sum()) <= n - min_size  # noqa: E731
    out: list[Candidate] = []

    for label, idx in ((label_names[k], k) for k in sorted(set(int(g) for g in gold))):
        out.append(Candidate(f"gold label: {label}", "gold", np.asarray(gold) == idx))
    for name, members in length_bins([len(w) for w in toks]):
        out.append(Candidate(name, "length", members))
    for marker, group in MARKERS.items():
        out.append(Candidate(marker_name(marker), "marker", np.asarray([bool(s & group) for s in sets])))
    out.append(Candidate("question mark", "punctuation", np.asarray(["?" in t for t in texts])))
    out.append(Candidate("exclamation mark", "punctuation", np.asarray(["!" in t for t in texts])))
    out.append(Candidate("digits", "digits", np.asarray([any(c.isdigit() for c in t) for t in texts])))
    out.append(Candidate("capitalised word after the first", "capitalised",
                         np.asarray([any(w[:1].isupper() for w in t.split()[1:]) for t in texts])))
    for kind, bags in (("word", sets), ("bigram", bigram_sets)):
        df = Counter(x for bag in bags for x in bag)
        for x, c in sorted(df.items(), key=lambda kv: (-kv[1], kv[0])):
            if min_size <= c <= n - min_size:
                out.append(Candidate(f"{kind}: {x}", kind, np.asarray([x in bag for bag in bags])))
    if embeddings and clusters:
        out.extend(_clusters(embeddings, sets, clusters, seed))

    seen, kept = set(), []
    for c in out:
        key = np.packbits(c.members).tobytes()
        if fits(c.members) and key not in seen:
            seen.add(key)
            kept.append(c)
    return kept


def _clusters(embeddings: dict[str, np.ndarray], sets: list[set[str]], k: int, seed: int) -> list[Candidate]:
    """k-means clusters of each model's embeddings, each named by its three most over-represented words."""
    from sklearn.cluster import KMeans  # deferred: scikit-learn: only when clusters are asked for

    df = Counter(x for s in sets for x in s)
    n = len(sets)
    out = []
    for model, vectors in embeddings.items():
        x = np.asarray(vectors, dtype=np.float64)
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        labels = KMeans(n_clusters=min(k, n), n_init=4, random_state=seed).fit_predict(x)
        for c in range(labels.max() + 1):
            members = labels == c
            inside = Counter(w for s, m in zip(sets, members) if m for w in s)
            size = int(members.sum())
            lift = sorted(((inside[w] / size) / (df[w] / n), w) for w in inside if inside[w] >= 3)
            named = ", ".join(w for _, w in lift[::-1][:3]) or "no distinctive word"
            out.append(Candidate(f"cluster {c + 1} of {model}: {named}", "cluster", members))
    return out


def find(texts: Sequence[str], gold: Sequence[int], first: Sequence[int], second: Sequence[int], *,
         models: Sequence[str], label_names: Sequence[str], metric: str = "accuracy", min_size: int = 20,
         alpha: float = 0.05, embeddings: dict[str, np.ndarray] | None = None, clusters: int = 0,
         top: int = 20, seed: int = 0) -> dict:
    """Test every candidate slice; the `top` slices, findings (q < alpha) first, by the gap they explain.

    Args:
        texts: each example's text (a pair's fields joined), as the candidates read it.
        gold, first, second: gold label indices and each model's predicted indices.
        metric: `accuracy` (McNemar) or `agreement` (Fisher).
    Returns:
        {"metric", "models", "n", "min_size", "alpha", "candidates_tested", "findings", "overall",
        "slices": [...]}, each
        slice with its size, both models' accuracy, agreement, the paired counts, p, q and its examples'
        indices.
    """
    if metric not in METRICS:
        raise InputError(f"metric: {str(metric)[:40]!r} is not one of {list(METRICS)}")
    gold, a, b = (np.asarray(x, dtype=int) for x in (gold, first, second))
    n = len(gold)
    if not (len(texts) == len(a) == len(b) == n):
        raise InputError(f"slices: {len(texts)} texts, {len(a)} and {len(b)} predictions for {n} gold labels")
    if n < 2 * min_size:
        raise InputError(f"min_size: {min_size} needs a dataset of at least {2 * min_size} labelled examples; "
                         f"this one has {n}")
    right_a, right_b, agree = a == gold, b == gold, a == b
    found = candidates(texts, gold, label_names, min_size, embeddings, clusters, seed)
    rows = []
    for c in found:
        m = c.members
        size = int(m.sum())
        only_a, only_b = int((m & right_a & ~right_b).sum()), int((m & ~right_a & right_b).sum())
        row = {"name": c.name, "kind": c.kind, "size": size,
               "accuracy": {models[0]: float(right_a[m].mean()), models[1]: float(right_b[m].mean())},
               "agreement": float(agree[m].mean()), "only_first_right": only_a, "only_second_right": only_b,
               "gap_examples": only_b - only_a, "indices": [int(i) for i in np.flatnonzero(m)]}
        if metric == "accuracy":
            row["p"] = mcnemar_exact(only_a, only_b)
            row["effect"] = row["accuracy"][models[1]] - row["accuracy"][models[0]]
        else:
            row["p"] = _fisher(int((~agree[m]).sum()), size, int((~agree[~m]).sum()), n - size)
            row["effect"] = row["agreement"] - float(agree[~m].mean())
        rows.append(row)
    for row, q in zip(rows, benjamini_hochberg([r["p"] for r in rows])):
        row["q"] = float(q)
    weight = (lambda r: abs(r["gap_examples"])) if metric == "accuracy" else \
        (lambda r: abs(r["effect"]) * r["size"])
    rows.sort(key=lambda r: (not r["q"] < alpha, -weight(r), r["q"], r["name"]))
    return {"metric": metric, "models": list(models), "n": n, "min_size": min_size, "alpha": alpha,
            "candidates_tested": len(rows),
            "findings": sum(r["q"] < alpha for r in rows),
            "overall": {"accuracy": {models[0]: float(right_a.mean()), models[1]: float(right_b.mean())},
                        "agreement": float(agree.mean())},
            "slices": rows[:top]}


def _fisher(d_in: int, n_in: int, d_out: int, n_out: int) -> float:
    from scipy.stats import fisher_exact  # deferred: scipy: loaded on first use

    return float(fisher_exact([[d_in, n_in - d_in], [d_out, n_out - d_out]]).pvalue)


def slices_batch(pair, batch, embed: bool = False, progress=None) -> list[np.ndarray]:
    """Batch function: each model's logits for one batch, then (with `embed`) each model's top-layer [CLS] sentence
    embeddings from the same forward pass, through the cache a projection keeps by content
    (`projection.cached_predictions`): Find slices run again with another metric or smallest size, or after a
    projection of the same rows at the top layer's [CLS], makes no forward pass."""
    from .projection import cached_predictions, vectors_batch  # deferred: torch: the spec above is numpy alone

    if not embed:
        return [cached_predictions(clf, batch, progress=progress)[0].logits for clf in pair.models]
    return vectors_batch(pair, batch, layer=-1, pooling="cls", progress=progress)


slices_batch.combine = "concat"
slices_batch.sorts = True  # in process: the whole sample at once, as the cache keys it
slices_batch.reports_progress = True


# ------------------------------------------------------------------ the capability's runner (`api.run` calls it)


def labelled_answers(pair: Pair, what: str, dataset: str | None, limit, *, embed: bool = False, progress=None,
                     engine: Engine | None = None, visitor: bool = True) -> tuple[str, list, list[int], list]:
    """(the dataset's name, its labelled examples, their rows in the dataset, each model's logits then, with
    `embed`, its top-layer [CLS] embeddings) for the capability `what`, which compares classifiers' right
    answers: what Find slices and the confusion matrices and curves read, through the cache by content."""
    if pair.task.is_regression:
        raise InputError(f"{what}: the {pair.task.name} task is a regression; {what} compare classifiers' answers")
    ds = dataset_of(pair, dataset, limit, default=1000 if visitor else None, visitor=visitor)
    own = ds.row_numbers()  # the dataset's own row numbers (a slice's rows keep the whole dataset's)
    at = [i for i, ex in enumerate(ds.examples) if ex.label is not None]
    rows, labelled = [own[i] for i in at], [ds.examples[i] for i in at]
    if not labelled:
        raise InputError(f"dataset: {ds.name} has no gold labels; {what} compare the models' right answers")
    for clf in pair.heads:
        check_labels(clf, [ex.label for ex in labelled])
    arrays = (engine or Engine()).run(pair.spec, slices_batch, labelled, params={"embed": embed}, progress=progress)
    return ds.name, labelled, rows, arrays


def run_slices(pair: Pair, *, metric: str, min_size: int, clusters: int, dataset: str | None = None,
               limit: int | str | None = None, progress=None, engine: Engine | None = None,
               visitor: bool = True) -> SlicesResult:
    """Where the two models differ on a labelled dataset: every candidate slice (words, bigrams, lengths, markers,
    the gold label, clusters of either model's embeddings) tested for a paired difference in `metric`, with
    Benjamini-Hochberg's q over all of them (`find`). Predictions (and the embeddings the clusters need) run
    through the engine: in process, or on a Ray cluster's workers."""
    name, labelled, rows, arrays = labelled_answers(pair, "slices", dataset, limit, embed=clusters > 0,
                                                    progress=progress, engine=engine, visitor=visitor)
    gold_names = [ex.label for ex in labelled]
    heads = pair.heads
    answers = [from_logits(clf, lg).predicted for clf, lg in zip(heads, arrays[:2])]
    labels = list(heads[0].labels)
    index = {name: k for k, name in enumerate(labels)}
    embeddings = {m.name: a for m, a in zip(heads, arrays[2:])} if clusters else None
    texts = [" / ".join(ex.texts) for ex in labelled]
    found = find(texts, [index[g] for g in gold_names], [index[a] for a in answers[0]],
                 [index.get(a, -1) for a in answers[1]], models=[m.name for m in heads], label_names=labels,
                 metric=metric, min_size=min_size, embeddings=embeddings, clusters=clusters)
    for s in found["slices"]:
        s["examples"] = [list(labelled[i].texts) for i in s["indices"][:5]]
        s["gold"] = [labelled[i].label for i in s["indices"][:5]]
        s["rows"] = [rows[i] for i in s["indices"]]  # as the dataset numbers them: `slice_spec` runs other tabs on it
    return SlicesResult(dataset=name, **found)
