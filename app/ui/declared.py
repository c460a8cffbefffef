"""More: a section for every declared capability (`app.core.capabilities`), generated from its declaration: its
controls, its gradio_client endpoint (named as the capability, its parameters as the options) and its answer.
Nothing here is written per capability."""
from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from app.core import api, views

from . import common
from .common import BATCH, SINGLE, Ctx, action, bind, dataset_field, describe, json_out


def handler(name: str) -> Callable:
    """`handler(ctx, <its inputs>, <its options>)` for the capability `name`, generated like every tab's
    (`common.handler`): the endpoint's parameters are the facade's names, optional where the declaration has a
    default; its answer is the result's JSON and its text."""
    capability = api.capabilities.get(name)
    inputs = ("text", "text2") if capability.inputs == "text" else ("dataset", "limit")
    return common.handler(name, lambda ctx, res, values: (res.to_dict(), f"```\n{views.declared_text(res)}\n```"),
                          params=(*inputs, *(o.name for o in capability.options)),
                          where="single" if capability.inputs == "text" else "batch")


def control(option) -> gr.components.Component:
    """The control an option's declaration calls for."""
    label = f"{option.name}: {option.help}"
    if option.choices:
        return gr.Dropdown(list(option.choices), value=option.default, label=label)
    if option.kind is bool:
        return gr.Checkbox(value=option.default, label=label)
    if option.kind in (int, float):
        return common.number(value=option.default, label=label, precision=0 if option.kind is int else None)
    return gr.Textbox(value=option.default, label=label)


def tab(ctx: Ctx, served: set[str]) -> None:
    """The tab, when some declared capability has no tab of its own (`served`: those that have)."""
    rest = [c for c in api.capabilities.declared() if c.name not in served]
    if not rest:
        return
    with gr.Tab("More", id="more"):
        describe("Further probes, each on the example above or on a dataset.")
        for capability in rest:
            with gr.Accordion(capability.name, open=len(rest) == 1):
                describe(capability.help)
                if capability.inputs == "text":
                    sources = list(ctx.inputs)
                else:
                    with gr.Row():
                        sources = [dataset_field(ctx, "dataset", "shipped name or path",
                                                 value=api.default_dataset(ctx.pair)),
                                   common.number(value=None, label="max examples (empty: this server's cap)")]
                with gr.Row():
                    controls = [control(o) for o in capability.options]
                go = gr.Button(f"Run {capability.name}", variant="primary")
                text = gr.Markdown()
                raw = json_out()
                action(go, bind(handler(capability.name), ctx), sources + controls, [raw, text],
                       api_name=capability.name,
                       **(SINGLE if capability.inputs == "text" else BATCH))
