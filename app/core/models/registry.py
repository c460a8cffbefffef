"""Which models make a pair, what they predict and in which order.

TextAttack's fine-tuned models ship configs without `id2label`, so label order is a fact we state here, taken
from the datasets they were trained on and TextAttack's own `dataset_args.py` (which remaps the BERT SNLI/MNLI
outputs with {0: 1, 1: 2, 2: 0}: that model answers contradiction, entailment, neutral).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..ground.data import GLUE_LABELS
from ..ground.errors import UnknownPair

MAX_LENGTH = 128


@dataclass(frozen=True)
class Task:
    name: str
    fields: tuple[str, ...]  # one text ("sentence") or a pair ("premise", "hypothesis")
    labels: tuple[str, ...] | None  # None: regression (STS-B)
    max_length: int = MAX_LENGTH
    score_range: tuple[float, float] | None = None

    @property
    def two_texts(self) -> bool:
        """Whether an input is two texts (premise and hypothesis, two questions): a "pair" is always the two
        models."""
        return len(self.fields) == 2

    @property
    def is_regression(self) -> bool:
        return self.labels is None


@dataclass(frozen=True)
class ModelSpec:
    """A model to load: `source` is a hub id, a local directory, or `offline:<name>` for a shipped one."""

    name: str
    source: str
    family: str  # "bert", "albert" or whatever the config says
    task: Task
    labels: tuple[str, ...] | None = None  # the model's own output order when it differs from the task's
    note: str = ""
    untrained_head_ok: bool = False  # load a checkpoint without a classification head (for its embeddings)
    precision: str = "fp32"  # "int8", "bf16", "fp16": for forward-only batch work (see precision.py)
    device: str = "cpu"  # where the weights live and the work runs: "cpu", "cuda:N", "mps" (see device.py)
    emulated: bool = False  # bf16 on a CPU as bf16-rounded products in fp32 (`precision.EmulatedBF16`)

    @property
    def output_labels(self) -> tuple[str, ...] | None:
        return self.labels if self.labels is not None else self.task.labels

    @property
    def precision_key(self) -> list[str]:
        """What a cache key adds for the precision: nothing for fp32 (caches written before int8 existed stay
        valid), the precision's name otherwise (int8 answers are others)."""
        return [self.precision] if self.precision != "fp32" else []


@dataclass(frozen=True)
class PairSpec:
    name: str
    task: Task
    models: tuple[ModelSpec, ModelSpec]
    description: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)


def _task(name: str, fields: tuple[str, ...], **kw) -> Task:
    return Task(name, fields, GLUE_LABELS[name], **kw)


ONE = ("sentence",)
TASKS: dict[str, Task] = {
    "sst2": _task("sst2", ONE),
    "rte": _task("rte", ("premise", "hypothesis")),
    "mrpc": _task("mrpc", ("sentence1", "sentence2")),
    "qqp": _task("qqp", ("question1", "question2")),
    "cola": _task("cola", ONE),
    "wnli": _task("wnli", ("sentence1", "sentence2")),
    "snli": _task("snli", ("premise", "hypothesis")),
    "mnli": _task("mnli", ("premise", "hypothesis")),
    "qnli": _task("qnli", ("question", "sentence")),
    "stsb": _task("stsb", ("sentence1", "sentence2"), score_range=(0.0, 5.0)),
    "ag_news": _task("ag_news", ("text",)),
    "imdb": _task("imdb", ("text",)),
    "rotten_tomatoes": _task("rotten_tomatoes", ("text",)),
    "yelp_polarity": _task("yelp_polarity", ("text",)),
}

# Hub suffixes exactly as TextAttack's model zoo spells them (textattack/model_args.py).
HUB_SUFFIX = {
    "sst2": "SST-2", "rte": "RTE", "mrpc": "MRPC", "qqp": "QQP", "cola": "CoLA", "wnli": "WNLI", "snli": "snli",
    "mnli": "MNLI", "qnli": "QNLI", "stsb": "STS-B", "ag_news": "ag-news", "imdb": "imdb",
    "rotten_tomatoes": "rotten-tomatoes", "yelp_polarity": "yelp-polarity",
}
# TextAttack's BERT NLI models were trained with dataset labels remapped {0: 1, 1: 2, 2: 0}.
BERT_REMAPPED = {"snli", "mnli"}
# Not in TextAttack's zoo table for ALBERT; the id follows the family's naming and may not exist on the hub.
ALBERT_NOT_IN_ZOO = {"mrpc", "mnli", "qnli"}


