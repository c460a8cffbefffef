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

Which product a process uses is decided once: `ALBERT_LENS_MATMUL=onednn` or `blas`, or by default (`auto`) a
few milliseconds of timing both on a BERT-sized product; oneDNN is chosen only when clearly faster, so a CPU
whose MKL is already AVX-512 keeps the stock layers. Only inference models are switched (`accelerate`, called
when the core loads a model): a weight that needs its gradient (training) takes the stock path.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time

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
_LOCK = threading.Lock()
_CHOSEN: dict[str, object] = {}


def _onednn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return _OP(x, weight, bias, "none", [], "")


def _usable() -> bool:
    return _OP is not None and torch.backends.mkldnn.is_available()


def _best_of(fn, reps: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def calibrate(rows: int = 256, inner: int = 384, outer: int = 1536) -> dict:
    """Times both products on one (rows x inner) @ (inner x outer) float32 product, best of five each, and
    checks oneDNN's result against the stock one."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(rows, inner, generator=gen)
    w = torch.randn(outer, inner, generator=gen) / inner**0.5
    b = torch.randn(outer, generator=gen)
    blas = _best_of(lambda: F.linear(x, w, b))
    try:
        y = _onednn(x, w, b)
        agrees = bool(torch.allclose(y, F.linear(x, w, b), rtol=1e-4, atol=1e-4))
        dnn = _best_of(lambda: _onednn(x, w, b))
    except Exception:  # noqa: BLE001 - an op this build can't run is simply not chosen
        return {"blas_s": blas, "onednn_s": None, "agrees": False}
    return {"blas_s": blas, "onednn_s": dnn, "agrees": agrees}


def backend() -> str:
    """"onednn" or "blas", decided once per process (see the module's docstring)."""
    with _LOCK:
        if "backend" in _CHOSEN:
            return _CHOSEN["backend"]  # type: ignore[return-value]
        asked = os.environ.get(ENV, "auto").strip().lower() or "auto"
        by = asked
        if asked not in CHOICES:
            raise LensError(f"{ENV}: {asked!r} is not one of {', '.join(CHOICES)}")
        if asked == "onednn" and not _usable():
            raise LensError(f"{ENV}: onednn was asked for, but this PyTorch build has no oneDNN linear op")
        if asked == "auto":
            asked, timing, by = _auto_choice()
            _CHOSEN["timing"] = timing
        _CHOSEN["backend"], _CHOSEN["chosen_by"] = asked, by
        return asked


def runtime_cache():
    """The project's cache folder (where the choice is kept)."""
    from .runtime import cache_dir

    return cache_dir()


def _choice_key() -> str:
    """What a cached choice holds for: this CPU's model, PyTorch's version and the threads a product uses."""
    from .device import cpu_name

    return f"{cpu_name()} | torch {torch.__version__} | {torch.get_num_threads()} threads"


def per_cpu(name: str, measure, valid) -> tuple[dict, bool]:
    """(a measurement, whether it came from the cache): `measure()` once per CPU model, PyTorch version and thread
    count, kept in the cache folder as `name`.json and taken by every later process; `valid(entry)` says whether a
    kept entry can be used (a damaged file is measured over)."""
    import json

    path = runtime_cache() / f"{name}.json"
    key = _choice_key()
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    known = known if isinstance(known, dict) else {}
    hit = known.get(key)
    if isinstance(hit, dict) and valid(hit):
        return hit, True
    known[key] = hit = measure()
    try:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1), encoding="utf-8")
        tmp.replace(path)  # whole, or not at all: a process reading it meanwhile sees the old file or the new
    except OSError:
        pass  # a read-only cache: this process still uses its own measurement
    return hit, False


def _auto_choice() -> tuple[str, dict, str]:
    """(product, its timing, how it was chosen). Timed once per CPU model (`per_cpu`): on an Intel Xeon oneDNN
    measured 1.08-1.31x the default product across fresh processes, against the 1.11x bar, so two processes of one
    app chose differently; now the first process's choice is every later one's."""

    def measure() -> dict:
        timing = calibrate() if _usable() else {"blas_s": None, "onednn_s": None, "agrees": False}
        fast = timing["onednn_s"] is not None and timing["onednn_s"] < 0.9 * timing["blas_s"]
        return {"backend": "onednn" if fast and timing["agrees"] else "blas", "timing": timing}

    hit, cached = per_cpu("matmul-choice", measure, lambda h: h.get("backend") in ("onednn", "blas")
                          and isinstance(h.get("timing"), dict))
    return hit["backend"], hit["timing"], "auto (cached for this CPU)" if cached else "auto"


def describe() -> dict:
    """What the model-facts panel shows: the product in use and, when timed, both products' times."""
    chosen = backend()
    timing = _CHOSEN.get("timing") or {}
    out = {"matmul": "oneDNN (CPU-feature kernels)" if chosen == "onednn" else "PyTorch default (BLAS)",
           "chosen_by": _CHOSEN["chosen_by"]}
    if timing.get("onednn_s") and timing.get("blas_s"):
        out["onednn_speedup"] = round(timing["blas_s"] / timing["onednn_s"], 2)
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


def accelerate(model: torch.nn.Module) -> int:
    """Switches the model's plain `nn.Linear` layers to `OneDNNLinear` when oneDNN is this process's product;
    returns how many were switched. The model's weights must not need gradients (the core freezes them)."""
    if backend() != "onednn":
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
