"""Whether a word swap keeps the sentence's meaning: the check TextAttack's recipes put on their own swaps.

WordNet offers every sense of a word, whatever the sentence means by it: "plot" becomes "plot of land", "high"
(spirited) becomes "gamey", "music" becomes "medicine". An edit that changes the meaning or breaks the grammar
counts against a model in a flip rate for the edit's fault, not the model's. Three checks, the first two as
TextAttack's `PartOfSpeech` and sentence-encoder constraints do:

- **part of speech kept:** NLTK's tagger reads the new word in the edited sentence as the same part of speech as
  the old word in the original (universal tagset; a multi-word replacement by its last word);
- **meaning kept:** the shipped MiniLM sentence encoder (all-MiniLM-L6-v2, mean pooling) puts the edited
  sentence at cosine >= `MIN_COSINE` to the original;
- **the word's usual sense:** the replacement is a synonym from the word's most frequent WordNet sense for that
  part of speech (WordNet orders senses by their frequency in tagged text), not a rare one.

On 120 hand-judged SST-2 swaps (tests/data/wordnet_edits_judged.tsv, 37 valid) the checks keep about half of the
edits, with half of the kept ones valid against a third before; the figures are in benchmarks/README.md and held
by tests/test_meaning.py. They are a filter, not a guarantee.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Sequence

import numpy as np

from ..ground.alignment import split_words
from ..ground.compat import quick_wordnet

MIN_COSINE = 0.8  # a low bar: on the hand-judged sample the cosine separates little (benchmarks/README.md)
_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _encoder():
    """The shipped MiniLM as a sentence encoder (its own tokenizer; CPU; loaded once)."""
    import torch  # deferred: PyTorch: loaded with the encoder
    from transformers import AutoModel, AutoTokenizer

    from ..ground.compat import quiet_weight_loading
    from ..models.offline import minilm_dir

    quiet_weight_loading()
    path = minilm_dir()
    model = AutoModel.from_pretrained(str(path)).eval()
    model.requires_grad_(False)
    return AutoTokenizer.from_pretrained(str(path)), model, torch


def warm_up() -> None:
    """Load the sentence encoder ahead of the first checked WordNet swap (2 s on a fast Xeon, its first click's
    wait on slower CPUs after WordNet itself, which `counterfactuals.warm_up` loads)."""
    embed(["warm up"])


def embed(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """Unit-length MiniLM sentence vectors (mean pooling over tokens, as sentence-transformers does), in the
    order given. Each distinct text is encoded once, in batches of similar length (a dataset's swaps repeat each
    original once per swap, and a batch padded to its longest text spent most of its work on padding)."""
    tok, model, torch = _encoder()
    distinct = list(dict.fromkeys(texts))
    if not distinct:
        return np.zeros((0, 384), dtype=np.float32)
    encoded = tok(distinct, truncation=True, max_length=128)  # once: the lengths order it, the batches pad it
    order = sorted(range(len(distinct)), key=lambda r: len(encoded["input_ids"][r]))
    vecs = np.zeros((len(distinct), model.config.hidden_size), dtype=np.float32)
    with _LOCK, torch.inference_mode():
        for i in range(0, len(order), batch_size):
            rows = order[i : i + batch_size]
            enc = tok.pad([{k: encoded[k][r] for k in encoded} for r in rows], return_tensors="pt")
            hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            v = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
            vecs[rows] = torch.nn.functional.normalize(v, dim=-1).numpy()
    at = {t: k for k, t in enumerate(distinct)}
    return vecs[[at[t] for t in texts]]


WORDNET_POS = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}  # universal tag -> WordNet's part of speech


@functools.lru_cache(maxsize=4096)
def tags(words: tuple[str, ...]) -> tuple[str, ...] | None:
    """NLTK's universal part-of-speech tags of `words` in context, or None when no tagger is installed. Kept
    for the last few thousand texts: a dataset's WordNet swaps tag each original once per swap of it."""
    try:
        import nltk  # deferred: NLTK and its data: only the tagging paths

        return tuple(t for _, t in nltk.pos_tag(list(words), tagset="universal"))
    except LookupError:  # no tagger installed: the part-of-speech checks can't be made
        return None


def _swap(original: str, edited: str) -> tuple[int, int, tuple[str, ...] | None, tuple[str, ...] | None] | None:
    """(the swapped word's position in the original, its replacement's last word's in the edited text, both
    texts' tags); None where nothing was swapped."""
    a, b = tuple(w.text for w in split_words(original)), tuple(w.text for w in split_words(edited))
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if at is None:
        return None
    return at, at + len(b) - len(a), tags(a), tags(b)  # a multi-word replacement: its last word's part of speech


def part_of_speech_kept(original: str, edited: str) -> bool | None:
    """The swapped word's tag in the edited text against the old word's in the original; None where nothing was
    swapped or no tagger is installed."""
    found = _swap(original, edited)
    if found is None:
        return None
    at, last, ta, tb = found
    if ta is None or tb is None or not 0 <= last < len(tb):
        return None
    return ta[at] == tb[last]


def usual_sense(word: str, replacement: str, pos: str | None) -> bool | None:
    """Whether `replacement` is a lemma of `word`'s most frequent WordNet sense (as `pos`: n, v, a, r); None
    without WordNet."""
    try:
        from nltk.corpus import wordnet as wn  # deferred: NLTK and its data

        quick_wordnet()
        senses = wn.synsets(word.lower(), pos=pos)
    except LookupError:
        return None
    if not senses:
        return False
    wanted = replacement.lower().replace(" ", "_")
    return wanted in {lemma.name().lower() for lemma in senses[0].lemmas()}


def _sense_kept(original: str, edited: str, edits: Sequence[tuple[str, str]]) -> bool | None:
    """`usual_sense` of a one-word swap, the word's part of speech as tagged where it was swapped."""
    if len(edits) != 1:
        return None
    word, replacement = edits[0]
    found = _swap(original, edited)
    pos = None
    if found is not None and found[2] is not None:
        pos = WORDNET_POS.get(found[2][found[0]])
    return usual_sense(word, replacement, pos)


def validity(originals: Sequence[Sequence[str]], edited: Sequence[Sequence[str]],
             edits: Sequence[Sequence[tuple[str, str]]] | None = None, progress=None) -> list[dict]:
    """Per edit: {"part_of_speech_kept", "usual_sense", "cosine", "valid"}; the texts are each example's fields
    (one field is edited per swap, and that one is checked); `edits` the (word, replacement) of each. A check
    that can't be made (no tagger, no WordNet) is None and doesn't count against the edit. `progress(done,
    total)`: edits checked."""
    pairs = [(" ".join(o), " ".join(e)) for o, e in zip(originals, edited)]
    if not pairs:
        return []
    vecs = embed([t for p in pairs for t in p])
    cos = (vecs[0::2] * vecs[1::2]).sum(1)
    out = []
    for k, (o, e, c) in enumerate(zip(originals, edited, cos)):
        field = next((f for f, (x, y) in enumerate(zip(o, e)) if x != y), 0)
        kept = part_of_speech_kept(o[field], e[field])
        sense = _sense_kept(o[field], e[field], edits[k]) if edits is not None else None
        out.append({"part_of_speech_kept": kept, "usual_sense": sense, "cosine": round(float(c), 4),
                    "valid": bool(kept is not False and sense is not False and c >= MIN_COSINE)})
        if progress:
            progress(k + 1, len(pairs))
    return out
