"""Counterfactuals: edit the input (or every example of a dataset) and see which model's answer moves."""
from __future__ import annotations

import gradio as gr

from app.core import api
from app.core.present import views
from app.core.present.plots import counterfactual_figure

from . import common
from .common import SINGLE, Ctx, dataset_field, describe, examples, json_out, text_inputs

STUDY_SWAP = "cities -> townships"
# Words of the shipped reviews whose swap should not change a sentiment: the study's probe, where it can apply.
NEUTRAL_SWAPS = "film -> movie, movie -> film, food -> meal, phone -> device, hotel -> motel, pizza -> pasta"


GENERATOR_NAMES = {"your_edit": "your own edit (beside the original)",
                   "word_replacement": "replace words", "wordnet_synonym": "WordNet synonym swaps",
                   "wordnet_antonym": "WordNet antonym swaps", "ablation_flip": "remove words until the label flips",
                   "hotflip": "HotFlip: the one swap that moves the label most",
                   "dataset_flip_rate": "over a dataset: replace words (flip rate)",
                   "dataset_wordnet_synonym": "over a dataset: WordNet synonyms",
                   "dataset_wordnet_antonym": "over a dataset: WordNet antonyms"}


def default_swaps(pair: api.Pair) -> str:
    """The study's swap for sentence pairs (its RTE example A has 'cities'); for single sentences, neutral noun
    swaps that occur in the shipped examples, so Generate works on them as they come."""
    return STUDY_SWAP if pair.task.two_texts else f"{STUDY_SWAP}, {NEUTRAL_SWAPS}"


def _edits_shown(ctx: Ctx, res, values: dict) -> tuple:
    return (res.to_dict(), views.counterfactual_summary(res, ctx.names), counterfactual_figure(res, ctx.names),
            views.changes_frame(res, ctx.names))


# its parameters: what the tab lays out, then every other generator's options (a plugin's), generated
counterfactual = common.handler("counterfactual", _edits_shown,
                                # your own edit's boxes last: a client's positional calls keep their meaning
                                rest=True, params=("text", "text2", "generator", "replacements", "dataset",
                                                   "limit", "edited", "edited2"),
                                desc="editing, scoring, checking")


def edited_texts(res: dict, row: int) -> list[str] | None:
    """A picked row of the changes table: its edited input."""
    changes = views.changes_in_order(res, res["models"])
    return changes[row]["edited"] if 0 <= row < len(changes) else None


def edited_note(res: dict, row: int) -> str:
    c = views.changes_in_order(res, res["models"])[row]
    return views.picked_note(f"{views.generator_name(c['generator'])}: {views.edits_text(c)}", None,
                             f"flips {views.flips(c, res['models'])}")


PINS_SHOWN = 500  # edits a session pins at most (a saved set is held to the server's example cap as well)


def pin(pinned: list | None, res: dict | None) -> tuple:
    """The shown result's edits added to the pinned ones (each edit once), each beside its original."""
    pinned = list(pinned or [])
    if not res or not (res.get("changes") or res.get("examples")):
        raise gr.Error("nothing to pin yet: generate edits first", duration=None, print_exception=False)
    have = {(tuple(c["original"]), tuple(c["edited"])) for c in pinned}
    for c in res.get("changes") or res.get("examples"):
        if (tuple(c["original"]), tuple(c["edited"])) not in have and len(pinned) < PINS_SHOWN:
            have.add((tuple(c["original"]), tuple(c["edited"])))
            pinned.append(c | ({"dataset": res["dataset"]} if res.get("dataset") else {}))
    return pinned, views.pinned_frame(pinned, res["models"]), pinned_summary(pinned)


def pinned_summary(pinned: list) -> str:
    if not pinned:
        return "<small>no edits pinned</small>"
    flipped = sum(any(c["flipped"]) for c in pinned)
    return (f"<small>{len(pinned):,} edit{'s' * (len(pinned) != 1)} pinned; {flipped:,} flip at least one "
            "model's label</small>")


def unpin() -> tuple:
    return [], None, pinned_summary([])


def save_pinned(ctx: Ctx):
    def save(pinned: list | None, name: str, originals: bool, *, key: str | None):
        if not pinned:
            raise api.InputError("edits: nothing pinned yet; generate edits and pin them first")
        # each pin keeps the dataset it was pinned from (`pin`); a typed edit has none
        return api.save_edits(ctx.pair, name, pinned, originals=bool(originals), key=key)

    return save


def _controls(generator: str) -> tuple:
    """The dataset and its limit where the generator edits a dataset, as each generator declares
    (`capabilities.COUNTERFACTUAL_GENERATORS`); its options' boxes follow `common.show_parts`."""
    declared = api.capabilities.COUNTERFACTUAL_GENERATORS.get(generator, api.capabilities.Part())
    return (*[gr.update(visible=declared.edits is not None)] * 2,)


