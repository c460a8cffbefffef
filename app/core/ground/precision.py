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
import json
import os

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .errors import InputError
from .runtime import env_flag

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
    if getattr(getattr(clf, "spec", None), "emulated", False):
        return EmulatedBF16()
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


FORCE_ENV = "ALBERT_LENS_FORCE_PRECISION"  # 1: the asked precision answers even where it is slower than fp32


def forced(flag: bool | None = None) -> bool:
    """Whether the asked precision is insisted on: `flag` when given (--force-precision), else
    ALBERT_LENS_FORCE_PRECISION=1 (or the older ALBERT_LENS_INT8=always)."""
    if flag is not None:
        return bool(flag)
    return env_flag(FORCE_ENV) or os.environ.get("ALBERT_LENS_INT8", "").strip().lower() == "always"


# The product-heavy operators that CPU autocast runs in bf16 (PyTorch's lower-precision list, those a transformer
# calls): the emulation rounds their operands to bf16 and their results to bf16, and multiplies in fp32.
_BF16_OPS = {F.linear, torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.baddbmm, torch.Tensor.__matmul__,
             torch.Tensor.matmul, F.scaled_dot_product_attention}


def _round_bf16(t):
    return t.to(torch.bfloat16).float() if isinstance(t, torch.Tensor) and t.is_floating_point() else t


class EmulatedBF16(TorchFunctionMode):
    """bf16 products without bf16 instructions: each product's operands rounded to bf16, multiplied in fp32 and
    the result rounded to bf16, which is what a bf16 unit computes (bf16 x bf16 is exact in fp32, and it
    accumulates in fp32), so answers match autocast's to accumulation order (the offline BERT's logits were
    equal to the last bit against AMX here) at about fp32's speed. On a CPU without bf16 instructions PyTorch's
    own bf16 product is a slow fallback (6x fp32's time under AVX2, benchmarks/README.md, CPUs); this is what a
    forced bf16 runs there."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _BF16_OPS:
            out = func(*[_round_bf16(a) for a in args], **{k: _round_bf16(v) for k, v in kwargs.items()})
            return out.to(torch.bfloat16) if isinstance(out, torch.Tensor) else out
        return func(*args, **kwargs)


LENGTHS = (24, 96)  # tokens of the timed batches: a short sentence (SST-2's median is 23) and a news text's
# rows of each timed batch, as the batch work sends them: int8 took 0.82x fp32's time on 16 rows of 24 tokens and
# 1.06-1.15x on 64 rows of 96-128 on an Intel Xeon (benchmarks/README.md, CPUs), so small batches chose it wrongly
ROWS = 32
# a reduced precision answers where fp32 takes at least this many times its time: the margin over noise, and the
# fidelity check's passes (64 inputs in both precisions, about 13% of a 1,000-text job) that only it pays
MARGIN = 1.25
BUDGET_S = 15.0  # the precision's timing stops after the round that passes this (a base-size model: seconds a run)
_FILLER = ("the film was neither as good nor as bad as its trailer promised , and the news from the markets "
           "and the league went on as before while the company said its results would follow next week . ")


def work_batches(tok, max_length: int) -> list[dict]:
    """The batches a precision or kernel is timed on: `ROWS` texts of each of `LENGTHS` tokens (capped by the
    task's maximum), tokenised as the model's own inputs."""
    out = []
    for n in sorted({min(n, max_length) for n in LENGTHS}):
        out.append(dict(tok([_FILLER * 8] * ROWS, truncation=True, max_length=n, return_tensors="pt")))
    return out


def forward_run(model: torch.nn.Module, batches: list[dict], context=contextlib.nullcontext):
    """A callable that runs `model`'s forward on every batch under `context()` (no gradients)."""

    def run() -> None:
        with torch.inference_mode(), context():
            for b in batches:
                model(**b)

    return run


def architecture_key(model: torch.nn.Module, max_length: int) -> str:
    """What a timing holds for: the model's class and the shapes its products take (not where its files sit nor
    their weights' values: two copies or fine-tunes of one architecture run at one speed)."""
    cfg = getattr(model, "config", None)
    shape = {k: getattr(cfg, k, None) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                 "intermediate_size", "embedding_size", "hidden_act", "vocab_size",
                                                 "num_hidden_groups", "num_labels")}
    return json.dumps([type(model).__name__, shape, max_length], sort_keys=True, default=str)


