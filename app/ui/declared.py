"""More: a section for every declared capability that no tab of its own shows (`app.core.declare.capabilities`:
`tokens`,
a plugin's), generated from its declaration: its controls, its gradio_client endpoint (named as the capability,
its parameters as the options) and its answer, as text and, where its result has one, a figure. Nothing here is
written per capability."""
from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from app.core import api
from app.core.present import plots, views

from . import common
from .common import DATASET, SINGLE, Ctx, dataset_field, describe, json_out


def inputs_of(capability) -> tuple[str, ...]:
    """What a section reads besides options: the example above (text, text2), a dataset and its limit, or both
    (`inputs="both"`: the example placed in a dataset; "either": here, the dataset)."""
    return {"text": ("text", "text2"), "both": ("text", "text2", "dataset", "limit")}.get(capability.inputs,
                                                                                          ("dataset", "limit"))


def shown(ctx: Ctx, res, values: dict) -> tuple:
    """A declared capability's answer as a section shows it: the result's JSON, its text (`views.text_of`: the
    result's own where it has one) and its figure (`plots.figure_of`, None where it has none)."""
    return res.to_dict(), f"```\n{views.text_of(res)}\n```", plots.figure_of(res)


def handler(name: str) -> Callable:
    """`handler(ctx, <its inputs>, <its options>)` for the capability `name`, generated like every tab's
    (`common.handler`): the endpoint's parameters are the facade's names, optional where the declaration has a
    default; its answer is the result's JSON, its text (`views.text_of`: the result's own where it has one) and
    its figure (`plots.figure_of`, None where it has none)."""
    capability = api.capabilities.get(name)
    single = capability.inputs == "text"
    return common.handler(name, shown, rest=True, params=inputs_of(capability),
                          where="single" if single else "dataset")


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
                named = {"text": ctx.inputs[0], "text2": ctx.inputs[1]}
                if capability.inputs != "text":
                    with gr.Row():
                        named |= {"dataset": dataset_field(ctx, "dataset", "shipped name or path",
                                                           value=ctx.default_dataset),
                                  "limit": common.number(value=common.capped(1000), label="max examples")}
                named = common.controls(capability.name, named)
                go = gr.Button(f"Run {capability.name}", variant="primary")
                text = gr.Markdown()
                figure = gr.Plot(elem_classes=["figure"], label=f"{capability.name}: figure")
                raw = json_out()
                run = handler(capability.name)
                common.wire(go, run, ctx, named, [raw, text, figure],
                       api_name=capability.name,
                       **(SINGLE if capability.inputs == "text" else DATASET))
