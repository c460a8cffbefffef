"""What the facade answers, declared: one result type per capability, as LIT declares its specs.

Each is a frozen dataclass whose fields say what a front end may read; `to_dict()` gives the JSON the app's
`gradio_client` users and the CLI's `--json` receive (plain lists, numbers, strings). A result is also a read-only
mapping (`res["n"]`, `res.get("comparison")`), so code written against the JSON reads the typed result the same
way.
Nested rows stay dictionaries: their keys are written where they are made (`inference.Prediction.record`,
`attacks.summarize`, `checklist.to_dict`, ...), and the field comments name those places.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Result(Mapping):
    """Base: a declared answer read by attribute or, as its JSON, by key."""

    def __getitem__(self, key: str) -> Any:
        if key not in self._present():  # as the JSON reads: a field that doesn't apply is absent
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._present())

    def __len__(self) -> int:
        return len(self._present())

    def __contains__(self, key: object) -> bool:
        return key in self._present()

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def _present(self) -> tuple[str, ...]:
        """The fields that apply: an optional field (default None) left None is absent from the JSON and from
        `in` and `res[...]`, as it was never set (a single input's counterfactual has no flip rate); the attribute
        reads None."""
        return tuple(f.name for f in dataclasses.fields(self)
                     if not (f.default is None and getattr(self, f.name) is None))

    @classmethod
    def of(cls, raw: Mapping, **extra):
        """From a technique's dictionary: every key must be declared (a new one is a test failure here, not a
        field the front ends silently never see)."""
        merged = {**raw, **extra}
        unknown = sorted(set(merged) - set(cls._names()))
        if unknown:
            raise TypeError(f"{cls.__name__}: undeclared field(s) {unknown}")
        return cls(**merged)

    def to_dict(self) -> dict:
        """The JSON form: the fields that apply, nested values as they are (already plain)."""
        return {name: getattr(self, name) for name in self._present()}


@dataclass(frozen=True)
class PredictResult(Result):
    """Both models' answer to one input."""
    task: str
    fields: list[str]  # the task's input fields, in order
    input: list[str]  # the texts as the models read them (NUL characters become spaces)
    models: list[dict]  # per model: `Prediction.record` (label, probabilities; or score) and latency_ms


@dataclass(frozen=True)
class SaliencyResult(Result):
    """Per-word maps of both models for one input, their faithfulness and how far they agree."""
    method: str
    output: str  # what was explained: "prob" or "logit"
    fields: list[str]
    maps: list[dict]  # per model: `saliency.Saliency.to_dict` (words, scores, explained label, ...)
    faithfulness: list[dict]  # per model: comprehensiveness and sufficiency of its own ranking
    agreement: float | None  # rank correlation of the two maps over shared words
    agreement_label: str | None  # the class both maps explain when compared
    signed: bool = True  # the method's scores say for (+) or against (-); False: a magnitude (gradient norm)


@dataclass(frozen=True)
class SaliencyMethodsResult(Result):
    """Every saliency method on one input, both models, one class (ferret's table): which words each method
    ranks first, and how faithful each method's map is, side by side."""
    fields: list[str]
    words: list[str]  # the input's words (the same for both models: maps are aligned to words)
    target_label: str | None  # the class every map explains (None: a regression score)
    output: str
    rows: list[dict]  # per method and model: method, model, scores, comprehensiveness, sufficiency, seconds, delta
    agreement: dict  # method -> the two models' rank agreement with it


@dataclass(frozen=True)
class SaliencyDatasetResult(Result):
    """Saliency over many examples (`explanation.explain_dataset`)."""
    dataset: str
    output: str
    method: str
    n: int  # examples explained (fewer than asked when the job was stopped)
    models: list[str]
    comprehensiveness: list[dict]  # per model: mean and 95% bootstrap interval
    sufficiency: list[dict]
    random_comprehensiveness: list[dict]  # the same words ranked at random: the floor to beat
    agreement: dict  # mean and interval of the two models' rank agreement
    examples: list[dict]
    stopped: dict | None  # `jobs.cut`: where and why the work was cut, when it was
    comprehensiveness_comparison: dict | None = None  # paired test of the two models (two models only)
    lowest_agreement: list[int] | None = None  # indices of the examples the models agree least on


