"""Linear layers through oneDNN's matrix product where it beats the default BLAS on this CPU.

PyTorch's CPU wheels run a float32 `nn.Linear` through MKL's sgemm, which on AMD processors takes its AVX2 path;
oneDNN, inside the same wheel, picks its kernel from the CPU's features. On this project's machine (AMD EPYC,
Zen 5, 2 cores) oneDNN's AVX-512 kernel does BERT's products at about 505 GFLOP/s against MKL's 215, and an
integrated-gradients node (forward and backward) takes 1.7x less time (benchmarks/README.md). The arithmetic is
the same float32 (oneDNN's strict mode: no bfloat16 or TF32), summed in another order, so results differ from
the stock layer at float32 rounding only (tests/test_kernels.py).

The tanh-approximated GELU that `albert-base-v2` names (`gelu_new`) is written in transformers as seven
element-wise operations in Python, each a pass over the (rows x tokens x 3,072) feed-forward tensor and each with
its own backward; it made ALBERT's integrated-gradients round 1.3x BERT's at base size (BERT's `gelu` is one
fused operator). `fuse_activations` gives such a model PyTorch's fused `gelu(approximate="tanh")`, the same
formula (equal to float32 rounding), whatever the matrix product.

Which kernels a model uses is decided by timing the model's own forward pass on this CPU (`tune`, once per
machine and model, kept for every process: `tuning.decided`); a one-layer product's timing had sat on its
threshold on an Intel Xeon, so two processes of one app chose differently. `ALBERT_LENS_MATMUL=onednn` or
`blas` decides instead. Only inference models are switched (the core freezes their weights): a weight that needs
its gradient (training) takes the stock path.
"""
from __future__ import annotations

import contextlib
import os
import threading

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from .errors import LensError

# oneDNN keeps a compiled primitive per product shape, 1,024 by default; text lengths and IG's row counts make many
# shapes, and a process's memory grew by 480 MB over 400 of them and kept growing (benchmarks/kernel_memory.py);
# with 64 it stays flat, no slower (a primitive is rebuilt in ~0.4 ms). oneDNN reads this at its first primitive,
# so it is set on import, before any model runs; an operator's own value is kept.
PRIMITIVE_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
os.environ.setdefault(PRIMITIVE_CACHE, "64")

CHOICES = ("auto", "onednn", "blas")
ENV = "ALBERT_LENS_MATMUL"
_OP = getattr(getattr(torch.ops, "mkldnn", None), "_linear_pointwise", None)
BUDGET_S = 3.0  # the kernels' timing stops after the round that passes this (it runs at a model's first load here)
_LOCK = threading.Lock()
_CHOSEN: dict[str, object] = {}


def _onednn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return _OP(x, weight, bias, "none", [], "")


def _usable() -> bool:
    return _OP is not None and torch.backends.mkldnn.is_available()


def backend() -> str:
    """"onednn", "blas" (ALBERT_LENS_MATMUL, read once per process) or "auto": each model's own choice, timed on
    its forward pass (`tune`)."""
    with _LOCK:
        if "backend" in _CHOSEN:
            return _CHOSEN["backend"]  # type: ignore[return-value]
        asked = os.environ.get(ENV, "auto").strip().lower() or "auto"
        if asked not in CHOICES:
            raise LensError(f"{ENV}: {asked!r} is not one of {', '.join(CHOICES)}")
        if asked == "onednn" and not _usable():
            raise LensError(f"{ENV}: onednn was asked for, but this PyTorch build has no oneDNN linear op")
        _CHOSEN["backend"] = asked
        return asked


def _set(model: torch.nn.Module, onednn: bool, fused: bool) -> None:
    """The model's linear layers on oneDNN or PyTorch's default, its `gelu_new` fused or transformers' own."""
    gelu, fast = _new_gelu_class(), _fused_gelu_class()
    for m in model.modules():
        if type(m) in (torch.nn.Linear, OneDNNLinear):
            m.__class__ = OneDNNLinear if onednn else torch.nn.Linear
        elif gelu is not None and type(m) in (gelu, fast):
            m.__class__ = fast if fused else gelu


