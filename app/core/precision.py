"""Numeric precision of a loaded model: fp32 (the default: every technique, and the only one gradients use),
int8 (dynamically quantised linear layers, a CPU path), or bf16 / fp16 (half-precision weights on a GPU, bf16
autocast on a CPU), each for forward-only batch work: embed, benchmark, CheckList, attacks, projection.

int8 here is PyTorch's dynamic quantisation (`torch.ao.quantization.quantize_dynamic`): weights stored as int8
per output channel, activations quantised at run time, products on the CPU's int8 instructions (VNNI where it
has them) through PyTorch's x86 quantised engine. Two changes to its stock layer (`TokenScaledLinear`) took the
offline BERT's [CLS] vectors from a minimum cosine of 0.86 to fp32 (mean 0.975) to 0.995 on the first 3,000 AG News
texts: every token's activations are mapped onto one range by their own minimum and span before the batch's one
quantisation step (the stock layer's step is set by the batch's extremes: one outlier token coarsened every other
token's, and a text's answer depended on its batch mates; now it does not), and the activations use all 8 bits
where the CPU's int8 product can't overflow (the stock layer keeps 7 for CPUs whose 16-bit accumulation saturates).

PyTorch marks `torch.ao.quantization` deprecated in favour of torchao (not a dependency here); the 2.13 this
project pins still ships it, kernels included.
"""
from __future__ import annotations

import contextlib

import torch

from .errors import InputError

PRECISIONS = ("fp32", "int8", "bf16", "fp16")
HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}


def check_on(precision: str, device: str) -> None:
    """Refuse a precision the device can't run, saying what to use instead: int8 is PyTorch's CPU quantised
    engine; fp16 on a CPU has no fast kernels (bf16 does, on CPUs with AVX-512 BF16 or AMX)."""
    kind = torch.device(device).type
    if precision == "int8" and kind != "cpu":
        raise InputError(f"precision: int8 is a CPU path (PyTorch's dynamic quantisation); on {device} use bf16 or "
                         "fp16, or --device cpu for int8")
    if precision == "fp16" and kind == "cpu":
        raise InputError("precision: fp16 runs on a GPU; on the CPU use bf16 (autocast) or fp32")


def to_half(model: torch.nn.Module, precision: str, device: str) -> None:
    """On a GPU, a half precision's weights are cast once at load (as sentence-transformers' `half()`); on the
    CPU the fp32 weights stay and `autocast` runs the products in bf16."""
    if precision in HALF and torch.device(device).type != "cpu":
        model.to(HALF[precision])


def autocast(clf) -> contextlib.AbstractContextManager:
    """The forward pass's context for `clf`'s precision: autocast to bf16 / fp16 (LayerNorm and softmax stay
    fp32 under it), nothing for fp32 and int8."""
    precision = getattr(clf, "precision", "fp32")
    if precision not in HALF:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(clf.device).type, dtype=HALF[precision])


def _head(name: str) -> bool:
    """The pooler and the classification head, whatever the family calls them (RoBERTa's `classifier.dense`)."""
    parts = name.split(".")
    return "pooler" in parts or any(p.endswith("classifier") for p in parts)


_ONCE: dict[str, object] = {}  # the CPU check's answer and the layer class, made once


def full_range_ok() -> bool:
    """Whether this CPU's int8 product keeps 8-bit activations exact: the worst case for a 16-bit accumulation
    (every activation at 255 and every weight at 127, whose pairs overflow int16) against its exact sum. CPUs
    with VNNI accumulate in 32 bits; older AVX2/AVX-512 kernels saturate, and there the stock 7 bits stay."""
    if "full_range" not in _ONCE:
        k = 64
        packed = torch.ops.quantized.linear_prepack(
            torch.quantize_per_tensor(torch.ones(8, k), 1 / 127, 0, torch.qint8), None)
        y = torch.ops.quantized.linear_dynamic(torch.ones(4, k), packed, reduce_range=False)
        _ONCE["full_range"] = bool(torch.allclose(y, torch.full_like(y, float(k)), rtol=0.02))
    return bool(_ONCE["full_range"])


def _dynamic_linear() -> type:
    from torch.ao.nn.quantized.dynamic import Linear

    return Linear


class _TokenScaled:
    """Marks the core's int8 layers (see `TokenScaledLinear`, built once transformers' quantised module is
    importable)."""


