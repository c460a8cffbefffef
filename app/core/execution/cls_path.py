"""Logits from the embedding layer's output with the last layer computed for [CLS] only.

A sequence classifier reads the last layer at [CLS] alone (the pooler takes position 0), so of that layer only
the keys and values are needed for every token; the query, attention output and feed-forward are needed for one.
Integrated gradients runs forward and backward over dozens of interpolated rows of one input, and there this
cuts the offline BERT's time per row by a fifth (1.26x, benchmarks/README.md); `predict` uses it for every
batch. Same logits and gradients up to float32 rounding (tests/test_cls_path.py). Models whose layout this
module does not know return None: the caller runs the model's own forward.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..models.loading import Classifier


def _layers_bert(model) -> tuple[list, object] | None:
    enc = getattr(getattr(model, "bert", None), "encoder", None)
    layers = list(getattr(enc, "layer", []) or [])
    return (layers, None) if layers else None


def _layers_albert(model) -> tuple[list, object] | None:
    base = getattr(model, "albert", None)
    enc = getattr(base, "encoder", None)
    if enc is None or not hasattr(enc, "albert_layer_groups"):
        return None
    cfg = model.config
    n, groups = cfg.num_hidden_layers, cfg.num_hidden_groups
    order = []
    for i in range(n):  # the group schedule of AlbertTransformer.forward
        group = enc.albert_layer_groups[int(i / (n / groups))]
        order.extend(group.albert_layers)
    return order, enc.embedding_hidden_mapping_in


def supported(clf: Classifier) -> tuple[str, list, object] | None:
    """(family, layers in run order, ALBERT's embedding projection or None); None for a model in training mode
    (dropout) or a layout this module does not know."""
    model = clf.model
    cfg = model.config
    if model.training:
        return None
    if getattr(cfg, "position_embedding_type", "absolute") != "absolute" or getattr(cfg, "is_decoder", False):
        return None
    if not hasattr(model, "classifier"):
        return None
    for family, find in (("bert", _layers_bert), ("albert", _layers_albert)):
        if cfg.model_type == family:
            found = find(model)
            return (family, *found) if found else None
    return None


def _cls_attention(attn, h: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Multi-head attention of [CLS] over all tokens: (rows, 1, hidden) before the output projection."""
    rows, tokens, _ = h.shape
    heads, size = attn.num_attention_heads, attn.attention_head_size
    q = attn.query(h[:, :1]).view(rows, 1, heads, size).transpose(1, 2)
    k = attn.key(h).view(rows, tokens, heads, size).transpose(1, 2)
    v = attn.value(h).view(rows, tokens, heads, size).transpose(1, 2)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(rows, 1, heads * size)


def _last_layer_cls(family: str, layer, h: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if family == "bert":
        a = layer.attention.output(_cls_attention(layer.attention.self, h, mask), h[:, :1])
        return layer.output(layer.intermediate(a), a)
    att = layer.attention  # ALBERT: projection and LayerNorm live inside its attention module
    a = att.LayerNorm(h[:, :1] + att.dense(_cls_attention(att, h, mask)))
    return layer.full_layer_layer_norm(layer.ff_chunk(a) + a)


def _additive_mask(attention_mask: torch.Tensor | None, rows: int, dtype, always: bool = False,
                   padded: bool | None = None) -> torch.Tensor | None:
    """The (rows, 1, 1, tokens) mask the models add to attention scores: 0 where attended, dtype's min at
    padding (what BERT and ALBERT build from a 0/1 mask); None when nothing is padded. `padded` is what the
    batch's maker knew on the host (`inference.Batch`); where it is not known, only a mask on the CPU is asked:
    on a GPU the answer waits for every queued batch (the CPU could not pad the next batch while the GPU
    computes), and a recorded CUDA graph may not ask at all (`always`)."""
    if attention_mask is None or (padded is False and not always):
        return None
    if not always and padded is None and attention_mask.device.type == "cpu" and bool(attention_mask.all()):
        return None
    m = attention_mask.expand(rows, -1)[:, None, None, :].to(dtype)
    return (1.0 - m) * torch.finfo(dtype).min


def _encode(family: str, layers: list, h: torch.Tensor, mask: torch.Tensor | None, cls_last: bool) -> torch.Tensor:
    for layer in layers[:-1]:
        out = layer(h, attention_mask=mask)
        h = out[0] if isinstance(out, tuple) else out
    if cls_last:
        return _last_layer_cls(family, layers[-1], h, mask)
    out = layers[-1](h, attention_mask=mask)
    return out[0] if isinstance(out, tuple) else out


def _embedding_output(clf: Classifier, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    return clf.model.base_model.embeddings(input_ids=inputs["input_ids"], token_type_ids=inputs.get("token_type_ids"))


def _head(clf: Classifier, family: str, cls: torch.Tensor) -> torch.Tensor:
    """Logits from the top layer's [CLS] vectors (rows, hidden): the pooler, then the classifier."""
    base = clf.model.base_model
    pooled = base.pooler_activation(base.pooler(cls)) if family == "albert" else base.pooler(cls[:, None])
    return clf.model.classifier(pooled)


def _padded(inputs: dict) -> bool | None:
    """Whether a batch has padding, where its maker said (`inference.Batch.padded`); None: not known."""
    return getattr(inputs, "padded", None)


def _logits(clf: Classifier, found: tuple, states: torch.Tensor, attention_mask: torch.Tensor | None,
            always_mask: bool = False, padded: bool | None = None) -> torch.Tensor:
    family, layers, mapping_in = found
    mask = _additive_mask(attention_mask, states.shape[0], states.dtype, always=always_mask, padded=padded)
    h = states if mapping_in is None else mapping_in(states)
    return _head(clf, family, _encode(family, layers, h, mask, cls_last=True)[:, 0])


def logits(clf: Classifier, states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """Logits for `states` (rows, tokens, E), the embedding layer's output; `attention_mask` (rows or 1,
    tokens) of 0/1. None when this path does not apply (an unknown layout, a model in training mode)."""
    found = supported(clf)
    return None if found is None else _logits(clf, found, states, attention_mask)


def states_logits(clf: Classifier, found: tuple, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """`logits` with `found` = `supported(clf)` and the mask always applied, asking the device nothing (what a
    recorded CUDA graph of integrated gradients' rounds runs: `graphs.Replayer.path_round`)."""
    return _logits(clf, found, states, attention_mask, always_mask=True)


def inputs_logits(clf: Classifier, inputs: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """Logits for a tokenised batch (input_ids, attention_mask, token_type_ids), as `clf.model(**inputs)`."""
    found = supported(clf)
    if found is None:
        return None
    return _logits(clf, found, _embedding_output(clf, inputs), inputs.get("attention_mask"), padded=_padded(inputs))


def padded_logits(clf: Classifier, found: tuple, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """`inputs_logits` for a padded batch with `found` = `supported(clf)`, with no question to the device on
    the way (what `graphs` records): the mask is applied whether or not anything is padded."""
    return states_logits(clf, found, _embedding_output(clf, inputs), inputs["attention_mask"])


def hidden_state(clf: Classifier, inputs: dict[str, torch.Tensor], layer: int, cls_only: bool = False
                 ) -> torch.Tensor | None:
    """`hidden_states[layer]` of the base model's forward (0: embedding output, after ALBERT's projection), run
    only that far; with `cls_only` the last layer run is for [CLS] alone and (rows, 1, hidden) comes back."""
    found = supported(clf)
    if found is None:
        return None
    family, layers, mapping_in = found
    inner = len(layers) // clf.model.config.num_hidden_layers  # ALBERT: a "layer" is a group's inner layers
    states = _embedding_output(clf, inputs)
    h = states if mapping_in is None else mapping_in(states)
    if layer == 0:
        return h[:, :1] if cls_only else h
    mask = _additive_mask(inputs.get("attention_mask"), h.shape[0], h.dtype, padded=_padded(inputs))
    return _encode(family, layers[: layer * inner], h, mask, cls_last=cls_only)


def inputs_logits_and_state(clf: Classifier, inputs: dict[str, torch.Tensor], layer: int, cls_only: bool = False
                            ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(logits, `hidden_states[layer]`) from one forward pass: a projection colours its points by the
    predictions of the same pass that embeds them, where predicting and embedding apart ran the encoder twice.
    `cls_only` at the top layer: its [CLS] row alone, (rows, 1, hidden)."""
    found = supported(clf)
    if found is None:
        return None
    family, layers, mapping_in = found
    depth = layer * (len(layers) // clf.model.config.num_hidden_layers)  # ALBERT: a group's inner layers
    states = _embedding_output(clf, inputs)
    h = states if mapping_in is None else mapping_in(states)
    mask = _additive_mask(inputs.get("attention_mask"), h.shape[0], h.dtype, padded=_padded(inputs))
    if depth >= len(layers):
        state = _encode(family, layers, h, mask, cls_last=cls_only)
        return _head(clf, family, state[:, 0]), state
    for block in layers[:depth]:
        out = block(h, attention_mask=mask)
        h = out[0] if isinstance(out, tuple) else out
    return _head(clf, family, _encode(family, layers[depth:], h, mask, cls_last=True)[:, 0]), h
