"""What one request may ask of this server, checked once, here, for every front end.

Every count, budget, tolerance, deadline and path a visitor sends (the app, gradio_client, the CLI, LIT, a Ray
job) passes through these functions: a value outside its range is an `InputError` naming the field and the range;
a valid value above this server's cap is clamped to it. Hosted mode (ALBERT_LENS_HOSTED=1, a public Space) lowers
the caps. A negative number once slipped through `min(limit or cap, cap)` and `examples[:n]` as "all rows but
one" (871 saliency maps where the cap was 50), which is why nothing here trusts a sign, a NaN or a type.
"""
from __future__ import annotations

import math
import numbers
import os
import re
from pathlib import Path

from .errors import InputError
from .runtime import ASSETS_DIR, SHARED_DATA, cache_dir, env_flag


def _env_number(name: str, default: float, kind=int):
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(float(raw))
    except ValueError:
        raise InputError(f"{name}: {raw!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"{name}: {raw!r} must be a positive number")
    return value


OPERATOR_CAP = 2**62  # what the operator asks for on the command line is validated but not capped


def limits() -> dict:
    """This server's caps; hosted mode (ALBERT_LENS_HOSTED=1) caps what one request may cost."""
    hosted = env_flag("ALBERT_LENS_HOSTED")
    return {
        "hosted": hosted,
        "max_chars": _env_number("ALBERT_LENS_MAX_CHARS", 2000 if hosted else 100_000),
        "max_examples": _env_number("ALBERT_LENS_MAX_EXAMPLES", 500 if hosted else 20_000),
        "max_lime_samples": 256 if hosted else 2048,
        "min_ig_tolerance": 1e-4 if hosted else 1e-7,  # tighter tolerances cost more integrated-gradient steps
        "max_ig_steps": 128 if hosted else 512,
        "swaps_per_example": 3 if hosted else 10,  # WordNet swaps per example over a dataset
        "max_saliency_examples": 50 if hosted else 2000,  # saliency over a dataset: each is a full explanation
        "max_attack_examples": 10 if hosted else 1000,
        "max_query_budget": 300 if hosted else 100_000,
        "max_attack_seconds": 30.0 if hosted else 3600.0,  # per example and model
        "max_checklist_sample": 50 if hosted else 100_000,  # cases per test
        # a dataset file is refused before reading past this size (hosted: the upload limit)
        "max_file_bytes": _env_number("ALBERT_LENS_MAX_FILE_MB", 20 if hosted else 1024) * 2**20,
        # the wall-clock budget of one app request; between batches, work past it stops and says so
        "request_seconds": _env_number("ALBERT_LENS_REQUEST_SECONDS", 120 if hosted else 3600, float),
        # LIT (lit_models/): a request's body; the predictions kept per model and the fitted projections; what one
        # request's outputs may hold (every layer's attention grows with a text's tokens squared)
        "lit_body_bytes": _env_number("ALBERT_LENS_LIT_BODY_MB", 64 if hosted else 1024) * 2**20,
        "lit_cache_bytes": _env_number("ALBERT_LENS_LIT_CACHE_MB", 256 if hosted else 2048) * 2**20,
        "lit_output_bytes": _env_number("ALBERT_LENS_LIT_OUTPUT_MB", 256 if hosted else 1024) * 2**20,
        # LIT: the datapoint sets /post_new_data keeps for later page loads, all of them together
        "lit_saved_bytes": _env_number("ALBERT_LENS_LIT_SAVED_MB", 32 if hosted else 512) * 2**20,
        # LIT: requests that run the models at once (lit_models/server.py); others wait for a slot
        "lit_slots": _env_number("ALBERT_LENS_LIT_SLOTS", 2 if hosted else 4),
        # LIT's server (waitress): connections one peer address may hold, all of them, and the seconds one may sit
        # idle (a connection that never finishes its headers included) before it is closed
        "lit_per_address": _env_number("ALBERT_LENS_LIT_PER_ADDRESS", 16 if hosted else 256),
        "lit_connections": _env_number("ALBERT_LENS_LIT_CONNECTIONS", 512 if hosted else 1024),
        "lit_idle_seconds": _env_number("ALBERT_LENS_LIT_IDLE_SECONDS", 30 if hosted else 120),
        # explanations and batch jobs in child processes at a lower CPU priority (app/core/execution/workers.py)
        "worker_processes": env_flag("ALBERT_LENS_WORKERS") if os.environ.get("ALBERT_LENS_WORKERS", "").strip()
        else hosted,
        # the app's /predict: slots one client (address) may hold, and requests it may keep waiting beside them
        # (app/core/execution/shares.py); locally the one user may use them all
        "client_slots": 1 if hosted else 16,
        "client_waiting": 1 if hosted else 64,
        # the jobs (explanations, work over datasets) one address may have in the app's queue, running and waiting
        # together, across every queued endpoint; locally the queue's whole size (app/ui/fair_queue.py)
        "client_jobs": _env_number("ALBERT_LENS_CLIENT_JOBS", 4 if hosted else 64),
        # and the direct calls one address may send a second, on average (hosted; a burst of twice that)
        "client_rate": 4.0 if hosted else None,
        # reverse proxies in front of the server whose X-Forwarded-For is trusted (a Space: 1)
        "proxies": _proxies(),
        "allowed_pairs": {p.strip().lower() for p in
                          os.environ.get("ALBERT_LENS_ALLOWED_PAIRS", "offline,sst2").split(",") if p.strip()},
    }


def _proxies() -> int | tuple:
    """Whose X-Forwarded-For is trusted: a count of reverse proxies (a Space: 1), trusted only when the peer is
    itself a private or loopback address (a proxy of the host's own network), or the proxies' addresses and
    networks, comma-separated (`10.0.0.0/8, 172.17.0.1`), trusted only when the peer is one of them."""
    import ipaddress

    raw = os.environ.get("ALBERT_LENS_PROXIES", "").strip()
    if not raw:
        return 0
    if raw.isascii() and raw.isdigit():
        if int(raw) > 10:
            raise InputError(f"ALBERT_LENS_PROXIES: {raw[:20]!r} is more than 10 proxies")
        return int(raw)
    nets = []
    for part in raw.split(","):
        try:
            nets.append(ipaddress.ip_network(part.strip(), strict=False))
        except ValueError:
            raise InputError(f"ALBERT_LENS_PROXIES: {part.strip()[:40]!r} is neither a count of proxies (0 to 10) "
                             "nor an address or network (10.0.0.0/8)") from None
    return tuple(nets)


def hosted() -> bool:
    return env_flag("ALBERT_LENS_HOSTED")


def _as_number(field: str, value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real | str):
        raise InputError(f"{field}: {value!r} is not {what}")
    try:
        x = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):
        raise InputError(f"{field}: {str(value)[:40]!r} is not {what}") from None
    return x


