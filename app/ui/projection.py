"""Projection: both models' sentence embeddings in 2-D, aligned, and how far their neighbourhoods agree."""
from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from pathlib import Path

import gradio as gr
import pandas as pd

from app.core import api
from app.core.present import views
from app.core.present.plots import locate_figure, plot_png

from . import common
from .common import (
    DATASET,
    Ctx,
    dataset_field,
    describe,
    json_out,
    on_select_range,
    slider,
    stop_button,
)


def _projection_shown(ctx: Ctx, res, values: dict) -> tuple:
    colour, spec = values["colour"], values["dataset"]  # the dropped file's path where one was dropped
    frame = pd.DataFrame(res["points"])
    out_dir = export_dir()
    frame.to_csv(out_dir / "projection.csv", index=False)
    frame = shown(res["points"])
    plot_png(res["points"], out_dir / "projection.png", colour, title=f"{res['dataset']} ({res['projection']})")
    # sorted by the colour column so the classes get the same colours as in the PNG
    lims = {"x_lim": views.span(frame["x"]), "y_lim": views.span(frame["y"])}  # the same axes in all three
    per_model = [gr.update(value=frame[frame.model == n].sort_values(colour, kind="stable"), color=colour,
                           color_map=None, **lims) for n in ctx.names]
    summary = {k: v for k, v in res.items() if k not in ("points", "texts")}
    return (summary, views.projection_summary(res, ctx.names), *per_model, gr.update(value=frame, color_map=None,
                                                                                    **lims),
            str(out_dir / "projection.csv"), str(out_dir / "projection.png"),
            _state(res, lims, spec))


def _state(projection: dict, lims: dict, spec: str) -> dict:
    """What the tab keeps of a projection for its brush, clicks and "make the picked points every tab's dataset"
    (`spec`: the dataset as its field named it, a dropped file's path where one was dropped)."""
    return {"points": projection["points"], "texts": projection["texts"], "picked": [], "lims": lims,
            "dataset": spec, "name": projection["dataset"]}


YOURS = "★ your sentence"  # the input's mark on the projection, in whatever column colours the points
# the PNG's colours (matplotlib's tab10, which is Vega's category10), in the sorted order both give the classes
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
MARK_COLOUR = "#111111"  # the sentence's mark: no class's colour
MARK_RADIUS = 0.022  # the mark's ring, as a share of each axis's span: a point among 500 the size of a letter


def mark(x: float, y: float, lims: dict, row: dict) -> list[dict]:
    """The sentence's mark as the plots draw it: Gradio's scatter plot gives every point one size and shape, so
    the mark is its point and two rings of points around it (a target the eye finds among 500 points), all in
    the mark's own colour with its own legend entry; `row` their other columns (row 0: a click opens nothing)."""
    import math

    rx, ry = (MARK_RADIUS * (hi - lo) for lo, hi in (lims["x_lim"], lims["y_lim"]))
    rings = [(x + f * rx * math.cos(a), y + f * ry * math.sin(a))
             for f, k in ((1.0, 16), (0.5, 8)) for a in (2 * math.pi * i / k for i in range(k))]
    return [row | {"x": px, "y": py} for px, py in [(x, y), *rings]]


def colour_map(values) -> dict[str, str]:
    """Every category a plot colours by: the classes in the PNG's colours (sorted, as the PNG orders them), the
    sentence's marks in the mark's colour (Gradio needs a colour for every category once it is given one)."""
    names = sorted({str(v) for v in values})
    marks = [v for v in names if v.startswith(YOURS)]
    classes = [v for v in names if v not in marks]
    return {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(classes)} | {m: MARK_COLOUR for m in marks}


NEAREST = "nearest to yours"  # the input's nearest examples, picked on both plots once it is placed
NEAREST_COLOURS = {NEAREST: "#d62728", "the rest": "#c7c7c7"}


