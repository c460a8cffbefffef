"""Load a classifier once, safely, and say clearly why when it can't be loaded.

Security: `trust_remote_code` is always False; safetensors are preferred; a `.bin` checkpoint is read only with
`torch.load(weights_only=True)`. Loaded models live in a small LRU cache shared by the CLI, the app and LIT.
"""
from __future__ import annotations

import contextlib
import copy
import inspect
import os
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from ..ground import device as devices
from ..ground import kernels
from ..ground.compat import quiet_weight_loading
from ..ground.errors import ModelLoadError
from ..ground.precision import architecture_key, check_on, quantize_int8, to_half, work_batches
from ..ground.runtime import cache_dir, hub_reachable
from . import offline
from .registry import TASKS, ModelSpec, Task, with_task

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack")


def read_weights_stamp(path: str | None) -> list:
    """Name, size and modification time of each weight file in a model directory."""
    folder = Path(path) if path else None
    if folder is None or not folder.is_dir():
        return []
    return sorted([f.name, st.st_size, st.st_mtime_ns] for f in folder.iterdir()
                  if f.suffix in WEIGHT_SUFFIXES for st in [f.stat()])


@dataclass
class ModelHead:
    """What a model answers, read from its config alone: name, task, labels, where it lives. Enough for code that
    only turns logits into labels (a Ray driver, whose workers hold the weights), at the cost of a config file."""

    spec: ModelSpec
    origin: str  # "offline assets", "local directory", "an offline export (...)", "hub", "local Hugging Face cache"
    path: str
    # the weight files as they were when this model was read: caches keyed by it miss once it is retrained
    weights_stamp: list = field(init=False, default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.weights_stamp = read_weights_stamp(self.path)

    @property
    def identity(self) -> list:
        """What a cached result computed by this model depends on: where it came from, where it lives, its weight
        files' names, sizes and times (a model retrained in place is another model) and its precision. Every
        on-disk cache keys its entries by it (embeddings, the report's sections)."""
        return [self.spec.source, self.path, self.weights_stamp, *self.spec.precision_key]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def task(self) -> Task:
        return self.spec.task

    @property
    def labels(self) -> tuple[str, ...] | None:
        return self.spec.output_labels

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def family(self) -> str:
        return self.spec.family

    @property
    def max_length(self) -> int:
        return self.spec.task.max_length

    def describe(self) -> str:
        how = {"int8": ", int8 linear layers", "bf16": ", bf16", "fp16": ", fp16"}.get(self.precision, "")
        where = "" if devices.is_cpu(self.device) else f", on {self.device}"
        return f"{self.name}: {self.spec.source} ({self.family}, from {self.origin}{how}{where})"

    @property
    def precision(self) -> str:
        return self.spec.precision

    @property
    def device(self) -> str:
        return self.spec.device


@dataclass
class Classifier(ModelHead):
    """A loaded model and its tokenizer, on top of what its config says."""

    model: torch.nn.Module = field(repr=False)
    base_tokenizer: object = field(repr=False)
    load_seconds: float
    untrained_head: bool = False  # a checkpoint without a classification head, loaded for its embeddings
    _local: threading.local = field(default_factory=threading.local, repr=False, compare=False)
    _copies: list = field(default_factory=list, repr=False, compare=False)  # (weakref to a thread, its copy)
    _spare: list = field(default_factory=list, repr=False, compare=False)  # copies whose threads have ended
    _copies_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    graphs: object = field(default=None, repr=False, compare=False)  # `graphs.Replayer` on a CUDA device

    def describe(self) -> str:
        warn = " · classification head untrained (random): its predictions mean nothing"
        return super().describe() + (warn if self.untrained_head else "")

    @property
    def tokenizer(self):
        """The tokenizer, one copy per thread: a fast tokenizer's settings live in shared Rust state, and two
        threads calling it at once fail with "Already borrowed" (seen under load with 16 app users). A copy
        takes ~25 ms, and the app's worker threads come and go (idle ones are retired), so a thread takes over
        the copy of one that has ended before making a new one: else a new thread's first prediction was
        charged the copy in its live latency."""
        tok = getattr(self._local, "tok", None)
        if tok is None:
            me = threading.current_thread()
            if me is threading.main_thread():
                tok = self.base_tokenizer
            else:
                with self._copies_lock:  # threads, not their idents: a new thread often reuses an ended one's
                    live = []
                    for ref, t in self._copies:
                        owner = ref()
                        if owner is not None and owner.is_alive():
                            live.append((ref, t))
                        else:
                            self._spare.append(t)
                    tok = self._spare.pop() if self._spare else copy.deepcopy(self.base_tokenizer)
                    self._copies[:] = live + [(weakref.ref(me), tok)]
            self._local.tok = tok
        return tok

    def reserve_tokenizer(self) -> None:
        """One tokenizer copy made ahead for the first worker thread, by servers that answer from worker threads
        (the Gradio app, LIT): else their first request pays the copy. CLI runs stay on the main thread and
        need none."""
        with self._copies_lock:
            self._spare.append(copy.deepcopy(self.base_tokenizer))


def task_from_config(config, base: Task) -> Task:
    """For user-given models: labels from the config (or LABEL_i), regression when it has one output."""
    if base.name != "custom":
        return base
    named = getattr(config, "albert_lens_task", None)  # written by `train-offline --export`
    if isinstance(named, str) and named in TASKS and not TASKS[named].is_regression:
        return TASKS[named]
    n = int(getattr(config, "num_labels", 2))
    if n == 1 or getattr(config, "problem_type", None) == "regression":
        return Task("custom", base.fields, None)
    return Task("custom", base.fields, _output_names(config))


def generic_labels(labels: Sequence[str]) -> bool:
    """Transformers' LABEL_0, LABEL_1, ...: a config that names no labels."""
    return all(re.fullmatch(r"LABEL_\d+", x) for x in labels)


def _output_names(config) -> tuple[str, ...]:
    id2label = getattr(config, "id2label", None) or {}
    return tuple(str(id2label.get(i, id2label.get(str(i), f"LABEL_{i}"))) for i in range(int(config.num_labels)))


def _named_outputs(spec: ModelSpec, config) -> ModelSpec:
    """A preset task's labels checked against the names the config gives its outputs (when it gives any beyond
    transformers' LABEL_0, LABEL_1...). Same names in another order: the config's order is the model's (an MNLI
    checkpoint answering contradiction, neutral, entailment), so predictions are named by it; other names: the
    model was trained for something else, and labelling its outputs with the task's names would be silent
    nonsense."""
    task = spec.task
    if task.labels is None or task.name == "custom" or spec.labels is not None:
        return spec
    names = _output_names(config)
    if generic_labels(names):
        return spec
    canon = {x.lower(): x for x in task.labels}
    if sorted(canon) != sorted(x.lower() for x in names):
        raise ModelLoadError(
            f"model {spec.source!r}: its config names its outputs {list(names)}, but task {task.name!r} has "
            f"{list(task.labels)}; give the task it was trained for, or none to take the config's labels")
    order = tuple(canon[x.lower()] for x in names)
    return spec if order == task.labels else replace(spec, labels=order)


def _find_weights(path: Path) -> Path:
    for name in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"):
        if (path / name).is_file():
            return path / name
    raise ModelLoadError(
        f"model directory {path}: no weights file (expected model.safetensors or pytorch_model.bin)"
    )


def _read_config(spec: ModelSpec, path: Path):
    # deferred: transformers: loaded with the first model, not by every import of the core
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(path, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001 - re-raised with the model named
        raise ModelLoadError(f"model {spec.source!r}: its config.json can't be read ({_short(exc)})") from exc


def _read_bin(weights: Path) -> dict:
    """A `.bin` checkpoint's tensors, tensors only (`weights_only`), mapped from the file rather than read into
    the process: the model keeps the mapped tensors (`assign=True`), so the app's worker processes, which load
    the same pair, share one copy of the weights in the page cache instead of holding one each (the base-size
    BERT's are 438 MB). A checkpoint in PyTorch's legacy (pre-zip) format can't be mapped and is read whole."""
    try:
        return torch.load(weights, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError as exc:
        if "zip" not in str(exc).lower() and "mmap" not in str(exc).lower():
            raise
        return torch.load(weights, map_location="cpu", weights_only=True)


def _load_from_dir(spec: ModelSpec, path: Path, config) -> tuple[torch.nn.Module, object, bool]:
    """(model, tokenizer, whether its classification head is untrained, which only `untrained_head_ok` allows)."""
    # deferred: transformers: loaded with the first model, not by every import of the core
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    quiet_weight_loading()
    weights = _find_weights(path) if path.is_dir() else None
    try:
        if weights is not None and weights.suffix == ".bin":
            model = AutoModelForSequenceClassification.from_config(config)
            missing, _ = model.load_state_dict(_read_bin(weights), strict=False, assign=True)
            model.float()  # a half-precision checkpoint's tensors, assigned as they are, computed in float32
        else:
            model, info = AutoModelForSequenceClassification.from_pretrained(
                path, config=config, trust_remote_code=False, use_safetensors=weights is not None or None,
                output_loading_info=True)
            missing = info.get("missing_keys", [])
        untrained = _check_missing(spec, [k for k in missing if not k.endswith("position_ids")], model,
                                   weights.name if weights is not None else "its checkpoint")
    except ModelLoadError:
        raise
    except Exception as exc:  # noqa: BLE001
        what = f"weights file {weights}" if weights is not None else "its weights"
        raise ModelLoadError(f"model {spec.source!r}: {what} is corrupt or unreadable ({_short(exc)})") from exc
    try:
        tok = AutoTokenizer.from_pretrained(path, use_fast=True, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001
        raise ModelLoadError(f"model {spec.source!r}: its tokenizer can't be loaded ({_short(exc)})") from exc
    # we pad pre-tokenised, length-sorted batches on purpose; the "use __call__" advice does not apply
    getattr(tok, "deprecation_warnings", {})["Asking-to-pad-a-fast-tokenizer"] = True
    if not getattr(tok, "is_fast", False):
        raise ModelLoadError(f"model {spec.source!r}: needs a fast tokenizer (offsets are used to align words)")
    _fit_inputs(model, tok)
    return model, tok, untrained


def _fit_inputs(model: torch.nn.Module, tok) -> None:
    """A tokenizer borrowed from another family (a DistilBERT or RoBERTa saved with BERT's) returns segment ids
    the model's forward has no argument for; it stops returning them, as the family's own tokenizer would."""
    accepted = inspect.signature(model.forward).parameters
    names = list(getattr(tok, "model_input_names", []))
    if "token_type_ids" in names and "token_type_ids" not in accepted:
        tok.model_input_names = [n for n in names if n != "token_type_ids"]


def allow_untrained_head(spec: ModelSpec) -> bool:
    flag = os.environ.get("ALBERT_LENS_ALLOW_UNTRAINED_HEAD", "").lower() in {"1", "true", "yes"}
    return spec.untrained_head_ok or flag


def _check_missing(spec: ModelSpec, missing: list[str], model, where: str) -> bool:
    """Transformers fills missing weights with random ones and only logs it: a base or masked-LM checkpoint
    would then answer with a random classifier. Refused, naming what is missing; a missing head alone is let
    through when asked (`untrained_head_ok`, ALBERT_LENS_ALLOW_UNTRAINED_HEAD=1: its embeddings are real).
    Returns whether the head is untrained."""
    if not missing:
        return False
    base = model.base_model_prefix + "."
    in_head = lambda k: not k.startswith(base) or k.startswith(base + "pooler.")
    head_only = all(map(in_head, missing))
    if head_only and allow_untrained_head(spec):
        return True
    missing = sorted(missing, key=lambda k: (not in_head(k), k))
    why = ("it has no trained classification head: is it a pretraining checkpoint rather than a fine-tuned "
           "classifier? (ALBERT_LENS_ALLOW_UNTRAINED_HEAD=1 loads it for its embeddings; its predictions are then "
           "random)" if head_only else "a partly random model would answer instead")
    raise ModelLoadError(f"model {spec.source!r}: {len(missing)} weights are missing from {where} "
                         f"({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}); {why}")


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


HUB_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "pytorch_model.bin"]


def _from_hub(spec: ModelSpec, patterns: list[str]) -> tuple[Path, str]:
    """The snapshot folder (the same one whichever files are asked for) and where it came from."""
    from huggingface_hub import snapshot_download  # deferred: the hub client: only for models that are not local

    # deferred: the hub client: only for models that are not local
    from huggingface_hub.utils import LocalEntryNotFoundError

    online = hub_reachable()
    try:
        local = snapshot_download(spec.source, allow_patterns=patterns, local_files_only=not online)
    except LocalEntryNotFoundError as exc:
        raise ModelLoadError(
            f"model {spec.source!r}: the Hugging Face hub can't be reached from this machine and the model is not in "
            "the local Hugging Face cache; connect once to download it, or give a local directory"
        ) from exc
    except Exception as exc:  # noqa: BLE001
        cause = type(exc).__name__
        if "RepositoryNotFound" in cause or "404" in str(exc):
            raise ModelLoadError(f"model {spec.source!r}: no such model on the Hugging Face hub") from exc
        raise ModelLoadError(f"model {spec.source!r}: download failed ({_short(exc)})") from exc
    return Path(local), "hub" if online else "local Hugging Face cache"


def _locate(spec: ModelSpec, config_only: bool = False) -> tuple[Path, str]:
    """(folder, origin) of a model; `config_only` fetches no weights from the hub."""
    source = spec.source
    if source.startswith("offline:"):
        try:
            # the folder by its real name: a cache whose `offline` folder links to another's holds one model
            return offline.materialise(source.split(":", 1)[1]).resolve(), "offline assets (assets/offline)"
        except offline.OfflineAssetsMissing as exc:
            raise ModelLoadError(f"model {source!r}: {exc}") from exc
    if Path(source).expanduser().exists():
        path = Path(source).expanduser().resolve()
        if not path.is_dir():
            raise ModelLoadError(f"model {source!r}: is a file; give the model's directory")
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"model directory {path}: no config.json; is this a Hugging Face model folder?")
        _find_weights(path)
        if offline.is_export(path):
            try:
                reads = "tokenizer and word embeddings" if offline.frozen_tables(path) else "tokenizer"
                return (offline.materialise_export(path).resolve(),
                        f"an offline export ({path}, {reads} from the MiniLM)")
            except Exception as exc:  # noqa: BLE001 - re-raised naming the folder
                raise ModelLoadError(
                    f"model {source!r}: an offline export that can't be completed ({_short(exc)})"
                ) from exc
        return path, "local directory"
    if source.startswith(("/", "./", "../", "~")) or os.sep in source.strip("/").replace("/", "", 1):
        raise ModelLoadError(f"model {source!r}: no such directory")
    if HUB_ID.match(source):
        return _from_hub(spec, ["config.json"] if config_only else HUB_FILES)
    raise ModelLoadError(f"model {source!r}: neither an existing directory nor a valid Hugging Face hub id")


# families that number positions from padding_idx + 1, so two of max_position_embeddings are never used
ID_POSITIONS = {"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "data2vec-text", "longformer", "xmod"}


def id_position_pad(model: torch.nn.Module) -> int | None:
    """The padding id a loaded model numbers its positions after (RoBERTa and kin derive positions from the ids,
    skipping padding), or None when its positions don't depend on the ids. Read from the embedding module, so a
    family missing from ID_POSITIONS is still seen once its weights are loaded."""
    pad = getattr(getattr(model.base_model, "embeddings", None), "padding_idx", None)
    if pad is None or "position_ids" not in inspect.signature(model.forward).parameters:
        return None
    return int(pad)


def position_limit(config, id_pad: int | None = None) -> int | None:
    """How many tokens the model's position table holds, or None when it has none. `id_pad`: the loaded
    model's `id_position_pad`; without a model (a head read from its config) the family decides."""
    n = getattr(config, "max_position_embeddings", None)
    if not n or n <= 0:
        return None
    if id_pad is None and getattr(config, "model_type", "") in ID_POSITIONS:
        id_pad = getattr(config, "pad_token_id", None) or 1
    if id_pad is not None:
        n -= id_pad + 1
    return int(n)


def _answering(spec: ModelSpec, config, id_pad: int | None = None) -> ModelSpec:
    """The spec with its task completed from the config, checked against the config's number of outputs, its
    family the config's, and its max length cut to what the model's position table holds (a model trained on 64
    tokens gets 64)."""
    task = task_from_config(config, spec.task)
    limit = position_limit(config, id_pad)
    if limit is not None and limit < task.max_length:
        task = replace(task, max_length=limit)
    spec = replace(with_task(spec, task), family=getattr(config, "model_type", None) or spec.family)
    n_out = int(config.num_labels)
    labels = spec.output_labels
    expected = 1 if labels is None else len(labels)
    if n_out != expected:
        raise ModelLoadError(
            f"model {spec.source!r}: has {n_out} outputs but task {spec.task.name!r} expects {expected} "
            f"({'a score' if labels is None else list(labels)})"
        )
    return _named_outputs(spec, config)


def read_head(spec: ModelSpec) -> ModelHead:
    """The model's head from its config, without loading weights; the same checks and labels as `load`."""
    path, origin = _locate(spec, config_only=True)
    return ModelHead(_answering(spec, _read_config(spec, path)), origin, str(path))


def load(spec: ModelSpec) -> Classifier:
    """Load without the cache (see `get_classifier`). Outside inference mode whatever the caller's: weights made
    inside it are inference tensors, which no later request could take gradients through (a pair first used by
    an embedding job, `@torch.inference_mode`, then refused every saliency map in that process)."""
    with torch.inference_mode(False):
        return _load(spec)


def _load(spec: ModelSpec) -> Classifier:
    t0 = time.perf_counter()
    path, origin = _locate(spec)
    config = _read_config(spec, path)
    model, tok, untrained = _load_from_dir(spec, path, config)
    model.eval()
    model.requires_grad_(False)  # an inference model: gradients are taken with respect to inputs only
    check_on(spec.precision, spec.device)
    if not devices.is_cpu(spec.device) or spec.precision != "fp32":
        kernels.fuse_activations(model)  # one fused operator instead of seven (fp32 on a CPU: timed, below)
    if not devices.is_cpu(spec.device):
        model.to(spec.device)  # PyTorch's own kernels there (SDPA attention); oneDNN and int8 are CPU paths
        devices.pin_attention(spec.device)  # ALBERT_LENS_ATTENTION, or the backend measured fastest on a GPU
        to_half(model, spec.precision, spec.device)
        # the fast tokenizer on every core for large batches: on a GPU the tokenizer, not the model, is what a
        # batch waits for (the app's workers are spawned, not forked, so its threads are safe)
        os.environ["TOKENIZERS_PARALLELISM"] = "true"
    elif spec.precision == "int8":
        quantize_int8(model)
    spec = _answering(spec, model.config, id_position_pad(model))
    try:
        _warm_up(model, tok)
    except Exception as exc:  # noqa: BLE001 - a model and tokenizer that don't fit: say so at load, not later
        raise ModelLoadError(f"model {spec.source!r}: a test forward pass on its tokenizer's output failed "
                             f"({type(exc).__name__}: {_short(exc)})") from exc
    if devices.is_cpu(spec.device) and spec.precision == "fp32":  # oneDNN's layers, the fused GELU: where they pay
        kernels.tune(model, architecture_key(model, spec.task.max_length), work_batches(tok, spec.task.max_length))
    return Classifier(spec, origin, str(path), model, tok, time.perf_counter() - t0, untrained)


def _warm_up(model: torch.nn.Module, tok) -> None:
    """One small forward pass at load: the first call pays one-off set-up (~100 ms here), which the app's live
    latency would otherwise charge to whichever model runs first."""
    with torch.no_grad():
        model(**tok("warm up", return_tensors="pt").to(next(model.parameters()).device))


_CACHE: OrderedDict[tuple, Classifier] = OrderedDict()
_HEADS: dict[tuple, ModelHead] = {}  # heads read from configs alone (`get_head`)
_LOCK = threading.Lock()


def max_cached_models() -> int:
    return max(1, int(os.environ.get("ALBERT_LENS_MAX_MODELS", "4")))


def _cache_key(spec: ModelSpec) -> tuple:
    """What makes two specs the same loaded model (the family is a guess until the config is read, so not it),
    with where its source sits now (`_where`)."""
    return spec.source, _where(spec), spec.task, spec.labels, spec.name, spec.untrained_head_ok, spec.precision, \
        spec.device, spec.emulated


def _where(spec: ModelSpec) -> tuple:
    """Where the source resolves now, by a few stats: the folder an offline model is built in, a local
    folder's weight files (`read_weights_stamp`). A process whose cache folder changed, or whose local model was
    retrained in place, loads it again: a head kept from before answered with the old place while the model
    loaded from the new one, and a report's second run in one process keyed its sections otherwise (reused none)."""
    def built() -> tuple[str]:
        return (str((cache_dir() / "offline").resolve()),)  # as `_locate` names it: followed through links

    if spec.source.startswith("offline:"):
        return built()
    path = Path(spec.source).expanduser()
    if path.is_dir():
        return (str(path.resolve()), *(tuple(s) for s in read_weights_stamp(str(path))),
                *(built() if offline.is_export(path) else ()))  # an export is built in the cache too
    return ()


def get_classifier(spec: ModelSpec) -> Classifier:
    """Loaded once per (source, task) and kept in a bounded LRU cache."""
    key = _cache_key(spec)
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    clf = load(spec)
    with _LOCK:
        _CACHE[key] = clf
        while len(_CACHE) > max_cached_models():
            _CACHE.popitem(last=False)
    return clf


def get_head(spec: ModelSpec) -> ModelHead:
    """The loaded model when the cache holds it, else its head read from the config (kept: a few fields)."""
    key = _cache_key(spec)
    with _LOCK:
        hit = _CACHE.get(key) or _HEADS.get(key)
    if hit is not None:
        return hit
    head = read_head(spec)
    with _LOCK:
        _HEADS[key] = head
    return head


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()
        _HEADS.clear()


_EAGER_LOCK = threading.Lock()
_EAGER_USERS: dict[int, list] = {}  # id(model) -> [calls inside, the implementation to restore]


@contextlib.contextmanager
def eager_attention(model: torch.nn.Module):
    """The model's attention computed by the eager implementation for the calls inside: transformers 5's SDPA
    returns no weights for `output_attentions` (4.x fell back to eager by itself). Counted per model, so the
    implementation is restored when the last caller leaves; a concurrent ordinary forward meanwhile runs eager,
    which gives the same outputs."""
    config = model.config
    current = getattr(config, "_attn_implementation", None)
    if current in (None, "eager"):
        yield
        return
    with _EAGER_LOCK:
        users = _EAGER_USERS.setdefault(id(model), [0, current])
        if users[0] == 0:
            users[1] = current
            _set_attention(model, "eager")
        users[0] += 1
    try:
        yield
    finally:
        with _EAGER_LOCK:
            users[0] -= 1
            if users[0] == 0:
                _set_attention(model, users[1])
                _EAGER_USERS.pop(id(model), None)


def _set_attention(model: torch.nn.Module, implementation: str) -> None:
    can = getattr(model, "_can_set_attn_implementation", None)
    if callable(can) and not can():
        # transformers 4's BERT and ALBERT: their layers fall back to eager by themselves when weights are asked
        # for, and the setter only warns (once per call: a line per example of `attention --dataset`)
        return
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        try:
            setter(implementation)
            return
        except Exception:  # noqa: BLE001 - an older transformers' setter refuses some models: set the config
            pass
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "_attn_implementation"):
            config._attn_implementation = implementation