def count(field: str, value, *, cap: int, default: int | None = None, lower: int = 1, clamp: bool = False) -> int:
    """A whole number of things (examples, cases, queries): empty gives `default` (None: the cap; a default
    above the cap is lowered to it), anything below `lower` or above the cap, fractional, infinite or not a
    number is refused, naming the range ("1e12" examples was once taken as the cap without a word). `clamp`: a
    size of work (a minibatch) lowered to the cap instead."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return int(cap if default is None else min(default, cap))
    allowed = (
        f"give a whole number from {lower:,} to {cap:,}" if cap < 10**9 else f"give a whole number of {lower} or more"
    )
    x = _as_number(field, value, f"a whole number; {allowed}")
    if not math.isfinite(x) or x != int(x):
        raise InputError(f"{field}: {str(value)[:40]!r} is not a whole number; {allowed}")
    if x < lower:
        raise InputError(f"{field}: {int(x):,} is too small; {allowed}")
    if x > cap and not clamp:
        shown = f"{int(x):,}" if x < 10**15 else str(value).strip()[:40]
        raise InputError(f"{field}: {shown} is more than this server takes; {allowed}")
    return int(min(x, cap))


def number(field: str, value, *, low: float, high: float, default: float | None = None,
           clamp: bool = True) -> float:
    """A finite number in (low, high]: empty gives `default`; above `high` it is clamped (or refused when
    `clamp` is off); zero, negative, NaN and infinity are refused."""
    if value is None or (isinstance(value, str) and not value.strip()):
        if default is None:
            raise InputError(f"{field}: give a number above {low:g} and at most {high:g}")
        value = default
    x = _as_number(field, value, f"a number; give a number above {low:g} and at most {high:g}")
    if not math.isfinite(x) or x <= low or (x > high and not clamp):
        raise InputError(f"{field}: {str(value)[:40]} is out of range; give a number above {low:g} and at most "
                         f"{high:g}")
    return min(x, high)


def tolerance(field: str, value) -> float:
    """Integrated gradients' convergence-delta tolerance, from a number or its text ("1e-4"): above this
    server's smallest (tighter ones cost more steps) and at most 1 (a looser one bounds nothing)."""
    x = _as_number(field, value, "a number")
    if not (math.isfinite(x) and x > 0):
        raise InputError(f"{field}: {str(value)[:40]!r} must be a positive, finite number")
    smallest = limits()["min_ig_tolerance"]
    if x < smallest:
        raise InputError(f"{field}: {x:g} is below this server's smallest, {smallest:g}")
    if x > 1:
        raise InputError(f"{field}: {x:g} is above 1; give a number from {smallest:g} to 1")
    return x


