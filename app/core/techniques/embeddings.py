"""Sentence embeddings (CLS or mean-pooled, any layer) and per-layer hidden states, batched like prediction."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..declare.capabilities import LAYER_POOLINGS, POOLINGS  # noqa: F401 - as the capabilities declare them
from ..execution import cls_path
from ..execution.inference import (
    DEFAULT_BATCH,
    Gathered,
    Progress,
    Ragged,
    batch_for,
    check_examples,
    encode_one,
    host,
    length_batches,
    logits_and_state,
    model_input_names,
    pad,
    tokenize,
)
from ..ground import jobs
from ..ground.alignment import align
from ..ground.data import Example
from ..ground.errors import InputError
from ..ground.precision import autocast
from ..models.loading import Classifier

# a sentence vector per example, or a vector per word (its tokens' mean): the unit two tokenizers share


def n_layers(clf: Classifier) -> int:
    return int(clf.model.config.num_hidden_layers)


def _layer_index(clf: Classifier, layer: int) -> int:
    """Layer 0 is the embedding output, 1..L the encoder layers; negative counts from the top."""
    total = n_layers(clf) + 1
    idx = layer if layer >= 0 else total + layer
    if not 0 <= idx < total:
        raise InputError(f"layer: {layer} is out of range for {clf.name} (0..{total - 1}, or -1 for the top)")
    return idx


def _pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(..., batch, tokens, hidden) to (..., batch, hidden): the [CLS] vector, or the mean over unmasked tokens."""
    if pooling == "cls":
        return hidden[..., 0, :]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(-2) / m.sum(-2).clamp(min=1)


def _prepared(clf: Classifier, examples: Sequence[Example], layer: int, pooling: str):
    """(examples checked, the layer's index, their encodings): what `embed` and `embed_and_predict` check first."""
    if pooling not in POOLINGS:
        raise InputError(f"pooling: {pooling!r} is not one of {POOLINGS}")
    examples = check_examples(clf.task, examples)
    return examples, _layer_index(clf, layer), tokenize(clf, examples)


def _batches(clf: Classifier, enc, batch_size: int, progress: Progress | None):
    """Length-sorted padded batches (row indices, batch), stopping where the job's budget ends; progress after each."""
    n, done = len(enc), 0
    for idx in length_batches(enc, batch_for(clf, batch_size)):
        jobs.checkpoint(done, n, "embeddings")
        yield idx, pad(clf, enc, idx)
        done += len(idx)
        if progress:
            progress(done, n)


@torch.inference_mode()
def embed(clf: Classifier, examples: Sequence[Example], *, layer: int = -1, pooling: str = "cls",
          batch_size: int = DEFAULT_BATCH * 2, progress: Progress | None = None) -> np.ndarray:
    """(n, hidden) float32. Mean pooling averages every unmasked token, [CLS]/[SEP] included, as
    sentence-transformers does, so the two agree on the same model."""
    examples, idx_layer, enc = _prepared(clf, examples, layer, pooling)
    out = np.zeros((len(examples), clf.model.config.hidden_size), dtype=np.float32)
    rows = Gathered(clf, out)
    base = clf.model.base_model
    for idx, batch in _batches(clf, enc, batch_size, progress):
        with autocast(clf):
            hidden = cls_path.hidden_state(clf, batch, idx_layer, cls_only=pooling == "cls")  # stops at the layer
            if hidden is None:
                hidden = base(**batch, output_hidden_states=True).hidden_states[idx_layer]
        rows.put(idx, _pool(hidden.float(), batch["attention_mask"], pooling))
    return rows.finish()


@torch.inference_mode()
def embed_and_predict(clf: Classifier, examples: Sequence[Example], *, layer: int = -1, pooling: str = "cls",
                      batch_size: int = DEFAULT_BATCH * 2, progress: Progress | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(embeddings as `embed` gives them, logits as `predict` gives them) from one pass over the encoder: a
    projection needs both, and two passes cost it twice the encoder's time (at base size most of a projection's
    minute). Models whose layout `cls_path` does not know take the two passes."""
    examples, idx_layer, enc = _prepared(clf, examples, layer, pooling)
    vectors = np.zeros((len(examples), clf.model.config.hidden_size), dtype=np.float32)
    logits = np.zeros((len(examples), 1 if clf.is_regression else len(clf.labels)), dtype=np.float32)
    rows, answers = Gathered(clf, vectors), Gathered(clf, logits)
    for idx, batch in _batches(clf, enc, batch_size, progress):
        with autocast(clf):
            both = logits_and_state(clf, batch, idx_layer, cls_only=pooling == "cls")
        answers.put(idx, both[0])
        rows.put(idx, _pool(both[1].float(), batch["attention_mask"], pooling))
    return rows.finish(), answers.finish()


@torch.inference_mode()
def hidden_states(clf: Classifier, example: Example) -> tuple[np.ndarray, list[str]]:
    """(layers + 1, tokens, hidden) for one example, and its tokens."""
    enc, _ = encode_one(clf, example)
    out = clf.model.base_model(**{k: v for k, v in enc.items() if k != "offset_mapping"}, output_hidden_states=True)
    states = host(torch.stack(out.hidden_states)[:, 0])
    return states, clf.tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())


def embed_batch(pair, batch: Sequence[Example], layer: int = -1, pooling: str = "cls") -> list[np.ndarray]:
    """Batch function: both models' sentence embeddings of one batch."""
    return [embed(clf, batch, layer=layer, pooling=pooling) for clf in pair.models]


