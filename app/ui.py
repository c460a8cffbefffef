"""The Gradio front end: five tabs over `app.core.api`, BERT and ALBERT side by side in each.

Thin by design: every handler calls one core API function and only reshapes its JSON for components. Each event
has an `api_name`, and its first output is that JSON, so `gradio_client` users get the full result.
"""
from __future__ import annotations

import functools
import html
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import gradio as gr
import pandas as pd
from gradio.context import LocalContext

from app.core import api, views
from app.core.errors import LensError
from app.core.plots import (
    benchmark_figure,
    counterfactual_figure,
    grouped_bars,
    plot_png,
    saliency_dataset_figure,
    saliency_figure,
    transition_labels,
)

log = logging.getLogger("albert_lens.ui")
MAX_UPLOAD_MB = 20
# Gradio's highlighted text breaks lines inside words (word-break: break-all), splitting a saliency map's words
# table headers wrap instead of ending in "...": "albert-sst2 before" fits no column of a side-by-side table
CSS = (".textfield { word-break: normal !important; overflow-wrap: anywhere; }\n"
       "th .header-content, th .header-button, th .header-button > span { white-space: pre-wrap !important; "
       "overflow: visible !important; text-overflow: clip !important; overflow-wrap: anywhere; }")


_RUNNING: dict[str, set[api.Job]] = {}  # session -> its running jobs, which its Stop buttons cancel
_RUNNING_LOCK = threading.Lock()


def _event_alive() -> Callable[[], bool] | None:
    """Whether the client of the event this thread runs is still there: Gradio marks a queued event's job dead
    when its client's stream closes (tab closed, network gone, gradio_client cancelled), but a function already
    running in a worker thread is never told; the core asks this between batches instead."""
    blocks, event_id = LocalContext.blocks.get(None), LocalContext.event_id.get(None)
    if blocks is None or event_id is None or getattr(blocks, "_queue", None) is None:
        return None
    queue = blocks._queue

    def alive() -> bool:
        for group in list(queue.active_jobs):
            for event in group or ():
                if event._id == event_id:
                    return bool(event.alive)
        return True  # no longer listed: the queue has finished with it, nothing says the client left

    return alive


def _session_key(request=None) -> str:
    request = request or LocalContext.request.get(None)
    return getattr(request, "session_hash", None) or "default"


def guarded(fn):
    """Each handler runs as a job (this server's time budget, stopped when its client leaves or presses Stop);
    errors become messages in the UI (escaped), never tracebacks."""

    @functools.wraps(fn)
    def inner(*args, **kwargs):
        job = api.job(alive=_event_alive(), name=fn.__name__)
        key = _session_key()
        with _RUNNING_LOCK:
            _RUNNING.setdefault(key, set()).add(job)
        try:
            with api.running(job):
                return fn(*args, **kwargs)
        except gr.Error:
            raise
        except LensError as exc:
            raise gr.Error(html.escape(str(exc), quote=False), print_exception=False) from None
        except Exception as exc:  # noqa: BLE001 - the app must keep serving
            log.exception("handler %s failed", fn.__name__)
            raise gr.Error(f"something went wrong in {fn.__name__.removeprefix('do_')} ({type(exc).__name__}); "
                           "the server logged it. Check the inputs or try again.", print_exception=False) from None
        finally:
            with _RUNNING_LOCK:
                running = _RUNNING.get(key)
                if running is not None:
                    running.discard(job)
                    if not running:
                        _RUNNING.pop(key, None)

    return inner


def stop_session(request: gr.Request) -> str:
    """The Stop buttons: every job of this browser session ends at its next batch."""
    with _RUNNING_LOCK:
        running = list(_RUNNING.get(_session_key(request), ()))
    for job in running:
        job.cancel()
    return "stopping after the current batch ..." if running else "nothing is running"


def _stop_button(target) -> None:
    gr.Button("Stop", size="sm").click(stop_session, None, target, queue=False, api_name=False)


