"""Benchmark: both models scored on one labelled dataset, the gap tested."""
from __future__ import annotations

import gradio as gr

from app.core import api
from app.core.present import views
from app.core.present.plots import benchmark_figure, slices_figure

from . import common
from .common import (
    DATASET,
    Ctx,
    action,
    bind,
    dataset_field,
    describe,
    json_out,
    on_select,
    stop_button,
    ticking,
    upload_path,
)
from .declared import shown


def benchmark(ctx: Ctx, dataset: str | None = None, uploaded=None, limit: float | None = None,
              progress=gr.Progress()) -> tuple:
    spec = upload_path(uploaded) or dataset
    with ticking(progress, "predicting") as report:
        res = ctx.heavy.dataset(api.benchmark, ctx.pair, spec, limit, progress=report)
    return (res.to_dict(), views.benchmark_summary(res, ctx.names), benchmark_figure(res),
            views.disagreement_frame(res, ctx.names))


slices = common.handler(
    "slices", lambda ctx, res, values: (res.to_dict(), views.slices_summary(res), slices_figure(res),
                                        views.slices_frame(res)),
    rest=True, params=("dataset", "uploaded", "limit", "metric", "min_size", "clusters"),
    extras={"uploaded": None},
    where="dataset", desc="predicting", read=common.uploaded_or_named)


def _on_the_dataset(capability: str, option: str):
    """The handler of a capability over Benchmark's dataset fields (the named one or a dropped file) and its own
    option, answering as More's generated sections do (`declared.shown`)."""
    return common.handler(capability, shown, rest=True, params=("dataset", "uploaded", "limit", option),
                          extras={"uploaded": None}, where="dataset", desc="predicting",
                          read=common.uploaded_or_named)


confusion = _on_the_dataset("confusion", "facet")
curves = _on_the_dataset("curves", "positive")


def slice_texts(res: dict, row: int) -> list[str] | None:
    shown = res.get("slices") or []
    return shown[row]["examples"][0] if 0 <= row < len(shown) and shown[row]["examples"] else None


def disagreement_texts(res: dict, row: int) -> list[str] | None:
    shown = res["disagreements"]["examples"]
    return shown[row]["texts"] if 0 <= row < len(shown) else None


def disagreement_note(res: dict, row: int) -> str:
    r = res["disagreements"]["examples"][row]
    row = r.get("row", r["index"] + 1)
    return views.picked_note(f"the benchmark's disagreements on {res['dataset']}, row {row}", r["gold"])


def slice_dataset(dataset: str | None, uploaded, res: dict | None, row: int | None) -> tuple[str, str] | None:
    """The picked slice as a dataset: (its name, the spec every dataset field reads it by)."""
    shown = (res or {}).get("slices") or []
    if row is None or not 0 <= row < len(shown) or not shown[row].get("rows"):
        return None
    s = shown[row]
    base = upload_path(uploaded) or dataset or res["dataset"]
    return f"slice «{s['name']}» of {res['dataset']} ({len(s['rows'])} rows)", api.slice_spec(base, s["rows"])


def slice_note(res: dict, row: int) -> str:
    s = res["slices"][row]
    first = f", row {s['rows'][0]}" if s.get("rows") else ""  # the dataset's own row, as every tab numbers it
    return views.picked_note(f"the slice «{s['name']}» of {res['dataset']}", (s.get("gold") or [None])[0],
                             f"its first example{first}")