@dataclass(frozen=True)
class CounterfactualResult(Result):
    """Edited inputs and what they did to each model: one input's edits, or a flip rate over a dataset."""
    generator: str
    models: list[str]
    changes: list[dict] | None = None  # one input: `counterfactuals.Change.to_dict` per edit
    per_model: list[dict] | None = None  # ablation_flip / hotflip: each model's own search
    dataset: str | None = None  # over a dataset (the dataset_* generators), with the fields below
    edits: str | None = None
    changed: int | None = None  # edited copies scored
    examples_changed: int | None = None
    flip_rate: list[float | None] | None = None  # per model: share of edits that change its label (WordNet
    # synonyms: of the edits that keep the meaning, `meaning.validity`)
    valid_edits: int | None = None  # WordNet synonyms: the edits that keep the meaning, which the rates count
    flip_rate_all_edits: list[float | None] | None = None  # WordNet synonyms: per model, over every edit
    both: int | None = None  # edits that flip both models
    only: list[list[dict]] | None = None  # per model: edits that flip it alone
    examples: list[dict] | None = None
    comparison: dict | None = None  # paired test of the flip rates, edits of one example together


@dataclass(frozen=True)
class ProjectionResult(Result):
    """Both models' sentence embeddings in 2-D, aligned, with how far their neighbourhoods agree."""
    dataset: str
    n: int
    method: str  # "umap" or "pca"
    layer: int
    pooling: str
    knn_overlap: float  # mean share of each point's k nearest neighbours found in both spaces
    k: int
    knn_chance: float  # the overlap two unrelated spaces would have
    procrustes_disparity: float  # residual after aligning the second projection to the first (0: same shape)
    embeddings_cached: list[bool]  # per model
    points: list[dict] = field(repr=False)  # `projection.projection_table`: model, index, x, y, text, gold, ...
    texts: list[list[str]] = field(repr=False)  # each example's fields; a point's `index` is its position here


@dataclass(frozen=True)
class SimilarityResult(Result):
    """Linear CKA between every layer of the two models, and of each with itself (`similarity.layer_similarity`):
    layer 0 is the embedding output; a None cell is a layer whose vectors don't vary across examples."""
    dataset: str
    n: int  # rows compared: examples, or for "words" pooling the words both models read
    pooling: str  # "cls", "mean" (a sentence per row) or "words"
    models: list[str]
    cross: dict  # {"cka", "low", "high"}: (layers of the first) × (layers of the second), 95% bootstrap bounds
    a: dict  # the first model against itself
    b: dict  # the second against itself
    best_b_for_a: list[int | None]  # per layer of the first: the second's layer most like it
    best_a_for_b: list[int | None]
    batches: int  # minibatches of the unbiased estimator (the bootstrap resamples them)


@dataclass(frozen=True)
class AttentionResult(Result):
    """One layer's attention of both models on one input, over words (`attention.py`): per model its units
    (special tokens and words), the chosen head's map (or the mean of the heads) and every head's."""
    fields: list[str]
    layer: int  # 1 .. the model's layers (a model with fewer is read at its own top)
    head: int | None  # None: the mean of the heads
    models: list[dict]  # per model: model, units, layer, map (units × units, rows sum to 1), heads


@dataclass(frozen=True)
class AttentionStatsResult(Result):
    """What each head looks at over a dataset (`attention.attention_stats`), per model: (layers × heads) means
    of a token's attention entropy and of its share on [CLS], [SEP] and punctuation, and (layers − 1 × heads)
    the Jensen-Shannon divergence of a head's attention from the layer before."""
    dataset: str
    n: int
    models: list[dict]  # per model: model, n, entropy, cls, sep, punct, neighbour_js