# Concurrency groups: a cheap prediction never waits in a queue behind explanations, and those never behind
# batch jobs. One explanation and one batch job at a time: on two cores each already uses both, and a second of
# each only slowed /predict (16 users, browser-like p50 305 -> 187 ms, p95 1.29 -> 0.70 s; benchmarks/README.md)
# at the same requests served. ALBERT_LENS_CONCURRENCY sets the batch slots on a larger machine.
CHEAP = {"concurrency_id": "predict", "concurrency_limit": 4}
SINGLE = {"concurrency_id": "single", "concurrency_limit": 1}
BATCH = {"concurrency_id": "batch", "concurrency_limit": max(1, int(os.environ.get("ALBERT_LENS_CONCURRENCY", "1")))}


class Heavy:
    """Where an explanation (`single`) or a batch job (`batch`) runs: here, or in a worker process of the
    facade's pools (hosted mode: /predict then keeps the server's interpreter and the cores' first call)."""

    def __init__(self, pools: dict | None = None):
        self.pools = pools or {}

    def _run(self, group: str, fn, *args, **kwargs):
        pool = self.pools.get(group)
        return pool.call(fn, *args, **kwargs) if pool is not None else fn(*args, **kwargs)

    def single(self, fn, *args, **kwargs):
        return self._run("single", fn, *args, **kwargs)

    def batch(self, fn, *args, **kwargs):
        return self._run("batch", fn, *args, **kwargs)

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()


