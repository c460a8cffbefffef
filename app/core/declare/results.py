"""What the facade answers, declared: one result type per capability, as LIT declares its specs.

Each is a frozen dataclass whose fields say what a front end may read; `to_dict()` gives the JSON the app's
`gradio_client` users and the CLI's `--json` receive (plain lists, numbers, strings). A result is also a read-only
mapping (`res["n"]`, `res.get("comparison")`), so code written against the JSON reads the typed result the same
way.
Nested rows are dictionaries declared as `TypedDict`s below (a dict at run time, so the JSON is unchanged): a row
with a key its type doesn't declare is refused when the result is made, as a top-level field is, so every key a
front end may read is written here.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict, get_args, get_origin, get_type_hints, is_typeddict


# ----------------------------------------------------------------------------- nested rows, declared
class ModelAnswer(TypedDict, total=False):
    """One model's answer to one input (`inference.Prediction.record`); a regression model gives `score`."""
    model: str
    label: str
    probabilities: dict[str, float]
    score: float
    latency_ms: float


class SaliencyMap(TypedDict, total=False):
    """One model's per-word map (`saliency.WordSaliency.to_dict`)."""
    model: str
    method: str
    words: list[str]
    fields: list[int]  # per word: which of the task's fields it is in
    scores: list[float]  # per word; signed methods: + supports the explained class
    target: int
    target_label: str | None
    probability: float | None  # the explained class's probability on the input
    tokens: list[str]
    token_scores: list[float]
    note: str
    delta: float | None  # integrated gradients: completeness error
    n_steps: int | None
    seconds: float
    output: str
    unread: list[int]  # words past the model's max length
    spans: list[list[int]]  # per word: [start, end) in its field's text


class Faithfulness(TypedDict, total=False):
    """A map's ERASER scores (`faithfulness.faithfulness`)."""
    comprehensiveness: float | None
    sufficiency: float | None
    bins: list[float]


class MethodRow(TypedDict):
    """One method's map of one model, in the methods table."""
    method: str
    model: str
    scores: list[float]
    unread: list[int]
    comprehensiveness: float | None
    sufficiency: float | None
    seconds: float
    delta: float | None
    signed: bool  # the method's scores say for (+) or against (-); False: a magnitude (gradient norm)


class Estimate(TypedDict, total=False):
    """A mean over examples with its 95% bootstrap interval."""
    model: str
    mean: float | None
    interval: list[float] | None
    n: int


class ExplainedExample(TypedDict, total=False):
    """One example of a dataset's saliency run."""
    index: int
    row: int  # its row in the dataset, as the file numbers it (through a slice too)
    texts: list[str]
    label: str | None
    top_words: list[list[str]]  # per model
    comprehensiveness: list[float | None]
    sufficiency: list[float | None]
    random_comprehensiveness: list[float | None]
    agreement: float | None


class Change(TypedDict, total=False):
    """One edit and both models before and after it (`counterfactuals.Change.to_dict`)."""
    original: list[str]
    edited: list[str]
    edits: list[list[str]]  # (old, new) word pairs
    generator: str
    before: list[dict]  # per model: `ModelAnswer` without latency
    after: list[dict]
    deltas: list[dict]  # per model: the change of each class's probability
    flipped: list[bool]
    validity: float | None  # WordNet: whether the edit keeps the meaning (`meaning.validity`)
    row: int  # over a dataset: the edited example's row in it, as the file numbers it


class ModelSearch(TypedDict, total=False):
    """One model's own search for a flip (ablation flip, HotFlip)."""
    model: str
    edited: list[str] | None
    flipped: bool
    before: dict
    after: dict | None
    removed: list[str]  # ablation flip: the words taken out
    size: int
    swap: list[str]  # HotFlip: (old, new)
    target_prob_before: float
    target_prob_after: float
    note: str


class AttentionMap(TypedDict):
    """One model's word-to-word attention at one layer."""
    model: str
    units: list[str]
    layer: int
    map: list[list[float]]
    heads: list[list[list[float]]]


class HeadStats(TypedDict):
    """One model's attention statistics per layer and head over a dataset."""
    model: str
    n: int
    entropy: list[list[float]]
    cls: list[list[float]]
    sep: list[list[float]]
    punct: list[list[float]]
    neighbour_js: list[list[float]]


