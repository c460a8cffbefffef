"""Compare: both models' answer to one input."""
from __future__ import annotations

import gradio as gr

from app.core import api
from app.core.present import views

from .common import Ctx, action, bind, describe, direct, examples, json_out, text_inputs


def predict(ctx: Ctx, text: str, text2: str | None = None) -> tuple:
    res = api.predict(ctx.pair, text, text2)
    return res.to_dict(), *[views.prob_label(m) for m in res["models"]], views.probability_table(res)


def tab(ctx: Ctx) -> None:
    with gr.Tab("Compare", id="compare"):
        describe("Both models' class probabilities for one input, and how long each took.")
        t1, t2 = text_inputs(ctx)
        go = gr.Button("Predict", variant="primary")
        with gr.Row():
            labels = [gr.Label(label=n, num_top_classes=5) for n in ctx.names]
        info = gr.Markdown(label="probabilities")
        raw = json_out()
        refused = lambda message: (None, *[None] * len(labels), views.refusal(message))  # noqa: E731
        action(go, inputs=[t1, t2], outputs=[raw, *labels, info], api_name="predict",
               **direct(bind(predict, ctx), shown_error=refused))
        ctx.on_pick.append((bind(predict, ctx), [t1, t2], [raw, *labels, info]))  # a pick elsewhere: answered
        gr.Examples(examples(ctx.pair), [t1, t2] if ctx.pair.task.two_texts else [t1])