def build(pair: api.Pair, workers: bool = False) -> gr.Blocks:
    """The app; `workers` runs explanations and batch jobs in child processes (`launch` turns it on in hosted
    mode, or with ALBERT_LENS_WORKERS=1); `demo.heavy.close()` stops them."""
    names = [m.name for m in pair.models]
    fields = pair.task.fields
    is_pair = pair.task.is_pair
    labels = list(pair.task.labels or [])
    shipped = list(api.shipped_datasets())
    released = list(api.released_datasets(pair))
    dev = released[0] if released else None
    # every dataset field offers the task's released dev split beside the shipped examples (the study's UMAPs,
    # flip rates and attacks ran on it), by name; a typed path still works locally
    datasets = [(n, n) for n in shipped + released]
    api.allow_reads_under(gr.utils.get_upload_folder())  # hosted mode reads uploads, no other server path
    hosted = api.limits()["hosted"]  # then the dataset fields offer the listed datasets only
    examples = _examples(pair)
    heavy = Heavy(api.worker_pools(pair, {"single": SINGLE["concurrency_limit"],
                                          "batch": BATCH["concurrency_limit"]}) if workers else None)

    def text_inputs():
        t1 = gr.Textbox(label=fields[0], lines=2, max_lines=8)
        t2 = gr.Textbox(label=fields[1] if is_pair else "second text", lines=2, visible=is_pair)
        return t1, t2

    with gr.Blocks(title="albert-lens", analytics_enabled=False, css=CSS) as demo:
        gr.Markdown(f"## albert-lens · {html.escape(pair.banner())}")

        with gr.Tab("Compare"):
            t1, t2 = text_inputs()
            go = gr.Button("Predict", variant="primary")
            with gr.Row():
                lab = [gr.Label(label=n, num_top_classes=5) for n in names]
            info = gr.Markdown(label="latency")
            raw = gr.JSON(label="result (JSON)", open=False)

            @guarded
            def do_predict(text, text2):
                res = api.predict(pair, text, text2)
                lines = " · ".join(f"**{html.escape(m['model'])}** {m['latency_ms']:.1f} ms" for m in res["models"])
                return res, *[views.prob_label(m) for m in res["models"]], "latency: " + lines

            go.click(do_predict, [t1, t2], [raw, *lab, info], api_name="predict", **CHEAP)
            gr.Examples(examples, [t1, t2] if is_pair else [t1])

        _benchmark_tab(pair, names, hosted, datasets, dev, heavy)

        with gr.Tab("Saliency"):
            s1, s2 = text_inputs()
            with gr.Row():
                method = gr.Dropdown(sorted(api.METHODS), value="integrated_gradients", label="method")
                target = gr.Dropdown(["predicted", *labels], value="predicted", label="explain class")
                tolerance = gr.Dropdown([f"{t:.0e}" for t in api.IG_TOLERANCES
                                         if t >= api.limits()["min_ig_tolerance"]],
                                        value="1e-03", label="integrated gradients: delta tolerance")
                # a confident prediction's probability is flat: gradients of the logit still show the evidence
                output = gr.Radio([("probability", "prob"), ("logit", "logit")], value="prob",
                                  label="explain the class's", visible=not pair.task.is_regression)
            go = gr.Button("Explain", variant="primary")
            with gr.Row():
                maps = [gr.HighlightedText(label=n, combine_adjacent=False, show_legend=False,
                                           color_map=None) for n in names]
            gr.Markdown("<small>red: the word supports the explained class · purple: it speaks against it · shade: "
                        "share of that model's largest |score|</small>")
            summary = gr.Markdown(label="summary")
            bars = gr.Plot(label="per-word scores")
            sraw = gr.JSON(label="result (JSON)", open=False)

            @guarded
            def do_saliency(text, text2, method_name, target_label, ig_tolerance, explained="prob",
                            progress=gr.Progress()):
                progress(0.1, desc=f"{method_name} on both models")
                res = heavy.single(api.saliency, pair, text, text2, method_name, target_label, ig_tolerance, explained)
                texts = [text] + ([text2] if is_pair else [])
                hl = [views.highlight(m, texts) for m in res["maps"]]
                return res, *hl, views.saliency_summary(res), saliency_figure(res)

            go.click(do_saliency, [s1, s2, method, target, tolerance, output], [sraw, *maps, summary, bars],
                     api_name="saliency", **SINGLE)
            gr.Examples(examples, [s1, s2] if is_pair else [s1])

            with gr.Accordion("Over a dataset: faithfulness against a random ranking, and agreement", open=False):
                with gr.Row():
                    sds = _dataset_field(datasets, hosted, "dataset", "shipped name or path",
                                         value=api.default_dataset(pair))
                    slimit = gr.Number(value=50, label="max examples (each is explained by both models)")
                sgo = gr.Button("Explain the dataset with this method")
                ssum = gr.Markdown(label="summary")
                splot = gr.Plot(label="faithfulness and agreement")
                stable = gr.Dataframe(headers=["#", "input", "explained class", "agreement",
                                               *[f"{n} top words" for n in names]], wrap=True,
                                      label="where the two models agree least on which words matter")
                sdraw = gr.JSON(label="result (JSON)", open=False)

                @guarded
                def do_saliency_dataset(dataset, method_name, ig_tolerance, limit, explained="prob",
                                        progress=gr.Progress()):
                    res = heavy.batch(
                        api.saliency_dataset, pair, dataset, method_name, limit, ig_tolerance, output=explained,
                        progress=lambda d, n: progress(d / max(n, 1), desc="explaining"))
                    return (res, views.cut_line(res) + views.saliency_dataset_summary(res),
                            saliency_dataset_figure(res), views.lowest_agreement_frame(res))

                sgo.click(do_saliency_dataset, [sds, method, tolerance, slimit, output], [sdraw, ssum, splot, stable],
                          api_name="saliency_dataset", **BATCH)
                _stop_button(ssum)

        with gr.Tab("Counterfactuals"):
            c1, c2 = text_inputs()
            with gr.Row():
                gen = gr.Dropdown(list(api.GENERATORS), value="word_replacement", label="generator")
                repl = gr.Textbox(label="replacements (old -> new, comma-separated)", value=_default_swaps(pair),
                                  lines=2)
            with gr.Row():
                cds = _dataset_field(datasets, hosted, "dataset for flip rate", "shipped name or path")
                climit = gr.Number(value=500, label="max examples")
            go = gr.Button("Generate", variant="primary")
            csum = gr.Markdown(label="summary")
            cplot = gr.Plot(label="effect per model")
            ctable = gr.Dataframe(
                headers=[
                    "flips",
                    "edited",
                    "edits",
                    "generator",
                    *[f"{n} {c}" for n in names for c in ("before", "after", "Δp")],
                ],
                label="changes (Δp: change in the probability of the label the model gave the original)",
                wrap=True,
                column_widths=["9%", "27%", "12%", "8%", *[f"{44 / (3 * len(names)):.2f}%"] * (3 * len(names))],
            )
            craw = gr.JSON(label="result (JSON)", open=False)

            @guarded
            def do_counterfactual(text, text2, generator, replacements, dataset, limit, progress=gr.Progress()):
                progress(0.1, desc=generator)
                res = heavy.single(api.counterfactual, pair, text, text2, generator, replacements, dataset, limit,
                                         progress=lambda d, n: progress(d / max(n, 1), desc="predicting"))
                return res, views.counterfactual_summary(res, names), counterfactual_figure(res, names), \
                    views.changes_frame(res, names)

            go.click(do_counterfactual, [c1, c2, gen, repl, cds, climit], [craw, csum, cplot, ctable],
                     api_name="counterfactual", **SINGLE)
            _stop_button(csum)
            gr.Examples(examples, [c1, c2] if is_pair else [c1])

        with gr.Tab("Projection"):
            with gr.Row():
                first = api.default_dataset(pair)
                pds = _dataset_field(datasets, hosted, "dataset", "shipped name, local path or datasets id",
                                     value=first if first in shipped else None)
                upload = gr.File(label="or upload csv/tsv/jsonl", file_types=[".csv", ".tsv", ".jsonl"])
            with gr.Row():
                pmethod = gr.Radio(["umap", "pca"], value="umap", label="projection")
                pooling = gr.Radio(["cls", "mean"], value="cls", label="pooling")
                layer = gr.Slider(-1, max(m.model.config.num_hidden_layers for m in pair.models), value=-1, step=1,
                                  label="layer (-1 = top, 0 = embeddings)")
                color = gr.Radio(["gold", "prediction", "correct"], value="gold", label="colour by")
                plimit = gr.Number(value=500, label="max examples")
            go = gr.Button("Project", variant="primary")
            psum = gr.Markdown(label="summary")
            with gr.Row():
                scatter = [gr.ScatterPlot(x="x", y="y", color="gold", tooltip=["text", "gold", "prediction"],
                                          label=n) for n in names]
            overlay = gr.ScatterPlot(x="x", y="y", color="model", tooltip=["model", "text"],
                                     label="overlay (second aligned to first)")
            with gr.Row():
                csv_out = gr.File(label="CSV")
                png_out = gr.Image(label="PNG", type="filepath")
            praw = gr.JSON(label="summary (JSON)", open=False)

            @guarded
            def do_project(dataset, uploaded, method_name, pool, layer_idx, colour, limit, progress=gr.Progress()):
                spec = _upload_path(uploaded) or dataset
                res = heavy.batch(api.project, pair, spec, method_name, layer_idx, pool, limit,
                                  progress=lambda d, n: progress(d / max(n, 1), desc="embedding"))
                frame = pd.DataFrame(res["points"])
                out_dir = Path(tempfile.mkdtemp(prefix="albert-lens-projection-"))
                frame.to_csv(out_dir / "projection.csv", index=False)
                plot_png(res["points"], out_dir / "projection.png", colour, title=f"{res['dataset']} ({method_name})")
                # sorted by the colour column so the classes get the same colours as in the PNG
                lims = {"x_lim": views.span(frame["x"]), "y_lim": views.span(frame["y"])}  # same axes in all three
                per_model = [gr.update(value=frame[frame.model == n].sort_values(colour, kind="stable"), color=colour,
                                       **lims) for n in names]
                summary = (
                    f"**{html.escape(res['dataset'])}**, {res['n']} examples · shared {res['k']}-nearest "
                    f"neighbours: **{res['knn_overlap']:.2f}** (unrelated spaces: {res['knn_chance']:.2f}) · "
                    "Procrustes disparity "
                    f"{res['procrustes_disparity']:.3f} · embeddings: "
                    + ", ".join(
                        f"{html.escape(n_)} {'from cache' if c else 'computed'}"
                        for n_, c in zip(names, res["embeddings_cached"])
                    )
                )
                return ({k: v for k, v in res.items() if k != "points"}, summary, *per_model,
                        gr.update(value=frame, **lims),
                        str(out_dir / "projection.csv"), str(out_dir / "projection.png"))

            go.click(do_project, [pds, upload, pmethod, pooling, layer, color, plimit],
                     [praw, psum, *scatter, overlay, csv_out, png_out], api_name="project", **BATCH)
            _stop_button(psum)

        with gr.Tab("Model facts"):
            ftexts = gr.Textbox(label="inputs for layer transitions and speed (one per line; empty = shipped examples)",
                                lines=3)
            go = gr.Button("Measure", variant="primary")
            fsum = gr.Markdown(label="summary")
            ftable = gr.Dataframe(headers=["fact", *names], label="facts")
            with gr.Row():
                steps = transition_labels(max(m.model.config.num_hidden_layers for m in pair.models))
                l2plot = gr.LinePlot(x="layer", y="l2", color="model", sort=steps, label="L2 distance between layers")
                cosplot = gr.LinePlot(x="layer", y="cosine", color="model", sort=steps,
                                      label="cosine similarity between layers")
            fraw = gr.JSON(label="result (JSON)", open=False)

            @guarded
            def do_facts(texts, progress=gr.Progress()):
                progress(0.1, desc="measuring")
                lines = [ln for ln in (texts or "").splitlines() if ln.strip()]
                res = heavy.single(api.facts, pair, lines or None)
                rows = [{k: views.fact_text(v) for k, v in m.items() if k != "transitions"} for m in res["models"]]
                trans = [{"model": m["model"], "layer": steps[i], "l2": l2, "cosine": c}
                         for m in res["models"] for i, (l2, c) in enumerate(zip(m["transitions"]["l2"],
                                                                                m["transitions"]["cosine"]))]
                r = res["ratios"]
                summary = (f"{names[1]} / {names[0]}: parameters **{r['parameters']:.2f}×**, latency "
                           f"**{r['latency']:.2f}×**, throughput **{r['throughput']:.2f}×** "
                           f"(measured now on {res['n_inputs']} inputs)\n\nOne input at a time, both models in "
                           "turns: " + html.escape(views.verdict(res["latency_comparison"], names, unit="inputs"),
                                                   quote=False))
                frame = pd.DataFrame(trans)
                table = pd.DataFrame(rows).set_index("model").T.reset_index().rename(columns={"index": "fact"})
                return res, summary, table.astype(str), frame, frame

            go.click(do_facts, [ftexts], [fraw, fsum, ftable, l2plot, cosplot], api_name="facts", **SINGLE)

        _extra_tabs(pair, names, hosted, datasets, heavy)
    demo.queue(default_concurrency_limit=BATCH["concurrency_limit"], max_size=64)
    demo.heavy = heavy
    return demo


