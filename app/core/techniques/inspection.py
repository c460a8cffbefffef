"""Everything about one forward (and backward) pass, per text field: what LIT's model API asks for.

Tokens, probabilities, CLS and mean-pooled embeddings, the input word embeddings and the gradients of the target
class's probability with respect to them (split per field), and per-layer attention. Callers may substitute a
field's tokens (HotFlip feeds flipped tokens back) or its word embeddings (integrated gradients interpolates
them). The sequence is built exactly as the tokenizer builds it, so probabilities equal `inference.predict`.
"""
from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np
import torch

from ..execution.inference import class_index, host
from ..ground.data import Example
from ..ground.errors import InputError
from ..models.loading import Classifier, eager_attention
from .gradients import score_gradient


def _field_ids(clf: Classifier, example: Example, tokens: Sequence[Sequence[str] | None] | None) -> list[list[int]]:
    tok = clf.tokenizer
    out = []
    for f, text in enumerate(example.texts):
        given = tokens[f] if tokens and f < len(tokens) else None
        if given is not None:
            ids = tok.convert_tokens_to_ids(list(given))
        else:
            ids = tok(text, add_special_tokens=False)["input_ids"]
        out.append(list(ids))
    budget = clf.max_length - _special_count(tok, len(out))
    while sum(map(len, out)) > budget:  # longest-first truncation, as the tokenizer does
        longest = max(range(len(out)), key=lambda i: len(out[i]))
        out[longest].pop()
    return out


def _template(tok, n_fields: int) -> list[tuple[int | None, int, int]]:
    """How the tokenizer lays out `n_fields` fields among its special tokens, as (field or None, special id,
    segment id) per slot: [CLS] a [SEP] b [SEP] in BERT, <s> a </s></s> b </s> in RoBERTa. Read off the tokenizer's
    own encoding of one-word fields (`sequence_ids` marks each token's field), so any family's layout works, under
    transformers 4 and 5 alike (5 dropped `build_inputs_with_special_tokens`)."""
    key = f"_albert_lens_template_{n_fields}"
    if (found := getattr(tok, key, None)) is not None:
        return found
    enc = tok(*(["a"] * n_fields), return_token_type_ids=True)
    fields = enc.sequence_ids(0)
    types = enc.get("token_type_ids") or [0] * len(fields)
    out: list[tuple[int | None, int, int]] = []
    for pos, (f, i, t) in enumerate(zip(fields, enc["input_ids"], types)):
        if f is None:
            out.append((None, i, t))
        elif pos == 0 or fields[pos - 1] != f:
            out.append((f, 0, t))
    setattr(tok, key, out)
    return out


def _special_count(tok, n_fields: int) -> int:
    return sum(f is None for f, _, _ in _template(tok, n_fields))


def _build(tok, fields: list[list[int]]) -> tuple[list[int], list[int], list[slice]]:
    """(input ids, segment ids, each field's slice) for fields given as ids, laid out as the tokenizer does."""
    ids: list[int] = []
    types: list[int] = []
    slices = [slice(0, 0)] * len(fields)
    for f, special, t in _template(tok, len(fields)):
        if f is None:
            ids.append(special)
            types.append(t)
        else:
            slices[f] = slice(len(ids), len(ids) + len(fields[f]))
            ids.extend(fields[f])
            types.extend([t] * len(fields[f]))
    return ids, types, slices


def inspect(clf: Classifier, example: Example, *, target: int | str | None = None,
            tokens: Sequence[Sequence[str] | None] | None = None,
            embeddings: Sequence[np.ndarray | None] | None = None,
            gradients: bool = True, attention: bool = True) -> dict:
    """One example, every per-token quantity. `tokens`/`embeddings` override fields (None keeps a field)."""
    tok = clf.tokenizer
    fields = _field_ids(clf, example, tokens)
    ids, types, slices = _build(tok, fields)
    where = torch.device(clf.device)
    input_ids = torch.tensor([ids], device=where)
    mask = torch.ones_like(input_ids)
    kw = {}
    if "token_type_ids" in tok.model_input_names:  # DistilBERT's forward has no such argument
        kw["token_type_ids"] = torch.tensor([types], device=where)
    with torch.no_grad():
        embeds = clf.model.get_input_embeddings()(input_ids)
    if embeddings:
        for f, sl in enumerate(slices):
            given = embeddings[f] if f < len(embeddings) else None
            if given is None:
                continue
            try:  # a visitor's (LIT's input_embs): numbers, finite, of its tokens' shape
                given = torch.as_tensor(np.asarray(given, dtype=np.float32), dtype=embeds.dtype, device=where)
            except (TypeError, ValueError, OverflowError):
                raise InputError(f"input_embs for field {f}: not a matrix of numbers") from None
            if not bool(torch.isfinite(given).all()):
                raise InputError(f"input_embs for field {f}: holds NaN or infinity; give finite numbers")
            if given.shape != embeds[0, sl].shape:
                raise InputError(f"input_embs for field {f}: shape {tuple(given.shape)} does not match the "
                                 f"{tuple(embeds[0, sl].shape)} of its tokens")
            embeds[0, sl] = given
    embeds = embeds.detach().requires_grad_(gradients)
    with torch.set_grad_enabled(gradients), eager_attention(clf.model) if attention else contextlib.nullcontext():
        out = clf.model(inputs_embeds=embeds, attention_mask=mask, output_hidden_states=True,
                        output_attentions=attention, **kw)
        logits = out.logits
        probs = None if clf.is_regression else host(torch.softmax(logits.detach(), -1)[0])
        tgt = class_index(clf, target, probs)
        if clf.is_regression:
            result = {"score": float(logits[0, 0])}
        else:
            result = {"probas": probs.astype(np.float32), "target": tgt}
        # the explained class's probability (a regression's score), through the saliency's own gradient path
        grads = host(score_gradient(clf, logits, tgt, embeds, "prob")[1][0]) if gradients else None
    hidden = out.hidden_states
    all_tokens = tok.convert_ids_to_tokens(ids)
    result.update(
        tokens=all_tokens,
        field_tokens=[all_tokens[sl] for sl in slices],
        cls_emb=host(hidden[-1][0, 0]),
        mean_emb=host(hidden[-1][0].mean(0)),
        input_embs=[host(embeds[0, sl]) for sl in slices],
        grads=[grads[sl] for sl in slices] if gradients else None,
        attentions=[host(a[0]) for a in out.attentions] if attention and out.attentions else None,
    )
    return result

