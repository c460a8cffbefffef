"""Small batches on a GPU replayed from captured CUDA graphs.

A Compare is one input through each model. On a GPU that forward is launch-bound: a base-size encoder at batch 1
is some 150 small kernels, each launched from Python, and the launching takes longer than the arithmetic
(benchmarks/README.md, the GPU section). A CUDA graph records the kernels of one forward once and launches them
all in one call. A graph has fixed shapes, so a batch is padded to a bucket (rows 1, 2, 4, 8; tokens 16, 32, 64,
... up to the model's length) with the attention mask covering the padding: one graph serves every batch that
fits its bucket, and its logits are the unpadded batch's up to float rounding (tests/test_graphs.py).

Each graph is captured the first time its bucket is asked for, checked once against the eager forward of the
same batch, and kept with the model; a capture that fails or a check that differs turns graphs off for that
model, which then answers eagerly as before. `ALBERT_LENS_CUDA_GRAPHS=0` turns them off everywhere.

A half-precision model also records a dataset's batches of up to 256 rows (`inference.GPU_BATCH`) and 128 tokens,
in buckets of 8 tokens (length-sorted batches are nearly all of one length, so a finer bucket wastes less
arithmetic): a CheckList run's 644 batches per model then come from a few graphs, which measured faster than
launching them (benchmarks/README.md). `ALBERT_LENS_CUDA_GRAPHS=large` records them for fp32 models too, `=small`
for none.

Integrated gradients' rounds are recorded the same way (`Replayer.path_round`): a round is a forward and a backward
of its nodes' rows, some thousands of small kernels, so a graph per (nodes, token bucket, class, score) replays
it in one launch; the input's states are padded to the bucket with the mask over the padding (a masked token
changes neither the [CLS] score nor, being multiplied by a zero attention weight, any real token's gradient).
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..ground.precision import HALF
from ..models.loading import Classifier
from . import cls_path

ENV = "ALBERT_LENS_CUDA_GRAPHS"
ROWS = (1, 2, 4, 8)
LENGTHS = (16, 32, 64, 128, 256, 512)
CHECK_RTOL, CHECK_ATOL = 1e-3, 1e-3  # an fp32 graph's first answer against the eager forward's
HALF_CHECK_EPS = 8  # in half precision: this many of the dtype's epsilons, for both (benchmarks/README.md, GPU)
PATH_ROW_TOKENS = 8192  # rows x bucket tokens of a recorded integrated-gradients round (IG's own chunk size)
LARGE_ROWS, LARGE_TOKENS, LARGE_STEP = 256, 128, 8  # a dataset's batches (`large`)
log = logging.getLogger(__name__)

# capture(fn) -> (replay, out): records `fn` once; replay() recomputes `out` in place from the static inputs
# score(logits) -> (rows,): the class score integrated gradients differentiates (`gradients.class_score`)
Score = Callable[[torch.Tensor], torch.Tensor]
Capture = Callable[[Callable[[], torch.Tensor]], tuple[Callable[[], None], torch.Tensor]]


def cuda_capture(fn: Callable[[], torch.Tensor], pool=None) -> tuple[Callable[[], None], torch.Tensor, object]:
    """PyTorch's recipe: warm up on a side stream (kernels chosen, memory pooled), then record on it. Other
    threads' GPU work may go on meanwhile (thread-local capture mode)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, capture_error_mode="thread_local"):
        out = fn()
    return graph.replay, out, graph.pool()


def _current_device(device: str):
    """The model's GPU as the current one (a stream or graph is made on the current device); nothing elsewhere."""
    return torch.cuda.device(device) if torch.device(device).type == "cuda" else contextlib.nullcontext()


def _bucket(n: int, sizes: tuple[int, ...]) -> int | None:
    return next((s for s in sizes if s >= n), None)