def _located_shown(ctx: Ctx, res, values: dict) -> tuple:
    """Where is my sentence: each model's plot with the input at its place (the mean of its neighbours'), marked
    large, and its nearest examples (either model's) picked on both plots, listed as picked points (so that they
    can be made every tab's dataset, as a brush's can); the score distributions; the overlay with the input on
    both clouds. A colour picked afterwards redraws the plots as a projection's."""
    spec = values["dataset"]
    proj = res["projection"]
    frame = shown(proj["points"])
    lims = {"x_lim": views.span(frame["x"]), "y_lim": views.span(frame["y"])}
    near = {nb["index"] for m in res["models"] for nb in m["neighbours"]}
    frame["nearest"] = [NEAREST if i in near else "the rest" for i in frame["index"]]
    text = " / ".join(res["input"])
    per_model, marks = [], []
    for m in res["models"]:
        mine = frame[frame.model == m["model"]].sort_values("nearest", ascending=False, kind="stable")
        blank = {c: "" for c in frame.columns} | {"row": 0, "model": m["model"], "text": text}
        drawn = pd.concat([mine, pd.DataFrame(mark(*m["position"], lims, blank | {"nearest": YOURS}))],
                          ignore_index=True)
        per_model.append(gr.update(value=drawn, color="nearest", color_map=NEAREST_COLOURS | {YOURS: MARK_COLOUR},
                                   **lims))
        marks += mark(*m["position"], lims, blank | {"model": f"{YOURS} ({m['model']})"})
    both = pd.concat([frame, pd.DataFrame(marks)], ignore_index=True)
    overlay = gr.update(value=both, color_map=colour_map(both["model"]), **lims)
    state = _state(proj, lims, spec) | {"picked": sorted(near), "coloured": list(ctx.names)}  # in dataset order
    return (res.to_dict(), views.locate_summary(res), locate_figure(res), views.neighbours_frame(res), *per_model,
            overlay, picked_frame(state, ctx.names), state)


def _neighbour(res: dict, row: int) -> dict | None:
    found = [nb for m in (res or {}).get("models", []) for nb in m["neighbours"]]  # the table's order
    return found[row] if 0 <= row < len(found) else None


def neighbour_texts(res: dict, row: int) -> list[str] | None:
    nb = _neighbour(res, row)
    return None if nb is None else res["projection"]["texts"][nb["index"]]


def neighbour_note(res: dict, row: int) -> str:
    nb = _neighbour(res, row)
    return views.picked_note(f"the examples nearest yours in {res['dataset']}, row {nb['row']}", nb["gold"])


locate = common.handler("locate", _located_shown,
                        rest=True, params=("text", "text2", "dataset", "uploaded", "projection", "pooling", "layer",
                                           "colour", "k", "limit"),
                        extras={"uploaded": None, "colour": "gold"}, where="dataset", desc="placing the example",
                        read=common.uploaded_or_named)


project = common.handler("project", _projection_shown,
                         rest=True, params=("dataset", "uploaded", "projection", "pooling", "layer", "colour",
                                            "limit"),
                         extras={"uploaded": None, "colour": "gold"}, where="dataset", desc="embedding",
                         read=common.uploaded_or_named)


def shown(points: list[dict]) -> pd.DataFrame:
    """The points as the plots draw them: with their row, 1-based as every table numbers rows, which the tooltip
    shows first and a click reads."""
    frame = pd.DataFrame(points)
    row = frame.pop("row") if "row" in frame else frame["index"] + 1  # the dataset's own number (a slice's too)
    frame.insert(0, "row", row)
    return frame


def _row_of(state: dict) -> dict[int, int]:
    """Each point's position (`index`) by its row in the dataset."""
    return {p.get("row", p["index"] + 1): p["index"] for p in state["points"]}


EXPORTS_KEPT = 32  # a request's CSV and PNG stay until this many newer ones exist (Gradio copies them when sent)
_EXPORTS: list[Path] = []
_EXPORTS_LOCK = threading.Lock()


def export_dir() -> Path:
    """A fresh folder for one request's CSV and PNG. Every request used to leave one in /tmp for good (186 after
    a day of test runs here; on a public server, a disk filled by visitors): the oldest go once more than
    `EXPORTS_KEPT` exist, and the rest when the process ends."""
    out = Path(tempfile.mkdtemp(prefix="albert-lens-projection-"))
    with _EXPORTS_LOCK:
        _EXPORTS.append(out)
        while len(_EXPORTS) > EXPORTS_KEPT:
            shutil.rmtree(_EXPORTS.pop(0), ignore_errors=True)
    return out


@atexit.register
def _remove_exports() -> None:
    for d in list(_EXPORTS):
        shutil.rmtree(d, ignore_errors=True)


PICKED, OTHER = "picked", "not picked"


