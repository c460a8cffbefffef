"""How faithful a word-saliency map is to its model, and how far two models' maps agree: the metrics, kept
apart from the attribution methods (`saliency`) as Captum keeps `metrics/` apart from `attr/`.

Faithfulness is ERASER's (DeYoung et al., 2020): comprehensiveness, the drop in the explained class's probability
when the top-ranked words are removed, and sufficiency, the drop when only they are kept; a random ranking of the
same words (`shuffled`) is the baseline a method must beat. Agreement is the rank correlation of two maps on the
words both models read.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..execution.inference import windowed
from ..ground.alignment import edit_texts
from ..ground.data import Example
from ..models.loading import Classifier
from .saliency import WordSaliency, target_outputs

FAITHFULNESS_BINS = (0.1, 0.2, 0.3, 0.4, 0.5)


def faithfulness(clf: Classifier, example: Example, sal: WordSaliency, bins=FAITHFULNESS_BINS) -> dict:
    """ERASER's comprehensiveness (probability drop when the top-k% words are removed) and sufficiency (drop
    when only they are kept), averaged over k. Higher comprehensiveness, lower sufficiency = more faithful."""
    al = sal.alignment
    seen = np.asarray(al.seen, dtype=int)  # ranked among the words the model read, not those past a cut
    n = len(seen)
    if n == 0:
        return {"comprehensiveness": 0.0, "sufficiency": 0.0, "bins": list(bins)}
    order = seen[np.argsort(-np.asarray(sal.scores)[seen], kind="stable")]
    window = windowed(clf, example, al)
    removed, kept = [], []
    for k in bins:
        top = set(order[: max(1, int(round(k * n)))].tolist())
        removed.append(Example(edit_texts(window.texts, al.words, {i: "" for i in top})))
        # only the top words stay: every other word goes, those past the cut too (they would refill the window)
        kept.append(Example(edit_texts(example.texts, al.words,
                                       {i: "" for i in range(len(al.words)) if i not in top})))
    p0 = sal.input_output()  # the input's probability from the map's own forward pass, else one more here
    probs = target_outputs(clf, ([] if p0 is not None else [example]) + removed + kept, sal.target)
    if p0 is None:
        p0, probs = probs[0], probs[1:]
    pr, pk = probs[: len(bins)], probs[len(bins) :]
    return {"comprehensiveness": float(np.mean(p0 - pr)), "sufficiency": float(np.mean(p0 - pk)),
            "bins": list(bins)}


def agreement(a: WordSaliency, b: WordSaliency) -> float | None:
    """Spearman rank correlation of two models' word scores on the words both read (None if undefined): words
    past a cut score 0 for both, and on a long input thousands of such ties would rank as agreement."""
    from scipy.stats import spearmanr  # deferred: scipy: loaded on first use

    if a.words != b.words:
        return None
    both = sorted(read_words(a) & read_words(b))
    if len(both) < 2:
        return None
    x, y = np.asarray(a.scores)[both], np.asarray(b.scores)[both]
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(spearmanr(x, y)[0])


def read_words(sal: WordSaliency) -> set[int]:
    """The words the model read (all of them without an alignment)."""
    return set(range(len(sal.words))) if sal.alignment is None else set(sal.alignment.seen)


def shuffled(sal: WordSaliency, rng: np.random.Generator) -> WordSaliency:
    """The same map with its scores dealt at random among the words the model read: the ranking a faithfulness
    score must beat to say the method found anything."""
    scores = np.asarray(sal.scores, dtype=float)
    seen = np.asarray(sorted(read_words(sal)), dtype=int)
    scores[seen] = rng.permutation(scores[seen])
    return replace(sal, scores=scores.tolist())


def top_words(sal: WordSaliency, k: int = 3) -> list[str]:
    """The `k` words that most support the explained class (largest score; for unsigned methods, the largest
    sensitivity), among the words the model read."""
    best = sorted(sorted(read_words(sal)), key=lambda i: -sal.scores[i])[:k]
    return [sal.words[i] for i in best if sal.scores[i] > 0]
