"""Which device answers: `auto` (CUDA, then Apple's MPS, then the CPU), `cpu`, `cuda`, `cuda:N` or `mps`.

Every front end takes the same word (`--device`, or `ALBERT_LENS_DEVICE` when none is given) and hands it to
`Pair.resolve`; a loaded model lives on one device, and the core moves each tokenised batch there once and each
result back once. The CPU-only pieces (oneDNN layers, int8) stay on the CPU: `loading` skips them elsewhere.
"""
from __future__ import annotations

import os
import re

import torch

from .errors import DeviceError

ENV = "ALBERT_LENS_DEVICE"
CHOICES = "auto, cpu, cuda, cuda:N or mps"
_NAME = re.compile(r"^(auto|cpu|mps|cuda)(?::(\d{1,2}))?$")


def _mps() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def available() -> list[str]:
    """The devices this process can use, CUDA's numbered, in the order `auto` prefers them."""
    found = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    if _mps():
        found.append("mps")
    return found + ["cpu"]


def resolve(name: str | None = None) -> str:
    """The canonical device for `name` ("cuda" is "cuda:0"); None reads ALBERT_LENS_DEVICE, then takes `auto`.

    Raises DeviceError naming the devices that are here when the one asked for is not."""
    given = name if name not in (None, "") else os.environ.get(ENV, "") or "auto"
    word = str(given).strip().lower()
    found = _NAME.match(word)
    if found is None or (found.group(2) is not None and found.group(1) != "cuda"):
        raise DeviceError(f"device: {str(given)[:40]!r} is not one of {CHOICES}")
    here = available()
    kind, index = found.group(1), found.group(2)
    if kind == "auto":
        return here[0]
    if kind == "cuda":
        kind = f"cuda:{int(index or 0)}"
    if kind not in here:
        raise DeviceError(f"device: {kind} is not available on this machine; available: {', '.join(here)}")
    return kind


def is_cpu(device: str | torch.device) -> bool:
    return torch.device(device).type == "cpu"


def float64_home(device: str | torch.device) -> torch.device:
    """Where float64 sums over `device`'s results are taken: the device itself, or the CPU for Apple's MPS,
    which has no float64 (integrated gradients' attributions and the attention statistics are summed in float64
    so that their checks show the method's error, not float32's rounding)."""
    dev = torch.device(device)
    return torch.device("cpu") if dev.type == "mps" else dev


def wide(t: torch.Tensor) -> torch.Tensor:
    """`t` in float64 at its device's `float64_home` (on MPS, a copy to the CPU; elsewhere a cast in place)."""
    return t.to(float64_home(t.device), torch.float64)


def wide_tensor(values, device: str | torch.device) -> torch.Tensor:
    """Host values (quadrature weights) as a float64 tensor at `device`'s `float64_home`."""
    return torch.tensor(values, dtype=torch.float64, device=float64_home(device))


def synchronize(device: str | torch.device) -> None:
    """Wait for the device's queued work: a timer read before it would time the queueing, not the work."""
    kind = torch.device(device).type
    if kind == "cuda":
        torch.cuda.synchronize(device)
    elif kind == "mps":
        torch.mps.synchronize()


ATTENTION_ENV = "ALBERT_LENS_ATTENTION"
ATTENTION = ("auto", "math", "efficient", "flash", "cudnn")  # PyTorch's SDPA backends, by their short names
CUDA_ATTENTION = "efficient"  # a CUDA model's backend when ALBERT_LENS_ATTENTION names none: cuDNN's, PyTorch's
# first choice, builds a plan for each new shape (~0.1 s, and a dataset's batches come in dozens of widths), the
# memory-efficient kernel none, and it is as fast once warm (benchmarks/README.md, the GPU section)
_held: list = []  # the pinned order's context, held open for the process (PyTorch keeps the order globally)


def attention_backend() -> str:
    """The attention backend a CUDA model prefers: ALBERT_LENS_ATTENTION, else CUDA_ATTENTION ("auto": PyTorch's own
    order). Raises DeviceError naming the variable and its choices for any other word."""
    word = (os.environ.get(ATTENTION_ENV, "") or CUDA_ATTENTION).strip().lower()
    if word not in ATTENTION:
        raise DeviceError(f"{ATTENTION_ENV}: {word[:20]!r} is not one of {', '.join(ATTENTION)}")
    return word


def sdpa_backends() -> dict:
    """PyTorch's attention backends by their short names, math last (the order a pin keeps after its choice)."""
    from torch.nn.attention import SDPBackend

    return {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}


def pin_attention(device: str | torch.device) -> str:
    """Put the chosen attention backend first in PyTorch's order of preference for scaled dot-product attention,
    the others kept after it (math last), so a call it cannot serve (flash in fp32, say) falls back rather than
    fails; with "auto", PyTorch's own order; on a CPU, nothing changes. Returns the order's first backend, or "auto"."""
    word = attention_backend()
    if torch.device(device).type != "cuda":
        return "auto"
    while _held:  # a second pin replaces the first; "auto" puts PyTorch's own order back
        _held.pop().__exit__(None, None, None)
    if word == "auto":
        return "auto"
    from torch.nn.attention import sdpa_kernel

    members = sdpa_backends()
    order = [members[word], *(m for m in members.values() if m is not members[word])]
    held = sdpa_kernel(order, set_priority=True)
    held.__enter__()
    _held.append(held)
    return word


def describe(device: str | torch.device) -> dict:
    """What a result says of the device that computed it: its name, and for a GPU its memory."""
    dev = torch.device(device)
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        return {"device": str(dev), "device_name": props.name, "device_memory_gb": round(props.total_memory / 2**30, 1)}
    if dev.type == "mps":
        return {"device": "mps", "device_name": "Apple GPU (MPS)"}
    return {"device": "cpu", "device_name": cpu_name()}


def memory(device: str | torch.device) -> dict:
    """A GPU's memory held by this process now and (CUDA) at its peak, in MB (empty on the CPU)."""
    dev = torch.device(device)
    if dev.type == "mps":  # what this process's tensors hold there (MPS keeps no peak)
        return {"gpu_memory_mb": round(torch.mps.current_allocated_memory() / 2**20, 1)}
    if dev.type != "cuda":
        return {}
    return {"gpu_memory_mb": round(torch.cuda.memory_allocated(dev) / 2**20, 1),
            "gpu_peak_memory_mb": round(torch.cuda.max_memory_allocated(dev) / 2**20, 1)}


def cpu_name() -> str:
    """The processor's model name (every speed figure names it)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()
