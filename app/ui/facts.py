"""Model facts: sizes, layer-to-layer transitions and speed, measured now."""
from __future__ import annotations

import gradio as gr

from app.core import api
from app.core.present import views
from app.core.present.plots import transition_labels

from .common import SINGLE, Ctx, action, bind, describe, json_out, ticking


def steps(ctx: Ctx) -> list[str]:
    return transition_labels(max(m.model.config.num_hidden_layers for m in ctx.pair.models))


def facts(ctx: Ctx, texts: str | None = None, text: str | None = None, text2: str | None = None,
          progress=gr.Progress()) -> tuple:
    """Measured on the inputs typed here, one per line; none: the example above (every tab's) first, then
    shipped examples."""
    lines = [ln for ln in (texts or "").splitlines() if ln.strip()]
    with ticking(progress, "measuring") as report:
        res = ctx.heavy.single(api.facts, ctx.pair, lines or None, text=text, text2=text2, progress=report)
    summary, table, frame = views.facts_views(res, ctx.names, steps(ctx))
    return res.to_dict(), summary, table, frame, frame


def tab(ctx: Ctx) -> None:
    with gr.Tab("Model facts", id="facts"):
        describe("Parameters, speed and how much each layer changes the representation (ALBERT shares one set "
                 "of layer weights; its transitions are smoother in the paper's Fig. 2).")
        texts = gr.Textbox(label="inputs for layer transitions and speed (one per line; empty = the example above, "
                                 "then shipped examples)", lines=3)
        go = gr.Button("Measure", variant="primary")
        summary = gr.Markdown(label="summary")
        table = gr.Dataframe(headers=["fact", *ctx.names], label="facts")
        with gr.Row():
            order = steps(ctx)
            l2 = gr.LinePlot(x="layer", y="l2", color="model", sort=order, label="L2 between layers")
            cosine = gr.LinePlot(x="layer", y="cosine", color="model", sort=order,
                                 label="cosine between layers")
        raw = json_out()
        action(go, bind(facts, ctx), [texts, *ctx.inputs], [raw, summary, table, l2, cosine], api_name="facts",
               **SINGLE)
