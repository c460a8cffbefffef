"""Gradients of one class score with respect to the input token embeddings, in eval mode (dropout off).

Everything gradient-based (saliency, HotFlip, LIT's TokenGradients) starts here. The forward pass runs from
`inputs_embeds`, so position and segment embeddings are added by the model exactly as in a normal call.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch

from ..execution import cls_path
from ..execution.inference import class_index, encode_one, host
from ..ground.alignment import Alignment
from ..ground.data import Example
from ..ground.errors import InputError
from ..models.loading import Classifier, id_position_pad

SCORES = ("prob", "logit", "logprob")


def class_score(clf: Classifier, logits: torch.Tensor, target: int, score: str) -> torch.Tensor:
    """The scalar per row whose gradient we take."""
    if clf.is_regression or score == "logit":
        return logits[:, target]
    if score == "prob":
        return torch.softmax(logits, -1)[:, target]
    if score == "logprob":
        return torch.log_softmax(logits, -1)[:, target]
    raise InputError(f"score: {score!r} is not one of {SCORES}")


def fp32_only(clf: Classifier) -> Classifier:
    """Gradients are taken on fp32 weights only: an int8 layer has none (its rounding would be differentiated
    as if it were the model). The facade gives gradient work the pair's fp32 twin (`Pair.fp32`)."""
    if getattr(clf, "precision", "fp32") != "fp32":
        raise InputError(f"precision: {clf.name} is loaded in {clf.precision}; gradients run on its fp32 weights "
                         "only (Pair.fp32)")
    return clf