NO_DATASET = "none: attack the text above"


def _dataset_field(datasets: list, hosted: bool, label: str, hint: str, value: str | None = None
                   ) -> gr.Dropdown:
    """A dataset dropdown of (name, value) choices: locally also a typed path or id (`hint` says which); hosted,
    the listed ones only, since typed server paths are refused there anyway (`api.readable`)."""
    return gr.Dropdown(datasets, value=value, allow_custom_value=not hosted,
                       label=label if hosted else f"{label} ({hint})")


def _benchmark_tab(pair: api.Pair, names: list[str], hosted: bool, datasets: list, dev: str | None, heavy: Heavy
                   ) -> None:
    with gr.Tab("Benchmark"):
        with gr.Row():
            ds = _dataset_field(datasets, hosted, "labelled dataset",
                                "shipped name or path", value=dev or api.default_dataset(pair))
            upload = gr.File(label="or upload csv/tsv/jsonl with labels", file_types=[".csv", ".tsv", ".jsonl"])
            limit = gr.Number(value=1000, label="max examples")
        go = gr.Button("Score both models", variant="primary")
        summary = gr.Markdown(label="summary")
        plot = gr.Plot(label="accuracy and who is right")
        table = gr.Dataframe(headers=["#", "input", "gold", *names, "right"], wrap=True,
                             label=f"examples the models answer differently (one model right first; at most "
                                   f"{api.DISAGREEMENTS_SHOWN})",
                             column_widths=["6%", "52%", "10%", "11%", "11%", "10%"])
        raw = gr.JSON(label="result (JSON)", open=False)

        @guarded
        def do_benchmark(dataset, uploaded, max_examples, progress=gr.Progress()):
            spec = _upload_path(uploaded) or dataset
            res = heavy.batch(api.benchmark, pair, spec, max_examples,
                                progress=lambda d, n: progress(d / max(n, 1), desc="predicting"))
            return res, views.benchmark_summary(res, names), benchmark_figure(res), views.disagreement_frame(res, names)

        go.click(do_benchmark, [ds, upload, limit], [raw, summary, plot, table], api_name="benchmark", **BATCH)
        _stop_button(summary)


