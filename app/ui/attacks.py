"""Attacks: a TextAttack recipe on both models, and whether one model's adversarial examples fool the other."""
from __future__ import annotations

import gradio as gr

from app.core import api
from app.core.present import views
from app.core.present.plots import grouped_bars

from . import common
from .common import (
    DATASET,
    Ctx,
    dataset_field,
    describe,
    json_out,
    on_select,
    option,
    shipped,
    stop_session,
    text_inputs,
)

NO_DATASET = "none: attack the text above"


def _attack_shown(ctx: Ctx, res, values: dict) -> tuple:
    summary, panels, table, bars = views.attack_views(res, ctx.names, list(ctx.pair.task.labels or []))
    return (res.to_dict(), summary, *panels, table, grouped_bars(bars, "model", "value", "measure", "rate",
                                                                  ylim=(0, 1)))


attack = common.handler("attack", _attack_shown, rest=True, params=("text", "text2", "recipe", "label", "dataset",
                                                                    "n", "query_budget", "time_limit"),
                        where="dataset", desc="attacking", read=lambda values: {"dataset": values["dataset"] or None})


def show_example(ctx: Ctx, res: dict | None, row: int | None) -> list[str]:
    """A row of the table picked: that example's panels (the table has a row per example and model)."""
    if not res or not res.get("examples") or row is None:
        return [""] * len(ctx.names)
    _, panels, _, _ = views.attack_views(res, ctx.names, list(ctx.pair.task.labels or []),
                                         shown=int(row) // len(ctx.names))
    return panels


def attacked_texts(res: dict, row: int) -> list[str] | None:
    """The picked row's adversarial text (its original where the attack did not succeed)."""
    rows = [r for e in res["examples"] for r in e["results"]]
    if not 0 <= row < len(rows):
        return None
    return rows[row]["adversarial"] or res["examples"][row // len(res["examples"][0]["results"])]["texts"]


def attacked_note(res: dict, row: int) -> str:
    per = len(res["examples"][0]["results"])
    example, r = res["examples"][row // per], res["examples"][row // per]["results"][row % per]
    what = "its adversarial text" if r.get("adversarial") else "the original (no adversarial text)"
    return views.picked_note(f"{res['recipe']} on {r['model']}", example.get("gold"), what)


def attack_examples(pair: api.Pair) -> list[list]:
    """Texts with their gold label (an attack needs one); a label the task doesn't have (RTE's on a 3-way NLI
    pair) is left for the user to choose."""
    labels = list(pair.task.labels or [])
    return [[*e.texts, e.label if e.label in labels else None] for e in shipped(pair)]


def tab(ctx: Ctx) -> None:
    pair = ctx.pair
    choices = [(f"{r['name']} ({'offline' if r['offline'] else 'needs downloads'}"
                f"{'' if r['available'] else ', unavailable here'})", r["name"]) for r in api.list_recipes()]
    with gr.Tab("Attacks", id="attacks"):
        describe("A TextAttack recipe perturbs the input until a model leaves its gold label. Success rate: the "
                 "share of attacked examples it fooled; transfer: the share of one model's adversarial examples "
                 "that also fool the other.")
        a1, a2 = text_inputs(ctx)  # the shared example
        with gr.Row():
            recipe = gr.Dropdown(choices, value="deepwordbug", label="recipe")
            gold = gr.Dropdown(list(pair.task.labels or []), label="gold label of the input")
            # a "none" choice, or a hosted dropdown (no typing) could never go back to attacking the text
            ads = dataset_field(ctx, "or a dataset", "shipped name or path", value="", extra=[(NO_DATASET, "")])
        with gr.Row():
            n = common.number(value=option("attack", "n").default, label="examples from the dataset")
            budget = common.number(value=option("attack", "query_budget").default, label="query budget")
            tlimit = common.number(value=option("attack", "time_limit").default, label="seconds per example and model")
        with gr.Row():
            go = gr.Button("Attack both models", variant="primary")
            stop = gr.Button("Stop")
        summary = gr.Markdown(label="summary")
        describe("Pick a row of the table to see that example's words here; its text becomes the shared example.")
        with gr.Row():
            diffs = [gr.HTML(label=n_) for n_ in ctx.names]
        def rows_of(res: dict):  # the table as sent
            return views.attack_views(res, ctx.names, list(ctx.pair.task.labels or []))[2]

        table = gr.Dataframe(headers=["row", "model", "outcome", "adversarial", "queries", "perturbed %", "seconds"],
                             label="per example and model", wrap=True, show_search="search")
        plot = gr.Plot(elem_classes=["figure"], label="success and transfer rates")
        raw = json_out()
        named = common.controls("attack", {"text": a1, "text2": a2, "recipe": recipe, "label": gold, "dataset": ads,
                                           "n": n, "query_budget": budget, "time_limit": tlimit})
        common.wire(go, attack, ctx, named,
                 [raw, summary, *diffs, table, plot], api_name="attack", **DATASET)
        table.select(on_select(show_example, ctx, rows_of), raw, diffs, api_name=False, queue=False)
        # the panels above show it; the other tabs get it
        ctx.link(table, raw, attacked_texts, switch=False, note_of=attacked_note, rows_of=rows_of)
        gr.Examples(attack_examples(pair), [a1, a2, gold] if pair.task.two_texts else [a1, gold])
        stop.click(stop_session, None, summary, api_name="attack_stop", queue=False)