def _token_scaled_class() -> type:
    if "cls" not in _ONCE:
        class TokenScaledLinear(_dynamic_linear(), _TokenScaled):
            """PyTorch's dynamic int8 linear layer with one activation range per token: each row is mapped onto
            [0, 1] by its own minimum and span before the product and mapped back after (span x the product, plus
            minimum x the weights' row sums, plus the bias), so every token uses all the levels, and the batch's
            one quantisation step (its range is [0, 1] whatever the batch) no longer depends on the batch mates;
            the weights, packed once without their bias, are unchanged."""

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                lo = x.amin(-1, keepdim=True)
                span = (x.amax(-1, keepdim=True) - lo).clamp_min_(1e-12)
                y = torch.ops.quantized.linear_dynamic((x - lo).div_(span), self._packed_params._packed_params,
                                                       reduce_range=not self.full_range)
                y = torch.addcmul(lo * self.weight_sums, y.to(x.dtype), span)  # W x = span W x' + lo W 1
                return y if self.float_bias is None else y.add_(self.float_bias)

            def bias(self):
                return self.float_bias

        _ONCE["cls"] = TokenScaledLinear
    return _ONCE["cls"]  # type: ignore[return-value]


def _token_scaled(layer: torch.nn.Module) -> None:
    """A stock dynamic int8 layer made a `TokenScaledLinear` in place: its bias moves out of the packed
    parameters (it is added after the rescaling)."""
    weight, bias = layer.weight(), layer.bias()
    layer._packed_params.set_weight_bias(weight, None)
    layer.__class__ = _token_scaled_class()
    layer.float_bias = None if bias is None else bias.detach().clone()
    layer.weight_sums = weight.dequantize().sum(1)  # the rows of the int8 weights the product uses
    layer.full_range = full_range_ok()


def quantize_int8(model: torch.nn.Module) -> int:
    """`model`'s encoder linear layers dynamically quantised to int8 in place (weights int8 per output channel,
    activations per token at run time, `TokenScaledLinear`), on this CPU's int8 instructions (VNNI where it has
    them); the pooler and the classifier (a few thousand multiply-adds) stay fp32. Forward only: a quantised
    layer has no gradient, so the core keeps gradients on its fp32 twin. Returns how many layers were quantised
    (an ALBERT's shared layer once: it is one module).

    Measured on the offline BERT over AG News test before the per-token scales: keeping its last layer fp32 did
    not help (the error is spread: every layer's int8 input adds to it, the first the most); the feed-forward
    output layer's input (after GELU, a few tokens far larger than the rest) held most of the error
    (benchmarks/README.md, int8)."""
    import warnings

    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    names = [n for n, m in model.named_modules() if type(m) is torch.nn.Linear and not _head(n)]
    with warnings.catch_warnings():  # torch.ao.quantization announces its move to torchao; the API is current here
        warnings.simplefilter("ignore")
        quantize_dynamic(model, dict.fromkeys(names, per_channel_dynamic_qconfig), dtype=torch.qint8, inplace=True)
    for layer in [m for m in model.modules() if type(m) is _dynamic_linear()]:  # an ALBERT's shared layer once
        _token_scaled(layer)
    return len(names)


def int8_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The layers `quantize_int8` swapped in (an ALBERT's shared ones once)."""
    return [m for m in model.modules() if isinstance(m, _dynamic_linear())]


INT8_MARGIN = 1.1  # int8 is taken only when its product is at least this much faster than fp32's here


def int8_speed() -> dict:
    """int8 against fp32 on a BERT-sized layer on this CPU (256 tokens x 768 -> 3,072, best of five each, after
    the core's own fp32 product choice), timed once per CPU model, PyTorch version and thread count and kept
    beside the matmul choice: {"fp32_s", "int8_s", "speedup", "wins"}. On an Intel Xeon with AVX-512 VNNI and
    AMX the offline pair's int8 batch work took 2.4-3.3x as long as fp32 (issue 40); there it answers in fp32."""
    if "int8" in _ONCE:
        return _ONCE["int8"]  # type: ignore[return-value]
    import time

    from . import kernels

    def measure() -> dict:
        gen = torch.Generator().manual_seed(0)
        layer = torch.nn.Sequential(torch.nn.Linear(768, 3072)).eval().requires_grad_(False)
        x = torch.randn(256, 768, generator=gen)
        fp32 = torch.nn.Sequential(torch.nn.Linear(768, 3072)).eval().requires_grad_(False)
        fp32.load_state_dict(layer.state_dict())
        kernels.accelerate(fp32)
        quantize_int8(layer)

        def best(fn) -> float:
            fn()
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            return min(times)

        with torch.inference_mode():
            f, q = best(lambda: fp32(x)), best(lambda: layer(x))
        return {"fp32_s": f, "int8_s": q, "speedup": round(f / q, 2), "wins": f >= INT8_MARGIN * q}

    hit, _ = kernels.per_cpu("int8-speed", measure, lambda h: {"fp32_s", "int8_s", "wins"} <= set(h))
    _ONCE["int8"] = hit
    return hit