@dataclass(frozen=True)
class BenchmarkResult(Result):
    """Both models scored on one labelled dataset (`benchmark.benchmark`)."""
    pair: str
    dataset: str
    n: int
    models: list[dict]  # per model: accuracy (or pearson/spearman), throughput, latency, parameters
    engine: dict  # where it ran (local, or the Ray cluster and its wall time)
    comparison: dict  # the paired test of the gap between the two
    disagreements: dict  # {"total", "examples"}: inputs the two answer differently
    ratios: dict  # second model over first: parameters, throughput, latency
    fidelity: dict | None = None  # a reduced precision against fp32 on a sample (`fidelity.against_fp32`)


@dataclass(frozen=True)
class SlicesResult(Result):
    """Where the two models differ on a labelled dataset (`slices.find`): each slice tested, with its q."""
    dataset: str
    n: int
    metric: str  # accuracy (McNemar) or agreement (Fisher)
    models: list[str]
    min_size: int
    alpha: float
    candidates_tested: int  # every candidate counts in the false-discovery rate
    findings: int  # slices with q < alpha
    overall: dict  # both accuracies and the agreement on the whole dataset
    slices: list[dict]  # findings first, by the gap they explain; each with its examples' indices and texts


@dataclass(frozen=True)
class EmbedResult(Result):
    """Both models' sentence embeddings of a dataset, in its order."""
    dataset: str
    n: int
    layer: int
    pooling: str
    embeddings: dict = field(repr=False)  # model name -> (n, hidden) numpy array (not JSON: `--out` writes .npz)
    fidelity: dict | None = None  # a reduced precision against fp32 on a sample (`fidelity.against_fp32`)


@dataclass(frozen=True)
class FactsResult(Result):
    """Model facts measured now: sizes, layer-to-layer transitions, speed."""
    models: list[dict]  # per model: `facts.model_facts`
    n_inputs: int
    latency_comparison: dict  # the paired latency test, one input at a time, models in turns
    ratios: dict  # second over first: parameters, latency, throughput


@dataclass(frozen=True)
class AttackResult(Result):
    """A TextAttack recipe run on both models, with transfer of each one's adversarial examples."""
    recipe: str
    models: list[str]
    examples: list[dict]  # per example: index, texts, label and each model's result (`attacks.attack_pair`)
    stopped: dict | None
    resumed: int  # examples read back from the resume file, not attacked again
    settings: dict  # n, query_budget, time_limit as validated
    summary: dict  # per model: `attacks.summarize`
    comparison: dict | None  # paired test of the success rates


@dataclass(frozen=True)
class ChecklistResult(Result):
    """A CheckList suite run on both models, with a paired test per test."""
    suite: str
    kind: str
    sample: int | None  # cases per test; None: all
    models: list[str]
    tests: list[dict]  # `checklist.to_dict`
    capabilities: dict  # capability -> model -> mean fail rate
    markdown: str
    differing: list[str]  # tests whose fail rates differ beyond chance (Holm-corrected)
    summary: str


@dataclass(frozen=True)
class CapabilityResult(Result):
    """A declared capability's answer (`capabilities.py`): which one, the options it ran with (defaults filled
    in), the dataset it read, and what its job returned, made JSON (arrays as lists)."""
    capability: str
    options: dict
    result: Any
    dataset: str | None = None
    n: int | None = None


RESULTS = (PredictResult, SaliencyResult, SaliencyMethodsResult, SaliencyDatasetResult, CounterfactualResult,
           ProjectionResult, SimilarityResult, AttentionResult, AttentionStatsResult, BenchmarkResult, EmbedResult,
           FactsResult, AttackResult, ChecklistResult, SlicesResult, CapabilityResult)
