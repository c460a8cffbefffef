"""Attention of both models on one input, word by word: each head's token-to-token map restated over words, so
a WordPiece and a SentencePiece model compare on the same rows and columns.

As in Clark et al. (2019), "What Does BERT Look At?": attention *to* a word is the sum over its tokens, attention
*from* a word the mean over its tokens, so each row still sums to one. Special tokens ([CLS], [SEP]) stay units of
their own: how much a head looks at them is much of what it does.
"""
from __future__ import annotations

import logging

import numpy as np
import torch

from .data import Example
from .errors import InputError
from .inference import encode_one
from .loading import Classifier, eager_attention


def units(clf: Classifier, example: Example) -> tuple[list[str], list[int], torch.Tensor]:
    """The input's units (special tokens by name, words by their text), each token's unit, and the encoding."""
    enc, al = encode_one(clf, example)
    tokens = clf.tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    names, unit_of, of_word = [], [], {}
    for tok, word in zip(tokens, al.token_word):
        if word is None:
            names.append(tok)
            unit_of.append(len(names) - 1)
        else:
            if word not in of_word:
                of_word[word] = len(names)
                names.append(al.words[word].text)
            unit_of.append(of_word[word])
    return names, unit_of, enc


def to_units(att: np.ndarray, unit_of: list[int], n_units: int) -> np.ndarray:
    """(..., tokens, tokens) attention to (..., units, units): the mean over a unit's tokens attending, the sum
    over a unit's tokens attended to."""
    onehot = np.zeros((len(unit_of), n_units))
    onehot[np.arange(len(unit_of)), unit_of] = 1.0
    average = (onehot / onehot.sum(0)).T  # (units, tokens)
    return average @ att @ onehot


def _attentions(clf: Classifier, enc) -> torch.Tensor:
    """(layers, heads, tokens, tokens) attention of one encoded input."""
    quiet = logging.getLogger("transformers.models")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "SDPA falls back to eager attention for output_attentions": expected here
    try:
        with eager_attention(clf.model):
            out = clf.model(**{k: v for k, v in enc.items() if k != "offset_mapping"}, output_attentions=True)
    finally:
        quiet.setLevel(level)
    if not out.attentions:
        raise InputError(f"model: {clf.name} returns no attention weights")
    return torch.stack(out.attentions)[:, 0]


@torch.inference_mode()
def word_attention(clf: Classifier, example: Example) -> dict:
    """Every layer's and head's attention over the input's units: {"model", "units", "maps": (layers, heads,
    units, units)}."""
    names, unit_of, enc = units(clf, example)
    att = _attentions(clf, enc).float().cpu().numpy()
    return {"model": clf.name, "units": names, "maps": to_units(att, unit_of, len(names))}


def pick(maps: np.ndarray, layer: int, head: int | None) -> tuple[int, np.ndarray]:
    """One layer's map (layers count from 1, as the encoder's; -1 is the top): one head, or the mean of its
    heads (`head` None). Returns the layer's number and the map."""
    n_layers, n_heads = maps.shape[:2]
    idx = layer - 1 if layer > 0 else n_layers + layer
    if layer == 0 or not 0 <= idx < n_layers:
        raise InputError(f"layer: {layer} is out of range (1..{n_layers}, or -1 for the top)")
    if head is not None and not 0 <= head < n_heads:
        raise InputError(f"head: {head} is out of range (0..{n_heads - 1}, or empty for the mean of the heads)")
    return idx + 1, maps[idx].mean(0) if head is None else maps[idx, head]


PUNCT = set(".,;:!?'\"()-`")


def _js(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence (nats) between attention rows, over the last axis."""
    m = (p + q) / 2

    def kl(a, b):
        return np.sum(np.where(a > 0, a * (np.log(np.maximum(a, 1e-12)) - np.log(np.maximum(b, 1e-12))), 0.0), -1)

    return (kl(p, m) + kl(q, m)) / 2


@torch.inference_mode()
def attention_stats(clf: Classifier, examples, progress=None) -> dict:
    """Per layer and head over examples (Clark et al., 2019): the mean entropy of a token's attention, the
    share of attention on [CLS], on [SEP] and on punctuation, and how far each head's attention moves from one
    layer to the next (Jensen-Shannon divergence, per token; ALBERT applies one set of weights at every layer)."""
    tok = clf.tokenizer
    sums = None
    n = 0
    for k, ex in enumerate(examples):
        _, _, enc = units(clf, ex)
        tokens = tok.convert_ids_to_tokens(enc["input_ids"][0].tolist())
        att = _attentions(clf, enc).double().cpu().numpy()
        cls = np.array([t == tok.cls_token for t in tokens], dtype=float)
        sep = np.array([t == tok.sep_token for t in tokens], dtype=float)
        punct = np.array([t.lstrip("▁#") in PUNCT and t.lstrip("▁#") != "" for t in tokens], dtype=float)
        stats = {
            "entropy": -np.sum(att * np.log(np.maximum(att, 1e-12)), -1).mean(-1),
            "cls": (att @ cls).mean(-1), "sep": (att @ sep).mean(-1), "punct": (att @ punct).mean(-1),
            "neighbour_js": _js(att[1:], att[:-1]).mean(-1),
        }
        sums = stats if sums is None else {key: sums[key] + v for key, v in stats.items()}
        n += 1
        if progress:
            progress(k + 1, len(examples))
    if not n:
        raise InputError("dataset: no examples")
    return {"model": clf.name, "n": n, **{key: (v / n).tolist() for key, v in sums.items()}}


def attention_stats_batch(pair, batch: list, progress=None) -> list[dict]:
    """Engine job (the whole sample on one worker): both models' `attention_stats`; `progress`: examples of
    both models."""
    out = []
    for k, clf in enumerate(pair.models):
        step = (lambda d, t, k=k: progress(k * t + d, 2 * t)) if progress else None
        out.append(attention_stats(clf, batch, progress=step))
    return out


attention_stats_batch.combine = "whole"
attention_stats_batch.reports_progress = True
