"""Inside: where the two models' representations agree layer by layer (CKA), and what their heads look at."""
from __future__ import annotations

import html

import gradio as gr

from app.core.present import views
from app.core.present.plots import attention_figure, similarity_figure

from . import common
from .common import (
    DATASET,
    SINGLE,
    Ctx,
    dataset_field,
    describe,
    json_out,
    option,
    slider,
    stop_button,
    text_inputs,
)

CKA_HELP = ("Linear CKA (Kornblith et al., 2019) compares two layers' sentence vectors over the same examples: 1 "
            "means the same geometry up to rotation and scale. Left: every layer of one model against every layer "
            "of the other (circles: the best match); right: each model against itself (layer 0: the embeddings).")


def _similarity_shown(ctx: Ctx, res, values: dict) -> tuple:
    return res.to_dict(), similarity_summary(res), similarity_figure(res)


similarity = common.handler("similarity", _similarity_shown, where="dataset", desc="layer embeddings",
                            rest=True, params=("dataset", "limit", "pooling"))


def similarity_summary(res: dict) -> str:
    a, b = res["models"]
    cross = res["cross"]["cka"]
    best = [f"{i}→{j} ({cross[i][j]:.2f})" for i, j in enumerate(res["best_b_for_a"]) if j is not None]
    return (f"**{html.escape(res['dataset'])}**, {html.escape(views.similarity_basis(res))} · for each "
            f"{html.escape(a)} layer, the "
            f"{html.escape(b)} layer most like it (CKA): {', '.join(best)}")


attention = common.handler("attention", lambda ctx, res, values: (res.to_dict(), attention_figure(res)),
                           rest=True, params=("text", "text2", "layer", "head"),
                           desc="attention of both models")


def tab(ctx: Ctx) -> None:
    pair = ctx.pair
    heads = max(m.model.config.num_attention_heads for m in pair.models)
    layers = max(m.model.config.num_hidden_layers for m in pair.models)
    with gr.Tab("Inside", id="inside"):
        describe(CKA_HELP)
        with gr.Row():
            ds = dataset_field(ctx, "dataset for CKA", "shipped name or path",
                               value=ctx.default_dataset)
            limit = common.number(value=common.capped(500), label="max examples")
            declared = option("similarity", "pooling")
            pooling = gr.Radio([(views.POOLING_NAMES.get(p, p), p) for p in declared.choices], value=declared.default,
                               label="pooling",
                               info="a vector per sentence, or per word (the two tokenizers compare word for word)")
        named = common.controls("similarity", {"dataset": ds, "limit": limit, "pooling": pooling})
        go = gr.Button("Compare the layers", variant="primary")
        summary = gr.Markdown(label="summary")
        plot = gr.Plot(elem_classes=["figure"], label="CKA")
        raw = json_out("similarity")
        common.wire(go, similarity, ctx, named, [raw, summary, plot],
               api_name="similarity", **DATASET)
        stop_button(summary)

        describe("Attention of both models on one input at one layer, word to word (rows attend to columns; a "
                 "word split into pieces is one row and one column, so the two tokenizers compare).")
        t1, t2 = text_inputs(ctx)
        with gr.Row():
            layer = slider(-1, layers, value=-1, step=1, label="layer (-1 = top)")
            head = gr.Dropdown(["mean", *[str(h) for h in range(heads)]], value="mean", label="head")
        anamed = common.controls("attention", {"text": t1, "text2": t2, "layer": layer, "head": head})
        show = gr.Button("Show attention")
        aplot = gr.Plot(elem_classes=["figure"], label="attention")
        araw = json_out("attention")
        common.wire(show, attention, ctx, anamed, [araw, aplot], api_name="attention",
               **SINGLE)