def _extra_tabs(pair: api.Pair, names: list[str], hosted: bool, datasets: list, heavy: Heavy) -> None:
    _attack_tab(pair, names, hosted, datasets, heavy)
    _checklist_tab(pair, names, hosted, heavy)


def _checklist_tab(pair: api.Pair, names: list[str], hosted: bool, heavy: Heavy) -> None:
    suites = list(api.released_suites(pair))
    with gr.Tab("Behavioural"):
        if not suites:
            gr.Markdown(f"No released CheckList suite fits the *{html.escape(pair.task.name)}* task: they test "
                        "sentiment (positive/negative, neutral) and QQP paraphrase labels. Give the path of, or "
                        "upload, a suite export written for this task's labels.")
        with gr.Row():
            # hosted, visitors upload suites; typed server paths are refused anyway
            suite = gr.Dropdown(suites, value=next(iter(suites), None), allow_custom_value=not hosted,
                                label="CheckList suite" + ("" if hosted else " (or a path to *_suite.json.gz)"))
            upload = gr.File(label="or upload a suite export", file_types=[".gz", ".json"])
            sample = gr.Number(value=20, label="cases per test")
        go = gr.Button("Run suite on both models", variant="primary")
        verdict = gr.Markdown(label="differences beyond chance")
        bars = gr.Plot(label="mean fail rate per capability")
        table = gr.Dataframe(headers=["capability", "test", "type", "n", *[f"{n_} fail %" for n_ in names],
                                      "p (McNemar)", "p (Holm)", "expectation"], wrap=True,
                             column_widths=["9%", "18%", "5%", "4%", *["9%"] * len(names), "10%", "8%", "28%"],
                             label="fail rate per test (p: do the two models fail equally often? Holm: corrected "
                                   "for the suite's number of tests)")
        fails = gr.Dataframe(headers=["model", "test", "inputs", "why"], label="failing examples", wrap=True,
                             column_widths=["10%", "22%", "42%", "26%"])
        craw = gr.JSON(label="result (JSON)", open=False)

        @guarded
        def do_checklist(suite_path, uploaded, cases_per_test, progress=gr.Progress()):
            spec = (str(Path(uploaded if isinstance(uploaded, str) else uploaded.name)) if uploaded else suite_path)
            if not spec:
                raise LensError("suite: give the path of a CheckList suite export")
            res = heavy.batch(api.checklist, pair, spec, cases_per_test,
                                progress=lambda d, t: progress(d / max(t, 1), desc="predicting suite inputs"))
            rows, fail_rows, bar_rows = [], [], []
            for t in res["tests"]:
                row = {"capability": t["capability"], "test": t["name"], "type": t["type"], "n": t["results"][0]["n"]}
                for r in t["results"]:
                    row[f"{r['model']} fail %"] = None if r["fail_rate"] is None else round(100 * r["fail_rate"], 1)
                    for e in r["examples"][:2]:
                        fail_rows.append({"model": r["model"], "test": t["name"],
                                          "inputs": " | ".join(" / ".join(x) for x in e["inputs"])[:300],
                                          "why": e["detail"]})
                paired = t.get("paired") or {}
                row["p (McNemar)"], row["p (Holm)"] = (None if paired.get(k) is None else round(paired[k], 4)
                                                       for k in ("p_value", "p_holm"))
                row["expectation"] = t["expectation"]
                rows.append(row)
            for cap_name, per in res["capabilities"].items():
                for m, v in per.items():
                    bar_rows.append({"capability": cap_name, "model": m, "fail rate": v or 0.0})
            return (res, html.escape(res["summary"], quote=False),
                    grouped_bars(bar_rows, "capability", "fail rate", "model", "fail rate", ylim=(0, 1)),
                    pd.DataFrame(rows), pd.DataFrame(fail_rows))

        go.click(do_checklist, [suite, upload, sample], [craw, verdict, bars, table, fails], api_name="checklist",
                 **BATCH)
        _stop_button(verdict)


