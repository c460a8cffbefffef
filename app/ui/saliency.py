"""Saliency: which words each model's answer rests on, for one input or over a dataset."""
from __future__ import annotations

import gradio as gr

from app.core import api
from app.core.present import views
from app.core.present.plots import saliency_dataset_figure, saliency_figure

from . import common
from .common import DATASET, SINGLE, Ctx, bind, dataset_field, describe, examples, json_out

SCALES = {"each model's own largest score": False, "one for both models": True}  # label: shared


def _maps_shown(ctx: Ctx, res, values: dict) -> tuple:
    texts = [values["text"]] + ([values["text2"]] if ctx.pair.task.two_texts else [])
    maps = [views.highlight(m, texts, signed=res["signed"] is not False) for m in res["maps"]]
    figure = saliency_figure(res)
    return res.to_dict(), *maps, views.saliency_summary(res), figure, views.largest_bars(figure.largest)


def drawn(ctx: Ctx, res: dict | None, text: str, text2: str | None, scale: str) -> tuple:
    """The highlights and the chart of the result on the page drawn again on `scale` (`SCALES`): each model's
    own largest score drawn full, or one scale for both, where a model whose scores are all small looks pale
    (its own scale made ALBERT's near-uniform map as deep as BERT's). No model runs."""
    if not res or not res.get("maps"):
        return (gr.update(),) * (len(ctx.names) + 2)
    shared = SCALES.get(scale, False)
    texts = [text or ""] + ([text2 or ""] if ctx.pair.task.two_texts else [])
    m = res["maps"][0]
    if m.get("spans") and any(f >= len(texts) or texts[f][a:b] != w
                              for w, f, (a, b) in zip(m["words"], m["fields"], m["spans"])):
        return (*[gr.update()] * (len(ctx.names) + 1),
                "<small>the sentence changed since these maps were made: press Explain to draw it on this "
                "scale</small>")
    top = views.largest_score(res["maps"]) if shared else None
    maps = [views.highlight(m, texts, signed=res.get("signed") is not False, top=top) for m in res["maps"]]
    figure = saliency_figure(res, shared=shared)
    return *maps, figure, views.largest_bars(figure.largest)


# each handler's parameters: the inputs and options the tab lays out, then every other declared option (a plugin
# method's own), which the tab generates controls for (`common.controls`)
saliency = common.handler("saliency", _maps_shown, desc="explaining on both models",
                          rest=True, params=("text", "text2", "method", "target", "tolerance", "output"))
saliency_methods = common.handler(
    "saliency_methods", lambda ctx, res, values: (res.to_dict(), views.methods_table(res)),
    rest=True, params=("text", "text2", "target", "tolerance", "output"),
    desc="every method on both models")


def headers(res: dict | None) -> list:
    """Each panel's title names the class its map explains (after the result, so the API's outputs stay values)."""
    maps = (res or {}).get("maps") or []
    return [gr.update(label=views.map_header(m)) for m in maps]


def _dataset_shown(ctx: Ctx, res, values: dict) -> tuple:
    return (res.to_dict(), views.cut_line(res) + views.saliency_dataset_summary(res), saliency_dataset_figure(res),
            views.lowest_agreement_frame(res))


saliency_dataset = common.handler("saliency", _dataset_shown,
                                  rest=True, params=("dataset", "method", "tolerance", "limit", "output"),
                                  where="dataset", desc="explaining", endpoint="saliency_dataset")


