"""The front ends' one door: one function per capability, computed once in the core.

Each returns its declared result type (`results.py`); the Gradio app, `gradio_client` users and the CLI's
`--json` receive its `to_dict()`, plain lists, numbers and strings only. Inputs arrive as raw strings; errors
are `LensError`s naming the field.
"""
from __future__ import annotations

import functools
import json
import os
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

from . import attacks, capabilities, jobs, policy, projection, views
from . import attention as attn
from . import checklist as cl
from . import counterfactuals as cf

# F401 below: names the front ends need besides the calls, handed on (the facade is their one door into the core)
from .attacks import OFFLINE_TEXTFOOLER, AttackUnavailable, list_recipes, recipe_status  # noqa: F401
from .batching import Combiner
from .benchmark import (
    DISAGREEMENTS_SHOWN,  # noqa: F401
    check_labels,
)
from .benchmark import benchmark as score
from .capabilities import DATASET_GENERATORS, GENERATORS, POOLINGS  # noqa: F401
from .checklist import default_suites  # noqa: F401 - the report's default suites
from .data import (
    DataError,
    Dataset,
    Example,
    blank_reason,  # noqa: F401 - LIT's new datapoints
    load_dataset,
    read_table,
    short_int,  # noqa: F401 - LIT's request bodies
    surrogate_reason,
)
from .embeddings import embed_batch
from .engine import Engine
from .errors import InputError
from .explanation import explain, explain_batch
from .facts import facts_batch, shares_layers
from .fidelity import against_fp32
from .inference import check_examples, from_logits, logits_batch
from .inference import predict as predict_examples  # noqa: F401
from .inspection import inspect  # noqa: F401
from .jobs import Job, Stopped, running  # noqa: F401
from .jobs import check as check_job  # noqa: F401
from .jobs import current as current_job  # noqa: F401
from .loading import Classifier, get_classifier  # noqa: F401
from .pair import Pair
from .policy import (  # noqa: F401
    OPERATOR_CAP,
    allow_reads_under,
    check_length,
    count,
    integer,
    limits,
    public_bind_allowed,
    public_message,
    readable,
)
from .policy import number as bounded_number  # noqa: F401 - LIT's settings
from .projection import in_cache, knn_chance, project_pair, projection_table, vectors_batch
from .registry import TASKS, ModelSpec, Task  # noqa: F401
from .results import (  # noqa: F401 - the declared answers, for front ends that name them
    RESULTS,
    AttackResult,
    AttentionResult,
    AttentionStatsResult,
    BenchmarkResult,
    CapabilityResult,
    ChecklistResult,
    CounterfactualResult,
    EmbedResult,
    FactsResult,
    PredictResult,
    ProjectionResult,
    SaliencyDatasetResult,
    SaliencyMethodsResult,
    SaliencyResult,
    SimilarityResult,
    SlicesResult,
)
from .runtime import ASSETS_DIR, SHARED_DATA, bounded_log_lines, cache_dir  # noqa: F401
from .saliency import METHODS  # noqa: F401
from .shares import Busy as SharesBusy  # noqa: F401 - the app's fair shares of /predict
from .shares import Shares, TooMany, client_key  # noqa: F401
from .significance import compare_accuracy, compare_correlation  # noqa: F401
from .similarity import similarity_batch, spans, summarise
from .slices import find as find_slices
from .slices import slices_batch
from .timing import TextCost, latency_batch  # noqa: F401 - TextCost: LIT prices its texts
from .training import TrainSettings, train_offline  # noqa: F401
from .workers import Pool

Progress = Callable[[int, int], None] | None
EXAMPLES = ASSETS_DIR / "examples"


def run(name: str, pair: Pair, text: str | None = None, text2: str | None = None, *, dataset: str | None = None,
        limit: int | str | None = None, progress: Progress = None, engine: Engine | None = None,
        visitor: bool = True, **options) -> CapabilityResult:
    """A declared capability (`capabilities.py`): its options checked against its declaration (defaults filled
    in, unknown names refused), its input or dataset resolved, its job run by the engine (in process, or on a Ray
    cluster's workers) on the pair, or its fp32 twin when the job needs gradients. `api.NAME(...)` is
    `api.run("NAME", ...)` for every declared NAME. A capability answered by a facade function of its own (its
    `runner`: saliency, project, ...) is that function's answer, its options checked there, once."""
    cap = capabilities.get(name)
    if cap.runner:
        return _run_runner(cap, pair, text=text, text2=text2, dataset=dataset, limit=limit, progress=progress,
                           engine=engine, visitor=visitor, **options)
    checked = cap.check(options, visitor=visitor)
    on = _on(name, pair)
    if cap.inputs == "text":
        examples, source = [example_from(on, text, text2)], None
    else:
        n = count("limit", limit, cap=_cap(visitor, "max_examples"), default=1000 if visitor else None)
        ds = resolve_dataset(on, dataset, n, visitor=visitor)
        examples, source = ds.examples, ds.name
    out = (engine or Engine()).run(on, cap.function(), examples, params=checked, progress=progress)
    return CapabilityResult(capability=name, options=checked, result=_plain(out), dataset=source,
                            n=None if source is None else len(examples))


