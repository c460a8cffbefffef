"""JSON-friendly answers for front ends: one function per capability, computed once in the core.

The Gradio app, `gradio_client` users and the CLI's `--json` all receive these dictionaries; they hold plain
lists, numbers and strings only. Inputs arrive as raw strings; errors are `LensError`s naming the field.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from .data import DataError, Dataset, Example, load_dataset, read_table
from .errors import InputError
from .inference import check_examples
from .pair import Pair
from .runtime import ASSETS_DIR, SHARED_DATA

Progress = Callable[[int, int], None] | None
EXAMPLES = ASSETS_DIR / "examples"


def limits() -> dict:
    """Hosted mode (ALBERT_LENS_HOSTED=1) caps what one request may cost."""
    hosted = os.environ.get("ALBERT_LENS_HOSTED", "").lower() in {"1", "true", "yes"}
    return {
        "hosted": hosted,
        "max_chars": int(os.environ.get("ALBERT_LENS_MAX_CHARS", 2000 if hosted else 100_000)),
        "max_examples": int(os.environ.get("ALBERT_LENS_MAX_EXAMPLES", 500 if hosted else 20_000)),
        "max_lime_samples": 256 if hosted else 2048,
        "min_ig_tolerance": 1e-4 if hosted else 1e-7,  # tighter tolerances cost more integrated-gradient steps
        "max_ig_steps": 128 if hosted else 512,
        "swaps_per_example": 3 if hosted else 10,  # WordNet swaps per example over a dataset
        "max_saliency_examples": 50 if hosted else 2000,  # saliency over a dataset: each is a full explanation
        "allowed_pairs": {p.strip().lower() for p in
                          os.environ.get("ALBERT_LENS_ALLOWED_PAIRS", "offline,sst2").split(",") if p.strip()},
    }


_READABLE: list[Path] = []  # folders a front end registered (its uploads), see `allow_reads_under`


def allow_reads_under(folder: str | Path) -> None:
    """A front end registers the folder its uploads land in, so that hosted mode can read them."""
    path = Path(folder).resolve()
    if path not in _READABLE:
        _READABLE.append(path)


def readable(spec: str, field: str) -> str:
    """`spec` unchanged if this server may read it. Hosted, a visitor's path must lie under the shipped assets,
    the released data or a registered upload folder: any other file the process can read (another app's .csv,
    a config .json) is refused, with the same words whether or not it exists. Nor does it download `datasets`
    hub ids: a whole split lands on the server's disk before the row cap applies."""
    if not limits()["hosted"]:
        return spec
    path = Path(spec).expanduser()
    resolved = path.resolve()  # symlinks and ".." followed, so neither leads out of a root
    roots = [ASSETS_DIR.resolve(), SHARED_DATA.resolve(), *_READABLE]
    roots += [Path(p).resolve() for p in os.environ.get("ALBERT_LENS_DATA_ROOTS", "").split(os.pathsep) if p]
    if any(resolved.is_relative_to(r) for r in roots):
        return spec
    raise InputError(f"{field}: this hosted server reads only its shipped examples, released data and uploaded "
                     f"files, not other server paths or hub datasets such as {spec!r}; upload the file instead")


def check_length(field: str, text: str, cap: int) -> None:
    """Over-long text is refused, naming the field: the app's inputs and, hosted, LIT's datapoints."""
    if len(text) > cap:
        raise InputError(f"field {field!r} is {len(text):,} characters long; the limit here is {cap:,}")


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


def predict(pair: Pair, text: str, text2: str | None = None) -> dict:
    ex = example_from(pair, text, text2)
    preds = pair.predict([ex])
    return {"task": pair.task.name, "fields": list(pair.task.fields), "input": list(ex.texts),
            "models": [p.record(0) | {"latency_ms": 1000 * p.seconds} for p in preds]}


IG_TOLERANCES = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)


