"""Model facts: how many parameters, where they sit, and whether layers share them (ALBERT's headline)."""
from __future__ import annotations

import numpy as np

from ..execution import graphs
from ..ground import device as devices
from ..ground.kernels import OneDNNLinear, describe, switched
from ..ground.precision import int8_layers
from .embeddings import hidden_states


def count_parameters(model) -> int:
    """Unique parameters: a tensor shared by several layers is stored, and counted, once."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def parameter_split(model) -> dict[str, int]:
    """Embeddings / encoder / head, counting shared tensors once. Embeddings: the base model's embedding modules
    and their projection to the hidden size (ALBERT's `embedding_hidden_mapping_in`, ELECTRA's
    `embeddings_project`); head: the pooler and everything outside the base model (DistilBERT's
    `pre_classifier`); encoder: the rest of the base model, whatever the family calls it (`transformer` in
    DistilBERT)."""
    prefix = getattr(model, "base_model_prefix", "") + "."
    seen: set[int] = set()
    split = {"embeddings": 0, "encoder": 0, "head": 0}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            continue
        seen.add(id(p))
        inner = name[len(prefix):] if prefix != "." and name.startswith(prefix) else None
        if inner is None or inner.startswith("pooler"):
            split["head"] += p.numel()
        elif inner.startswith(("embeddings", "word_embedding")) or "embedding_hidden_mapping_in" in inner:
            split["embeddings"] += p.numel()
        else:
            split["encoder"] += p.numel()
    return split


def shares_layers(model) -> bool:
    """True when the encoder applies one set of weights more than once (ALBERT's cross-layer sharing)."""
    config = model.config
    groups = getattr(config, "num_hidden_groups", None)
    return groups is not None and groups < config.num_hidden_layers


def layer_transitions(clf, examples) -> dict[str, list[float]]:
    """Mean L2 distance and cosine similarity between each layer's input and output hidden states (averaged
    over tokens and examples): the ALBERT paper's Figure 2, where ALBERT's transitions are smoother."""
    l2, cos = [], []
    for ex in examples:
        states, _ = hidden_states(clf, ex)  # (layers + 1, tokens, hidden)
        a, b = states[:-1], states[1:]
        l2.append(np.linalg.norm(b - a, axis=-1).mean(-1))
        num = (a * b).sum(-1)
        den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1) + 1e-12
        cos.append((num / den).mean(-1))
    return {"l2": np.mean(l2, 0).tolist(), "cosine": np.mean(cos, 0).tolist()}


def linear_layers(model) -> str:
    """Which matrix product the model's linear layers use here: the latency and throughput figures depend on it
    (oneDNN's is 1.7-2.3x PyTorch's default on this project's AMD machine, `app/core/ground/kernels.py`)."""
    where = next(model.parameters()).device
    if where.type != "cpu":
        return f"PyTorch's {where.type.upper()} kernels ({next(model.parameters()).dtype})".replace("torch.", "")
    int8 = int8_layers(model)
    if int8:
        import torch

        return f"int8, dynamically quantised ({len(int8)} layers, torch's {torch.backends.quantized.engine} kernels)"
    how = describe(model)
    gelu = ", fused GELU" if how["fused_gelu"] else ""
    if switched(model):
        speedup = how.get("onednn_speedup")
        gain = f", the model's forward {speedup}x faster than on PyTorch's default here" if speedup else ""
        return f"oneDNN (products of {OneDNNLinear.MIN_MACS / 1e6:g}M+ multiply-adds{gain}{gelu}; {how['chosen_by']})"
    return f"PyTorch default{gelu} ({how['chosen_by']})"


def model_facts(clf, examples) -> dict:
    split = parameter_split(clf.model)
    cfg = clf.model.config
    return {
        "model": clf.name, "source": clf.spec.source, "family": clf.family, "parameters": count_parameters(clf.model),
        **{f"parameters_{k}": v for k, v in split.items()},
        "layers": cfg.num_hidden_layers, "hidden_size": cfg.hidden_size,
        "embedding_size": getattr(cfg, "embedding_size", cfg.hidden_size), "shares_layers": shares_layers(clf.model),
        "vocab_size": cfg.vocab_size, "tokenizer": type(clf.tokenizer).__name__,
        "linear_layers": linear_layers(clf.model), "precision": clf.precision,
        **devices.describe(clf.device), "transitions": layer_transitions(clf, examples),
        **devices.memory(clf.device), **graphs.status(clf),
    }


def facts_batch(pair, batch, progress=None) -> list[dict]:
    """Batch function (the whole sample on one worker): both models' facts; `progress`: models done."""
    out = []
    for clf in pair.models:
        out.append(model_facts(clf, batch))
        if progress:
            progress(len(out), len(pair.models))
    return out


facts_batch.combine = "whole"
facts_batch.reports_progress = True
