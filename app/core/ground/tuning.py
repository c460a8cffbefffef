"""Choices decided by timing the real work on this machine, once, and kept for every process on it.

A speed option (a precision, a kernel) helps on one CPU and hurts on the next: bf16 autocast runs 3x faster than
fp32 where the CPU has AMX and about 6x slower where it has only AVX2 (benchmarks/README.md, CPUs). So an option
is taken only after the model's own forward pass has been timed both ways here, alternated, and only with a margin
(`MARGIN`); the answer is kept per machine key (`machine`: the CPU's model, the instruction sets PyTorch, oneDNN and
MKL are allowed, PyTorch's version and thread count) and per model architecture, in the cache folder (or the one
ALBERT_LENS_TIMING names), under a file lock: two processes started together measure once and choose the same.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

MARGIN = 1.1  # an option is taken only when the default takes at least this many times its time
WARM_UP_S = 0.25  # a first call slower than twice `clear` decides alone only when it also lost by this much
# the variables that cap the instruction sets of the libraries that do the products (see `machine`)
CAPS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
log = logging.getLogger("albert_lens.tuning")


def machine() -> dict:
    """What a timing holds for: the CPU's model, the instruction set ATen dispatches to (after
    ATEN_CPU_CAPABILITY), the caps given to oneDNN and MKL, PyTorch's version and its thread count."""
    from ..ground.device import cpu_name

    return {"cpu": cpu_name(), "aten": torch.backends.cpu.get_cpu_capability(),
            "onednn_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper() or "all",
            "mkl_isa": os.environ.get("MKL_ENABLE_INSTRUCTIONS", "").strip().upper() or "all",
            "torch": torch.__version__, "threads": torch.get_num_threads()}


def machine_key() -> str:
    m = machine()
    return (f"{m['cpu']} | aten {m['aten']} | onednn {m['onednn_isa']} | mkl {m['mkl_isa']} | torch {m['torch']} "
            f"| {m['threads']} threads")


def _cache():
    """Where the decisions are kept: the folder ALBERT_LENS_TIMING names, else the cache folder. They hold for a
    machine (`machine_key`), not for a cache: several caches on one machine (a project's own, each of a test
    suite's) can share one folder of them and time once."""
    from ..ground.runtime import cache_dir

    named = os.environ.get("ALBERT_LENS_TIMING", "").strip()
    if not named:
        return cache_dir()
    path = Path(named)
    with contextlib.suppress(OSError):  # not made: `decided` finds nothing kept and times, as a read-only cache does
        path.mkdir(parents=True, exist_ok=True)
    return path


LOCK_WAIT_S = 120.0  # how long a process waits for another's timing before it times for itself


@contextlib.contextmanager
def _locked(name: str):
    """An exclusive lock on `name` across processes (a file lock in the cache folder; none where it can't be
    made, and then each process decides for itself as before). A lock another process holds is waited for at most
    `LOCK_WAIT_S` seconds, said in one line when the wait starts, and then this process times for itself."""
    try:
        import fcntl

        handle = open(_cache() / f"{name}.lock", "a+")  # noqa: SIM115 - held for the block
    except (ImportError, OSError):
        yield
        return
    try:
        held = _acquire(handle, fcntl, name)
        yield
    finally:
        if held:
            with contextlib.suppress(OSError):
                fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _acquire(handle, fcntl, name: str) -> bool:
    """The lock taken (True), or given up after `LOCK_WAIT_S` (False)."""
    deadline = None
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        except OSError:
            return False
        if deadline is None:
            log.warning("waiting up to %.0f s for another process's timing of %s (lock: %s)", LOCK_WAIT_S, name,
                        handle.name)
            deadline = time.monotonic() + LOCK_WAIT_S
        elif time.monotonic() >= deadline:
            log.warning("%s: the other process still holds %s after %.0f s; timing here instead", name,
                        handle.name, LOCK_WAIT_S)
            return False
        time.sleep(0.1)


def _read(path, *, quiet: bool = False) -> dict:
    """The decisions kept in `path`, or {} where it is missing or unreadable (damaged, nested past what the
    parser takes, not a JSON object): then the choice is timed again and the file written over, with one warning
    line for a file that was there (`quiet`: the second read, under the lock, says nothing more)."""
    say = (lambda *a: None) if quiet else log.warning
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        say("%s unreadable (%s); timing again", path.name, type(exc).__name__)
        return {}
    try:
        known = json.loads(text)
    except (ValueError, RecursionError) as exc:
        say("%s is damaged (%s); timing again", path.name, type(exc).__name__)
        return {}
    if not isinstance(known, dict):
        say("%s holds no decisions (a JSON %s); timing again", path.name, type(known).__name__)
        return {}
    return known