def tab(ctx: Ctx) -> None:
    names = ctx.names
    with gr.Tab("Counterfactuals", id="counterfactuals"):
        describe("Edit the input and see which model's label moves. Δp: the change in the probability of the label "
                 "the model gave the original; over a dataset, the flip rate is the share of edits that change it.")
        c1, c2 = text_inputs(ctx)
        with gr.Row():
            declared = common.option("counterfactual", "generator")
            gen = gr.Dropdown([(GENERATOR_NAMES.get(g, g), g) for g in declared.choices], value=declared.default,
                              label="generator")
            repl = gr.Textbox(label="replacements (old -> new, comma-separated)", value=default_swaps(ctx.pair),
                              lines=2)
        with gr.Row():  # your own edit: the text box holds the original, this box your version of it
            edited = gr.Textbox("", label="your edit (the text above as you'd change it)", lines=2,
                                visible=declared.default == "your_edit")
            edited2 = gr.Textbox("", label="your edit of the second text (empty: unchanged)", lines=2,
                                 visible=declared.default == "your_edit" and ctx.pair.task.two_texts)
        with gr.Row():
            cds = dataset_field(ctx, "dataset for flip rate", "shipped name or path", visible=False,
                                value=ctx.default_dataset)
            climit = common.number(value=common.capped(500), label="max examples", visible=False)
        # every control once, by name; a generator's own options (replacements, a plugin's) shown while it is chosen
        named = common.controls("counterfactual", {"text": c1, "text2": c2, "generator": gen, "edited": edited,
                                                   "edited2": edited2, "replacements": repl, "dataset": cds,
                                                   "limit": climit})
        shown = {k: v for k, v in named.items() if k != "edited2" or ctx.pair.task.two_texts}
        common.show_parts("counterfactual", gen, shown, extra=(_controls, [cds, climit]))
        # the original copied into the edit box when it is empty, so an edit starts from the text
        gen.change(lambda g, t, e: t if g == "your_edit" and not (e or "").strip() else gr.update(), [gen, c1, edited],
                   edited, api_name=False, queue=False)
        go = gr.Button("Generate", variant="primary")
        csum = gr.Markdown(label="summary")
        cplot = gr.Plot(elem_classes=["figure"], label="effect per model")
        ctable = gr.Dataframe(
            headers=["flips", "edited", "edits", "generator",
                     *[f"{n} {c}" for n in names for c in ("before", "after", "Δp")]],
            label="changes", wrap=True, show_search="search", elem_classes=["wide-table"],
            # a label column fits "positive", a Δp column a signed number to 3 significant digits ("-0.000904")
            column_widths=["7%", "23%", "11%", "8%",
                           *[f"{w / len(names):.2f}%" for _ in names for w in (14, 14, 23)]],
        )
        craw = json_out()
        common.wire(go, counterfactual, ctx, named, [craw, csum, cplot, ctable],
                 api_name="counterfactual", **SINGLE)
        ctx.link(ctable, craw, edited_texts, note_of=edited_note,  # an edit picked becomes the example
                 rows_of=lambda res: views.changes_frame(res, ctx.names))
        common.stop_button(csum)
        with gr.Column():
            describe("Pinned edits: each edit kept beside its original with both models' answers, across "
                     "generators and inputs; saved as a dataset, every tab's dataset field reads them.")
            with gr.Row():
                pin_button = gr.Button("Pin these edits")
                unpin_button = gr.Button("Clear the pins")
            pinned = gr.State([])
            pinned_said = gr.Markdown(pinned_summary([]))
            ptable = gr.Dataframe(
                headers=["#", "from", "original", "edited", "edits", "flips",
                         *[f"{n} {c}" for n in names for c in ("before", "after", "Δp")]],
                label="pinned edits", wrap=True, elem_classes=["wide-table"])
            with gr.Row():
                set_name = gr.Textbox(label="name of the saved set", value="my edits", max_lines=1)
                with_originals = gr.Checkbox(value=True, label="keep each original before its edits")
                save_button = gr.Button("Save the pinned edits as a dataset", variant="primary")
        pin_button.click(common.guarded(pin), [pinned, craw], [pinned, ptable, pinned_said], api_name=False,
                         queue=False)
        unpin_button.click(unpin, None, [pinned, ptable, pinned_said], api_name=False, queue=False)
        common.save_as_dataset(ctx, save_button, [pinned, set_name, with_originals], save_pinned(ctx))
        gr.Examples(examples(ctx.pair), [c1, c2] if ctx.pair.task.two_texts else [c1])