def timed(fp, low, asked: str) -> dict:
    """`fp` (fp32) against `low` (the same model at `asked`) on this CPU, kept per machine and model architecture
    (`tuning.decided`): {"fp32_s", "asked_s"} on the batch work's batches, "fp32_one_s", "asked_one_s" on one input
    (Compare's), and for bf16 "emulated_s" (`EmulatedBF16` on the fp32 model)."""
    from . import tuning

    def ctx():
        return torch.autocast("cpu", dtype=HALF[asked]) if asked in HALF else contextlib.nullcontext()

    def decided(t: dict[str, list[float]]) -> bool:
        """Whether the rounds so far settle what `choose` reads of them: `asked` against fp32 by `MARGIN` (won or
        lost), and bf16's own products against their emulation."""
        apart = tuning.apart
        if not (apart(t["fp32_s"], t["asked_s"], MARGIN) or apart(t["asked_s"], t["fp32_s"], 1 / MARGIN)):
            return False
        return "emulated_s" not in t or apart(t["emulated_s"], t["asked_s"]) or apart(t["asked_s"], t["emulated_s"])

    def measure() -> dict:
        batches = work_batches(fp.base_tokenizer, fp.max_length)
        runs = {"fp32_s": forward_run(fp.model, batches), "asked_s": forward_run(low.model, batches, ctx)}
        if asked == "bf16":
            runs["emulated_s"] = forward_run(fp.model, batches, EmulatedBF16)
        out = tuning.alternated(runs, budget_s=BUDGET_S, settled=decided)
        one = [{k: v[:1] for k, v in batches[0].items()}]  # one short input, as Compare sends it
        single = tuning.alternated({"fp32_one_s": forward_run(fp.model, one),
                                    "asked_one_s": forward_run(low.model, one, ctx)}, reps=15, budget_s=BUDGET_S)
        return {**out, **single}

    hit, _ = tuning.decided(f"precision-{asked}", architecture_key(fp.model, fp.max_length), measure,
                            lambda h: tuning.seconds(h, "fp32_s", "asked_s", "fp32_one_s", "asked_one_s")
                            and (asked != "bf16" or tuning.seconds(h, "emulated_s")))
    return hit


def _shown(seconds: float) -> float:
    """Seconds to four significant digits, as a choice's timing shows them (never 0: a ratio divides by it)."""
    return max(float(f"{seconds:.4g}"), 1e-9)


def choose(fp_models, low_models, asked: str, force: bool) -> dict:
    """Which precision answers a pair asked for `asked` on the CPU: {"asked", "used", "why", "forced",
    "emulated", "timing"}. `asked` answers only where both models' forward passes together take at most
    1/`MARGIN` of fp32's, timed on this CPU (`timed`), or where forced; else fp32 answers, and `why` says
    how much slower `asked` was. A forced bf16 runs emulated (`EmulatedBF16`) where that is faster than the CPU's
    own bf16 products. Where `asked` answers unforced, "one_input" says whether one input at a time (Compare)
    answers in it too, by its own timing (bf16 under AMX: 2.3x faster on batches, slower on one text)."""
    from . import tuning
    from .device import cpu_name

    times = [timed(fp, low, asked) for fp, low in zip(fp_models, low_models)]
    # the times as shown (four significant digits: a tiny model's forward takes well under a millisecond), and
    # the ratio and the choice made from those very numbers, so that "took 5.43x" is what the timing shown says
    f32, low = _shown(sum(t["fp32_s"] for t in times)), _shown(sum(t["asked_s"] for t in times))
    ratio = low / f32
    emulated = asked == "bf16" and sum(t.get("emulated_s", float("inf")) for t in times) < low
    timing = {"fp32_s": f32, f"{asked}_s": low}
    if asked == "bf16":
        timing["bf16_emulated_s"] = _shown(sum(t["emulated_s"] for t in times))
    took = f"{asked} took {ratio:.2f}x fp32's time on this CPU ({cpu_name()})"
    one_f, one_q = sum(t["fp32_one_s"] for t in times), sum(t["asked_one_s"] for t in times)
    # one input at a time (Compare): its own timing, as small batches favour another precision than large ones
    one = {"used": "fp32", "why": f"for one input at a time {asked} took {one_q / one_f:.2f}x fp32's time, so "
                                  "fp32 answers there"}
    if tuning.wins(one_q, one_f, tuning.MARGIN):
        one = {"used": asked, "why": f"for one input at a time {asked} took {one_q / one_f:.2f}x fp32's time"}
    if force:
        how = " (emulated: bf16-rounded products in fp32, faster here than its bf16 instructions)" if emulated else ""
        return {"asked": asked, "used": asked, "forced": True, "emulated": emulated, "timing": timing,
                "why": f"forced ({FORCE_ENV} or --force-precision){how}; {took}"}
    if tuning.wins(low, f32, MARGIN):
        return {"asked": asked, "used": asked, "forced": False, "emulated": False, "timing": timing,
                "why": took, "one_input": one}
    return {"asked": asked, "used": "fp32", "forced": False, "emulated": False, "timing": timing,
            "why": f"{took}, so fp32 answered ({asked} pays from {1 / MARGIN:.2f}x)"}