def points_in(ctx: Ctx, state: dict | None, model: str, span) -> tuple:
    """Every point of `model`'s plot whose x lies in the brushed `span` (Gradio's scatter selects an x range), in
    the dataset's order, as a table whose rows open their example; the state remembers which is which. Both
    models' plots then colour the same examples as picked: a range drawn on either highlights them on both."""
    if not state or not isinstance(span, list | tuple) or len(span) != 2:
        return gr.update(), state, *[gr.update() for _ in ctx.names]
    lo, hi = sorted(float(v) for v in span)
    hits = [p for p in state["points"] if p["model"] == model and lo <= p["x"] <= hi]
    chosen = {p["index"] for p in hits}
    frame = shown(state["points"])
    frame["picked"] = [PICKED if i in chosen else OTHER for i in frame["index"]]
    # the other plots colour the same examples as picked; the brushed one keeps its own drawing, and so its
    # brush's rectangle (a new value redraws a plot and dropped it), unless an earlier pick coloured it
    redrawn = [n for n in ctx.names if n != model or n in state.get("coloured", ())]
    plots = [gr.update(value=frame[frame.model == n].sort_values("picked", kind="stable"), color="picked",
                       color_map=None, **state.get("lims", {})) if n in redrawn else gr.update() for n in ctx.names]
    state = state | {"picked": [p["index"] for p in hits], "coloured": redrawn}
    return picked_frame(state, ctx.names), state, *plots


def picked_frame(state: dict, names: list[str]) -> pd.DataFrame:
    """The picked points as the table lists them: the dataset's row, the text, gold and each model's answer."""
    first = {}
    for p in state["points"]:
        first.setdefault(p["index"], p)
    rows = [[p.get("row", p["index"] + 1), views.clip(p["text"]), p["gold"],
             *[p.get(f"{n} prediction", "") for n in names]] for p in (first[i] for i in state.get("picked") or [])]
    return pd.DataFrame(rows, columns=["row", "text", "gold", *[f"{n} prediction" for n in names]])


def picked_texts(state: dict, row: int) -> list[str] | None:
    picked = state.get("picked") or []
    return state["texts"][picked[row]] if 0 <= row < len(picked) else None


def picked_dataset(state: dict | None) -> tuple[str, str] | None:
    """The points a brush picked, as a dataset: (its name, the spec every dataset field reads it by)."""
    if not state or not state.get("picked") or not state.get("dataset"):
        return None
    number = {i: r for r, i in _row_of(state).items()}
    rows = [number[i] for i in state["picked"]]  # the dataset's own numbers: a slice's rows keep theirs
    return f"{len(rows)} points picked on the projection of {state['name']}", api.slice_spec(state["dataset"], rows)


def clicked_index(state: dict | None, value: str | None) -> int | None:
    """The dataset index of the point the page's script says was clicked ("<row>/<click time>", `CLICK_JS`): the
    tooltip's row, 1-based as the tables number rows; None for anything else."""
    if not state or not isinstance(value, str):
        return None
    row = value.split("/")[0].strip()
    if not (row.isascii() and row.isdigit() and len(row) <= 9):
        return None
    return _row_of(state).get(int(row))


def clicked_texts(state: dict, value: str) -> list[str] | None:
    index = clicked_index(state, value)
    return None if index is None else state["texts"][index]


def clicked_note(state: dict, value: str) -> str:
    return _note(state, clicked_index(state, value))


def picked_note(state: dict, row: int) -> str:
    return _note(state, state["picked"][row])


def _note(state: dict, index: int) -> str:
    point = next(p for p in state["points"] if p["index"] == index)
    return views.picked_note(f"the projection, row {point.get('row', index + 1)}", point["gold"])