def ig_tolerance(value) -> float:
    """A convergence-delta tolerance from a number or its text ("1e-4"), within this server's limits."""
    cap = limits()
    try:
        tol = float(value)
    except (TypeError, ValueError):
        raise InputError(f"tolerance: {value!r} is not a number") from None
    if not (math.isfinite(tol) and tol > 0):
        raise InputError(f"tolerance: {value!r} must be a positive, finite number")
    if tol < cap["min_ig_tolerance"]:
        raise InputError(f"tolerance: {tol:g} is below this server's smallest, {cap['min_ig_tolerance']:g}")
    return tol


def saliency(pair: Pair, text: str, text2: str | None = None, method: str = "integrated_gradients",
             target: str | None = None, tolerance: float | str | None = None, output: str | None = None) -> dict:
    """Per-word maps of both models; `tolerance` bounds integrated gradients' convergence delta (default 1e-3);
    `output` is what they explain, the class's probability (default) or its logit."""
    from .saliency import explain

    options = _method_options(method, tolerance, output)
    ex = example_from(pair, text, text2)
    tgt = None if target in (None, "", "predicted") else target
    out = explain(pair.models, ex, method, tgt, **options)
    return {
        "method": method, "output": options["output"], "fields": list(pair.task.fields),
        "maps": [m.to_dict() for m in out["maps"]],
        "faithfulness": out["faithfulness"],
        "agreement": out["agreement"], "agreement_label": out["agreement_label"],
    }


def _method_options(method: str, tolerance: float | str | None, output: str | None = None) -> dict:
    """What a request may ask of a saliency method here: the explained output, LIME's samples, integrated
    gradients' steps and delta."""
    from .saliency import check_output

    cap = limits()
    kw = {"output": check_output(output or "prob")}
    if method == "lime":
        kw["n_samples"] = min(256, cap["max_lime_samples"])
    if method == "integrated_gradients":  # no tolerance given: the method's own default
        kw["max_steps"] = cap["max_ig_steps"]
        if tolerance not in (None, ""):
            kw["tolerance"] = ig_tolerance(tolerance)
    return kw


def saliency_dataset(pair: Pair, dataset: str | None = None, method: str = "integrated_gradients",
                     limit: int | None = 50, tolerance: float | str | None = None, progress: Progress = None,
                     output: str | None = None) -> dict:
    """Saliency over the first `limit` examples of a dataset (`saliency.explain_dataset`): faithfulness per
    model against a random ranking, the paired comparison of the two, and the models' agreement."""
    from .saliency import check_method, explain_dataset

    check_method(method)
    options = _method_options(method, tolerance, output)
    cap = limits()["max_saliency_examples"]
    ds = resolve_dataset(pair, dataset, min(limit or cap, cap))
    res = explain_dataset(pair.models, ds.examples, method, progress=progress, **options)
    return {"dataset": ds.name, "output": options["output"], **res}


def counterfactual(pair: Pair, text: str, text2: str | None = None, generator: str = "word_replacement",
                   replacements: str = "", dataset: str | None = None, limit: int | None = None,
                   progress: Progress = None) -> dict:
    from . import counterfactuals as cf

    cap = limits()["max_chars"]
    if replacements and len(replacements) > cap:
        raise InputError(f"replacements: {len(replacements):,} characters; the limit here is {cap:,}")
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
        return {"generator": generator, "dataset": ds.name, "models": [m.name for m in pair.models], **res}
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
        return {"generator": generator, "models": [m.name for m in models], "per_model": per_model,
                "changes": changes}
    elif generator == "hotflip":
        per_model = [cf.hotflip(clf, ex) for clf in models]
        changes = [cf.compare(models, ex, Example(r["edited"]), [r["swap"]], f"hotflip ({r['model']})").to_dict()
                   for r in per_model if r.get("edited")]
        return {"generator": generator, "models": [m.name for m in models], "per_model": per_model,
                "changes": changes}
    else:
        raise InputError(f"generator: {generator!r} is not one of {GENERATORS}")
    return {"generator": generator, "models": [m.name for m in models], "changes": changes}