def _remapped(labels: tuple[str, ...]) -> tuple[str, ...]:
    mapping = {0: 1, 1: 2, 2: 0}  # dataset label -> model output index
    out = [""] * len(labels)
    for ds_idx, model_idx in mapping.items():
        out[model_idx] = labels[ds_idx]
    return tuple(out)


def textattack_pair(task_name: str) -> PairSpec:
    task = TASKS[task_name]
    suffix = HUB_SUFFIX[task_name]
    bert = ModelSpec(
        "BERT", f"textattack/bert-base-uncased-{suffix}", "bert", task,
        labels=_remapped(task.labels) if task_name in BERT_REMAPPED else None,
    )
    albert = ModelSpec(
        "ALBERT",
        f"textattack/albert-base-v2-{suffix}",
        "albert",
        task,
        note="not listed in TextAttack's model zoo; the hub id follows its naming"
        if task_name in ALBERT_NOT_IN_ZOO
        else "",
    )
    return PairSpec(
        task_name, task, (bert, albert), f"TextAttack's fine-tuned BERT-base and ALBERT-base-v2 on {task_name}"
    )


def offline_pair(task_name: str = "sst2") -> PairSpec:
    """The pair `train-offline --task <task> --export assets/offline` writes (SST-2's is shipped): `offline` for
    SST-2, `offline-<task>` for the others."""
    task = TASKS[task_name]
    return PairSpec(
        "offline" if task_name == "sst2" else f"offline-{task_name}",
        task,
        (
            ModelSpec("BERT", f"offline:bert-{task_name}", "bert", task),
            ModelSpec("ALBERT", f"offline:albert-{task_name}", "albert", task),
        ),
        "BERT (MiniLM-L6-H384) and a factorised, layer-shared ALBERT trained by albert-lens on "
        f"{'SST-2' if task_name == 'sst2' else task_name.upper()}; no network needed",
    )


OFFLINE_PAIR = offline_pair("sst2")

PRESETS: dict[str, PairSpec] = {name: textattack_pair(name) for name in TASKS} | {"offline": OFFLINE_PAIR}


ALIASES = {"sst_2": "sst2", "sts_b": "stsb", "agnews": "ag_news", "mr": "rotten_tomatoes", "yelp": "yelp_polarity"}


def task_key(name: str) -> str:
    """A pair or task name as the registry spells it: "SST-2", "sts-b" and "offline-SST-2" read as sst2, stsb
    and offline_sst2."""
    key = name.strip().lower().replace("-", "_")
    if key.startswith("offline_"):
        return "offline_" + task_key(key[len("offline_"):])
    return ALIASES.get(key, key)


def get_pair(name: str) -> PairSpec:
    key = task_key(name)
    if key.startswith("offline_"):
        task = key[len("offline_"):]
        if task in TASKS and not TASKS[task].is_regression:
            return OFFLINE_PAIR if task == "sst2" else offline_pair(task)
    if key not in PRESETS:
        raise UnknownPair(f"pair: unknown preset {name!r}; choose one of {sorted(PRESETS)}, offline-<task> for a "
                          "pair `train-offline --task <task>` exported, or give --models A B")
    return PRESETS[key]


def custom_pair(source_a: str, source_b: str, task: str | Task | None = None) -> PairSpec:
    """Any two hub ids or local directories. The task (labels, fields) comes from a preset name, or from the
    first model's config once loaded (see `loading.task_from_config`)."""
    t = TASKS[task] if isinstance(task, str) else task
    names = []
    for src in (source_a, source_b):
        base = Path(src).name if Path(src).exists() else src.split("/")[-1]
        names.append(base or src)
    if names[0] == names[1]:
        names = [f"A: {names[0]}", f"B: {names[1]}"]
    fam = [
        "albert" if "albert" in src.lower() else "bert" if "bert" in src.lower() else "model"
        for src in (source_a, source_b)
    ]
    placeholder = t or Task("custom", ONE, None)
    specs = tuple(ModelSpec(n, s, f, placeholder) for n, s, f in zip(names, (source_a, source_b), fam))
    return PairSpec(f"{names[0]} vs {names[1]}", placeholder, specs, "user-given models",
                    extra={"task_known": t is not None})


def with_task(spec: ModelSpec, task: Task) -> ModelSpec:
    return replace(spec, task=task)