tolerance.span = lambda: (limits()["min_ig_tolerance"], 1.0)  # the range a front end offers (`Option.span`)


def integer(field: str, value, *, low: int, high: int) -> int:
    """An index in [low, high] (a layer): out of range is refused, never clamped, since it names a thing."""
    x = _as_number(field, value, f"a whole number from {low} to {high}")
    if not math.isfinite(x) or x != int(x) or not low <= x <= high:
        raise InputError(f"{field}: {str(value)[:40]} is out of range; give a whole number from {low} to {high}")
    return int(x)


def whole(field: str, value, hint: str) -> int:
    """A whole number whose range is checked later, where it is known (a layer: the model's), so that no
    message here states a range that isn't the real one; `hint` says what it counts."""
    x = _as_number(field, value, f"a whole number ({hint})")
    if not math.isfinite(x) or x != int(x) or abs(x) > 2**31:
        raise InputError(f"{field}: {str(value)[:40]} is not a whole number ({hint})")
    return int(x)


_READABLE: list[Path] = []  # folders a front end registered (its uploads), see `allow_reads_under`


_UPLOADS: set[str] = set()  # the upload folders as registered and as resolved: messages name their files only


def allow_reads_under(folder: str | Path) -> None:
    """A front end registers the folder its uploads land in, so that hosted mode can read them."""
    path = Path(folder).resolve()
    if path not in _READABLE:
        _READABLE.append(path)
    _UPLOADS.update({str(Path(folder).absolute()), str(path)})


def public_message(message: str) -> str:
    """An error's words as the person who sent the request may read them: a file they uploaded is named as they
    named it (its file name, not the server's temporary copy, `.../gradio/<hash>/rows.csv`), always; hosted, a
    path under any of this server's folders (shipped assets, released data, caches) becomes its file name too.
    Other paths are left outside hosted mode, where reading any path is the user's own business."""
    roots = set(_UPLOADS)
    if limits()["hosted"]:
        roots |= {str(r) for r in (*_READABLE, ASSETS_DIR.resolve(), SHARED_DATA.resolve(), cache_dir().resolve())}
    for root in sorted(roots, key=len, reverse=True):  # the deepest first: an upload folder inside a cache
        message = re.sub(re.escape(root.rstrip("/")) + r"(?:/[^\s'\",:;]*)?",
                         lambda m: Path(m.group()).name or "(server folder)", message)
    return message


def readable(spec: str, field: str) -> str:
    """`spec` unchanged if this server may read it. Hosted, a visitor's path must lie under the shipped assets,
    the released data or a registered upload folder: any other file the process can read (another app's .csv,
    a config .json) is refused, with the same words whether or not it exists. Nor does it download `datasets`
    hub ids: a whole split lands on the server's disk before the row cap applies."""
    if not isinstance(spec, str):
        raise InputError(f"{field}: expected a name or path, got {type(spec).__name__}")
    if len(spec) > 4096 or "\x00" in spec:
        raise InputError(f"{field}: not a name or path ({len(spec):,} characters)")
    if not limits()["hosted"]:
        return spec
    path = Path(spec).expanduser()
    resolved = path.resolve()  # symlinks and ".." followed, so neither leads out of a root
    roots = [ASSETS_DIR.resolve(), SHARED_DATA.resolve(), *_READABLE]
    roots += [Path(p).resolve() for p in os.environ.get("ALBERT_LENS_DATA_ROOTS", "").split(os.pathsep) if p]
    if any(resolved.is_relative_to(r) for r in roots):
        return spec
    shown = spec if len(spec) <= 80 else spec[:80] + "…"
    raise InputError(f"{field}: this hosted server reads only its shipped examples, released data and uploaded "
                     f"files, not other server paths or hub datasets such as {shown!r}; upload the file instead")


def check_length(field: str, text: str, cap: int) -> None:
    """Over-long text is refused, naming the field: the app's inputs, dataset rows and, hosted, LIT's datapoints."""
    if len(text) > cap:
        raise InputError(f"field {field!r} is {len(text):,} characters long; the limit here is {cap:,}")


def public_bind_allowed(host: str, unsafe_public: bool) -> None:
    """A server bound to anything but loopback serves whoever connects: without hosted mode every file the
    process can read is a typed path away, so that takes hosted mode or the operator's explicit word."""
    loopback = host in ("localhost", "::1") or host.startswith("127.")
    if loopback or hosted() or unsafe_public:
        return
    raise InputError(f"--host {host}: binding a non-loopback address serves this machine's files (any dataset path "
                     "typed into a field) and its CPU to whoever connects; set ALBERT_LENS_HOSTED=1 for a public "
                     "server with caps, or pass --unsafe-public if this network is yours alone")