def _attack_tab(pair: api.Pair, names: list[str], hosted: bool, datasets: list, heavy: Heavy) -> None:
    fields = pair.task.fields
    recipes = api.list_recipes()
    choices = [(f"{r['name']} ({'offline' if r['offline'] else 'needs downloads'}"
                f"{'' if r['available'] else ', unavailable here'})", r["name"]) for r in recipes]
    with gr.Tab("Attacks"):
        with gr.Row():
            a1 = gr.Textbox(label=fields[0], lines=2)
            a2 = gr.Textbox(label=fields[1] if pair.task.is_pair else "second text", lines=2,
                            visible=pair.task.is_pair)
        with gr.Row():
            recipe = gr.Dropdown(choices, value="deepwordbug", label="recipe")
            gold = gr.Dropdown(list(pair.task.labels or []), label="gold label of the input")
            # a "none" choice, or a hosted dropdown (no typing) could never go back to attacking the text
            ads = _dataset_field([(NO_DATASET, "")] + datasets, hosted, "or a dataset", "shipped name or path",
                                 value="")
        with gr.Row():
            n = gr.Number(value=5, label="examples from the dataset")
            budget = gr.Number(value=200, label="query budget")
            tlimit = gr.Number(value=30, label="seconds per example and model")
        with gr.Row():
            go = gr.Button("Attack both models", variant="primary")
            stop = gr.Button("Stop")
        asum = gr.Markdown(label="summary")
        with gr.Row():
            diffs = [gr.HighlightedText(label=f"{n_} adversarial (first example)", combine_adjacent=False,
                                        show_legend=False) for n_ in names]
        atable = gr.Dataframe(headers=["#", "model", "outcome", "adversarial", "queries", "perturbed %", "seconds"],
                              label="per example and model", wrap=True)
        aplot = gr.Plot(label="success and transfer rates")
        araw = gr.JSON(label="result (JSON)", open=False)

        @guarded
        def do_attack(text, text2, recipe_name, gold_label, dataset, n_examples, query_budget, time_limit_s,
                      progress=gr.Progress()):
            progress(0, desc=f"{recipe_name}: starting")
            res = heavy.batch(
                api.attack,
                pair,
                recipe_name,
                text,
                text2,
                gold_label,
                dataset or None,
                n_examples,
                query_budget,
                time_limit_s,
                progress=lambda d, t: progress(d / max(t, 1), desc=f"{recipe_name}: {d}/{t} examples"),
            )
            first = res["examples"][0]["results"] if res["examples"] else []
            hl = [[(c if ch else views.clip(c), "changed" if ch else None) for c, ch in (r.get("marked") or [])] or
                  [(r["outcome"], None)] for r in first] or [[], []]
            rows, bars = [], []
            for ex in res["examples"]:
                for r in ex["results"]:
                    rows.append({"#": ex["index"], "model": r["model"], "outcome": r["outcome"],
                                 "adversarial": " / ".join(views.clip(t) for t in r["adversarial"] or []),
                                 "queries": r["queries"],
                                 "perturbed %": "" if r["perturbed_words_pct"] is None
                                 else round(r["perturbed_words_pct"], 1),
                                 "seconds": round(r["seconds"], 2)})
            for name_, s_ in res["summary"].items():
                bars.append({"model": name_, "measure": "success rate", "value": s_["success_rate"] or 0.0})
                bars.append({"model": name_, "measure": "transfer rate", "value": s_["transfer_rate"] or 0.0})
            summary = views.cut_line(res) + " · ".join(views.attack_line(k, v) for k, v in res["summary"].items())
            if res.get("comparison") and res["comparison"]["n"] > 1:  # one example is no test
                summary += "<br>" + html.escape(views.verdict(res["comparison"], names,
                                                        unit="examples attacked on both models"), quote=False)
            notes = dict.fromkeys(r["note"] for ex in res["examples"] for r in ex["results"] if r.get("note"))
            summary += "".join(f"<br><small>{html.escape(n)}</small>" for n in notes)  # e.g. a long input's window
            return (res, summary, *hl, pd.DataFrame(rows),
                    grouped_bars(bars, "model", "value", "measure", "rate", ylim=(0, 1)))

        go.click(do_attack, [a1, a2, recipe, gold, ads, n, budget, tlimit], [araw, asum, *diffs, atable, aplot],
                 api_name="attack", **BATCH)
        gr.Examples(_attack_examples(pair), [a1, a2, gold] if pair.task.is_pair else [a1, gold])
        stop.click(stop_session, None, asum, api_name="attack_stop", queue=False)


