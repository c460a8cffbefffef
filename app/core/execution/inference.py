"""Batched prediction: tokenise once, sort by length, pad each batch only as far as its longest member.

On CPU the cost of a transformer grows with the padded length, so sorting and dynamic padding (rather than
padding every input to 128 or 512 tokens) is most of the speed. Results come back in the caller's order.
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..ground import jobs
from ..ground.alignment import align
from ..ground.data import Example, blank_reason
from ..ground.errors import InputError
from ..ground.precision import autocast
from ..models.loading import Classifier, ModelHead
from ..models.registry import Task
from . import cls_path, graphs

Progress = Callable[[int, int], None]
DEFAULT_BATCH = 32
GPU_BATCH = 256  # rows per forward pass off the CPU: a GPU's kernels fill up only with hundreds of rows


def batch_for(clf: Classifier, batch_size: int) -> int:
    """The batch size on `clf`'s device: the caller's on the CPU, at least GPU_BATCH on a GPU."""
    return batch_size if torch.device(clf.device).type == "cpu" else max(batch_size, GPU_BATCH)


def check_examples(task: Task, examples: Sequence[Example]) -> list[Example]:
    """Every example has one text per task field and none is empty; messages name the field. An example is
    checked once: one that passed is marked (for its number of fields), and the techniques that receive it again
    (each model's encoding, its predictions) pass it on unread."""
    out = []
    n_fields = len(task.fields)
    for i, ex in enumerate(examples):
        if isinstance(ex, Example) and getattr(ex, "_checked_fields", None) == n_fields:
            out.append(ex)
            continue
        where = f"example {i + 1}: " if len(examples) > 1 else ""
        if not isinstance(ex, Example):
            ex = Example(ex if isinstance(ex, tuple | list) else (str(ex),))
        if len(ex.texts) < len(task.fields):
            missing = task.fields[len(ex.texts)]
            raise InputError(f"{where}field {missing!r} is missing: the {task.name} task takes "
                             f"{' + '.join(task.fields)}")
        if len(ex.texts) > len(task.fields):
            raise InputError(f"{where}{len(ex.texts)} texts given, but the {task.name} task takes "
                             f"{len(task.fields)} ({' + '.join(task.fields)})")
        for name, text in zip(task.fields, ex.texts):
            if not isinstance(text, str):
                raise InputError(f"{where}field {name!r} must be text, got {type(text).__name__}")
            if (why := blank_reason(text)) is not None:
                raise InputError(f"{where}field {name!r} {why}")
        object.__setattr__(ex, "_checked_fields", n_fields)  # not a field: equality, hashing and copies ignore it
        out.append(ex)
    return out


def tokenize(clf: Classifier, examples: Sequence[Example], *, offsets: bool = False, tensors: bool = False,
             max_length: int | None = None):
    """One fast-tokenizer call for all examples (pairs use longest-first truncation). Plain calls (no offsets,
    no tensors) return `Ragged` ids, read straight from the Rust tokenizer where it gives the wrapper's own ids."""
    columns = list(zip(*(ex.texts for ex in examples)))
    max_length = max_length or clf.max_length
    if not offsets and not tensors:
        direct = _direct(clf.tokenizer, columns, max_length)
        if direct is not None:
            return direct
    kw = dict(truncation=True, max_length=max_length, return_offsets_mapping=offsets)
    if tensors:
        kw.update(padding=True, return_tensors="pt")
    if len(columns) == 2:
        enc = clf.tokenizer(list(columns[0]), list(columns[1]), **kw)
    else:
        enc = clf.tokenizer(list(columns[0]), **kw)
    return enc if offsets or tensors else Ragged.from_lists(enc, model_input_names(clf.tokenizer))


class Ragged:
    """Token ids of many inputs without padding: each column (input_ids, token_type_ids) one flat int64 array,
    with every input's start and length. `pad` cuts length-sorted batches from it with array indexing (a
    Python loop over rows took 2.4 s of a 40 s CheckList run on the CPU)."""

    def __init__(self, columns: dict[str, np.ndarray], lengths: np.ndarray):
        self.columns, self.lengths = columns, lengths
        self.starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if len(lengths) else lengths

    @classmethod
    def from_lists(cls, enc, names: Sequence[str]) -> "Ragged":
        """From per-input id lists (a tokenizer's output, or `encodings` of the Rust tokenizer)."""
        ids = enc["input_ids"]
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        total = int(lengths.sum())
        columns = {name: np.fromiter(itertools.chain.from_iterable(enc[name]), dtype=np.int64, count=total)
                   for name in names if name != "attention_mask" and name in enc}
        return cls(columns, lengths)

    def __len__(self) -> int:
        return len(self.lengths)

    def __contains__(self, name: str) -> bool:
        return name in self.columns or name == "attention_mask"

    def __getitem__(self, name: str) -> list[np.ndarray]:
        """One array per input, as a tokenizer's output lists them (attention_mask: ones)."""
        if name == "attention_mask":
            return [np.ones(n, dtype=np.int64) for n in self.lengths]
        flat = self.columns[name]
        return [flat[s : s + n] for s, n in zip(self.starts, self.lengths)]


_DIRECT_CHECK = 8  # inputs compared with the wrapper's own call, once per tokenizer


def _direct(tok, columns: list[tuple[str, ...]], max_length: int) -> Ragged | None:
    """The Rust tokenizer's `encode_batch_fast` with the truncation the wrapper would set: the wrapper's
    per-input conversion to Python dicts was a third of tokenising time (benchmarks/README.md). Checked once per
    tokenizer against the wrapper's own ids on a few inputs; a tokenizer that differs (or has no Rust backend)
    takes the wrapper's path. None: use the wrapper."""
    backend = getattr(tok, "_tokenizer", None)
    if not getattr(tok, "is_fast", False) or not hasattr(backend, "encode_batch_fast") or \
            getattr(tok, "_albert_lens_direct", True) is False:
        return None
    names = [k for k in model_input_names(tok) if k != "attention_mask"]
    target = {"max_length": max_length, "stride": 0, "strategy": "longest_first",
              "direction": getattr(tok, "truncation_side", "right")}
    current = backend.truncation
    if current is None or {k: current.get(k) for k in target} != target:
        backend.enable_truncation(**target)
    if backend.padding is not None:
        backend.no_padding()
    batch = list(columns[0]) if len(columns) == 1 else list(zip(columns[0], columns[1]))
    encodings = backend.encode_batch_fast(batch, add_special_tokens=True)
    lists = {"input_ids": [e.ids for e in encodings]}
    segments = "token_type_ids" in names
    if segments and len(columns) == 2:
        lists["token_type_ids"] = [e.type_ids for e in encodings]
    # one text per input: its segment ids are all 0 (checked below), written as zeros rather than read one list
    # per input (benchmarks/README.md, the GPU section: CheckList's tokenising)
    if not hasattr(tok, "_albert_lens_direct"):
        k = min(len(batch), _DIRECT_CHECK)
        sample = tok(*[list(c[:k]) for c in columns], truncation=True, max_length=max_length)
        want = dict(lists)
        if segments and "token_type_ids" not in want:  # the zeros single texts are given below
            want["token_type_ids"] = [[0] * len(ids) for ids in lists["input_ids"][:k]]
        same = all(list(sample[n][i]) == list(want[n][i]) for n in want if n in sample for i in range(k))
        tok._albert_lens_direct = same
        if not same:
            return None
    out = Ragged.from_lists(lists, names)
    if segments and "token_type_ids" not in out.columns:
        out.columns["token_type_ids"] = np.zeros(int(out.lengths.sum()), dtype=np.int64)
    return out


def length_batches(enc: Ragged, batch_size: int) -> list[np.ndarray]:
    order = np.argsort(-enc.lengths, kind="stable")  # longest first: memory peaks early, if at all
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


class Batch(dict):
    """A padded batch's tensors, as the model's forward takes them, and whether any row of it is padded: known
    on the host when the batch is cut, so the [CLS] path on a GPU skips the attention mask of a batch with none
    (most batches of a length-sorted run, benchmarks/README.md) without asking the device."""

    padded: bool | None = None  # None: not known

    def like(self, tensors: dict) -> "Batch":
        out = Batch(tensors)
        out.padded = self.padded
        return out


def pad(clf: Classifier, enc: Ragged, idx) -> Batch:
    """One length-sorted batch, padded on the CPU and moved to the model's device once. Cut from the flat id
    arrays by indexing rather than through `tokenizer.pad` (5-9x less time on AG News batches,
    benchmarks/README.md, GPU): the same tensors (tests/test_inference.py), in the tokenizer's padding side."""
    tok = clf.tokenizer
    fills = {"input_ids": tok.pad_token_id or 0, "token_type_ids": getattr(tok, "pad_token_type_id", 0) or 0}
    idx = np.asarray(idx, dtype=np.int64)
    at, valid = cells(tok, enc, idx)
    out = Batch()
    out.padded = not bool(valid.all())
    for name in model_input_names(tok):
        if name == "attention_mask":
            out[name] = torch.from_numpy(valid.astype(np.int64))
        elif name in enc.columns:
            out[name] = torch.from_numpy(np.where(valid, enc.columns[name][at], fills[name]))
    return to_device(clf, out)


def cells(tok, enc: Ragged, idx) -> tuple[np.ndarray, np.ndarray]:
    """The layout of a padded batch of `enc`'s inputs `idx` (rows, longest input's length), padded on the
    tokenizer's side: where each cell's token sits in the flat arrays (a padding cell points at some token, in
    range), and which cells are tokens rather than padding."""
    idx = np.asarray(idx, dtype=np.int64)
    lengths = enc.lengths[idx]
    width = int(lengths.max())
    shift = (width - lengths)[:, None] if getattr(tok, "padding_side", "right") == "left" else 0
    src = np.arange(width, dtype=np.int64)[None, :] - shift  # each cell's position within its input
    valid = (src >= 0) & (src < lengths[:, None])
    return np.clip(enc.starts[idx][:, None] + src, 0, max(int(enc.lengths.sum()) - 1, 0)), valid


def model_input_names(tok) -> list[str]:
    """What the model's forward takes of a tokenizer's output: ids, mask and, where the family has them, segments."""
    names = getattr(tok, "model_input_names", None) or ["input_ids", "attention_mask", "token_type_ids"]
    return [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in names or k == "attention_mask"]


def to_device(clf: Classifier, tensors: dict) -> dict:
    """Tensors on `clf`'s device (the same dict on the CPU; pinned and copied without waiting elsewhere)."""
    where = torch.device(clf.device)
    if where.type == "cpu":
        return tensors
    pin = where.type == "cuda"
    moved = {k: (v.pin_memory().to(where, non_blocking=True) if pin else v.to(where))
             if isinstance(v, torch.Tensor) else v for k, v in tensors.items()}
    return tensors.like(moved) if isinstance(tensors, Batch) else moved


class Gathered:
    """Batch results written into a host array in the caller's order. On the CPU each batch is written as it
    comes; on a GPU they stay there until `finish`, one copy back in all: a copy per batch would make the CPU
    wait for each batch before padding the next, where it can pad while the GPU computes."""

    def __init__(self, clf: Classifier, out: np.ndarray):
        self.out, self.defer = out, torch.device(clf.device).type != "cpu"
        self.parts: list[tuple[np.ndarray, torch.Tensor]] = []

    def put(self, idx: np.ndarray, values: torch.Tensor) -> None:
        if self.defer:
            self.parts.append((idx, values.detach().float()))
        else:
            self.out[idx] = host(values)

    def finish(self) -> np.ndarray:
        if self.parts:
            self.out[np.concatenate([i for i, _ in self.parts])] = host(torch.cat([v for _, v in self.parts]))
            self.parts.clear()
        return self.out


def host(t: torch.Tensor) -> np.ndarray:
    """A result back on the host as float32 numpy (one copy from a GPU; none on the CPU)."""
    return t.detach().float().cpu().numpy()


@dataclass
class Prediction:
    """One model's answers for a list of examples, in input order."""

    model: str
    labels: tuple[str, ...] | None
    probs: np.ndarray | None  # (n, classes); None for regression
    scores: np.ndarray | None  # (n,) regression outputs; None for classifiers
    logits: np.ndarray
    seconds: float
    n_tokens: int
    cls: np.ndarray | None = None  # (n, hidden): the top layer's [CLS] vectors, where `predict(top_cls=True)`

    @property
    def predicted(self) -> list[str] | list[float]:
        if self.labels is None:
            return [float(s) for s in self.scores]
        return [self.labels[i] for i in self.probs.argmax(1)]

    def record(self, i: int) -> dict:
        if self.labels is None:
            return {"model": self.model, "score": float(self.scores[i])}
        return {
            "model": self.model,
            "label": self.labels[int(self.probs[i].argmax())],
            "probabilities": {lab: float(p) for lab, p in zip(self.labels, self.probs[i])},
        }


@torch.inference_mode()
def predict(clf: Classifier, examples: Sequence[Example], *, batch_size: int = DEFAULT_BATCH,
            progress: Progress | None = None, validate: bool = True, top_cls: bool = False) -> Prediction:
    """`validate=False` lets perturbation methods score inputs with every word removed (an empty field).
    `top_cls`: also the top layer's [CLS] vectors (`Prediction.cls`, what a projection and Find slices' clusters
    embed), from the same pass: the classifier's head reads that vector anyway, so it costs a copy."""
    if validate:
        examples = check_examples(clf.task, examples)
    t0 = time.perf_counter()
    enc = tokenize(clf, examples)
    n_out = 1 if clf.is_regression else len(clf.labels)
    logits = np.zeros((len(examples), n_out), dtype=np.float32)
    done = 0
    rows = Gathered(clf, logits)
    vectors = Gathered(clf, np.zeros((len(examples), clf.model.config.hidden_size), dtype=np.float32)) \
        if top_cls else None
    for idx in length_batches(enc, batch_for(clf, batch_size)):
        jobs.checkpoint(done, len(examples), "predictions")  # a request past its budget, or left, stops here
        batch = pad(clf, enc, idx)
        with autocast(clf):
            if top_cls:
                out, state = logits_and_state(clf, batch, clf.model.config.num_hidden_layers, cls_only=True)
                vectors.put(idx, state[:, 0])
            else:
                out = graphs.logits(clf, batch)  # a small batch on a GPU: one recorded launch (None elsewhere)
                if out is None:
                    out = cls_path.inputs_logits(clf, batch)  # the last layer for [CLS] only: same logits, less time
                if out is None:
                    out = clf.model(**batch).logits
        rows.put(idx, out)
        done += len(idx)
        if progress:
            progress(done, len(examples))
    rows.finish()
    cls = None if vectors is None else vectors.finish()
    seconds = time.perf_counter() - t0
    return from_logits(clf, logits, seconds, int(enc.lengths.sum()), cls=cls)


def logits_and_state(clf: Classifier, batch: dict, layer: int, cls_only: bool = False
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, `hidden_states[layer]`) of one padded batch from one pass: `cls_path`'s (with `cls_only` at the
    top layer, the last layer run for [CLS] alone: (rows, 1, hidden)), or the whole forward pass with its hidden
    states for a layout it does not know."""
    both = cls_path.inputs_logits_and_state(clf, batch, layer, cls_only=cls_only)
    if both is None:
        out = clf.model(**batch, output_hidden_states=True)
        both = out.logits, out.hidden_states[layer]
    return both


def logits_batch(pair, batch: Sequence[Example], batch_size: int = DEFAULT_BATCH, validate: bool = True,
                 progress: Progress | None = None) -> list[np.ndarray]:
    """Batch function: both models' logits for one batch; `progress`: examples of both models."""
    return [p.logits for p in predict_both(pair, batch, batch_size=batch_size, validate=validate, progress=progress)]