def tab(ctx: Ctx) -> None:
    with gr.Tab("Benchmark", id="benchmark"):
        describe("Accuracy of both models on the same examples; the p-value (McNemar's exact test) says whether the "
                 "gap is more than chance. The table lists the examples they answer differently.")
        with gr.Row():
            ds = dataset_field(ctx, "labelled dataset", "shipped name or path",
                               value=ctx.default_dataset)
            upload = gr.File(label="or upload csv/tsv/jsonl with labels", file_types=[".csv", ".tsv", ".jsonl"])
            limit = common.number(value=common.capped(1000), label="max examples")
        go = gr.Button("Score both models", variant="primary")
        summary = gr.Markdown(label="summary")
        plot = gr.Plot(elem_classes=["figure"], label="accuracy")
        describe(f"The examples the models answer differently, one model right first (at most "
                 f"{api.DISAGREEMENTS_SHOWN}); pick one to open it in Compare.")
        table = gr.Dataframe(headers=["row", "input", "gold", *ctx.names, "right"], wrap=True, label="disagreements",
                             show_search="search",
                             column_widths=["6%", "52%", "10%", "11%", "11%", "10%"])
        raw = json_out()
        ctx.link(table, raw, disagreement_texts, note_of=disagreement_note,
                 rows_of=lambda res: views.disagreement_frame(res, ctx.names))
        action(go, bind(benchmark, ctx), [ds, upload, limit], [raw, summary, plot, table], api_name="benchmark",
               **DATASET)
        stop_button(summary)

        gr.Markdown("### Where they differ")
        describe("Every word, bigram, length, negation or contrast marker, gold label and cluster of either model's "
                 "embeddings in the dataset above, tested for a paired difference between the models; q is the "
                 "false-discovery rate over all of them, so a slice with q < 0.05 differs beyond chance.")
        with gr.Row():
            declared = common.option("slices", "metric")
            metric = gr.Radio(list(declared.choices), value=declared.default, label="metric")
            min_size = common.number(value=common.option("slices", "min_size").default, label="smallest slice",
                                 precision=0)
            clusters = common.number(value=common.option("slices", "clusters").default,
                                 label="embedding clusters per model (0: none)", precision=0)
        find = gr.Button("Find slices")
        slice_summary = gr.Markdown(label="slices")
        slice_plot = gr.Plot(elem_classes=["figure"], label="slices")
        slice_table = gr.Dataframe(headers=["slice", "size", *ctx.names, "agree", "gap", "q", "beyond chance"],
                                   wrap=True, label="slices", show_search="search",
                                   column_widths=["40%", "8%", "9%", "9%", "8%", "8%", "8%", "10%"])
        slice_raw = json_out()
        ctx.link(slice_table, slice_raw, slice_texts, note_of=slice_note, rows_of=views.slices_frame)
        chosen = gr.State()  # the slice row picked last
        slice_table.select(on_select(lambda ctx_, res, row: row, ctx, views.slices_frame), slice_raw, chosen,
                           api_name=False, queue=False)
        use = gr.Button("Make the picked slice every tab's dataset", size="sm")
        common.use_as_dataset(ctx, use, [ds, upload, slice_raw, chosen], slice_dataset)
        named = common.controls("slices", {"dataset": ds, "uploaded": upload, "limit": limit, "metric": metric,
                                           "min_size": min_size, "clusters": clusters})
        common.wire(find, slices, ctx, named,
                   [slice_raw, slice_summary, slice_plot, slice_table], api_name="slices", **DATASET)
        stop_button(slice_summary)

        gr.Markdown("### How each errs")
        describe("Both models' confusion matrices on the dataset above (gold labels down, predicted across), split by "
                 "length, a marker or whether the two models agree, each part with McNemar's paired test; and both "
                 "models' ROC and precision-recall curves for one class, each area with its interval and the paired "
                 "test of the two (DeLong's for the ROC AUC).")
        with gr.Row():
            declared = common.option("confusion", "facet")
            facet = gr.Radio(list(declared.choices), value=declared.default, label="split by")
            labels = [] if ctx.pair.task.is_regression else list(ctx.pair.heads[0].labels)
            positive = gr.Dropdown([("a two-class task's second label, else the first", ""), *labels], value="",
                                   label="ROC and PR curves for the class (against the rest)",
                                   allow_custom_value=True)  # the core checks it, with the field's name
        with gr.Row():
            go_confusion = gr.Button("Confusion matrices")
            go_curves = gr.Button("ROC and PR curves")
        confusion_summary = gr.Markdown(label="confusion matrices")
        confusion_plot = gr.Plot(elem_classes=["figure"], label="confusion matrices")
        confusion_raw = json_out()
        common.wire(go_confusion, confusion, ctx,
                    common.controls("confusion", {"dataset": ds, "uploaded": upload, "limit": limit, "facet": facet}),
                    [confusion_raw, confusion_summary, confusion_plot], api_name="confusion", **DATASET)
        stop_button(confusion_summary)
        curves_summary = gr.Markdown(label="curves")
        curves_plot = gr.Plot(elem_classes=["figure"], label="ROC and PR curves")
        curves_raw = json_out()
        common.wire(go_curves, curves, ctx,
                    common.controls("curves", {"dataset": ds, "uploaded": upload, "limit": limit,
                                               "positive": positive}),
                    [curves_raw, curves_summary, curves_plot], api_name="curves", **DATASET)
        stop_button(curves_summary)
