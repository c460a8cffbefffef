"""The front ends' one door: every declared capability through `run`, plus what a front end needs besides.

`run(name, pair, ...)` checks a request's options against the capability's declaration (`capabilities.py`), once,
runs it on the pair (its fp32 twin where the declaration says it needs gradients) and returns its declared result
type (`results.py`); the Gradio app, `gradio_client` users and the CLI's `--json` receive its `to_dict()`, plain
lists, numbers and strings only. `api.NAME(pair, ...)` is `run("NAME", pair, ...)` for every declared NAME, its
inputs by position (text and text2, or the dataset), its options by name. Inputs arrive as raw strings; errors are
`LensError`s naming the field.
"""
from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from inspect import Parameter, Signature, signature

from .catalogue import DATASET_GENERATORS, GENERATORS  # noqa: F401
from .declare import capabilities
from .declare.capabilities import POOLINGS
from .declare.results import (  # noqa: F401 - the declared answers, for front ends that name them
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
    LocateResult,
    PredictResult,
    ProjectionResult,
    SaliencyDatasetResult,
    SaliencyMethodsResult,
    SaliencyResult,
    SimilarityResult,
    SlicesResult,
)
from .execution.batching import Combiner
from .execution.engine import Engine
from .execution.inference import check_examples  # noqa: F401 - LIT's datapoints
from .execution.inference import predict as predict_examples  # noqa: F401
from .execution.inputs import (  # noqa: F401 - what a request names, read (the front ends' dataset fields and slices)
    ascii_digits,
    check_readable,  # LIT's datapoints: what no model reads
    dataset_of,
    default_dataset,
    example_from,
    released_datasets,
    released_dev_set,
    resolve_dataset,
    shipped_datasets,
    shipped_examples,
    slice_ranges,
    slice_spec,
)
from .execution.pair import Pair
from .execution.shares import Busy as SharesBusy  # noqa: F401 - the app's fair shares of /predict
from .execution.shares import Shares, TooMany, client_key, over_share, retry_after, turns  # noqa: F401
from .execution.workers import Pool
from .ground import jobs, policy, saved
from .ground.data import (  # noqa: F401
    Dataset,
    Example,
    blank_reason,  # LIT's new datapoints
    short_int,  # LIT's request bodies
    surrogate_reason,  # LIT's generators' settings
)
from .ground.errors import InputError
from .ground.jobs import (  # noqa: F401
    Job,
    Stopped,
    checkpoint,  # noqa: F401
    running,
)
from .ground.jobs import current as current_job  # noqa: F401
from .ground.policy import (  # noqa: F401
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
from .ground.policy import number as bounded_number  # noqa: F401 - LIT's settings
from .ground.runtime import ASSETS_DIR, SHARED_DATA, bounded_log_lines, cache_dir, env_flag  # noqa: F401
from .ground.saved import visitor_key  # noqa: F401 - a hosted visitor's saved sets
from .ground.significance import compare_accuracy, compare_correlation  # noqa: F401
from .models.loading import Classifier, get_classifier  # noqa: F401
from .models.registry import TASKS, ModelSpec, Task  # noqa: F401
from .present import views  # noqa: F401 - the front ends' texts
from .techniques import counterfactuals as cf
from .techniques import projection

# F401 below: names the front ends need besides the calls, handed on (the facade is their one door into the core)
from .techniques.attacks import OFFLINE_TEXTFOOLER, AttackUnavailable, list_recipes, recipe_status  # noqa: F401
from .techniques.benchmark import DISAGREEMENTS_SHOWN  # noqa: F401
from .techniques.benchmark import benchmark as score
from .techniques.checklist import default_suites, released_suites  # noqa: F401 - the report's and the app's suites
from .techniques.embeddings import embed_batch
from .techniques.facts import facts_batch, shares_layers
from .techniques.fidelity import against_fp32
from .techniques.inspection import inspect  # noqa: F401 - LIT's gradients and embeddings
from .techniques.projection import knn_chance  # noqa: F401 - the report's chance line
from .techniques.saliency import METHODS  # noqa: F401
from .techniques.timing import TextCost, latency_batch  # noqa: F401 - TextCost: LIT prices its texts
from .techniques.training import TrainSettings, train_offline  # noqa: F401

Progress = Callable[[int, int], None] | None
# what a front end hands `run` besides a capability's options: consumed by `run` (visitor), or passed on to a
# runner whose signature names it (a runner that does not is refused it, never silently)
PASSED = ("dataset", "limit", "progress", "engine", "visitor", "cancel", "out")


def run(name: str, pair: Pair, text: str | None = None, text2: str | None = None, **given) -> CapabilityResult:
    """A declared capability (`capabilities.py`): its options checked against its declaration (defaults filled
    in, unknown names refused), on the pair or, where the declaration says it needs gradients, its fp32 twin
    (the one place that is decided). A capability with a runner (saliency, project, ...) is its runner's answer,
    called by keyword; else its batch function runs (in process, or on a Ray cluster's workers) on the input or on
    the dataset's first `limit` examples. `given`: the options, and any of `PASSED`."""
    capability = capabilities.get(name)
    passed = {k: given.pop(k) for k in PASSED if k in given}
    visitor = passed.get("visitor", True)
    checked = capability.check(given, visitor=visitor)
    on = pair.fp32 if capability.needs_gradients else pair
    if capability.runner:
        takes = accepts(name)
        inputs = {"text": text, "text2": text2, **passed}
        for key, value in inputs.items():
            if value is not None and key not in takes and key != "visitor":
                raise InputError(f"{key}: {name} takes no {key}")
        return capabilities.resolve(capability.runner)(on, **{k: v for k, v in inputs.items() if k in takes}, **checked)
    progress, engine = passed.get("progress"), passed.get("engine")
    if capability.inputs == "text":
        examples, source = [example_from(on, text, text2)], None
    else:
        ds = dataset_of(on, passed.get("dataset"), passed.get("limit"), default=1000 if visitor else None,
                        visitor=visitor)
        examples, source = ds.examples, ds.name
    out = (engine or Engine()).run(on, capability.batch_function(), examples, params=checked, progress=progress)
    return CapabilityResult(capability=name, options=checked, result=_plain(out), dataset=source,
                            n=None if source is None else len(examples))


def accepts(name: str) -> set[str]:
    """Which inputs (text, text2) and which of `PASSED` the capability takes: its runner's (by its signature), or
    for a batch function its input's (the text, or a dataset and its limit) with progress, engine and visitor."""
    capability = capabilities.get(name)
    if capability.runner:
        return {"text", "text2", *PASSED} & set(signature(capabilities.resolve(capability.runner)).parameters)
    read = {"dataset", "limit"} if capability.inputs != "text" else {"text", "text2"}
    return {"progress", "engine", "visitor"} | read


def entry(name: str) -> Callable:
    """`api.NAME`: `run(NAME, pair, ...)` with the capability's inputs by position (text and text2, or the
    dataset) and its options and `PASSED` by name, with a signature that lists them (the declared defaults fill
    in what is not given)."""
    capability = capabilities.get(name)
    first = ("dataset",) if capability.inputs == "dataset" else ("text", "text2")

    def call(pair: Pair, *inputs, **given):
        if len(inputs) > len(first):
            raise TypeError(f"{name}: takes {', '.join(first)} by position and its options by name "
                            f"({', '.join(o.name for o in capability.options) or 'none'})")
        given.update(zip(first, inputs))
        if capability.inputs == "dataset":
            return run(name, pair, **given)
        return run(name, pair, given.pop("text", None), given.pop("text2", None), **given)

    P = Parameter
    params = [P("pair", P.POSITIONAL_OR_KEYWORD)]
    optional = capability.inputs == "either"  # a text that may be left out where a dataset is given
    params += [P(n, P.POSITIONAL_OR_KEYWORD, default=None if (n != "text" or optional) else P.empty) for n in first]
    params += [P(o.name, P.KEYWORD_ONLY, default=None) for o in capability.options]
    params += [P(k, P.KEYWORD_ONLY, default=True if k == "visitor" else None) for k in PASSED if k not in first]
    call.__signature__ = Signature(params)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = capability.help
    return call


# the declared capabilities, each one entry point: `api.NAME` (`__getattr__`), made from the declaration as it is
# now, so a method or generator registered later (a plugin's) is in its signature


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


_ENTRIES: dict[str, tuple] = {}  # name -> (the declaration it was made from, its entry point)


def __getattr__(name: str):
    """Every declared capability is a facade function: `api.NAME(pair, text)` runs `api.run("NAME", ...)`."""
    if name in {c.name for c in capabilities.declared()}:
        capability = capabilities.get(name)
        if _ENTRIES.get(name, (None,))[0] is not capability:  # one function per declaration: a worker pickles it
            _ENTRIES[name] = (capability, entry(name))  # by name, and finds it here again
        return _ENTRIES[name][1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    threads = int(raw) if ascii_digits(raw) and int(raw) > 0 else spare
    return {group: Pool(n, setup, threads=threads, name=f"{group} worker") for group, n in groups.items()}



def _worker_setup(pair: Pair, readable_roots: list[str]) -> None:
    for root in readable_roots:
        allow_reads_under(root)
    _ = pair.models  # load the weights now, not during the first visitor's request
    for step in warm_ups():
        step()


def warm_ups() -> tuple:
    """One-off costs of a process's first projection (UMAP's compilation) and first WordNet swap (loading
    WordNet, then the sentence encoder that checks a swap's meaning), which a server pays while it starts
    instead of its first visitor: ~6 CPU s a process. ALBERT_LENS_WARM_UP=0 (or another off word) leaves them to
    the first use, for servers that live a short while (a smoke test, a test suite's); unset, they run."""
    if os.environ.get("ALBERT_LENS_WARM_UP", "").strip() and not env_flag("ALBERT_LENS_WARM_UP"):
        return ()
    from .techniques import meaning

    return (projection.warm_up, cf.warm_up, meaning.warm_up)


def save_edits(pair: Pair, name: str, changes, *, originals: bool = True, dataset: str | None = None,
               key: str | None = None, visitor: bool = True) -> saved.SavedSet:
    """Edits (pinned in the app, or a counterfactual's) kept as the saved set `name`, which every dataset field and
    --dataset then read (its `spec`, `saved:<name>`); with `originals`, each original is kept before its edits.
    `key`: a hosted visitor's own (`visitor_key`), without which hosted mode keeps nothing for a visitor."""
    if key is None and visitor and policy.hosted():
        raise InputError("name: saved sets here are each visitor's own; save from the app's page")
    return saved.save(name, cf.saved_records(pair, changes, originals=originals, dataset=dataset, visitor=visitor),
                      key=key)


def save_result(pair: Pair, res: CounterfactualResult, name: str, **kw) -> saved.SavedSet:
    """A counterfactual result's edits (one input's, or a dataset's) as the saved set `name` (`save_edits`)."""
    return save_edits(pair, name, res.saved_edits(), dataset=res.dataset, **kw)


def saved_sets(key: str | None = None) -> list[saved.SavedSet]:
    """An owner's saved sets, newest first: the local folder's, or a hosted visitor's (`key`)."""
    return saved.listed(key)


def overview(pair: Pair) -> dict:
    """What a first screen says of the pair: the task, its fields and labels, each model's size and depth, and
    the device that answers."""
    from .techniques.facts import count_parameters

    return {"pair": pair.name, "task": pair.task.name, "fields": list(pair.task.fields),
            "labels": list(pair.task.labels) if pair.task.labels else None,
            "models": [{"model": clf.name, "parameters": count_parameters(clf.model),
                        "layers": clf.model.config.num_hidden_layers,
                        "shares_layers": shares_layers(clf.model)} for clf in pair.models],
            **pair.hardware()}


def benchmark(pair: Pair, dataset: str | None = None, limit: int | None = None, progress: Progress = None, *,
              engine: Engine | None = None, visitor: bool = True) -> BenchmarkResult:
    """Both models scored on one labelled dataset: accuracy (Pearson for regression), speed, the paired test of
    the gap between them and the examples they answer differently (`core.benchmark`); on a Ray `engine` the
    predictions run on its workers. `visitor=False`: the operator's request (the CLI, the report), not capped."""
    # empty: 1000 rows for a visitor; every row for the operator (the CLI's benchmark without --limit)
    ds = dataset_of(pair, dataset, limit, default=1000 if visitor else None, visitor=visitor)
    return BenchmarkResult.of(score(pair, ds, progress=progress, engine=engine),
                              fidelity=against_fp32(pair, ds.examples))


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


FACTS_SHIPPED = 30  # shipped examples measured when no texts are given (one fewer beside a given input)


def facts(pair: Pair, texts: Sequence[str | Sequence[str]] | None = None, progress: Progress = None, *,
          text: str | None = None, text2: str | None = None, engine: Engine | None = None) -> FactsResult:
    """Model facts measured on `texts`: one input each, a line of text (for a pair task the two texts separated
    by a tab, or one text used for both) or its fields; none: `text` (and `text2`), the example every tab reads,
    first where given, then shipped examples. On a Ray `engine`, measured on one of its workers. `progress`: each
    model's facts, then the paired latency measurement."""
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
                    t = (t.split("\t", 1) if "\t" in t else [t, t]) if pair.task.two_texts else [t]
                exs.append(example_from(pair, *t))
            except InputError as exc:  # the UI gives one input per line: say which
                raise InputError(f"texts, line {i}: {exc}") from None
    else:
        given = [example_from(pair, text, text2)] if text is not None and text.strip() else []
        exs = given + resolve_dataset(pair, None, FACTS_SHIPPED - len(given), visitor=False).examples
    run = (engine or Engine()).run
    steps = len(pair.spec.models) + 1  # each model's facts, then the paired latency
    models = run(pair, facts_batch, exs, progress=(lambda d, t: progress(d * (steps - 1) // t, steps))
                 if progress else None)
    latency = run(pair, latency_batch, exs)
    throughput = latency.pop("throughput")
    if progress:
        progress(steps, steps)
    # one measurement of each: every latency and throughput figure (the table's, the ratios, the verdicts) is the
    # paired runs' mean with its interval (each model's own timing beside the paired one read 139 / 31 ms under
    # "latency 0.80x")
    for k, m in enumerate(models):
        m.update(latency_ms=latency["values"][k], latency_ms_interval=latency["intervals"][k],
                 throughput_per_s=throughput["values"][k], throughput_interval=throughput["intervals"][k])
    a, b = models
    return FactsResult(models=models, n_inputs=len(exs), example_first=bool(not texts and text and text.strip()),
                       latency_comparison=latency,
                       throughput_comparison=throughput, precision=pair.precision_asked,
                       ratios={"parameters": b["parameters"] / a["parameters"],
                               "latency": latency["values"][1] / latency["values"][0],
                               "throughput": throughput["values"][1] / throughput["values"][0]})