def score_gradient(clf: Classifier, logits: torch.Tensor, target: int, wrt: torch.Tensor, score: str = "prob"
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """The one gradient path: the first row's class score and its gradient with respect to `wrt` (the word
    embeddings fed to the model). Saliency (`input_gradients`) and LIT's gradients (`inspection`) both take it,
    so the two can't differ in what they differentiate."""
    fp32_only(clf)
    value = class_score(clf, logits, target, score)[0]
    (grad,) = torch.autograd.grad(value, wrt)
    return value, grad


def repeat_rows(t: torch.Tensor | None, n: int) -> torch.Tensor | None:
    """One example's (1, tokens) tensor broadcast to n rows (None stays None)."""
    return None if t is None else t.expand(n, -1)


def forward_embeds(clf: Classifier, embeds: torch.Tensor, attention_mask: torch.Tensor,
                   token_type_ids: torch.Tensor | None) -> torch.Tensor:
    """Logits from word embeddings (batch, tokens, E); masks broadcast over the batch."""
    fp32_only(clf)
    n = embeds.shape[0]
    kw = {"attention_mask": repeat_rows(attention_mask, n)}
    if token_type_ids is not None:
        kw["token_type_ids"] = repeat_rows(token_type_ids, n)
    return clf.model(inputs_embeds=embeds, **kw).logits


# ------------------------------------------------------------------ the embedding layer's output
# Integrated gradients interpolates the output of the embedding layer (word + position + segment embeddings after
# LayerNorm), as Captum's BERT tutorial does. A forward hook swaps in, or records, that output. The hook reads a
# thread-local slot, so concurrent requests on the same model never see each other's tensors.

_SLOT = threading.local()
_HOOK_LOCK = threading.Lock()


def embedding_layer(clf: Classifier) -> torch.nn.Module:
    base = clf.model.base_model
    layer = getattr(base, "embeddings", None)
    if layer is None:
        raise InputError(f"model: {clf.name} has no embedding layer named 'embeddings' to interpolate")
    return layer


def id_positions(clf: Classifier, input_ids: torch.Tensor) -> torch.Tensor | None:
    """The position ids a model derives from the ids themselves (RoBERTa and its kin number tokens after skipping
    padding), or None where positions don't depend on the ids. Integrated gradients passes the input's to its
    [PAD] baseline too: else the baseline's padding would shift every later position, and [SEP], the same token
    in both, would take attribution that belongs to the words."""
    embedding_layer(clf)  # a clear message for models without one
    pad = id_position_pad(clf.model)
    if pad is None:
        return None
    keep = input_ids.ne(pad).long()
    return torch.cumsum(keep, 1) * keep + pad


def _hook(module, inputs, output):
    slot = getattr(_SLOT, "value", None)
    if slot is None or slot[0] is not module:
        return None
    if slot[1] == "record":
        slot[2].append(output.detach())
        return None
    return slot[1]


def _ensure_hook(module: torch.nn.Module) -> None:
    with _HOOK_LOCK:
        if not getattr(module, "_albert_lens_hook", False):
            module.register_forward_hook(_hook)
            module._albert_lens_hook = True


def layer_outputs(clf: Classifier, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  token_type_ids: torch.Tensor | None, position_ids: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(embedding-layer output, logits) of an ordinary forward pass over a batch of ids."""
    module = embedding_layer(clf)
    _ensure_hook(module)
    seen: list[torch.Tensor] = []
    _SLOT.value = (module, "record", seen)
    try:
        with torch.no_grad():
            kw = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
            if position_ids is not None:
                kw["position_ids"] = position_ids
            logits = clf.model(input_ids=input_ids, attention_mask=attention_mask, **kw).logits
    finally:
        _SLOT.value = None
    return seen[0], logits


def embedding_states(clf: Classifier, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                     position_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The embedding layer's output alone (what `layer_outputs` records), for when the logits come from elsewhere
    (a replayed graph): a handful of kernels rather than the whole forward."""
    kw = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
    if position_ids is not None:
        kw["position_ids"] = position_ids
    with torch.no_grad():
        return embedding_layer(clf)(input_ids=input_ids, **kw)


def forward_from_layer(clf: Classifier, states: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                       token_type_ids: torch.Tensor | None, cls_only: bool = True) -> torch.Tensor:
    """Logits with the embedding layer's output replaced by `states` (batch, tokens, E); the ids, mask and
    segments of one example broadcast over the batch. `cls_only`: the last layer for [CLS] alone where
    `cls_path` knows the model (same logits, a fifth less time), else the model's own forward."""
    fp32_only(clf)
    if cls_only:
        fast = cls_path.logits(clf, states, attention_mask)
        if fast is not None:
            return fast
    module = embedding_layer(clf)
    _ensure_hook(module)
    n = states.shape[0]
    _SLOT.value = (module, states)
    try:
        kw = {} if token_type_ids is None else {"token_type_ids": repeat_rows(token_type_ids, n)}
        return clf.model(
            input_ids=repeat_rows(input_ids, n), attention_mask=repeat_rows(attention_mask, n), **kw
        ).logits
    finally:
        _SLOT.value = None


@dataclass
class TokenGradients:
    tokens: list[str]
    input_ids: np.ndarray
    embeddings: np.ndarray  # (tokens, E): the word embeddings fed to the model
    gradients: np.ndarray  # (tokens, E)
    target: int
    target_label: str | None
    score: float  # value of the differentiated score
    probs: np.ndarray | None
    alignment: Alignment


def embeds_forward(clf: Classifier, enc) -> tuple[torch.Tensor, torch.Tensor]:
    """(word embeddings of the encoded input, set to require gradients; its logits, their graph kept): the one
    forward pass a gradient method needs, which also gives the prediction that picks the explained class."""
    clf.model.eval()
    with torch.no_grad():
        embeds = clf.model.get_input_embeddings()(enc["input_ids"])
    embeds = embeds.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        logits = forward_embeds(clf, embeds, enc["attention_mask"], enc.get("token_type_ids"))
    return embeds, logits


def input_gradients(clf: Classifier, example: Example, target: int | str | None = None,
                    score: str = "prob", encoded=None, forward=None) -> TokenGradients:
    """`encoded`: the (encoding, alignment) of `example` when the caller already has it; `forward`: its
    `embeds_forward` when the caller already ran it (a saliency method picks its class from those logits)."""
    enc, alignment = encoded or encode_one(clf, example)
    embeds, logits = forward or embeds_forward(clf, enc)
    probs = None if clf.is_regression else host(torch.softmax(logits.detach(), -1)[0])
    tgt = class_index(clf, target, probs)
    with torch.enable_grad():
        value, grad = score_gradient(clf, logits, tgt, embeds, score)
    ids = enc["input_ids"][0].cpu()
    return TokenGradients(
        tokens=clf.tokenizer.convert_ids_to_tokens(ids.tolist()),
        input_ids=ids.numpy(),
        embeddings=host(embeds[0]),
        gradients=host(grad[0]),
        target=tgt,
        target_label=None if clf.is_regression else clf.labels[tgt],
        score=float(value.detach()),
        probs=probs,
        alignment=alignment,
    )