# over a dataset: the edit each generator makes to every example
DATASET_GENERATORS = {"dataset_flip_rate": "word_replacement", "dataset_wordnet_synonym": "wordnet_synonym",
                      "dataset_wordnet_antonym": "wordnet_antonym"}
GENERATORS = ("word_replacement", "wordnet_synonym", "wordnet_antonym", "ablation_flip", "hotflip",
              *DATASET_GENERATORS)


def shipped_datasets() -> dict[str, Path]:
    return {p.stem: p for p in sorted(EXAMPLES.glob("*.jsonl"))}


def default_dataset(pair: Pair) -> str:
    """The shipped example set the pair's task can read: sentence pairs or single sentences."""
    return "rte_pairs" if pair.task.is_pair else "sentiment_plain"


def released_dev_set(pair: Pair) -> str | None:
    """The task's GLUE dev split in the released data beside the checkout, when it is there: a benchmark on
    the shipped examples alone (30 sentences) can't tell two models apart."""
    path = SHARED_DATA / "glue" / pair.task.name / "dev.tsv"
    return str(path) if path.is_file() else None


def resolve_dataset(pair: Pair, spec: str | None, limit: int | None = None, *, visitor: bool = True) -> Dataset:
    """A shipped example set by name, a local path (or uploaded file), or a `datasets` id when online.
    `visitor=False` when the server's operator named it (command-line flags): hosted mode checks only what
    visitors type (`readable`)."""
    if not spec:
        spec = default_dataset(pair)
    shipped = shipped_datasets()
    if spec in shipped:
        try:
            ds = read_table(shipped[spec], labels=pair.task.labels or (), n_fields=len(pair.task.fields))
        except DataError:  # shipped gold labels from another label space (RTE pairs on an MNLI model): drop them
            ds = read_table(shipped[spec], labels=(), n_fields=len(pair.task.fields))
            ds.examples = [Example(e.texts) for e in ds.examples]
    else:
        ds = load_dataset(readable(spec, "dataset") if visitor else spec, task=pair.task.name)
    cap = limits()["max_examples"]
    n = min(limit or cap, cap)
    ds = ds.head(n)
    if any(len(e.texts) != len(pair.task.fields) for e in ds.examples):
        raise InputError(f"dataset: {ds.name} has {len(ds.examples[0].texts)} text field(s); the {pair.task.name} "
                         f"task needs {len(pair.task.fields)}")
    return ds


def project(pair: Pair, dataset: str | None = None, method: str = "umap", layer: int = -1, pooling: str = "cls",
            limit: int | None = 500, progress: Progress = None) -> dict:
    from .projection import cached_predictions, knn_chance, project_pair, projection_table

    ds = resolve_dataset(pair, dataset, limit)
    preds = []
    for k, clf in enumerate(pair.models):  # the first third of the progress: predictions, then embeddings
        step = (lambda d, n, k=k: progress(k * n + d, 6 * n)) if progress else None
        preds.append(cached_predictions(clf, ds.examples, progress=step)[0])
    step = (lambda d, n: progress(n + 2 * d, 3 * n)) if progress else None
    proj = project_pair(pair.models, ds.examples, method=method, layer=int(layer), pooling=pooling, progress=step)
    rows = projection_table(proj, pair.models, ds.examples, preds)
    return {"dataset": ds.name, "n": len(ds), "method": method, "layer": int(layer), "pooling": pooling,
            "knn_overlap": proj.knn_overlap, "k": proj.k, "knn_chance": knn_chance(len(ds), proj.k),
            "procrustes_disparity": proj.disparity,
            "embeddings_cached": proj.embeddings_cached, "points": rows}


def benchmark(pair: Pair, dataset: str | None = None, limit: int | None = 1000, progress: Progress = None) -> dict:
    """Both models scored on one labelled dataset: accuracy (Pearson for regression), speed, the paired test of
    the gap between them and the examples they answer differently (`core.benchmark`)."""
    from .benchmark import benchmark as score

    ds = resolve_dataset(pair, dataset, limit)
    return score(pair, ds, progress=progress)