def predict_both(pair, batch: Sequence[Example], *, progress: Progress | None = None, **kw) -> list[Prediction]:
    """Each model's `predict(**kw)` of `batch` in turn; `progress`: examples of both models."""
    models = pair.models
    out = []
    for k, clf in enumerate(models):
        step = (lambda d, n, k=k: progress(k * n + d, len(models) * n)) if progress else None
        out.append(predict(clf, batch, progress=step, **kw))
    return out


logits_batch.combine = "concat"
logits_batch.sorts = True  # in process: one call over the sample, whose length order pads least
logits_batch.reports_progress = True


def from_logits(clf: ModelHead, logits: np.ndarray, seconds: float = 0.0, n_tokens: int = 0,
                cls: np.ndarray | None = None) -> Prediction:
    """A Prediction from raw logits, e.g. computed on a Ray worker: the same softmax as a local run."""
    logits = np.asarray(logits, dtype=np.float32)
    if clf.is_regression:
        return Prediction(clf.name, None, None, logits[:, 0].copy(), logits, seconds, n_tokens, cls)
    probs = torch.softmax(torch.from_numpy(logits), -1).numpy()
    return Prediction(clf.name, clf.labels, probs, None, logits, seconds, n_tokens, cls)


def class_index(clf: Classifier, target: int | str | None, probs: np.ndarray | None = None) -> int:
    """Resolve a target class given by name or index; None means the predicted class."""
    if clf.is_regression:
        return 0
    if target is None:
        return int(np.argmax(probs)) if probs is not None else 0
    if isinstance(target, str):
        if target not in clf.labels:
            raise InputError(f"target: unknown label {target!r}; {clf.name} predicts {list(clf.labels)}")
        return clf.labels.index(target)
    if not 0 <= int(target) < len(clf.labels):
        raise InputError(f"target: class {target} out of range 0..{len(clf.labels) - 1}")
    return int(target)


def encode_one(clf: Classifier, example: Example):
    """Tensors for one example plus its word alignment (the basis of every per-word technique)."""
    (example,) = check_examples(clf.task, [example])
    enc = tokenize(clf, [example], offsets=True, tensors=True)
    ids = enc["input_ids"][0]
    alignment = align(example.texts, enc["offset_mapping"][0].tolist(), enc.sequence_ids(0),
                      at_limit=len(ids) >= clf.max_length)
    if not torch.device(clf.device).type == "cpu":
        enc = enc.to(clf.device)  # a BatchEncoding keeps sequence_ids() after the move
    return enc, alignment


def windowed(clf: Classifier, example: Example, alignment) -> Example:
    """The example cut a window past what `clf` reads (`Alignment.window`): techniques that predict on many
    edited copies of a long input edit this, with the same predictions as editing the whole text."""
    if not alignment.cut:
        return example
    return dataclasses.replace(example, texts=alignment.window(example.texts, clf.max_length))