def _upload_path(uploaded) -> str | None:
    if not uploaded:
        return None
    path = Path(uploaded if isinstance(uploaded, str) else uploaded.name)
    size = path.stat().st_size
    if size > MAX_UPLOAD_MB * 2**20:
        raise LensError(f"upload: {path.name} is {size / 2**20:.1f} MB; the limit is {MAX_UPLOAD_MB} MB")
    if path.suffix.lower() not in (".csv", ".tsv", ".jsonl"):
        raise LensError(f"upload: {path.name} is not a .csv, .tsv or .jsonl file")
    return str(path)


STUDY_SWAP = "cities -> townships"
# Words of the shipped reviews whose swap should not change a sentiment: the study's probe, where it can apply.
NEUTRAL_SWAPS = "film -> movie, movie -> film, food -> meal, phone -> device, hotel -> motel, pizza -> pasta"


def _default_swaps(pair: api.Pair) -> str:
    """The study's swap for sentence pairs (its RTE example A has 'cities'); for single sentences, neutral noun
    swaps that occur in the shipped examples, so Generate works on them as they come."""
    return STUDY_SWAP if pair.task.is_pair else f"{STUDY_SWAP}, {NEUTRAL_SWAPS}"


def _shipped(pair: api.Pair) -> tuple:
    """The shipped examples for the pair's task (read once: the Compare, Saliency and Attacks tabs all offer
    them); eight for single sentences, all the pairs."""
    return _shipped_for(pair.task)