class ScoredModel(TypedDict, total=False):
    """One model on a labelled dataset (`benchmark.benchmark`): accuracy, or Pearson and Spearman for a
    regression, with its speed and size."""
    model: str
    source: str
    n: int
    accuracy: float
    pearson: float
    spearman: float
    seconds: float
    throughput_per_s: float
    latency_ms_median: float
    latency_ms_p95: float
    parameters: int
    parameters_embeddings: int
    parameters_encoder: int
    parameters_head: int


class ModelFacts(TypedDict, total=False):
    """One model's facts (`facts.model_facts`) and speed."""
    model: str
    source: str
    family: str
    tokenizer: str
    vocab_size: int
    hidden_size: int
    embedding_size: int
    layers: int
    shares_layers: bool
    parameters: int
    parameters_embeddings: int
    parameters_encoder: int
    parameters_head: int
    transitions: list[float]  # cosine similarity of each layer's output to the one before
    linear_layers: str
    precision: str
    device: str
    device_name: str
    cuda_graphs: bool
    latency_ms: float  # one input at a time: the mean of the paired runs (`FactsResult.latency_comparison`)
    latency_ms_interval: list[float]
    throughput_per_s: float  # batched: the mean of the paired rounds (`FactsResult.throughput_comparison`)
    throughput_interval: list[float]


class Slice(TypedDict, total=False):
    """One candidate slice of a dataset and the paired test of the models on it (`slices.find`)."""
    name: str
    kind: str
    size: int
    indices: list[int]
    rows: list[int]  # as the dataset numbers them, from 1
    examples: list[list[str]]
    gold: list[str]
    accuracy: list[float]
    agreement: float
    only_first_right: int
    only_second_right: int
    gap_examples: list[int]
    effect: float
    p: float
    q: float


class ConfusionFacet(TypedDict, total=False):
    """One facet of a dataset (all of it, a length bin, the examples with a marker ...) and both models'
    confusion matrices on it (`confusion.confusion`)."""
    name: str
    n: int
    matrices: list[list[list[int]]]  # per model: rows the gold label, columns the predicted one (`labels` order)
    cells: list[list[list[list[int]]]]  # per model, per gold and predicted label: the dataset's rows, from 1
    accuracy: list[float]
    comparison: dict  # the paired test of the two accuracies on the facet (`significance.compare_accuracy`)


class Curve(TypedDict, total=False):
    """One model's ROC or precision-recall curve for one class (`confusion.curves`)."""
    model: str
    x: list[float]  # ROC: false-positive rate; PR: recall
    y: list[float]  # ROC: true-positive rate; PR: precision
    thresholds: list[float]  # per point: the class's probability at or above which an input counts as it


class AttackedExample(TypedDict, total=False):
    """One example attacked on every model (`attacks.attack_pair`)."""
    index: int
    row: int  # over a dataset: its row in it, as the file numbers it
    texts: list[str]
    gold: str
    results: list[dict]  # per model: TextAttack's outcome, queries, perturbed text
    transfer: list[dict]  # each model's adversarial text given to the other


_ROW_TYPES: dict[type, dict[str, tuple[type, int]]] = {}


def _row_types(cls: type) -> dict[str, tuple[type, int]]:
    """Per field of a result class: the TypedDict its rows are and how deep in lists they sit
    (`list[Change]`: 1, `list[list[Change]]`: 2), for the fields that have one."""
    if cls not in _ROW_TYPES:
        found = {}
        for name, hint in get_type_hints(cls).items():
            depth = 0
            while True:
                args = [a for a in get_args(hint) if a is not type(None)]
                if get_origin(hint) is list and args:
                    hint, depth = args[0], depth + 1
                elif args and get_origin(hint) is not list and len(args) == 1 and not is_typeddict(hint):
                    hint = args[0]  # X | None
                else:
                    break
            if depth and is_typeddict(hint):
                found[name] = (hint, depth)
        _ROW_TYPES[cls] = found
    return _ROW_TYPES[cls]


def _rows(value, depth: int):
    if value is None:
        return
    if depth == 0:
        yield value
        return
    for item in value:
        yield from _rows(item, depth - 1)


