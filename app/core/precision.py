"""Numeric precision of a loaded model: fp32 (the default: every technique, and the only one gradients use) or
int8 (dynamically quantised linear layers, for forward-only batch work: embed, benchmark, CheckList, attacks,
projection).

int8 here is PyTorch's dynamic quantisation (`torch.ao.quantization.quantize_dynamic`): weights stored as int8
per output channel, activations quantised per batch at run time, products on the CPU's int8 instructions (VNNI
where it has them) through PyTorch's x86 quantised engine. PyTorch marks `torch.ao.quantization` deprecated in
favour of torchao (not a dependency here); the 2.13 this project pins still ships it, kernels included.
"""
from __future__ import annotations

import torch

PRECISIONS = ("fp32", "int8")


def _head(name: str) -> bool:
    """The pooler and the classification head, whatever the family calls them (RoBERTa's `classifier.dense`)."""
    parts = name.split(".")
    return "pooler" in parts or any(p.endswith("classifier") for p in parts)


def quantize_int8(model: torch.nn.Module) -> int:
    """`model`'s encoder linear layers dynamically quantised to int8 in place (weights int8 per output channel,
    activations quantised per batch at run time), on this CPU's int8 instructions (VNNI where it has them); the
    pooler and the classifier (a few thousand multiply-adds) stay fp32. Forward only: a quantised layer has no
    gradient, so the core keeps gradients on its fp32 twin. Returns how many layers were quantised (an ALBERT's
    shared layer once: it is one module).

    Measured on the offline BERT over AG News test: keeping its last layer fp32 did not help (the error is
    spread: every layer's int8 input adds to it, the first the most); see benchmarks/README.md, int8."""
    import warnings

    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    names = [n for n, m in model.named_modules() if type(m) is torch.nn.Linear and not _head(n)]
    with warnings.catch_warnings():  # torch.ao.quantization announces its move to torchao; the API is current here
        warnings.simplefilter("ignore")
        quantize_dynamic(model, dict.fromkeys(names, per_channel_dynamic_qconfig), dtype=torch.qint8, inplace=True)
    return len(names)


def int8_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The layers `quantize_int8` swapped in (an ALBERT's shared ones once)."""
    from torch.ao.nn.quantized.dynamic import Linear

    return [m for m in model.modules() if isinstance(m, Linear)]
