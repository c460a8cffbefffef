"""Behavioural: a CheckList suite on both models, with a paired test per test."""
from __future__ import annotations

import html
from pathlib import Path

import gradio as gr

from app.core import api
from app.core.ground.errors import LensError
from app.core.present import views
from app.core.present.plots import grouped_bars

from . import common
from .common import DATASET, Ctx, dataset_field, describe, json_out, option, stop_button


def _suite_read(values: dict) -> dict:
    """A suite dropped on the page is read instead of the named one; over a dataset, no suite is read."""
    if values.get("over") == "dataset":
        return {"suite": ""}
    uploaded = values["uploaded"]
    spec = str(Path(uploaded if isinstance(uploaded, str) else uploaded.name)) if uploaded else values["suite"]
    if not spec:
        raise LensError("suite: give the path of a CheckList suite export")
    return {"suite": spec}


def _suite_shown(ctx: Ctx, res, values: dict) -> tuple:
    table, fails, bars = views.checklist_views(res)
    cases = views.checklist_cases(res)
    return (res.to_dict(), html.escape(res["summary"], quote=False),
            grouped_bars(bars, "capability", "fail rate", "model", "fail rate", ylim=(0, 1)), table, fails,
            cases)


checklist = common.handler("checklist", _suite_shown, rest=True,
                           params=("suite", "uploaded", "sample", "over", "dataset", "limit"),
                           extras={"uploaded": None}, where="dataset", desc="predicting suite inputs",
                           read=_suite_read)


def failure_texts(res: dict, row: int) -> list[str] | None:
    fails = views.checklist_failures(res)
    return fails[row]["texts"] if 0 <= row < len(fails) else None


def failure_note(res: dict, row: int) -> str:
    f = views.checklist_failures(res)[row]
    return views.picked_note(f"CheckList's «{f['test']}», failed by {f['model']}", None, f["why"])


def tab(ctx: Ctx) -> None:
    suites = list(api.released_suites(ctx.pair))
    names = ctx.names
    with gr.Tab("Behavioural", id="checklist"):
        describe("CheckList tests of capabilities (vocabulary, negation, robustness to typos, fairness): the fail "
                 "rate of each model per test, and McNemar's p-value for whether they fail equally often "
                 "(Holm-corrected for the number of tests).")
        describe(views.checklist_types_legend())
        if not suites:
            gr.Markdown(f"No released CheckList suite fits the *{html.escape(ctx.pair.task.name)}* task: they test "
                        "sentiment (positive/negative, neutral) and QQP paraphrase labels. Give the path of, or "
                        "upload, a suite export written for this task's labels.")
        with gr.Row():
            # hosted, visitors upload suites; typed server paths are refused anyway
            suite = gr.Dropdown(suites, value=next(iter(suites), None), allow_custom_value=not ctx.hosted,
                                label="CheckList suite" + ("" if ctx.hosted else " (or a path to *_suite.json.gz)"))
            upload = gr.File(label="or upload a suite export", file_types=[".gz", ".json"])
            sample = common.number(value=option("checklist", "sample").default, label="cases per test")
        with gr.Row():  # or CheckList's robustness perturbations of a dataset's rows (every tab's dataset)
            over = gr.Radio([("a CheckList suite's cases", "suite"),
                             ("CheckList's perturbations of a dataset's rows", "dataset")],
                            value="suite", label="test")
            cds = dataset_field(ctx, "dataset to perturb", "shipped name or path", value=ctx.default_dataset,
                                visible=False)
            climit = common.number(value=common.capped(200), label="max rows", visible=False)
        named = common.controls("checklist", {"suite": suite, "uploaded": upload, "sample": sample, "over": over,
                                              "dataset": cds, "limit": climit})
        go = gr.Button("Run suite on both models", variant="primary")
        verdict = gr.Markdown(label="differences beyond chance")
        bars = gr.Plot(elem_classes=["figure"], label="mean fail rate per capability")
        table = gr.Dataframe(headers=["capability", "test", "type", "n", *[f"{n_} fail %" for n_ in names],
                                      "p (McNemar)", "p (Holm)", "expectation", "left out"], wrap=True,
                             column_widths=["8%", "16%", "5%", "4%", *["8%"] * len(names), "9%", "7%", "22%", "13%"],
                             label="fail rate per test")
        # over a dataset's perturbations, a row column first: the dataset's own row
        fails = gr.Dataframe(headers=["model", "test", "inputs", "why"], wrap=True,
                             label="failing examples", show_search="search")
        every = gr.Dataframe(headers=["row", "test", "perturbed", *names], wrap=True, visible=False,
                             label="every perturbed row", show_search="search")
        over.change(lambda o: [gr.update(visible=o == "dataset")] * 3, over, [cds, climit, every], api_name=False,
                    queue=False)
        raw = json_out()
        ctx.link(fails, raw, failure_texts, note_of=failure_note, rows_of=lambda res: views.checklist_views(res)[1])
        common.wire(go, checklist, ctx, named, [raw, verdict, bars, table, fails, every],
                 api_name="checklist", **DATASET)
        stop_button(verdict)