@dataclass(frozen=True)
class Result(Mapping):
    """Base: a declared answer read by attribute or, as its JSON, by key."""

    def __post_init__(self) -> None:
        """Every nested row's keys are declared by its row type: a key made somewhere and declared nowhere is a
        failure here, where it is made, not a field the front ends silently never see."""
        for name, (row_type, depth) in _row_types(type(self)).items():
            allowed = row_type.__annotations__
            for row in _rows(getattr(self, name), depth):
                if isinstance(row, Mapping) and not set(row) <= set(allowed):
                    raise TypeError(f"{type(self).__name__}.{name}: undeclared key(s) "
                                    f"{sorted(set(row) - set(allowed))}; declare them in {row_type.__name__}")

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
    models: list[ModelAnswer]


@dataclass(frozen=True)
class SaliencyResult(Result):
    """Per-word maps of both models for one input, their faithfulness and how far they agree."""
    method: str
    output: str  # what was explained: "prob" or "logit"
    fields: list[str]
    maps: list[SaliencyMap]  # per model
    faithfulness: list[Faithfulness]  # per model: of its own ranking
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
    rows: list[MethodRow]  # per method and model
    agreement: dict  # method -> the two models' rank agreement with it
    target_labels: dict | None = None  # model -> its class, where each explains its own prediction ("own")


@dataclass(frozen=True)
class SaliencyDatasetResult(Result):
    """Saliency over many examples (`explanation.explain_dataset`)."""
    dataset: str
    output: str
    method: str
    n: int  # examples explained (fewer than asked when the job was stopped)
    models: list[str]
    comprehensiveness: list[Estimate]  # per model
    sufficiency: list[Estimate]
    random_comprehensiveness: list[Estimate]  # the same words ranked at random: the floor to beat
    agreement: dict  # mean and interval of the two models' rank agreement
    examples: list[ExplainedExample]
    stopped: dict | None  # `jobs.cut`: where and why the work was cut, when it was
    comprehensiveness_comparison: dict | None = None  # paired test of the two models (two models only)
    lowest_agreement: list[int] | None = None  # indices of the examples the models agree least on


@dataclass(frozen=True)
class CounterfactualResult(Result):
    """Edited inputs and what they did to each model: one input's edits, or a flip rate over a dataset."""
    generator: str
    models: list[str]
    changes: list[Change] | None = None  # one input: each edit
    per_model: list[ModelSearch] | None = None  # ablation_flip / hotflip: each model's own search
    dataset: str | None = None  # over a dataset (the dataset_* generators), with the fields below
    edits: str | None = None
    changed: int | None = None  # edited copies scored
    examples_changed: int | None = None
    flip_rate: list[float | None] | None = None  # per model: share of edits that change its label (WordNet
    # synonyms: of the edits that keep the meaning, `meaning.validity`)
    valid_edits: int | None = None  # WordNet synonyms: the edits that keep the meaning, which the rates count
    flip_rate_all_edits: list[float | None] | None = None  # WordNet synonyms: per model, over every edit
    both: int | None = None  # edits that flip both models
    only: list[list[Change]] | None = None  # per model: edits that flip it alone
    examples: list[Change] | None = None
    comparison: dict | None = None  # paired test of the flip rates, edits of one example together

    def saved_edits(self) -> list:
        """The edits a saved set keeps: one input's, or every edited example of a dataset."""
        return list(self.changes if self.changes is not None else self.examples or [])


@dataclass(frozen=True)
class ProjectionResult(Result):
    """Both models' sentence embeddings in 2-D, aligned, with how far their neighbourhoods agree."""
    # what can colour its points (a row's column: its gold label, a model's prediction, whether that model is right,
    # whether the two models agree), with the name a front end shows
    COLOURS: ClassVar[dict[str, str]] = {"gold": "gold", "prediction": "prediction", "correct": "correct",
                                         "models": "models agree?"}
    dataset: str
    n: int
    projection: str  # "umap" or "pca"
    layer: int
    pooling: str
    knn_overlap: float  # mean share of each point's k nearest neighbours found in both spaces
    k: int
    knn_chance: float  # the overlap two unrelated spaces would have
    procrustes_disparity: float  # residual after aligning the second projection to the first (0: same shape)
    embeddings_cached: list[bool]  # per model
    points: list[dict] = field(repr=False)  # `projection.projection_table`: model, index, row, x, y, text, ...
    texts: list[list[str]] = field(repr=False)  # each example's fields; a point's `index` is its position here


class Neighbour(TypedDict):
    """One of a model's nearest dataset examples to an input (`locate.run_locate`)."""
    index: int  # its position in the projection's texts
    row: int  # the dataset's own row number
    text: str
    gold: str
    prediction: str | float
    cosine: float


