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

from ..declare.results import AttentionResult, AttentionStatsResult
from ..execution.engine import Engine
from ..execution.inference import cells, check_examples, encode_one, pad, tokenize
from ..execution.inputs import dataset_of, example_from
from ..execution.pair import Pair
from ..ground import device as devices
from ..ground import jobs
from ..ground.data import Example
from ..ground.errors import InputError
from ..models.loading import Classifier, eager_attention


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
    return _attentions_batch(clf, {k: v for k, v in enc.items() if k != "offset_mapping"})[:, 0]


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


# attention weights of one batch held at once (float64), layers x heads x rows x tokens^2. On the CPU the
# statistics run over every padded cell and are bound by memory: small batches (less padding, tensors that stay in
# cache) were fastest (benchmarks/README.md); a GPU takes larger ones (fewer launches; not yet timed on one).
ATT_CELLS = {"cpu": 1 << 20, "gpu": 1 << 24}


def _stat_batches(lengths: np.ndarray, cells_per_row_token2: int, budget: int) -> list[np.ndarray]:
    """Length-sorted batches (longest first) whose attention weights fit `budget` cells: a batch of long inputs
    holds fewer rows, one input at the least."""
    order = np.argsort(-lengths, kind="stable")
    out, i = [], 0
    while i < len(order):
        width = int(lengths[order[i]])
        rows = max(1, budget // (cells_per_row_token2 * width * width))
        out.append(order[i : i + rows])
        i += rows
    return out


@torch.inference_mode()
def attention_stats(clf: Classifier, examples, progress=None) -> dict:
    """Per layer and head over examples (Clark et al., 2019): the mean entropy of a token's attention, the
    share of attention on [CLS], on [SEP] and on punctuation, and how far each head's attention moves from one
    layer to the next (Jensen-Shannon divergence, per token; ALBERT applies one set of weights at every layer).

    Length-sorted batches, each moved to the device once; every statistic is taken there in float64 (on Apple's
    MPS, which has none, on the CPU) over each input's own tokens (a padded key holds no attention, a padded query
    is left out), summed over the inputs, and copied back once at the end."""
    examples = check_examples(clf.task, examples)
    if not examples:
        raise InputError("dataset: no examples")
    tok = clf.tokenizer
    enc = tokenize(clf, examples)
    words = [t.lstrip("▁#") for t in tok.convert_ids_to_tokens(enc.columns["input_ids"].tolist())]
    flags = np.stack([enc.columns["input_ids"] == tok.cls_token_id, enc.columns["input_ids"] == tok.sep_token_id,
                      np.array([w in PUNCT and w != "" for w in words], dtype=bool)], 1)
    cfg = clf.model.config
    sums = js_sum = None
    done = 0
    home = devices.float64_home(clf.device)  # where the float64 statistics are taken (MPS has no float64)
    budget = ATT_CELLS["cpu" if home.type == "cpu" else "gpu"]
    for idx in _stat_batches(enc.lengths, cfg.num_hidden_layers * cfg.num_attention_heads, budget):
        jobs.checkpoint(done, len(examples), "examples")
        batch = pad(clf, enc, idx)
        att = devices.wide(_attentions_batch(clf, batch))  # (layers, rows, heads, tokens, tokens)
        valid = devices.wide(batch["attention_mask"])  # 1.0 at a token, 0.0 at padding
        query = valid[None, :, None, :] / valid.sum(1)[None, :, None, None]  # each input's mean over its own tokens
        at = torch.as_tensor(cells(tok, enc, idx)[0], device=home)  # each cell's token, as `pad` laid them
        marks = torch.as_tensor(flags, device=home)[at] * valid[..., None]  # (rows, tokens, 3)
        logs = torch.log(att.clamp_min(1e-12))
        stats = torch.stack([-(att * logs).sum(-1), *torch.einsum("lbhqk,bkf->flbhq", att, marks)])
        stats = (stats * query).sum(-1).sum(2)  # (5, layers, heads): each input's mean over its tokens, summed
        js = (_js_torch(att[1:], att[:-1], logs[1:], logs[:-1]) * query).sum(-1).sum(1)
        sums = stats if sums is None else sums + stats
        js_sum = js if js_sum is None else js_sum + js
        done += len(idx)
        if progress:
            progress(done, len(examples))
    n = len(examples)
    means = (sums / n).cpu().numpy()
    return {"model": clf.name, "n": n, "entropy": means[0].tolist(), "cls": means[1].tolist(),
            "sep": means[2].tolist(), "punct": means[3].tolist(), "neighbour_js": (js_sum / n).cpu().numpy().tolist()}


def _js_torch(p: torch.Tensor, q: torch.Tensor, log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence (nats) between attention rows, over the last axis (`log_p`, `log_q`: their logs,
    zero rows skipped as 0 * log 0)."""
    m = (p + q) / 2
    log_m = torch.log(m.clamp_min(1e-12))
    kl_p = torch.where(p > 0, p * (log_p - log_m), 0.0).sum(-1)
    kl_q = torch.where(q > 0, q * (log_q - log_m), 0.0).sum(-1)
    return (kl_p + kl_q) / 2


def _attentions_batch(clf: Classifier, batch) -> torch.Tensor:
    """(layers, rows, heads, tokens, tokens) attention of a padded batch."""
    quiet = logging.getLogger("transformers.models")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "SDPA falls back to eager attention for output_attentions": expected here
    try:
        with eager_attention(clf.model):
            out = clf.model(**batch, output_attentions=True)
    finally:
        quiet.setLevel(level)
    if not out.attentions:
        raise InputError(f"model: {clf.name} returns no attention weights")
    return torch.stack(out.attentions)


def attention_stats_batch(pair, batch: list, progress=None) -> list[dict]:
    """Batch function (the whole sample on one worker): both models' `attention_stats`; `progress`: examples of
    both models."""
    out = []
    for k, clf in enumerate(pair.models):
        step = (lambda d, t, k=k: progress(k * t + d, 2 * t)) if progress else None
        out.append(attention_stats(clf, batch, progress=step))
    return out


attention_stats_batch.combine = "whole"
attention_stats_batch.reports_progress = True


# ------------------------------------------------------------------ the capability's runner (`api.run` calls it)


def run_attention(pair: Pair, text: str | None = None, text2: str | None = None, *, layer: int, head: int | None,
                  dataset: str | None = None, limit: int | str | None = None, progress=None,
                  engine: Engine | None = None, visitor: bool = True) -> AttentionResult | AttentionStatsResult:
    """Both models' attention on one input at one layer, over words (so the two tokenizers compare): one head's
    map or, with no head, the mean of the layer's heads; every head's map beside it. `progress`: models done.
    With `dataset`: per layer and head of both models over its first `limit` examples, attention entropy, the
    share on [CLS], [SEP] and punctuation, and the change from the layer before (`attention_stats`); on a Ray
    `engine`, on one of its workers."""
    if dataset is not None:
        if text:
            raise InputError("text: give either an input or a dataset, not both")
        ds = dataset_of(pair, dataset, limit, default=200, visitor=visitor)
        models = (engine or Engine()).run(pair, attention_stats_batch, ds.examples, progress=progress)
        return AttentionStatsResult(dataset=ds.name, n=len(ds), models=models)
    ex = example_from(pair, text, text2)
    models = []
    for clf in pair.models:
        w = word_attention(clf, ex)
        top = w["maps"].shape[0]
        number, m = pick(w["maps"], min(layer, top) if layer > 0 else layer, head)
        models.append({"model": clf.name, "units": w["units"], "layer": number, "map": m.tolist(),
                       "heads": w["maps"][number - 1].tolist()})
        if progress:
            progress(len(models), len(pair.models))
    return AttentionResult(fields=list(pair.task.fields), layer=layer, head=head, models=models)