def _run_runner(cap: capabilities.Capability, pair: Pair, **given):
    """A runner called with what it takes: its options by their declared names, its inputs (text or dataset),
    progress, engine and the visitor flag where its signature has them."""
    from inspect import signature

    names = {o.name for o in cap.options}
    unknown = sorted(set(given) - names - capabilities.RESERVED)
    if unknown:
        raise InputError(f"{unknown[0]}: {cap.name} takes no such option; it takes {sorted(names) or 'none'}")
    runner = capabilities.resolve(cap.runner)
    params = signature(runner).parameters
    passed = {k: v for k, v in given.items() if k in params and (v is not None or k in names)}
    return runner(pair, **passed)


def _plain(value):
    """A job's answer as JSON takes it: arrays as lists, numpy numbers as Python's."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def __getattr__(name: str):
    """Every declared capability is a facade function: `api.tokens(pair, text)` runs `api.run("tokens", ...)`."""
    if name in {c.name for c in capabilities.declared()}:
        return functools.partial(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def example_from(pair: Pair, text: str | None, text2: str | None = None) -> Example:
    """Raw strings to a checked Example; NUL characters become spaces, over-long fields are refused."""
    fields = pair.task.fields
    cap = limits()["max_chars"]
    texts = []
    for name, t in zip(fields, [text, text2]):
        t = "" if t is None else t
        if not isinstance(t, str):
            raise InputError(f"field {name!r} must be text, got {type(t).__name__}")
        check_length(name, t, cap)
        texts.append(t.replace("\x00", " "))
    return check_examples(pair.task, [Example(tuple(texts))])[0]


def predict(pair: Pair, text: str, text2: str | None = None) -> PredictResult:
    """Both models' answer to one input. Visitors asking at the same moment share a forward pass
    (`batching.Combiner`); `latency_ms` is the time of the pass that answered."""
    ex = example_from(pair, text, text2)
    models = predict_combiner(pair.for_one_input)(ex)
    return PredictResult(task=pair.task.name, fields=list(pair.task.fields), input=list(ex.texts), models=models)


_COMBINERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_COMBINERS_LOCK = threading.Lock()


def predict_combiner(pair: Pair) -> Combiner:
    """The pair's combiner of concurrent one-input predictions: checked examples in, per input both models'
    records out."""
    with _COMBINERS_LOCK:
        if pair not in _COMBINERS:
            ref = weakref.ref(pair)  # the combiner, kept by the pair's entry, must not keep the pair alive

            def both(examples):
                preds = ref().predict(list(examples))
                return [[p.record(i) | {"latency_ms": 1000 * p.seconds} for p in preds] for i in range(len(examples))]

            _COMBINERS[pair] = Combiner(both)
        return _COMBINERS[pair]


IG_TOLERANCES = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)


def job(alive: Callable[[], bool] | None = None, name: str = "request") -> jobs.Job:
    """A front end's request as a job: this server's time budget (`request_seconds`) and, when the front end
    can tell, whether its client is still there. Run the call inside `jobs.running(api.job(...))`."""
    return jobs.Job(seconds=limits()["request_seconds"], alive=alive, name=name)


def worker_pools(pair: Pair, groups: dict[str, int]) -> dict[str, Pool]:
    """Child processes for a front end's heavy requests, `groups` naming how many per concurrency group; each
    loads `pair`, may read what this process may (its registered upload folders) and is warmed up like the app."""
    setup = [(_worker_setup, (pair, [str(p) for p in policy._READABLE]))]
    raw = os.environ.get("ALBERT_LENS_WORKER_THREADS", "").strip()
    spare = max(1, (os.cpu_count() or 1) // sum(groups.values()))
    threads = int(raw) if _digits(raw) and int(raw) > 0 else spare
    return {group: Pool(n, setup, threads=threads, name=f"{group} worker") for group, n in groups.items()}



def _worker_setup(pair: Pair, readable_roots: list[str]) -> None:
    for root in readable_roots:
        allow_reads_under(root)
    _ = pair.models  # load the weights now, not during the first visitor's request
    for step in warm_ups():
        step()


def warm_ups() -> tuple:
    """One-off costs of a process's first projection (UMAP's compilation) and first WordNet swap (loading
    WordNet), which a server pays while it starts instead of its first visitor."""
    return (projection.warm_up, cf.warm_up)


def shipped_examples(task, limit: int | None = None) -> list[Example]:
    """The shipped examples a pair of this task reads (`task`: a pair's `.task`), by the same loader as any
    dataset, their labels as written."""
    path = shipped_datasets()[_shipped_for(task)]
    return read_table(path, labels=(), n_fields=len(task.fields), limit=limit).examples


def _options(name: str, *, visitor: bool = True, **given) -> dict:
    """A request's options checked against the capability's declaration (`capabilities.py`), once, before any
    work: the only place an option's name, range and default are read."""
    return capabilities.get(name).check(given, visitor=visitor)


def _on(name: str, pair: Pair) -> Pair:
    """The pair a capability runs on: its fp32 twin where the declaration says it needs gradients (gradients and
    the maps' forward passes on fp32 weights, whatever the pair's batch precision), the pair itself otherwise."""
    return pair.fp32 if capabilities.get(name).needs_gradients else pair


def _named(target):
    """A target as the declaration checks it: a class index passes by (`inference.class_index` checks it)."""
    return None if isinstance(target, int) and not isinstance(target, bool) else target


def _target(target, checked: str):
    """The class asked for: a class index as given, else the checked label's name, or none (empty or
    "predicted": the first model's prediction)."""
    if isinstance(target, int) and not isinstance(target, bool):
        return target
    return None if checked in ("", "predicted") else checked


def saliency(pair: Pair, text: str, text2: str | None = None, method: str = "integrated_gradients",
             target: str | None = None, tolerance: float | str | None = None,
             output: str | None = None) -> SaliencyResult:
    """Per-word maps of both models; `tolerance` bounds integrated gradients' convergence delta (default 1e-3);
    `output` is what they explain, the class's probability (default) or its logit."""
    pair = _on("saliency", pair)
    opts = _options("saliency", method=method, target=_named(target), tolerance=tolerance, output=output)
    method, options = opts["method"], _method_options(opts["method"], opts["tolerance"], opts["output"])
    ex = example_from(pair, text, text2)
    out = explain(pair.models, ex, method, _target(target, opts["target"]), **options)
    return SaliencyResult(method=method, output=options["output"], fields=list(pair.task.fields),
                          maps=[m.to_dict() for m in out["maps"]], faithfulness=out["faithfulness"],
                          agreement=out["agreement"], agreement_label=out["agreement_label"],
                          signed=METHODS[method].signed)


def saliency_methods(pair: Pair, text: str, text2: str | None = None, target: str | None = None,
                     tolerance: float | str | None = None, output: str | None = None,
                     progress: Progress = None) -> SaliencyMethodsResult:
    """Every method on one input, both models explaining one class (the first model's prediction, or `target`),
    with each map's faithfulness: where the methods agree on a model's reasons, and which to trust.
    `progress`: methods done."""
    pair = _on("saliency_methods", pair)
    opts = _options("saliency_methods", target=_named(target), tolerance=tolerance, output=output)
    ex = example_from(pair, text, text2)
    tgt = _target(target, opts["target"])
    rows, agreement, words, label, explained = [], {}, [], None, "prob"
    for name in sorted(METHODS):
        options = _method_options(name, opts["tolerance"], opts["output"])
        out = explain(pair.models, ex, name, tgt if tgt is not None else label, **options)
        label = out["maps"][0].target_label  # the first method's class, asked of every later one
        words, explained = out["maps"][0].words, options["output"]
        agreement[name] = out["agreement"]
        rows += [{"method": name, "model": m.model, "scores": m.scores, "unread": m.unread,
                  "comprehensiveness": f["comprehensiveness"], "sufficiency": f["sufficiency"],
                  "seconds": m.seconds, "delta": m.delta} for m, f in zip(out["maps"], out["faithfulness"])]
        if progress:
            progress(len(agreement), len(METHODS))
    return SaliencyMethodsResult(fields=list(pair.task.fields), words=words, target_label=label, output=explained,
                                 rows=rows, agreement=agreement)


def _method_options(method: str, tolerance: float, output: str) -> dict:
    """What a checked request asks of a saliency method here: the explained output, LIME's samples, integrated
    gradients' steps and delta."""
    cap = limits()
    kw = {"output": output}
    if method == "lime":
        kw["n_samples"] = min(256, cap["max_lime_samples"])
    if method == "integrated_gradients":
        kw["max_steps"] = cap["max_ig_steps"]
        kw["tolerance"] = tolerance
    return kw


def saliency_dataset(pair: Pair, dataset: str | None = None, method: str = "integrated_gradients",
                     limit: int | None = 50, tolerance: float | str | None = None, progress: Progress = None,
                     output: str | None = None, *, engine: Engine | None = None,
                     visitor: bool = True) -> SaliencyDatasetResult:
    """Saliency over the first `limit` examples of a dataset (`explanation.explain_dataset`): faithfulness per
    model against a random ranking, the paired comparison of the two, and the models' agreement; on a Ray
    `engine`, on one of its workers."""
    pair = _on("saliency", pair)
    opts = _options("saliency", visitor=visitor, method=method, tolerance=tolerance, output=output)
    method, options = opts["method"], _method_options(opts["method"], opts["tolerance"], opts["output"])
    n = count("limit", limit, cap=_cap(visitor, "max_saliency_examples"), default=50)
    ds = resolve_dataset(pair, dataset, n, visitor=visitor)
    res = (engine or Engine()).run(pair, explain_batch, ds.examples, params={"method": method, **options},
                                   progress=progress)
    return SaliencyDatasetResult.of(res, dataset=ds.name, output=options["output"])


def counterfactual(pair: Pair, text: str, text2: str | None = None, generator: str = "word_replacement",
                   replacements: str | None = None, dataset: str | None = None, limit: int | None = None,
                   progress: Progress = None) -> CounterfactualResult:
    pair = _on("counterfactual", pair)  # its gradient-guided edits need gradients
    if replacements is not None and not isinstance(replacements, str):
        raise InputError(f"replacements: expected text such as 'film -> movie', got {type(replacements).__name__}")
    opts = _options("counterfactual", generator=generator, replacements=replacements)
    generator, replacements = opts["generator"], opts["replacements"]
    if (why := surrogate_reason(replacements)) is not None:
        raise InputError(f"replacements: {why}")
    if generator in DATASET_GENERATORS:
        ds = resolve_dataset(pair, dataset, limit)
        edits = DATASET_GENERATORS[generator]
        pairs = cf.parse_pairs(replacements) if edits == "word_replacement" else None
        res = cf.flip_rate(pair.models, ds.examples, pairs, progress, edits=edits,
                           per_example=limits()["swaps_per_example"])
        if not res["changed"]:
            what = f"none of {list(pairs)} occurs" if pairs is not None else "WordNet offers no swap"
            field = "replacements" if pairs is not None else "dataset"
            raise InputError(f"{field}: {what} in the {len(ds)} examples of {ds.name}")
        return CounterfactualResult.of(res, generator=generator, dataset=ds.name,
                                       models=[m.name for m in pair.models])
    ex = example_from(pair, text, text2)
    models = pair.models
    if generator == "word_replacement":
        changes = [cf.word_replacement(models, ex, cf.parse_pairs(replacements)).to_dict()]
        if not changes[0]["edits"]:
            raise InputError(f"replacements: none of {list(cf.parse_pairs(replacements))} occurs in the input")
    elif generator in ("wordnet_synonym", "wordnet_antonym"):
        kind = generator.split("_")[1]
        changes = [c.to_dict() for c in cf.wordnet_swaps(models, ex, kind)]
        if not changes:
            raise InputError(f"text: WordNet offers no {kind} for its words (function words and inflected forms "
                             "such as 'takes' or 'cities' are not swapped)")
    elif generator == "ablation_flip":
        per_model = [cf.ablation_flip(clf, ex) for clf in models]
        changes = [cf.compare(models, ex, Example(r["edited"]), [(w, "") for w in r["removed"]],
                              f"ablation_flip ({r['model']})").to_dict() for r in per_model if r["edited"]]
        return CounterfactualResult(generator, [m.name for m in models], changes, per_model)
    elif generator == "hotflip":
        per_model = [cf.hotflip(clf, ex) for clf in models]
        changes = [cf.compare(models, ex, Example(r["edited"]), [r["swap"]], f"hotflip ({r['model']})").to_dict()
                   for r in per_model if r.get("edited")]
        return CounterfactualResult(generator, [m.name for m in models], changes, per_model)
    else:  # a generator declared but not answered here
        raise InputError(f"generator: {generator!r} is not one of {GENERATORS}")
    return CounterfactualResult(generator, [m.name for m in models], changes)


def shipped_datasets() -> dict[str, Path]:
    return {p.stem: p for p in sorted(EXAMPLES.glob("*.jsonl"))}


def overview(pair: Pair) -> dict:
    """What a first screen says of the pair: the task, its fields and labels, each model's size and depth, and
    the device that answers."""
    from .facts import count_parameters

    return {"pair": pair.name, "task": pair.task.name, "fields": list(pair.task.fields),
            "labels": list(pair.task.labels) if pair.task.labels else None,
            "models": [{"model": clf.name, "parameters": count_parameters(clf.model),
                        "layers": clf.model.config.num_hidden_layers,
                        "shares_layers": shares_layers(clf.model)} for clf in pair.models],
            **pair.hardware()}


def default_dataset(pair: Pair) -> str:
    """The shipped example set the pair's task can read: sentence pairs or single sentences."""
    return _shipped_for(pair.task)


def _shipped_for(task) -> str:
    return "rte_pairs" if task.is_pair else "sentiment_plain"


def released_dev_set(pair: Pair) -> str | None:
    """The task's GLUE dev split in the released data beside the checkout, when it is there: a benchmark on
    the shipped examples alone (30 sentences) can't tell two models apart."""
    path = SHARED_DATA / "glue" / pair.task.name / "dev.tsv"
    return str(path) if path.is_file() else None


def released_datasets(pair: Pair) -> dict[str, str]:
    """Released data a front end offers by name (label and value alike, so a dropdown never sends a label for a
    value, and no server path reaches the page)."""
    dev = released_dev_set(pair)
    return {f"{pair.task.name} dev (released GLUE)": dev} if dev else {}


def released_suites(pair: Pair) -> dict[str, str]:
    """The released CheckList suites the pair's models answer, by name."""
    return {f"{Path(p).name.split('_suite')[0]} (released CheckList)": p for p in default_suites(pair)}


def _cap(visitor: bool, key: str) -> int | float:
    return limits()[key] if visitor else OPERATOR_CAP


# "<dataset> @rows:3,17,40-45": rows of a dataset (1-based, as the app's tables number them), what a brushed
# projection or a slice hands the dataset-level tabs; the CLI's --dataset takes it too
SLICE_SPEC = re.compile(r"^(?P<base>.+?)\s*@rows:(?P<rows>.*)$", re.S)


def _digits(text: str) -> bool:
    """0-9 only: str.isdigit() also takes "²" and "١", which int() then refuses (or reads) on its own terms."""
    text = text.strip()
    return text.isascii() and text.isdigit()


def slice_ranges(text: str, cap: int) -> list[tuple[int, int]]:
    """The (first, last) row ranges a slice names, in its order, validated but not expanded: a range is only
    expanded once the dataset's length is known (`@rows:1-999999999` on the command line, whose cap is the
    operator's, once built a billion-row list before any check and took 16 GB)."""
    ranges: list[tuple[int, int]] = []
    named = 0
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        if not _digits(lo) or (hi and not _digits(hi)) or len(part) > 40:
            raise InputError(f"dataset: {part[:20]!r} in @rows is not a row number or a range like 40-45")
        a, b = int(lo), int(hi or lo)
        if a < 1 or b < a:
            raise InputError(f"dataset: rows count from 1 and a range runs upwards; got {part[:20]!r}")
        named += b - a + 1
        if named > cap:
            raise InputError(f"dataset: @rows names more than {cap:,} rows, this server's limit")
        ranges.append((a, b))
    if not ranges:
        raise InputError("dataset: @rows names no row")
    return ranges


def slice_spec(dataset: str, rows) -> str:
    """The dataset name of some of `dataset`'s rows (1-based), for every dataset field and --dataset."""
    return f"{dataset} @rows:{','.join(str(int(r)) for r in rows)}"


def resolve_dataset(pair: Pair, spec: str | None, limit: int | str | None = None, *, visitor: bool = True) -> Dataset:
    """A shipped example set by name, a local path (or uploaded file), or a `datasets` id when online; its first
    `limit` examples (validated: a whole number from 1 to this server's `max_examples`; empty: the cap), read no
    further. `visitor=False` when the server's operator named it (command-line flags): hosted mode checks only
    what visitors type (`readable`), and only a visitor's rows are held to the text cap."""
    cap = limits()
    n = count("limit", limit, cap=_cap(visitor, "max_examples"))
    if not spec:
        spec = default_dataset(pair)
    if not isinstance(spec, str):
        raise InputError(f"dataset: expected a name or path, got {type(spec).__name__}")
    if (picked := SLICE_SPEC.match(spec)) is not None:  # a slice: some rows of a dataset, as the app names them
        reads = _cap(visitor, "max_examples")
        ranges = slice_ranges(picked["rows"], reads)
        last = max(b for _, b in ranges)
        if last > reads:
            raise InputError(f"dataset: row {last:,} is past the first {reads:,} rows this server reads")
        whole = resolve_dataset(pair, picked["base"], last, visitor=visitor)
        if last > len(whole):
            first = next(max(a, len(whole) + 1) for a, b in ranges if b > len(whole))
            raise InputError(f"dataset: row {first:,} is past the end of {whole.name} ({len(whole):,} rows)")
        rows = list(dict.fromkeys(r for a, b in ranges for r in range(a, b + 1)))
        return Dataset(f"{whole.name}, {len(rows):,} picked rows", [whole.examples[r - 1] for r in rows][:n],
                       whole.task, whole.source)
    shipped = shipped_datasets()
    spec = released_datasets(pair).get(spec, spec)
    if spec not in shipped and visitor:
        spec = readable(spec, "dataset")
    if spec in shipped:
        try:
            ds = read_table(shipped[spec], labels=pair.task.labels or (), n_fields=len(pair.task.fields), limit=n)
        except DataError:  # shipped gold labels from another label space (RTE pairs on an MNLI model): drop them
            ds = read_table(shipped[spec], labels=(), n_fields=len(pair.task.fields), limit=n)
            ds.examples = [Example(e.texts) for e in ds.examples]
    else:
        try:
            ds = load_dataset(spec, task=pair.task.name, limit=n)
        except OSError as exc:  # a name the file system refuses (too long, ...), not a file
            raise DataError(f"dataset: {spec[:80]!r} can't be opened ({exc.strerror or type(exc).__name__})") from None
    ds = ds.head(n)
    if not ds.examples:
        raise InputError(f"dataset: {ds.name} has no examples")
    if any(len(e.texts) != len(pair.task.fields) for e in ds.examples):
        raise InputError(f"dataset: {ds.name} has {len(ds.examples[0].texts)} text field(s); the {pair.task.name} "
                         f"task needs {len(pair.task.fields)}")
    if visitor:
        for i, e in enumerate(ds.examples, 1):
            for f, t in zip(pair.task.fields, e.texts):
                if len(t) > cap["max_chars"]:
                    raise InputError(f"dataset: {ds.name}, example {i}: field {f!r} is {len(t):,} characters long; "
                                     f"the limit here is {cap['max_chars']:,}")
    return ds


def project(pair: Pair, dataset: str | None = None, method: str = "umap", layer: int = -1, pooling: str = "cls",
            limit: int | None = 500, progress: Progress = None, *, engine: Engine | None = None,
            visitor: bool = True) -> ProjectionResult:
    """Both models' sentence embeddings projected to 2-D and aligned, with how far their neighbourhoods agree;
    on a Ray `engine` the predictions and embeddings are computed on its workers (the driver holds no weights)."""
    # before the dataset is read and predicted; the depth is checked again where the weights are, before any
    # forward pass (`projection.vectors_batch`)
    opts = _options("project", visitor=visitor, method=method, layer=layer, pooling=pooling)
    method, layer, pooling = opts["method"], opts["layer"], opts["pooling"]
    n = count("limit", limit, cap=_cap(visitor, "max_examples"), default=500)
    ds = resolve_dataset(pair, dataset, n, visitor=visitor)
    heads = pair.heads  # a Ray driver reads labels and names, not weights
    had = [in_cache(h, ds.examples, layer, pooling) for h in heads]
    arrays = (engine or Engine()).run(pair, vectors_batch, ds.examples, params={"layer": layer, "pooling": pooling},
                                      progress=progress)
    preds = [from_logits(h, lg) for h, lg in zip(heads, arrays[:2])]
    proj = project_pair(heads, ds.examples, method=method, layer=layer, pooling=pooling,
                        compute=lambda exs: arrays[2:])
    proj.embeddings_cached = had  # whether each model's vectors were on disk before this request
    return _projection_result(heads, ds, proj, preds)


def _projection_result(models, ds: Dataset, proj, preds) -> ProjectionResult:
    return ProjectionResult(
        dataset=ds.name, n=len(ds), method=proj.method, layer=proj.layer, pooling=proj.pooling,
        knn_overlap=proj.knn_overlap, k=proj.k, knn_chance=knn_chance(len(ds), proj.k),
        procrustes_disparity=proj.disparity, embeddings_cached=proj.embeddings_cached,
        points=projection_table(proj, models, ds.examples, preds), texts=[list(e.texts) for e in ds.examples])


def similarity(pair: Pair, dataset: str | None = None, limit: int | None = 500, pooling: str = "cls",
               batch: int | None = 128, progress: Progress = None, *, engine: Engine | None = None,
               visitor: bool = True) -> SimilarityResult:
    """Linear CKA of every layer of the first model against every layer of the second (and each against
    itself) on a dataset, streamed in minibatches of `batch` rows: memory is one batch's, however many
    examples (`similarity.py`). Rows are sentence vectors ("cls", "mean") or words ("words": each word's tokens'
    mean, the words both models read). On a Ray `engine` the batches run on its workers and only their
    statistics come back."""
    opts = _options("similarity", visitor=visitor, pooling=pooling, batch=batch)
    pooling, size = opts["pooling"], opts["batch"]
    n = count("limit", limit, cap=_cap(visitor, "max_examples"), default=500)
    ds = resolve_dataset(pair, dataset, n, visitor=visitor)
    spans(len(ds), size)  # at least 8 examples, before any work
    params = {"pooling": pooling, "minibatch": size}
    # whole minibatches per engine batch, so the minibatches are the same in process and on Ray; in process
    # sentences are embedded 8 minibatches at a time, sorted by length inside (one minibatch at a time padded
    # each to its longest text: AG News took twice as long); the minibatches keep the dataset's order, so each
    # is a random draw as the estimator needs. A minibatch of sentences is already ~20 minibatches of words.
    per = size * 8 if pooling != "words" else size
    eng = engine or Engine(batch_size=per)
    rows = eng.run(pair, similarity_batch, ds.examples, params=params,
                   batch_size=size * max(1, min(eng.chunk(len(ds), pair.spec), per) // size), progress=progress)
    res = summarise(rows)
    return SimilarityResult.of(res, dataset=ds.name, pooling=pooling, models=[m.name for m in pair.heads])


def attention(pair: Pair, text: str, text2: str | None = None, layer: int | str | None = -1,
              head: int | str | None = None, progress: Progress = None) -> AttentionResult:
    """Both models' attention on one input at one layer, over words (so the two tokenizers compare): one head's
    map or, with no head, the mean of the layer's heads; every head's map beside it. `progress`: models done."""
    ex = example_from(pair, text, text2)
    opts = _options("attention", layer=layer, head=None if head in ("", "mean") else head)
    layer, head = opts["layer"], opts["head"]
    models = []
    for clf in pair.models:
        w = attn.word_attention(clf, ex)
        top = w["maps"].shape[0]
        number, m = attn.pick(w["maps"], min(layer, top) if layer > 0 else layer, head)
        models.append({"model": clf.name, "units": w["units"], "layer": number, "map": m.tolist(),
                       "heads": w["maps"][number - 1].tolist()})
        if progress:
            progress(len(models), len(pair.models))
    return AttentionResult(fields=list(pair.task.fields), layer=layer, head=head, models=models)


def attention_stats(pair: Pair, dataset: str | None = None, limit: int | None = 200, progress: Progress = None, *,
                    engine: Engine | None = None, visitor: bool = True) -> AttentionStatsResult:
    """Per layer and head of both models over a dataset: attention entropy, the share on [CLS], [SEP] and
    punctuation, and the change from the layer before (`attention.attention_stats`); on a Ray `engine`, on one
    of its workers."""
    n = count("limit", limit, cap=_cap(visitor, "max_examples"), default=200)
    ds = resolve_dataset(pair, dataset, n, visitor=visitor)
    models = (engine or Engine()).run(pair, attn.attention_stats_batch, ds.examples, progress=progress)
    return AttentionStatsResult(dataset=ds.name, n=len(ds), models=models)


def benchmark(pair: Pair, dataset: str | None = None, limit: int | None = 1000, progress: Progress = None, *,
              engine: Engine | None = None, visitor: bool = True) -> BenchmarkResult:
    """Both models scored on one labelled dataset: accuracy (Pearson for regression), speed, the paired test of
    the gap between them and the examples they answer differently (`core.benchmark`); on a Ray `engine` the
    predictions run on its workers. `visitor=False`: the operator's request (the CLI, the report), not capped."""
    # empty: 1000 rows for a visitor; every row for the operator (the CLI's benchmark without --limit)
    n = count("limit", limit, cap=_cap(visitor, "max_examples"), default=1000 if visitor else None)
    ds = resolve_dataset(pair, dataset, n, visitor=visitor)
    return BenchmarkResult.of(score(pair, ds, progress=progress, engine=engine),
                              fidelity=against_fp32(pair, ds.examples))


def slices(pair: Pair, dataset: str | None = None, limit: int | None = 1000, metric: str = "accuracy",
           min_size: int | None = 20, clusters: int | None = 8, progress: Progress = None, *,
           engine: Engine | None = None, visitor: bool = True) -> SlicesResult:
    """Where the two models differ on a labelled dataset: every candidate slice (words, bigrams, lengths, markers,
    the gold label, clusters of either model's embeddings) tested for a paired difference in `metric`, with
    Benjamini-Hochberg's q over all of them (`slices.find`). Predictions (and the embeddings the clusters need)
    run through the engine: in process, or on a Ray cluster's workers."""
    if pair.task.is_regression:
        raise InputError(f"slices: the {pair.task.name} task is a regression; slices compare classifiers' answers")
    opts = _options("slices", visitor=visitor, metric=metric, min_size=min_size, clusters=clusters)
    metric, min_size, clusters = opts["metric"], opts["min_size"], opts["clusters"]
    n = count("limit", limit, cap=_cap(visitor, "max_examples"), default=1000 if visitor else None)
    ds = resolve_dataset(pair, dataset, n, visitor=visitor)
    rows = [i + 1 for i, ex in enumerate(ds.examples) if ex.label is not None]  # the dataset's own row numbers
    labelled = [ds.examples[r - 1] for r in rows]
    if not labelled:
        raise InputError(f"dataset: {ds.name} has no gold labels; slices compare the models' right answers")
    gold_names = [ex.label for ex in labelled]
    for clf in pair.heads:
        check_labels(clf, gold_names)
    arrays = (engine or Engine()).run(pair.spec, slices_batch, labelled, params={"embed": clusters > 0},
                                      progress=progress)
    heads = pair.heads
    answers = [from_logits(clf, lg).predicted for clf, lg in zip(heads, arrays[:2])]
    labels = list(heads[0].labels)
    index = {name: k for k, name in enumerate(labels)}
    embeddings = {m.name: a for m, a in zip(heads, arrays[2:])} if clusters else None
    texts = [" / ".join(ex.texts) for ex in labelled]
    found = find_slices(texts, [index[g] for g in gold_names], [index[a] for a in answers[0]],
                        [index.get(a, -1) for a in answers[1]], models=[m.name for m in heads], label_names=labels,
                        metric=metric, min_size=min_size, embeddings=embeddings, clusters=clusters)
    for s in found["slices"]:
        s["examples"] = [list(labelled[i].texts) for i in s["indices"][:5]]
        s["gold"] = [labelled[i].label for i in s["indices"][:5]]
        s["rows"] = [rows[i] for i in s["indices"]]  # as the dataset numbers them: `slice_spec` runs other tabs on it
    return SlicesResult(dataset=ds.name, **found)


def embed(pair: Pair, dataset: str | None = None, limit: int | None = None, layer: int = -1, pooling: str = "cls",
          progress: Progress = None, *, engine: Engine | None = None, visitor: bool = True) -> EmbedResult:
    """Both models' sentence embeddings of a dataset, in its order: {"dataset", "n", "embeddings": {model name:
    (n, hidden) array}}; on a Ray `engine` in batches across its workers."""
    if pooling not in POOLINGS:
        raise InputError(f"pooling: {str(pooling)[:40]!r} is not one of {list(POOLINGS)}")
    # the depth is checked where the weights are (a Ray driver holds none): `embeddings` names the range
    layer = integer("layer", layer, low=-1000, high=1000)
    ds = resolve_dataset(pair, dataset, limit, visitor=visitor)
    arrays = (engine or Engine()).run(pair.spec, embed_batch, ds.examples,
                                      params={"layer": layer, "pooling": pooling}, progress=progress)
    return EmbedResult(dataset=ds.name, n=len(ds), layer=layer, pooling=pooling,
                       embeddings={m.name: a for m, a in zip(pair.spec.models, arrays)},
                       fidelity=against_fp32(pair, ds.examples, pooling=pooling))


def facts(pair: Pair, texts: Sequence[str | Sequence[str]] | None = None, progress: Progress = None, *,
          engine: Engine | None = None) -> FactsResult:
    """Model facts measured on `texts`: one input each, a line of text (for a pair task the two texts separated
    by a tab, or one text used for both) or its fields; none: the shipped examples. On a Ray `engine`, measured
    on one of its workers. `progress`: each model's facts, then the paired latency measurement."""
    if isinstance(texts, str):
        texts = [texts]
    if texts:
        cap = limits()["max_examples"]
        if len(texts) > cap:
            raise InputError(f"texts: {len(texts):,} inputs; the limit here is {cap:,}")
        exs = []
        for i, t in enumerate(texts, 1):
            try:
                if isinstance(t, str):
                    t = (t.split("\t", 1) if "\t" in t else [t, t]) if pair.task.is_pair else [t]
                exs.append(example_from(pair, *t))
            except InputError as exc:  # the UI gives one input per line: say which
                raise InputError(f"texts, line {i}: {exc}") from None
    else:
        exs = resolve_dataset(pair, None, 30).examples
    run = (engine or Engine()).run
    steps = len(pair.spec.models) + 1  # each model's facts, then the paired latency
    models = run(pair, facts_batch, exs, progress=(lambda d, t: progress(d * (steps - 1) // t, steps))
                 if progress else None)
    latency = run(pair, latency_batch, exs)
    if progress:
        progress(steps, steps)
    a, b = models
    # the latency ratio from the paired measurement its verdict is tested on: from each model's own timing, a busy
    # machine printed "latency 3.69x" (the second slower) above "the first's latency is higher beyond chance"
    first, second = latency["values"]
    return FactsResult(models=models, n_inputs=len(exs), latency_comparison=latency, precision=pair.precision_asked,
                       ratios={"parameters": b["parameters"] / a["parameters"],
                               "latency": second / first,
                               "throughput": b["throughput_per_s"] / a["throughput_per_s"]})


def attack(pair: Pair, recipe: str, text: str | None = None, text2: str | None = None, label: str | None = None,
           dataset: str | None = None, n: int = 5, query_budget: int = 200, time_limit: float = 30.0,
           cancel=None, progress: Progress = None, *, engine: Engine | None = None, out: str | Path | None = None,
           visitor: bool = True) -> AttackResult:
    """Attack one labelled input, or the first `n` labelled examples of a dataset, on both models. `out`: a
    JSON-lines file of finished examples, kept and appended to as each one finishes (an interrupted run goes on
    where it stopped); on a Ray `engine` the examples are attacked in batches across its workers."""
    opts = _options("attack", visitor=visitor, recipe=recipe, label=label or "", n=n, query_budget=query_budget,
                    time_limit=time_limit)
    recipe, label, n, query_budget, time_limit = (opts[k] for k in ("recipe", "label", "n", "query_budget",
                                                                       "time_limit"))
    if recipe not in attacks.RECIPES:
        raise InputError(f"recipe: {str(recipe)[:60]!r} is not one of {sorted(attacks.RECIPES)}")
    if dataset:
        labelled = [e for e in resolve_dataset(pair, dataset, None, visitor=visitor).examples if e.label is not None]
        if not labelled:
            raise InputError("dataset: it has no gold labels, which an attack needs")
        examples = labelled[:n]
    else:
        ex = example_from(pair, text, text2)
        if not label:
            raise InputError("label: choose the gold label of the input (the attack tries to move the models off it)")
        if label not in (pair.task.labels or ()):
            raise InputError(f"label: {str(label)[:40]!r} is not one of {list(pair.task.labels or ())}")
        examples = [Example(ex.texts, label)]
    out = Path(out) if out else None
    if out is not None:  # `--out runs/tf.jsonl` in a fresh checkout: its folder is made, as --out folders are
        out.parent.mkdir(parents=True, exist_ok=True)
    done = _finished_rows(out) if out is not None else {}
    total = len(examples)
    rows: list[dict] = list(done.values())

    def on_result(row):
        rows.append(row)
        if out is not None:
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        if progress:
            progress(len(rows), total)

    stopped: dict = {}
    todo = [i for i in range(total) if i not in done]  # the engine's rows count from 0 over these
    written: set[int] = set()

    def on_row(row):  # in process each row as it finishes (the file is kept if the run is cut); on Ray per batch
        row = row | {"index": todo[row["index"]]}
        written.add(row["index"])
        on_result(row)

    if todo:
        for row in (engine or Engine()).run(
                pair, attacks.attack_batch, [examples[i] for i in todo],
                params={"recipe": recipe, "query_budget": query_budget, "time_limit": time_limit},
                hooks={"cancel": cancel, "on_row": on_row, "stopped": stopped}):
            if todo[row["index"]] not in written:
                on_row(row)
    rows.sort(key=lambda r: r["index"])
    heads = pair.heads  # a Ray driver reads labels and names, not weights
    return AttackResult(recipe=recipe, models=[m.name for m in heads], examples=rows, stopped=stopped or None,
                        resumed=len(done), settings={"n": n, "query_budget": query_budget, "time_limit": time_limit},
                        summary=attacks.summarize(rows, heads), comparison=attacks.compare_success(rows, heads))


def _finished_rows(path: Path) -> dict[int, dict]:
    """The examples an earlier run of the same attack finished, by index."""
    if not path.is_file():
        return {}
    done = {}
    for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
                done[int(row["index"])] = row
            except (ValueError, KeyError, TypeError, RecursionError):
                raise InputError(f"out: {path}, line {k} is not a row this command wrote; move the file away "
                                 "to start afresh") from None
    return done


def checklist(pair: Pair, suite: str, sample: int | None = 20, progress: Progress = None,
              engine=None, *, visitor: bool = True) -> ChecklistResult:
    """Run a released CheckList suite (path to its JSON export) on both models; with a Ray `engine` the
    suite's inputs are predicted on its workers. `visitor=False`: the operator's suite (the CLI, the report): read
    wherever it is, its cases and sample not held to a visitor's caps (`api.run` passed the flag, and it was
    dropped: a hosted server's operator could not run a suite of their own)."""
    cap = limits()
    if suite is not None and not isinstance(suite, str):
        raise InputError("suite: give the path of a CheckList suite export (*_suite.json.gz)")
    opts = _options("checklist", visitor=visitor, suite=suite or "", sample=sample)
    suite, sample = opts["suite"], opts["sample"]
    if not suite:
        raise InputError("suite: give the path of a CheckList suite export (*_suite.json.gz)")
    suite = released_suites(pair).get(suite, suite)
    s = cl.load_suite(readable(suite, "suite") if visitor else suite, max_chars=cap["max_chars"] if visitor else None)
    heads = pair.heads  # a Ray driver needs labels, not weights

    def probabilities(inputs):  # each distinct input once per model, in process or on the engine's workers
        logits = (engine or Engine()).run(pair, logits_batch, inputs, params={"validate": False, "batch_size": 64},
                                          progress=progress)
        return [from_logits(clf, lg).probs for clf, lg in zip(heads, logits)]

    models = heads
    results = cl.run_suite(s, models, sample=sample, progress=progress, probabilities=probabilities)
    names = [m.name for m in models]
    caps = {}
    for cap_name, tests in cl.by_capability(results).items():
        caps[cap_name] = {}
        for k, n in enumerate(names):
            rates = [t.results[k]["fail_rate"] for t in tests if t.results[k]["fail_rate"] is not None]
            caps[cap_name][n] = float(sum(rates) / len(rates)) if rates else None
    tests = cl.to_dict(results)
    # the table and the verdict in words, as the front ends show them (`views`), kept in the JSON for scripts
    return ChecklistResult(suite=s.name, kind=s.kind, sample=sample, models=names, tests=tests, capabilities=caps,
                           markdown=views.checklist_table_markdown(tests, names),
                           differing=[t.name for t in cl.differing_tests(results)],
                           summary=views.checklist_summary(tests, names))