def _has_gelu_new(model: torch.nn.Module) -> bool:
    gelu, fast = _new_gelu_class(), _fused_gelu_class()
    return gelu is not None and any(type(m) in (gelu, fast) for m in model.modules())


def tune(model: torch.nn.Module, key: str, batches: list[dict]) -> dict:
    """Chooses the model's kernels on this CPU by timing its own forward pass on the first of `batches` (those a
    precision is timed on, `precision.work_batches`; within `BUDGET_S`): PyTorch's stock layers, the fused GELU
    (models with `gelu_new`) and oneDNN's linear layers (with the fused GELU), in turns (`tuning.alternated`). An
    option is taken only when it is `tuning.MARGIN` times faster than the default (the fused GELU where the model
    has `gelu_new`, else the stock layers), and oneDNN only when its logits equal the stock ones to float32
    rounding. Kept per machine and model (`tuning.decided`): every process on the machine takes the first one's
    choice. ALBERT_LENS_MATMUL=onednn or blas decides instead (with the fused GELU). Returns {"onednn", "fused",
    "chosen_by", "timing"}, also kept on the model (`chosen`)."""
    from . import tuning

    def run() -> torch.Tensor:
        with torch.inference_mode():
            return [model(**b).logits for b in batches][0]

    batches = batches[:1]  # the short batch: this runs at every first load on a machine, so it stays cheap

    asked = backend()
    if asked != "auto":
        choice = {"onednn": asked == "onednn", "fused": True, "chosen_by": asked, "timing": {}}
    else:
        def measure() -> dict:
            runs = {"stock": lambda: (_set(model, False, False), run())}
            if _has_gelu_new(model):
                runs["fused"] = lambda: (_set(model, False, True), run())
            agrees = False
            if _usable():
                try:
                    _set(model, False, True)
                    ref = run()
                    _set(model, True, True)
                    agrees = bool(torch.allclose(run(), ref, rtol=1e-4, atol=1e-4))
                except Exception:  # noqa: BLE001 - an op this build can't run is simply not chosen
                    agrees = False
            if agrees:
                runs["onednn"] = lambda: (_set(model, True, True), run())
            times = tuning.alternated(runs, budget_s=BUDGET_S)
            # the default: the fused GELU where there is one (the same formula; its backward is one operator
            # instead of seven, which integrated gradients feel more than a forward does), else the stock layers
            default = best = "fused" if "fused" in times else "stock"
            for name, t in times.items():
                if name != default and tuning.wins(t, times[default]) and t < times[best]:
                    best = name
            return {"onednn": best == "onednn", "fused": best != "stock", "agrees": agrees,
                    "timing": {k: round(v, 5) for k, v in times.items()}}

        hit, cached = tuning.decided("kernel-choice", key, measure,
                                     lambda h: isinstance(h.get("onednn"), bool) and isinstance(h.get("fused"), bool))
        choice = {**hit, "chosen_by": "timed on this model (kept for this machine)" if cached
                  else "timed on this model"}
    _set(model, choice["onednn"] and _usable(), choice["fused"])
    model._lens_kernels = choice
    return choice


def chosen(model: torch.nn.Module) -> dict:
    """The model's kernel choice (`tune`), {} where none was made (a GPU, int8)."""
    return getattr(model, "_lens_kernels", {})


def describe(model: torch.nn.Module | None = None) -> dict:
    """What the model-facts panel and the benchmarks show: the product in use and how it was chosen, with the
    timing that decided where the model's was timed."""
    asked = backend()
    if model is None:
        return {"matmul": {"onednn": "oneDNN (CPU-feature kernels)", "blas": "PyTorch default (BLAS)"}.get(
            asked, "per model, timed on its forward pass"), "chosen_by": asked}
    c = chosen(model)
    out = {"matmul": "oneDNN (CPU-feature kernels)" if switched(model) else "PyTorch default (BLAS)",
           "fused_gelu": bool(fused(model)), "chosen_by": c.get("chosen_by", asked)}
    t = c.get("timing") or {}
    if t.get("onednn") and t.get("stock"):
        out["onednn_speedup"] = round(t["stock"] / t["onednn"], 2)
    return out