def facts(pair: Pair, texts: Sequence[str | Sequence[str]] | None = None) -> dict:
    """Model facts measured on `texts`: one input each, a line of text (for a pair task the two texts separated
    by a tab, or one text used for both) or its fields; none: the shipped examples."""
    from .facts import latency_comparison, model_facts

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
    models = [model_facts(clf, exs) for clf in pair.models]
    a, b = models
    return {"models": models, "n_inputs": len(exs), "latency_comparison": latency_comparison(pair.models, exs),
            "ratios": {"parameters": b["parameters"] / a["parameters"],
                       "latency": b["latency_ms"] / a["latency_ms"],
                       "throughput": b["throughput_per_s"] / a["throughput_per_s"]}}


def attack(pair: Pair, recipe: str, text: str | None = None, text2: str | None = None, label: str | None = None,
           dataset: str | None = None, n: int = 5, query_budget: int = 200, time_limit: float = 30.0,
           cancel=None, progress: Progress = None) -> dict:
    """Attack one labelled input, or the first `n` labelled examples of a dataset, on both models."""
    from . import attacks

    cap = limits()
    if cap["hosted"]:
        n, query_budget, time_limit = min(n, 10), min(query_budget, 300), min(time_limit, 30.0)
    if dataset:
        examples = [e for e in resolve_dataset(pair, dataset, None).examples if e.label is not None][: int(n)]
    else:
        ex = example_from(pair, text, text2)
        if not label:
            raise InputError("label: choose the gold label of the input (the attack tries to move the models off it)")
        examples = [Example(ex.texts, label)]
    total = len(examples)
    rows: list[dict] = []

    def on_result(row):
        rows.append(row)
        if progress:
            progress(len(rows), total)

    attacks.attack_pair(pair.models, recipe, examples, query_budget=query_budget, time_limit=time_limit,
                        cancel=cancel, on_result=on_result)
    return {"recipe": recipe, "models": [m.name for m in pair.models], "examples": rows,
            "summary": attacks.summarize(rows, pair.models), "comparison": attacks.compare_success(rows, pair.models)}


def checklist(pair: Pair, suite: str, sample: int | None = 20, progress: Progress = None, engine=None) -> dict:
    """Run a released CheckList suite (path to its JSON export) on both models; with a Ray `engine` the
    suite's inputs are predicted on its workers."""
    from . import checklist as cl
    from .engine import ray_or_none
    from .inference import from_logits

    cap = limits()
    if cap["hosted"]:
        sample = min(sample or 20, 50)
    s = cl.load_suite(readable(suite, "suite"))
    remote = ray_or_none(engine)
    probabilities = None
    if remote is not None:
        def probabilities(inputs):
            logits = remote.run(pair.spec, "predict", inputs, params={"validate": False, "batch_size": 64},
                                progress=progress)
            return [from_logits(clf, lg).probs for clf, lg in zip(pair.heads, logits)]
    models = pair.models if remote is None else pair.heads  # a Ray driver needs labels, not weights
    results = cl.run_suite(s, models, sample=sample, progress=progress, probabilities=probabilities)
    names = [m.name for m in models]
    caps = {}
    for cap_name, tests in cl.by_capability(results).items():
        caps[cap_name] = {}
        for k, n in enumerate(names):
            rates = [t.results[k]["fail_rate"] for t in tests if t.results[k]["fail_rate"] is not None]
            caps[cap_name][n] = float(sum(rates) / len(rates)) if rates else None
    return {"suite": s.name, "kind": s.kind, "sample": sample, "models": names, "tests": cl.to_dict(results),
            "capabilities": caps, "markdown": cl.table_markdown(results, names),
            "differing": [t.name for t in cl.differing_tests(results)], "summary": cl.summary(results, names)}