def seconds(entry: dict, *keys: str) -> bool:
    """Whether each of `keys` in a kept entry is a time: a finite, non-negative number (a hand-edited or damaged
    file may hold text, null or a list there)."""
    return all(isinstance(entry.get(k), (int, float)) and not isinstance(entry.get(k), bool)
               and math.isfinite(entry[k]) and entry[k] >= 0 for k in keys)


def decided(name: str, key: str, measure: Callable[[], dict], valid: Callable[[dict], bool]) -> tuple[dict, bool]:
    """(a decision, whether it came from the cache): `measure()` once per machine key and `key` (a model, say),
    kept in the cache folder as `name`.json; `valid(entry)` says whether a kept entry can be used (a damaged file
    or entry is measured over). Under a file lock, so that processes started together take one measurement."""
    path = _cache() / f"{name}.json"
    full = f"{machine_key()} | {key}" if key else machine_key()
    hit = _read(path).get(full)
    if _usable(hit, valid):
        return hit, True
    with _locked(name):
        known = _read(path, quiet=True)  # another process may have decided while this one waited
        hit = known.get(full)
        if _usable(hit, valid):
            return hit, True
        known[full] = hit = measure()
        try:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(known, indent=1), encoding="utf-8")
            tmp.replace(path)  # whole, or not at all
        except OSError:
            pass  # a read-only cache: this process still uses its own measurement
    return hit, False


def _usable(hit, valid: Callable[[dict], bool]) -> bool:
    try:
        return isinstance(hit, dict) and bool(valid(hit))
    except (TypeError, ValueError, KeyError, AttributeError):
        return False


def alternated(runs: dict[str, Callable[[], object]], reps: int = 5, clear: float = 2.0,
               budget_s: float | None = None,
               settled: Callable[[dict[str, list[float]]], bool] | None = None) -> dict[str, float]:
    """Median seconds of each run, the runs taken in turn (a, b, a, b...) so that a machine that slows or speeds up
    meanwhile affects all alike, after one call each that counts only where one run lost by twice `clear` and
    `WARM_UP_S` seconds (else it is one-off set-up: a new shape's kernel, a cache). Stops
    early where one run takes over `clear` times another's (1.5x that after one round): an option 6x slower needs no
    more proof; given `budget_s`, after the round in which the timing has taken that long (a base-size model's
    forward on one thread takes seconds); and given `settled` (each run's seconds so far -> whether they decide
    what the caller chooses from them, `apart`), after the second round or any later one it accepts."""
    start = time.perf_counter()
    first = {}
    for k, fn in runs.items():
        t0 = time.perf_counter()
        fn()
        first[k] = time.perf_counter() - t0
    if max(first.values()) > max(2 * clear * min(first.values()), min(first.values()) + WARM_UP_S):
        # a loser by twice `clear` on its first call, set-up included: one-off set-up costs milliseconds, and bf16
        # without bf16 instructions would take seconds more to prove what it already shows
        return first
    times: dict[str, list[float]] = {k: [] for k in runs}
    for rnd in range(reps):
        for k, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
        best = {k: statistics.median(v) for k, v in times.items()}
        if max(best.values()) > clear * min(best.values()) * (1.5 if rnd == 0 else 1):
            break  # after one round at 1.5x `clear`, after two at `clear`
        if budget_s is not None and time.perf_counter() - start > budget_s:
            break
        if settled is not None and rnd >= 1 and settled(times):
            break
    return {k: statistics.median(v) for k, v in times.items()}


def apart(slow: list[float], fast: list[float], margin: float = 1.0) -> bool:
    """Whether every time in `slow` is at least `margin` times every time in `fast`: the same winner in every round
    so far, by `margin` even between the slowest of one and the fastest of the other (more rounds of `alternated`
    would move the medians only if the machine's speed changed meanwhile): `wins` between the ranges' extremes."""
    return wins(max(fast), min(slow), margin)


def wins(option_s: float, default_s: float, margin: float = MARGIN) -> bool:
    """Whether an option's time earns it over the default's: at least `margin` times faster."""
    return default_s >= margin * option_s
