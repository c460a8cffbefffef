"""LIT model wrapper for any classifier the core loads (BERT, ALBERT, ...; single texts and pairs).

An adapter only: specs are declared here, every number comes from `app.core.techniques.inspection.inspect`.
LIT 1.3.1's own
GLUE example is TensorFlow-only and hard-codes `model.bert`; this one works for any sequence classifier.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import time
from collections.abc import Iterable, Mapping

import numpy as np
from lit_nlp.api import model as lit_model
from lit_nlp.api import types as lit_types

from app.core.api import (
    TASKS,
    Classifier,
    Example,
    ModelSpec,
    Task,
    TextCost,
    check_examples,
    check_length,
    check_readable,
    checkpoint,
    current_job,
    get_classifier,
    inspect,
)
from app.core.ground.errors import InputError

LABEL = "label"
# set while LIT runs an interpreter or a generator (`light_outputs`): its probes (texts without an id) answer
# their prediction alone
_LIGHT: contextvars.ContextVar[bool] = contextvars.ContextVar("albert_lens_lit_light", default=False)


@contextlib.contextmanager
def light_outputs():
    """Within it, a text without an id (an interpreter's or generator's probe) is answered with its prediction,
    tokens and pooled embeddings only."""
    token = _LIGHT.set(True)
    try:
        yield
    finally:
        _LIGHT.reset(token)



class LensModel(lit_model.BatchedModel):
    """A BERT or ALBERT text classifier served through albert-lens's inference core."""

    def __init__(self, model: str = "offline:bert-sst2", task: str = "sst2", name: str = "",
                 classifier: Classifier | None = None, batch_size: int = 16):
        if classifier is None:
            if task not in TASKS:
                raise ValueError(f"task: {task!r} is not one of {sorted(TASKS)}")
            family = "albert" if "albert" in model.lower() else "bert"
            classifier = get_classifier(ModelSpec(name or model, model, family, TASKS[task]))
        self.clf = classifier
        self.batch_size = batch_size
        self.max_chars: int | None = None  # hosted: the longest text field a visitor may send (see server.py)
        self.max_inputs: int | None = None  # hosted: the most texts one request may ask for (LIME's samples count)
        self.cost: TextCost | None = None  # hosted: what a text costs here (server.measure_cost), then measured
        self.max_output_bytes: int | None = None  # hosted: the most one request's outputs may hold
        self.pair_models: tuple[Classifier, ...] = (classifier,)  # whose tokenizers decide what no model reads

    @classmethod
    def init_spec(cls) -> lit_types.Spec:
        """Lets the LIT UI load another model by hub id, local directory or `offline:<name>`."""
        return {
            "model": lit_types.String(default="offline:albert-sst2", required=True),
            "task": lit_types.CategoryLabel(vocab=sorted(TASKS), default="sst2", required=False),
            "name": lit_types.String(default="", required=False),
        }

    @classmethod
    def from_classifier(cls, clf: Classifier) -> "LensModel":
        return cls(classifier=clf)

    @property
    def task(self) -> Task:
        return self.clf.task

    precision = ""  # which precision answers and why, when the pair's was chosen (`models_for`)

    def description(self) -> str:
        return self.clf.describe() + (f" · {self.precision}" if self.precision else "")

    def max_minibatch_size(self) -> int:
        return self.batch_size

    # ---- specs

    def input_spec(self) -> lit_types.Spec:
        spec: lit_types.Spec = {}
        for f in self.task.fields:
            spec[f] = lit_types.TextSegment()
            spec[f"tokens_{f}"] = lit_types.Tokens(parent=f, required=False)
            spec[f"input_embs_{f}"] = lit_types.TokenEmbeddings(align=f"tokens_{f}", required=False)
        if self.clf.is_regression:
            spec[LABEL] = lit_types.Scalar(required=False)
        else:
            spec[LABEL] = lit_types.CategoryLabel(vocab=list(self.clf.labels), required=False)
        return spec

    def output_spec(self) -> lit_types.Spec:
        spec: lit_types.Spec = {"tokens": lit_types.Tokens()}
        for f in self.task.fields:
            spec[f"tokens_{f}"] = lit_types.Tokens(parent=f)
        if self.clf.is_regression:
            spec["score"] = lit_types.RegressionScore(parent=LABEL)
        else:
            spec["probas"] = lit_types.MulticlassPreds(vocab=list(self.clf.labels), parent=LABEL)
            spec[LABEL] = lit_types.CategoryLabel(vocab=list(self.clf.labels), required=False)
        spec["cls_emb"] = lit_types.Embeddings()
        spec["mean_emb"] = lit_types.Embeddings()
        for f in self.task.fields:
            spec[f"input_embs_{f}"] = lit_types.TokenEmbeddings(align=f"tokens_{f}")
            spec[f"token_grad_{f}"] = lit_types.TokenGradients(
                align=f"tokens_{f}", grad_for=f"input_embs_{f}", grad_target_field_key=LABEL)
        for i in range(self.clf.model.config.num_hidden_layers):
            spec[f"layer_{i + 1}/attention"] = lit_types.AttentionHeads(align_in="tokens", align_out="tokens")
        return spec

    # ---- prediction

    def _one(self, ex: dict) -> dict:
        fields = self.task.fields
        example = self.example(ex)
        tokens = [ex.get(f"tokens_{f}") for f in fields]
        embs = [ex.get(f"input_embs_{f}") for f in fields]
        given = any(e is not None for e in embs)
        attention, gradients = self._computes(ex)
        light = not gradients
        target = None if self.clf.is_regression else ex.get(LABEL) or None
        # given embeddings are integrated gradients' interpolation steps: LIT reads their gradients, never their
        # attention, which at 2,000 characters is ~60 MB a text (100 steps: 6 GB). A text without an id inside
        # an interpreter's or generator's request is one of its probes (LIME's samples, HotFlip's and ablation
        # flip's candidates): LIT reads its prediction alone, so neither gradients nor attention are computed.
        r = inspect(self.clf, example, target=target,
                    tokens=tokens if any(t is not None for t in tokens) else None,
                    embeddings=embs if given else None, attention=attention, gradients=gradients)
        out = {"tokens": r["tokens"], "cls_emb": r["cls_emb"], "mean_emb": r["mean_emb"]}
        if self.clf.is_regression:
            out["score"] = r["score"]
        else:
            out["probas"] = r["probas"]
            out[LABEL] = self.clf.labels[r["target"]]
        for k, (f, toks) in enumerate(zip(fields, r["field_tokens"])):
            out[f"tokens_{f}"] = toks
            if not light:
                out[f"input_embs_{f}"] = r["input_embs"][k]
                out[f"token_grad_{f}"] = r["grads"][k]
        for i, att in enumerate(r["attentions"] or []):
            out[f"layer_{i + 1}/attention"] = att
        return out

    def output_bytes(self, tokens: int, attention: bool = True, gradients: bool = True) -> int:
        """Bytes of JSON one text's outputs make at `tokens` tokens (what LIT sends back, not the arrays it holds:
        ~20 bytes a number against 4, `json_bytes_per_number`): every layer's attention (heads x tokens^2) when
        computed, the input embeddings and their gradients (tokens x hidden) when computed, the pooled
        embeddings."""
        cfg = self.clf.model.config
        hidden = int(getattr(cfg, "hidden_size", 768))
        numbers = 2 * hidden + 64
        if attention:
            numbers += cfg.num_hidden_layers * cfg.num_attention_heads * tokens * tokens
        if gradients:
            numbers += 2 * tokens * hidden
        return int(numbers * json_bytes_per_number())

    def _computes(self, ex: Mapping) -> tuple[bool, bool]:
        """(attention, gradients): what `_one` computes for this datapoint."""
        given = any(ex.get(f"input_embs_{f}") is not None for f in self.task.fields)
        light = not given and _LIGHT.get() and not ex.get("_id")
        return not given and not light, not light

    def example(self, ex: dict) -> Example:
        """A datapoint's texts as the core's checked Example: each field text (a number or a list is refused),
        not blank, invisible or a lone surrogate, and hosted at most `max_chars` long."""
        if not isinstance(ex, Mapping):  # LIT's dataset rows are its Input mappings, a visitor's plain dicts
            raise InputError("inputs: each datapoint is a JSON object of its fields")
        texts = []
        for f in self.task.fields:
            text = ex.get(f, "")
            if not isinstance(text, str):
                raise InputError(f"field {f!r} must be text, got {type(text).__name__}")
            if self.max_chars is not None:
                check_length(f, text, self.max_chars)
            texts.append(text)
        ex = check_examples(self.task, [Example(tuple(texts))])[0]
        check_readable(self.pair_models, zip(self.task.fields, ex.texts))  # the app's check, the pair's tokenizers
        return ex

    def admit(self, inputs: list) -> None:
        """What every path that runs this model checks first (LIT's predictions, interpreters, the paired
        metrics): the count, each datapoint's texts, and the work against the request's time left."""
        if self.max_inputs is not None and len(inputs) > self.max_inputs:
            raise InputError(f"inputs: {len(inputs):,} texts in one request (LIME's samples count); the limit here "
                             f"is {self.max_inputs:,}")
        examples = [self.example(ex) for ex in inputs]
        priced = self.cost is not None and current_job() is not None
        if self.max_output_bytes is None and not priced:
            return
        sizes = [self.tokens(e) for e in examples]  # tokenized once, for both checks
        if self.max_output_bytes is not None:  # what the request's answer will hold, before it is built
            need = sum(self.output_bytes(t, *self._computes(ex)) for t, ex in zip(sizes, inputs))
            if need > self.max_output_bytes:
                raise InputError(f"inputs: these {len(inputs):,} texts' outputs would make about {need / 2**20:,.0f} "
                                 f"MB of JSON here (each one's attention in every layer); the limit is "
                                 f"{self.max_output_bytes / 2**20:,.0f} MB: send fewer or shorter texts")
        if priced:
            self._fits_the_budget(sizes)

    def tokens(self, example: Example) -> int:
        """How many tokens the model reads of `example` (its maximum length at most): what a text's cost grows
        with."""
        enc = self.clf.tokenizer(*example.texts, truncation=True, max_length=self.clf.max_length)
        return len(enc["input_ids"])

    def predict(self, inputs, **kw):
        inputs = list(inputs)
        self.admit(inputs)
        return super().predict(inputs, **kw)

    def _fits_the_budget(self, tokens: list[int]) -> None:
        """Refuse, before any work, texts (those LIT's cache doesn't hold) that the running request's time left
        can't cover at this model's cost here (`cost`, by each text's tokens): the cap on a request is its work,
        not only its count."""
        job = current_job()
        if job is None or job.deadline is None or self.cost is None or not tokens:
            return
        left = max(0.0, job.deadline - job.clock())
        each = [self.cost.seconds(c) for c in tokens]
        need = sum(each)
        if need > left:
            mean = need / len(each)
            most = int(left // mean) if mean > 0 else len(each)
            raise InputError(
                f"inputs: {len(each):,} new texts would take {self.clf.name} about {need:,.0f} s here "
                f"({1000 * mean:,.0f} ms each), and this request has {left:,.0f} s left of the server's budget; "
                f"send at most {most:,}")

    def predict_minibatch(self, inputs: list[dict]) -> list[dict]:
        out = []
        for ex in inputs:
            checkpoint()  # the request's budget, between texts: a stopped request stops within one text
            start = time.perf_counter()
            out.append(self._one(ex))
            if self.cost is not None and not any(ex.get(f"input_embs_{f}") is not None for f in self.task.fields):
                # what a text really cost: the estimate follows it (an interpolation step is not a text)
                self.cost.observe(len(out[-1]["tokens"]), time.perf_counter() - start)
        return out

    def get_embedding_table(self) -> tuple[list[str], np.ndarray]:
        """(vocabulary in id order, word-embedding matrix): what HotFlip searches."""
        vocab = self.clf.tokenizer.convert_ids_to_tokens(
            list(range(self.clf.model.get_input_embeddings().num_embeddings))
        )
        table = self.clf.model.get_input_embeddings().weight.detach().float().cpu().numpy()
        return [str(v) for v in vocab], table


@functools.lru_cache(maxsize=1)
def json_bytes_per_number() -> float:
    """Bytes LIT's JSON answer spends on one float32 of an output, measured once with LIT's own serializer on
    numbers like an attention map's (probabilities: its widest case); an answer counted by its arrays' bytes was
    ~6x larger than counted (195 MB estimated, 1.15 GB sent)."""
    from lit_nlp.lib import serialize

    sample = np.random.default_rng(0).random(4096).astype(np.float32)
    return len(serialize.to_json({"x": sample})) / sample.size


def lens_of(model) -> LensModel | None:
    """The LensModel under LIT's wrappers (its prediction cache), or None for another model."""
    while model is not None and not isinstance(model, LensModel) and hasattr(model, "wrapped"):
        model = model.wrapped
    return model if isinstance(model, LensModel) else None


def models_for(classifiers: Iterable[Classifier], precision: str = "") -> dict[str, LensModel]:
    """LIT's models for the pair's classifiers; `precision` (`views.precision_line`) joins each description."""
    classifiers = tuple(classifiers)
    out = {clf.name: LensModel.from_classifier(clf) for clf in classifiers}
    for m in out.values():
        m.precision, m.pair_models = precision, classifiers
    return out