class Located(TypedDict):
    """Where one input sits in a dataset for one model (`locate.run_locate`)."""
    model: str
    answer: str | float  # the model's label for the input (its score for regression)
    score: float  # the probability it gives that label (regression: its score)
    share_below: float  # the dataset's examples given a lower probability of that label (a lower score), ties half
    scores: list[float]  # every dataset example's probability of that label (score), for the distribution
    neighbours: list[Neighbour]  # nearest first, cosine in the model's own embedding space
    position: list[float]  # in the model's projection: the mean of its neighbours' places


@dataclass(frozen=True)
class LocateResult(Result):
    """Where one input sits in a dataset, for each model: its nearest examples, its place in the projection and
    its score among the dataset's."""
    input: list[str]
    dataset: str
    n: int
    k: int
    models: list[Located]
    projection: dict = field(repr=False)  # the dataset's projection (`ProjectionResult.to_dict()`) it is placed in


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
    minibatches: int  # of the unbiased estimator
    # how the 95% bounds were drawn: "a bootstrap over the minibatches", or for fewer than 8 minibatches
    # "half-samples of the examples"; None for one minibatch of under 8 rows (no interval)
    interval: str | None = None


@dataclass(frozen=True)
class AttentionResult(Result):
    """One layer's attention of both models on one input, over words (`attention.py`): per model its units
    (special tokens and words), the chosen head's map (or the mean of the heads) and every head's."""
    fields: list[str]
    layer: int  # 1 .. the model's layers (a model with fewer is read at its own top)
    head: int | None  # None: the mean of the heads
    models: list[AttentionMap]  # per model; a map is units × units, its rows sum to 1


@dataclass(frozen=True)
class AttentionStatsResult(Result):
    """What each head looks at over a dataset (`attention.attention_stats`), per model: (layers × heads) means
    of a token's attention entropy and of its share on [CLS], [SEP] and punctuation, and (layers − 1 × heads)
    the Jensen-Shannon divergence of a head's attention from the layer before."""
    dataset: str
    n: int
    models: list[HeadStats]


@dataclass(frozen=True)
class BenchmarkResult(Result):
    """Both models scored on one labelled dataset (`benchmark.benchmark`)."""
    pair: str
    dataset: str
    n: int
    models: list[ScoredModel]
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
    slices: list[Slice]  # findings first, by the gap they explain; each with its examples' indices and texts


@dataclass(frozen=True)
class ConfusionResult(Result):
    """Both models' confusion matrices on a labelled dataset, side by side, per facet (`confusion.run_confusion`)."""
    dataset: str
    n: int
    models: list[str]
    labels: list[str]  # the order of every matrix's rows (gold) and columns (predicted)
    facet: str  # what the dataset is split by: none, length, a marker (negation, ...), agreement
    facets: list[ConfusionFacet]


@dataclass(frozen=True)
class CurvesResult(Result):
    """Both models' ROC and precision-recall curves for one class on a labelled dataset, with the areas compared
    (`confusion.run_curves`)."""
    dataset: str
    n: int
    models: list[str]
    positive: str  # the class the curves are for (one against the rest)
    positives: int  # examples of that class
    roc: list[Curve]
    pr: list[Curve]
    auc: dict  # DeLong's paired comparison of the ROC AUCs (`significance.compare_auc`)
    average_precision: dict  # the paired bootstrap of the average precisions


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
    models: list[ModelFacts]
    n_inputs: int
    latency_comparison: dict  # the paired latency test, one input at a time, models in turns
    ratios: dict  # second over first: parameters, latency, throughput (the paired measurements' means)
    precision: dict | None = None  # which precision answers batch work and why (`Pair.precision_asked`)
    throughput_comparison: dict | None = None  # the paired throughput test, batched rounds, models in turns
    example_first: bool = False  # measured on the example every tab reads, then shipped examples


@dataclass(frozen=True)
class AttackResult(Result):
    """A TextAttack recipe run on both models, with transfer of each one's adversarial examples."""
    recipe: str
    models: list[str]
    examples: list[AttackedExample]  # per example, each model's result
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
    over: str = "suite"  # "dataset": CheckList's perturbations of a dataset's rows; each failure names its `row`


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
           ProjectionResult, LocateResult, SimilarityResult, AttentionResult, AttentionStatsResult, BenchmarkResult,
           EmbedResult, FactsResult, AttackResult, ChecklistResult, SlicesResult, CapabilityResult)