@functools.lru_cache(maxsize=8)
def _shipped_for(task) -> tuple:
    return tuple(api.shipped_examples(task, None if task.is_pair else 8))


def _examples(pair: api.Pair) -> list[list[str]]:
    return [list(e.texts) for e in _shipped(pair)]


def _attack_examples(pair: api.Pair) -> list[list]:
    """Texts with their gold label (an attack needs one); a label the task doesn't have (RTE's on a 3-way NLI
    pair) is left for the user to choose."""
    labels = list(pair.task.labels or [])
    return [[*e.texts, e.label if e.label in labels else None] for e in _shipped(pair)]


def launch(pair: api.Pair, host: str = "127.0.0.1", port: int = 7860, **kw) -> None:
    workers = api.limits()["worker_processes"]
    demo = build(pair, workers=workers)
    for clf in pair.models:  # the app answers from worker threads
        clf.reserve_tokenizer()
    if not workers:  # else each worker process warms itself up
        _warm_up()
    demo.launch(server_name=host, server_port=port, show_error=True,
                max_file_size=f"{MAX_UPLOAD_MB}mb", state_session_capacity=session_capacity(), **kw)


def session_capacity() -> int:
    """Sessions whose component values Gradio keeps in memory, oldest dropped first. Gradio's default, 10,000,
    let a public server grow by ~0.23 MB per visitor session without end (350 MB in a 16-user load test's three
    rounds); the app keeps no state of its own between clicks, so a dropped session loses nothing."""
    raw = os.environ.get("ALBERT_LENS_SESSIONS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else 256


def _warm_up() -> threading.Thread:
    """One-off costs of a process's first projection (UMAP's compilation) and first WordNet swap (loading
    WordNet), paid in the background while the app starts instead of by the first user to click."""
    def run():
        for step in api.warm_ups():
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - a failed warm-up only leaves the one-off cost to the first use
                log.warning("warm-up %s.%s failed (%s); its first use will be slower", step.__module__,
                            step.__name__, exc)

    thread = threading.Thread(target=run, name="warm-up", daemon=True)
    thread.start()
    return thread