def tab(ctx: Ctx) -> None:
    pair = ctx.pair
    with gr.Tab("Projection", id="projection"):
        describe("Each model's sentence embeddings in 2-D, the second aligned to the first. Shared k-nearest "
                 "neighbours: the share of each sentence's neighbours the two spaces have in common (1: the same "
                 "neighbourhoods); Procrustes disparity: what is left after aligning the two clouds (0: the same "
                 "shape).")
        with gr.Row():
            first = ctx.default_dataset
            pds = dataset_field(ctx, "dataset", "shipped name, local path or datasets id", value=first)
            upload = gr.File(label="or upload csv/tsv/jsonl", file_types=[".csv", ".tsv", ".jsonl"])
        with gr.Row():
            declared = common.option("project", "projection")
            projected = gr.Radio(list(declared.choices), value=declared.default, label="projection")
            declared = common.option("project", "pooling")
            pooling = gr.Radio([(views.POOLING_NAMES.get(p, p), p) for p in declared.choices], value=declared.default,
                               label="pooling")
            layer = slider(-1, max(m.model.config.num_hidden_layers for m in pair.models), value=-1, step=1,
                              label="layer (-1 = top, 0 = embeddings)")
            colour = gr.Radio([(shown, name) for name, shown in api.ProjectionResult.COLOURS.items()], value="gold",
                              label="colour by")
            limit = common.number(value=common.capped(500), label="max examples")
        named = common.controls("project", {"dataset": pds, "uploaded": upload, "projection": projected,
                                            "pooling": pooling, "layer": layer, "colour": colour, "limit": limit})
        go = gr.Button("Project", variant="primary")
        summary = gr.Markdown(label="summary")
        # the row first: a click on a point reads it from the tooltip (`CLICK_JS`)
        tooltip = ["row", "text", "gold", *[f"{n} prediction" for n in ctx.names]]
        with gr.Row():
            # square (CSS `.square-plot`): a projection's two axes are in the same units, and a wide, flat plot
            # overplotted SST-2 dev's 872 points
            # the name as the chart's own title, not the block's label: Gradio sizes the chart to the whole block,
            # so a label above it pushed the chart's bottom, where its legend is, out of sight
            scatter = [gr.ScatterPlot(x="x", y="y", color="gold", tooltip=tooltip, label=n, show_label=False, title=n,
                                      height=420, min_width=320, elem_classes=["square-plot"]) for n in ctx.names]
        overlay = gr.ScatterPlot(x="x", y="y", color="model", tooltip=["model", "text"], height=420,
                                 label="overlay", show_label=False, title="overlay: the second aligned to the first",
                                 elem_classes=["square-plot"])
        with gr.Row():
            csv_out = gr.File(label="CSV")
            png_out = gr.Image(label="PNG", type="filepath")
        describe("Click a point to make it the example and open it in Compare. Draw a range across either plot: "
                 "its points are coloured as picked on both and listed below, and a row picked there opens in "
                 "Compare too. The overlay shows the second model's cloud aligned to the first's.")
        clicked = gr.Textbox(elem_id="projection-click", elem_classes=["offscreen"], show_label=False,
                             container=False)
        picked = gr.Dataframe(headers=["row", "text", "gold", *[f"{n} prediction" for n in ctx.names]], wrap=True,
                              label="picked points", show_search="search")
        raw = json_out()
        state = gr.State()
        common.wire(go, project, ctx, named,
                 [raw, summary, *scatter, overlay, csv_out, png_out, state], api_name="project", **DATASET)
        for plot, name in zip(scatter, ctx.names):
            plot.select(on_select_range(points_in, ctx, name), state, [picked, state, *scatter], api_name=False,
                        queue=False)
        ctx.link(picked, state, picked_texts, note_of=picked_note, rows_of=lambda st: picked_frame(st, ctx.names))
        ctx.link(clicked, state, clicked_texts, note_of=clicked_note)
        use = gr.Button("Make the picked points every tab's dataset", size="sm")
        common.use_as_dataset(ctx, use, [state], picked_dataset)
        stop_button(summary)
        with gr.Accordion("Where is my sentence?", open=False):
            describe("The example above placed in this dataset's projection (a black target, among its nearest "
                     "examples, which are picked on both plots and listed as the picked points), "
                     "each model's nearest examples to it, and where each model's score for it falls among the "
                     "dataset's.")
            with gr.Row():
                k = common.number(value=common.default("locate", "k"), label="nearest examples per model",
                                  precision=0)
                where = gr.Button("Place the example", variant="secondary")
            placed = gr.Markdown()
            scores = gr.Plot(elem_classes=["figure"], label="scores over the dataset")
            nearest = gr.Dataframe(headers=["model", "row", "cosine", "gold", "says", "text"], wrap=True,
                                   label="nearest examples", show_search="search")
            lraw = json_out("where is my sentence")
            lnamed = common.controls("locate", {**named, "text": ctx.inputs[0], "text2": ctx.inputs[1], "k": k})
            common.wire(where, locate, ctx, lnamed,
                   [lraw, placed, scores, nearest, *scatter, overlay, picked, state], api_name="locate", **DATASET)
            ctx.link(nearest, lraw, neighbour_texts, note_of=neighbour_note, rows_of=views.neighbours_frame)