class _LinearFn(torch.autograd.Function):
    """y = x W^T + b by oneDNN; the input's gradient is oneDNN's product with W (a transposed view, no copy).
    Weights get no gradient here: the caller sends weights that need one to the stock layer."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(weight)
        return _onednn(x, weight, bias)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (weight,) = ctx.saved_tensors
        return _onednn(grad.contiguous(), weight.t(), None), None, None


class OneDNNLinear(torch.nn.Linear):
    """An `nn.Linear` (same parameters, same state dict) whose float32 inference runs through oneDNN when the
    product is large enough to gain: a oneDNN call costs ~11 us whatever its size, so below `MIN_MACS`
    multiply-adds PyTorch's default is faster (measured here: 12 tokens x 384 -> 384, 1.8M, 24 against 35 us;
    64 x 128 -> 128, 1.0M, 17 against 14 us; a classifier row or a tiny model, 12 against 2-4 us)."""

    MIN_MACS = 1_500_000

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if (x.dtype != torch.float32 or w.dtype != torch.float32 or x.device.type != "cpu" or x.dim() < 2
                or x.numel() * self.out_features < self.MIN_MACS
                or w.requires_grad or (self.bias is not None and self.bias.requires_grad)):
            return F.linear(x, w, self.bias)
        return _LinearFn.apply(x, w, self.bias)


def _new_gelu_class():
    try:  # deferred: transformers is loaded with the first model
        from transformers.activations import NewGELUActivation
    except ImportError:  # pragma: no cover - every supported transformers has it
        return None
    return NewGELUActivation


_FUSED: dict[str, type] = {}


class _Fused:
    """Marks an activation module whose class `fuse_activations` swapped (`stock` swaps it back)."""


def _fused_gelu_class():
    base = _new_gelu_class()
    if base is None:
        return None
    if "cls" not in _FUSED:
        class FusedTanhGELU(base, _Fused):
            """transformers' `gelu_new` as one fused PyTorch operator (forward and backward)."""

            def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 - the parent's name
                return F.gelu(input, approximate="tanh")

        _FUSED["cls"] = FusedTanhGELU
    return _FUSED["cls"]


def fuse_activations(model: torch.nn.Module) -> int:
    """Swaps the model's `gelu_new` modules for the fused operator; returns how many were swapped."""
    base, fused = _new_gelu_class(), _fused_gelu_class()
    n = 0
    for module in model.modules():
        if base is not None and type(module) is base:
            module.__class__ = fused
            n += 1
    return n


def fused(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's activations that `fuse_activations` swapped."""
    return [m for m in model.modules() if isinstance(m, _Fused)]


def accelerate(model: torch.nn.Module, force: bool = False) -> int:
    """Switches the model's plain `nn.Linear` layers to `OneDNNLinear` when ALBERT_LENS_MATMUL=onednn (or
    `force`: the benchmarks' own models); returns how many were switched. The model's weights must not need
    gradients (the core freezes them)."""
    if not (force and _usable()) and backend() != "onednn":
        return 0
    n = 0
    for module in model.modules():
        if type(module) is torch.nn.Linear:
            module.__class__ = OneDNNLinear
            n += 1
    return n


def switched(model: torch.nn.Module) -> list[OneDNNLinear]:
    """The model's layers that `accelerate` switched to oneDNN."""
    return [m for m in model.modules() if type(m) is OneDNNLinear]


@contextlib.contextmanager
def stock(model: torch.nn.Module):
    """The model with PyTorch's own linear layers and transformers' own activations for the duration (the
    benchmarks' baselines run Captum's tutorial as a stock install would)."""
    layers, acts = switched(model), fused(model)
    for m in layers:
        m.__class__ = torch.nn.Linear
    for m in acts:
        m.__class__ = _new_gelu_class()
    try:
        yield model
    finally:
        for m in layers:
            m.__class__ = OneDNNLinear
        for m in acts:
            m.__class__ = _fused_gelu_class()