embed_batch.combine = "concat"


@torch.inference_mode()
def embed_layers(clf: Classifier, examples: Sequence[Example], *, pooling: str = "cls",
                 batch_size: int = DEFAULT_BATCH * 2) -> np.ndarray:
    """(layers + 1, n, hidden) float32: every layer's sentence embedding from one forward pass per batch (the
    representational similarity of all layer pairs needs them all; `embed` once per layer would run the
    encoder layers + 1 times)."""
    if pooling not in POOLINGS:
        raise InputError(f"pooling: {pooling!r} is not one of {POOLINGS}")
    examples = check_examples(clf.task, examples)
    enc = tokenize(clf, examples)
    out = np.zeros((n_layers(clf) + 1, len(examples), clf.model.config.hidden_size), dtype=np.float32)
    for idx, batch, states in _every_layer(clf, enc, batch_size):
        for k, h in enumerate(states):  # layer by layer: stacking them first copied every layer's states (~350 MB)
            out[k, idx] = host(_pool(h.float(), batch["attention_mask"], pooling))
    return out


def _every_layer(clf: Classifier, enc, batch_size: int):
    """Per length-sorted batch of `enc`: its rows, its padded inputs and every layer's hidden states (the
    embedding output first), stopping between batches when the request is cancelled."""
    total, done = len(enc), 0
    for idx in length_batches(enc, batch_for(clf, batch_size)):
        jobs.checkpoint(done, total, "embeddings")
        batch = pad(clf, enc, idx)
        with autocast(clf):
            states = clf.model.base_model(**batch, output_hidden_states=True).hidden_states
        yield idx, batch, states
        done += len(idx)


@torch.inference_mode()
def word_layers(clf: Classifier, examples: Sequence[Example], *,
                batch_size: int = DEFAULT_BATCH * 2) -> tuple[np.ndarray, np.ndarray]:
    """(layers + 1, words, hidden) float32: every layer's vector of every word of every example (in order), the
    mean over the word's tokens, so a WordPiece and a SentencePiece model give the same rows; and per word
    whether the model read it (a word past the max length has no tokens, and a zero vector)."""
    examples = check_examples(clf.task, examples)
    enc = tokenize(clf, examples, offsets=True)
    alignments = [align(ex.texts, enc["offset_mapping"][i], enc.sequence_ids(i),
                        at_limit=len(enc["input_ids"][i]) >= clf.max_length) for i, ex in enumerate(examples)]
    first = np.cumsum([0] + [len(al.words) for al in alignments])
    out = np.zeros((n_layers(clf) + 1, first[-1], clf.model.config.hidden_size), dtype=np.float32)
    seen = np.zeros(first[-1], dtype=bool)
    for idx, _, states in _every_layer(clf, Ragged.from_lists(enc, model_input_names(clf.tokenizer)), batch_size):
        width = states[0].shape[1]
        cells, word_of, weights, rows = [], [], [], []  # each word's tokens, as cells of the batch's flat states
        for row, i in enumerate(idx):
            for w, toks in enumerate(alignments[i].word_tokens):
                if toks:
                    cells.extend(row * width + t for t in toks)
                    word_of.extend([len(rows)] * len(toks))
                    weights.extend([1.0 / len(toks)] * len(toks))
                    rows.append(first[i] + w)
        if not rows:
            continue
        where = states[0].device
        cells_t, word_t = (torch.as_tensor(a, device=where) for a in (cells, word_of))
        weights_t = torch.as_tensor(weights, dtype=torch.float32, device=where)[:, None]
        for k, h in enumerate(states):  # layer by layer, not a stacked copy of every layer's states
            flat = h.reshape(-1, h.shape[-1])[cells_t].float() * weights_t
            # each word's tokens' mean for the whole batch at once: one copy back per layer, not one per example
            out[k, rows] = host(torch.zeros(len(rows), h.shape[-1], device=where).index_add_(0, word_t, flat))
        seen[rows] = True
    return out, seen