def tab(ctx: Ctx) -> None:
    pair = ctx.pair
    with gr.Tab("Saliency", id="saliency"):
        describe("Which words each model's answer rests on, both explaining the same class. Comprehensiveness: how "
                 "much the class's probability drops without the top words (higher: the map found what mattered); "
                 "sufficiency: the drop with only them kept (lower is better).")
        s1, s2 = common.text_inputs(ctx)
        with gr.Row():
            declared = common.option("saliency", "method")
            method = gr.Dropdown([(views.method_label(m), m) for m in sorted(declared.choices)],
                                 value=declared.default, label="method")
            target = gr.Dropdown(["predicted", ("each model's own", "own"), *(pair.task.labels or [])],
                                 value="predicted", label="explain class (predicted: the first model's)")
            tolerance = gr.Dropdown([f"{t:.0e}" for t in api.IG_TOLERANCES if t >= api.limits()["min_ig_tolerance"]],
                                    value=f"{common.option('saliency', 'tolerance').default:.0e}",
                                    label="integrated gradients: delta tolerance")
            # a confident prediction's probability is flat: gradients of the logit still show the evidence
            declared = common.option("saliency", "output")
            output = gr.Radio([(views.OUTPUT_NAMES.get(o, o), o) for o in declared.choices], value=declared.default,
                              label="explain the class's", visible=not pair.task.is_regression)
        # every control once, by name; a method's own options (tolerance, a plugin's) shown while it is chosen
        named = common.controls("saliency", {"text": s1, "text2": s2, "method": method, "target": target,
                                             "tolerance": tolerance, "output": output})
        common.show_parts("saliency", method, named)
        with gr.Row():
            go = gr.Button("Explain", variant="primary")
            every = gr.Button("All methods side by side")
        with gr.Row():
            # signed scores in red and purple; an unsigned method's levels (views.highlight) in one colour
            maps = [gr.HighlightedText(label=n, combine_adjacent=False, show_legend=False,
                                       color_map=views.SENSITIVITY_COLOURS, show_inline_category=False)
                    for n in ctx.names]
        scale = gr.Radio(list(SCALES), value=next(iter(SCALES)), label="colour scale")
        gr.Markdown("<small>red: the word supports the explained class · purple: it speaks against it · shade: "
                    "share of the largest |score| on the scale above · amber (gradient norm and other methods "
                    "without a sign): how much the answer moves with the word, darker = more</small>")
        summary = gr.Markdown(label="summary")
        bars = gr.Plot(elem_classes=["figure", "wide-figure"], label="per-word scores")
        largest = gr.Markdown(elem_id="largest-bars")
        table = gr.HTML()  # all methods side by side
        raw = json_out()
        mraw = json_out("all methods")
        common.wire(go, saliency, ctx, named,
               [raw, *maps, summary, bars, largest], api_name="saliency", **SINGLE).success(
            headers, raw, maps, api_name=False, queue=False).then(
            lambda *v: drawn(ctx, *v) if SCALES.get(v[-1]) else (gr.update(),) * (len(maps) + 2),
            [raw, s1, s2, scale], [*maps, bars, largest], api_name=False, queue=False, show_progress="hidden")
        # a redraw of what the page holds: no timer over the outputs (it stood in "largest bar" for a moment)
        scale.change(bind(drawn, ctx), [raw, s1, s2, scale], [*maps, bars, largest], api_name=False, queue=False,
                     show_progress="hidden")
        common.wire(every, saliency_methods, ctx, named, [mraw, table],
                    api_name="saliency_methods", **SINGLE)
        gr.Examples(examples(pair), [s1, s2] if pair.task.two_texts else [s1])

        with gr.Accordion("Over a dataset: faithfulness against a random ranking, and agreement", open=False):
            with gr.Row():
                sds = dataset_field(ctx, "dataset", "shipped name or path", value=ctx.default_dataset)
                slimit = common.number(value=common.capped(50, "max_saliency_examples"),
                                       label="max examples (each is explained by both models)")
            sgo = gr.Button("Explain the dataset with this method")
            ssum = gr.Markdown(label="summary")
            splot = gr.Plot(elem_classes=["figure"], label="faithfulness and agreement")
            stable = gr.Dataframe(headers=["row", "input", "explained class", "agreement",
                                           *[f"{n} top words" for n in ctx.names]], wrap=True,
                                  label="lowest agreement")
            sdraw = json_out("dataset result")
            common.wire(sgo, saliency_dataset, ctx, {**named, "dataset": sds, "limit": slimit},
                        [sdraw, ssum, splot, stable], api_name="saliency_dataset", **DATASET)
            common.stop_button(ssum)