class Replayer:
    """One model's graphs, by (rows, tokens) bucket. `capture` records a forward (CUDA graphs on a GPU; the
    tests pass one that runs it eagerly, so everything but the recording runs on the CPU)."""

    def __init__(self, clf: Classifier, capture: Capture | None = None):
        self.clf, self.found = clf, cls_path.supported(clf)
        self.capture = capture
        self.graphs: dict[tuple[int, int], tuple[Callable[[], None], dict[str, torch.Tensor], torch.Tensor]] = {}
        self.paths: dict[tuple, tuple[Callable[[], None], dict[str, torch.Tensor], tuple]] = {}
        self.lock = threading.Lock()
        self.pool = None
        self.off = self.found is None
        self.why_off = "" if not self.off else "a layout the [CLS] path does not know"
        self.paths_off, self.why_paths_off = self.off, self.why_off

    def bucket(self, inputs: dict[str, torch.Tensor]) -> tuple[int, int] | None:
        """The (rows, tokens) graph a batch is padded to; None: none serves it (run it eagerly)."""
        rows, width = inputs["input_ids"].shape
        if rows > ROWS[-1]:
            if not large(self.clf) or rows > LARGE_ROWS or width > min(LARGE_TOKENS, self.clf.max_length):
                return None
            return LARGE_ROWS, min(-(-width // LARGE_STEP) * LARGE_STEP, self.clf.max_length)
        tokens = self._tokens(width)
        row_bucket = _bucket(rows, ROWS)
        return None if tokens is None or row_bucket is None else (row_bucket, tokens)

    def _tokens(self, width: int) -> int | None:
        """The token bucket of `width` (16, 32, 64, ... up to the model's length); None past the model's length."""
        return _bucket(width, tuple(n for n in LENGTHS if n < self.clf.max_length) + (self.clf.max_length,))

    def logits(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The batch's logits from its bucket's graph (a fresh tensor, not the graph's own output); None when
        graphs are off for this model or the batch fits no bucket: the caller runs the forward eagerly."""
        if self.off or self.clf.model.training:  # graphs record the inference forward (no dropout)
            return None
        key = self.bucket(inputs)
        if key is None:
            return None
        rows = inputs["input_ids"].shape[0]
        with self.lock, _current_device(self.clf.device):  # one set of static inputs per graph: replays take turns
            if key not in self.graphs and not self._record(key, inputs):
                return None
            replay, static, out = self.graphs[key]
            for name, value in self._padded(inputs, key).items():
                static[name].copy_(value)
            replay()
            return out[:rows].clone()

    def _padded(self, inputs: dict[str, torch.Tensor], key: tuple[int, int]) -> dict[str, torch.Tensor]:
        """The batch padded right and down to the bucket; padding rows attend to their first token alone."""
        rows, width = inputs["input_ids"].shape
        extra = (0, key[1] - width, 0, key[0] - rows)
        pad_id = self.clf.tokenizer.pad_token_id or 0
        out = {}
        for name, value in inputs.items():
            if name not in ("input_ids", "attention_mask", "token_type_ids"):
                continue
            out[name] = F.pad(value, extra, value=pad_id if name == "input_ids" else 0)
        if "attention_mask" not in out:
            out["attention_mask"] = F.pad(torch.ones_like(inputs["input_ids"]), extra, value=0)
        out["attention_mask"][rows:, 0] = 1
        return out

    def _forward(self, static: dict[str, torch.Tensor]) -> torch.Tensor:
        return cls_path.padded_logits(self.clf, self.found, static)

    def _record(self, key: tuple[int, int], inputs: dict[str, torch.Tensor]) -> bool:
        """Capture the bucket's graph and check its first answer against the eager forward of `inputs`."""
        static = {name: value.clone() for name, value in self._padded(inputs, key).items()}
        rows = inputs["input_ids"].shape[0]

        rtol, atol = check_tolerance(self.clf)

        def same(out: torch.Tensor) -> bool:
            eager = cls_path.inputs_logits(self.clf, inputs)
            return eager is not None and torch.allclose(out[:rows].float(), eager.float(), rtol=rtol, atol=atol)

        got = self._checked(lambda: self._forward(static), same, "a replayed graph's logits differed from the "
                                                                 "eager forward's")
        if isinstance(got, str):
            return self._turn_off(got)
        self.graphs[key] = (got[0], static, got[1])
        return True

    def _checked(self, fn: Callable, same: Callable, differs: str) -> tuple | str:
        """`fn` recorded (by CUDA graphs, or the tests' stand-in) and replayed once: (replay, out) when
        `same(out)` agrees with the eager answer, else why not, in words (any failure to record leaves the eager
        path, which works)."""
        try:
            if self.capture is None:
                replay, out, self.pool = cuda_capture(fn, self.pool)
            else:
                replay, out = self.capture(fn)
            replay()
            if not same(out):
                return differs
        except Exception as exc:  # noqa: BLE001 - reported, and the eager path answers
            return f"capture failed ({type(exc).__name__}: {str(exc)[:200]})"
        return replay, out

    # -------------------------------------------------------------- integrated gradients' rounds
    def path_round(self, x: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None, alphas: torch.Tensor,
                   weights: torch.Tensor, score: Score, what: tuple) -> tuple[torch.Tensor, torch.Tensor] | None:
        """One round of integrated gradients from its graph: (the nodes' weighted gradient sum (tokens, E) in
        float64, each node's d/dalpha F (nodes,)), as `saliency.IntegratedGradients.path_integral` sums them
        eagerly; None where no graph applies (graphs off, a model in training, a round too large to record).
        `score` is recorded into the graph: `what` names it (the class and the kind of score) in the key."""
        if self.paths_off or self.clf.model.training:
            return None
        tokens, nodes = x.shape[1], alphas.shape[0]
        width = self._tokens(tokens)
        if width is None or nodes * width > PATH_ROW_TOKENS:
            return None
        key = (nodes, width, *what)
        with self.lock, _current_device(self.clf.device):
            inputs = self._path_inputs(x, b, mask, alphas, weights, width)
            if key not in self.paths and not self._record_path(key, inputs, tokens, score):
                return None
            replay, static, out = self.paths[key]
            for name, value in inputs.items():
                static[name].copy_(value)
            replay()
            return out[0][:tokens].clone(), out[1].clone()

    @staticmethod
    def _path_inputs(x, b, mask, alphas, weights, width: int) -> dict[str, torch.Tensor]:
        """A round's inputs with the states padded (zeros) to `width` tokens and the mask covering the padding."""
        extra = width - x.shape[1]
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.long, device=x.device)
        return {"x": F.pad(x, (0, 0, 0, extra)), "b": F.pad(b, (0, 0, 0, extra)),
                "mask": F.pad(mask[:1], (0, extra), value=0), "alphas": alphas, "weights": weights}

    def _round(self, inputs: dict[str, torch.Tensor], score: Score) -> tuple[torch.Tensor, torch.Tensor]:
        x, b = inputs["x"], inputs["b"]
        diff = x - b
        states = (b + inputs["alphas"][:, None, None] * diff).requires_grad_(True)
        with torch.enable_grad():
            logits = cls_path.states_logits(self.clf, self.found, states, inputs["mask"])
            (grad,) = torch.autograd.grad(score(logits).sum(), states)
        return (inputs["weights"][:, None, None] * grad.double()).sum(0), (grad * diff).sum((1, 2))

    def _record_path(self, key: tuple, inputs: dict[str, torch.Tensor], tokens: int, score: Score) -> bool:
        """Capture a round's graph and check its first answer against the same round run eagerly, unpadded."""
        static = {name: value.clone() for name, value in inputs.items()}

        def same(out: tuple[torch.Tensor, torch.Tensor]) -> bool:
            unpadded = {**inputs, "x": inputs["x"][:, :tokens], "b": inputs["b"][:, :tokens],
                        "mask": inputs["mask"][:, :tokens]}
            total, slope = self._round(unpadded, score)
            return all(torch.allclose(got.double(), want.double(), rtol=CHECK_RTOL,
                                      atol=CHECK_ATOL * float(want.abs().max()) + 1e-12)
                       for got, want in ((out[0][:tokens], total), (out[1], slope)))

        got = self._checked(lambda: self._round(static, score), same,
                            "a replayed round's gradients differed from the eager round's")
        if isinstance(got, str):
            return self._paths_off(got)
        self.paths[key] = (got[0], static, got[1])
        return True

    def _paths_off(self, why: str) -> bool:
        self.paths_off, self.why_paths_off = True, why
        self.paths.clear()
        log.warning("CUDA graphs off for %s's integrated gradients: %s; its rounds run eagerly", self.clf.name, why)
        return False

    def _turn_off(self, why: str) -> bool:
        self.off, self.why_off = True, why
        self.graphs.clear()
        log.warning("CUDA graphs off for %s: %s; it answers eagerly", self.clf.name, why)
        return False


def check_tolerance(clf: Classifier) -> tuple[float, float]:
    """(rtol, atol) of a graph's first logits against the eager forward's. The bucket's padding makes the
    products sum in another order, so a half-precision model's logits move by about an epsilon of its dtype
    (fp16 ~1e-3, bf16 ~8e-3), past the fixed 1e-3 an fp32 graph is held to."""
    half = HALF.get(getattr(clf, "precision", "fp32"))
    if half is None:
        return CHECK_RTOL, CHECK_ATOL
    tol = HALF_CHECK_EPS * torch.finfo(half).eps
    return tol, tol


def enabled(clf: Classifier) -> bool:
    """Graphs for a model on a CUDA device, unless ALBERT_LENS_CUDA_GRAPHS=0."""
    return torch.device(clf.device).type == "cuda" and os.environ.get(ENV, "1") != "0"


def large(clf: Classifier) -> bool:
    """Whether a dataset's batches (up to LARGE_ROWS rows) are recorded too: by default for a half-precision model
    (measured: the CheckList suite in fp16 took 10.7 s from graphs against 15.7 s eagerly, H200), for every model
    with ALBERT_LENS_CUDA_GRAPHS=large, for none with =small."""
    word = os.environ.get(ENV, "1").strip().lower()
    if word in ("large", "small"):
        return word == "large"
    return getattr(clf, "precision", "fp32") in HALF


_REPLAYERS_LOCK = threading.Lock()


def replayer(clf: Classifier) -> Replayer | None:
    """The model's replayer (made once, kept with the model); None where graphs do not apply."""
    if not enabled(clf):
        return None
    with _REPLAYERS_LOCK:
        if clf.graphs is None:
            clf.graphs = Replayer(clf)
        return clf.graphs


def logits(clf: Classifier, inputs: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """Logits of a small batch on a CUDA device from a replayed graph; None: run the forward eagerly."""
    found = replayer(clf)
    return None if found is None else found.logits(inputs)


def path_round(clf: Classifier, x: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None, alphas: torch.Tensor,
               weights: torch.Tensor, score: Score, what: tuple) -> tuple[torch.Tensor, torch.Tensor] | None:
    """An integrated-gradients round on a CUDA device from a replayed graph (`Replayer.path_round`); None: run
    it eagerly."""
    found = replayer(clf)
    return None if found is None else found.path_round(x, b, mask, alphas, weights, score, what)


def status(clf: Classifier) -> dict:
    """What Model facts says of the model's graphs: on or off (and why), the buckets captured so far, and the
    integrated-gradients rounds recorded (nodes, tokens) once there are any."""
    found = clf.graphs if enabled(clf) else None
    if found is None:
        return {"cuda_graphs": False}
    rounds = sorted({k[:2] for k in found.paths})
    return {"cuda_graphs": not found.off, "cuda_graph_buckets": sorted(found.graphs),
            **({"cuda_graphs_off": found.why_off} if found.off else {}),
            **({"cuda_graph_ig_rounds": rounds} if rounds else {}),
            **({"cuda_graphs_ig_off": found.why_paths_off} if found.paths_off and not found.off else {})}
