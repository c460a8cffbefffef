"""The app's handlers as plain functions, no server: each tab's handler against the facade it calls, and the
wiring Gradio reads from them (optional inputs, names)."""
import inspect
import json

import gradio as gr
import pandas as pd
import pytest

from app.core import api
from app.core.ground.errors import LensError
from app.core.present import views
from app.ui import attacks, benchmark, checklist, common, compare, counterfactuals, facts, projection, saliency
from app.ui.common import Ctx, bind

DISAGREE = "The cities were beautiful but the hotel was dreadful."  # offline BERT: negative, ALBERT: positive


@pytest.fixture(scope="module")
def ctx(tiny_pair):
    return Ctx.of(tiny_pair)


def test_predict_shows_the_facades_answer(ctx, tiny_pair):
    res, label_a, label_b, latency = compare.predict(ctx, "a fine film")
    direct = api.predict(tiny_pair, "a fine film").to_dict()
    assert res["input"] == direct["input"] == ["a fine film"]
    for shown, m, d in zip([label_a, label_b], res["models"], direct["models"]):
        assert shown == m["probabilities"] and m["probabilities"] == pytest.approx(d["probabilities"], abs=1e-6)
    assert latency.count(" ms") == 2
    lines = latency.splitlines()  # the classes in the task's order for both models, the predicted one marked
    assert [ln.split(" | ")[0] for ln in lines[2:-1]] == [f"| {lab}" for lab in tiny_pair.task.labels]
    assert latency.count("◀") == 2
    json.dumps(res)  # the JSON output is JSON


def test_saliency_panels_explain_one_class_and_say_which(offline_pair):
    """The two offline models disagree on this input: both panels still explain the first model's class, and
    each panel's title names it; the agreement is on that class."""
    ctx = Ctx.of(offline_pair)
    preds = [m["label"] for m in api.predict(offline_pair, DISAGREE)["models"]]
    assert preds[0] != preds[1]  # the case in question
    res, map_a, map_b, summary, _, largest = saliency.saliency(ctx, DISAGREE, None, "gradient_x_input")
    assert [m["target_label"] for m in res["maps"]] == [preds[0]] * 2 == [res["agreement_label"]] * 2
    titles = [u["label"] for u in saliency.headers(res)]
    assert titles == [f"{n} · explains {preds[0]}" for n in ctx.names]
    asked = api.saliency(offline_pair, DISAGREE, method="gradient_x_input", target=preds[0])
    assert res["maps"][1]["scores"] == pytest.approx(asked["maps"][1]["scores"], abs=1e-6)
    assert [w for w, _ in map_a if w.strip()] == res["maps"][0]["words"]
    assert summary.count(f"*{preds[0]}*") >= 2
    # the chart's largest bar and the highlight's deepest word are one word per model
    for name, shown in zip(ctx.names, (map_a, map_b)):
        deepest = max((s for s in shown if s[1] is not None), key=lambda s: abs(s[1]))[0]
        assert f"**{name}** {deepest}" in largest, (largest, deepest)


def test_an_unsigned_method_is_highlighted_in_one_colours_shades(ctx):
    """Gradient norm has no sign: its highlight gives each word a level of the largest score, drawn in one
    colour's shades (every word was red, "supports the explained class", beside a chart saying "no sign"); a
    signed method keeps its scores in [-1, 1]."""
    res, map_a, map_b, *_ = saliency.saliency(ctx, "a fine film with a dull end", None, "gradient_norm")
    assert res["signed"] is False
    for m, shown in zip(res["maps"], (map_a, map_b)):
        levels = [lab for _, lab in shown if lab is not None]
        assert levels and all(lab in views.SENSITIVITY_COLOURS for lab in levels)
        top = max(m["scores"])
        want = [f"sensitivity {min(5, 1 + int(5 * s / top))}" for s in m["scores"]]
        assert levels == want and "sensitivity 5" in levels
    res, map_a, *_ = saliency.saliency(ctx, "a fine film with a dull end", None, "gradient_x_input")
    assert all(isinstance(v, float) and -1 <= v <= 1 for _, v in map_a if v is not None)


def test_saliency_asked_for_another_class_explains_it_in_both(offline_pair):
    ctx = Ctx.of(offline_pair)
    res, *_ = saliency.saliency(ctx, DISAGREE, None, "occlusion", "positive")
    assert [m["target_label"] for m in res["maps"]] == ["positive", "positive"]


def test_counterfactual_controls_follow_the_generator():
    """Replacements only for word replacement; the dataset and its limit only for the dataset_* generators."""
    shown = {g: [*common.parts_read("counterfactual", g, ["replacements"]),
                 *(u["visible"] for u in counterfactuals._controls(g))] for g in api.GENERATORS}
    declared = api.capabilities.COUNTERFACTUAL_GENERATORS
    assert shown == {g: [declared[g].reads("replacements"), g.startswith("dataset_"), g.startswith("dataset_")]
                     for g in api.GENERATORS}
    assert shown["word_replacement"] == [True, False, False]
    assert shown["wordnet_synonym"] == [False, False, False]
    assert shown["dataset_flip_rate"] == [True, True, True]
    assert shown["dataset_wordnet_antonym"] == [False, True, True]


def test_counterfactual_handler_tables_each_edit(ctx):
    res, summary, _, table = counterfactuals.counterfactual(ctx, "the cities were lovely", None, "word_replacement",
                                                      "cities -> townships")
    assert list(res["changes"][0]["edited"]) == ["the townships were lovely"]
    assert list(table["edited"]) == ["the «townships» were lovely"] and "1 edit(s)" in summary


def test_benchmark_handler_scores_a_named_dataset(ctx, tiny_pair):
    res, summary, _, table = benchmark.benchmark(ctx, "sentiment_plain", None, 12)
    direct = api.benchmark(tiny_pair, "sentiment_plain", 12)
    assert res["n"] == 12 and res["comparison"]["p_value"] == pytest.approx(direct["comparison"]["p_value"])
    assert "12 labelled examples" in summary
    assert len(table) == min(direct["disagreements"]["total"], api.DISAGREEMENTS_SHOWN)


def test_checklist_handler_without_a_suite_names_the_field(ctx):
    with pytest.raises(LensError, match="suite: give the path"):
        checklist.checklist(ctx, None, None, 5)


def test_checklist_views_have_a_row_per_test_and_model_columns():
    res = {"tests": [{"capability": "Vocabulary", "name": "t1", "type": "MFT", "expectation": "positive",
                      "paired": {"p_value": 0.5, "p_holm": 1.0},
                      "results": [{"model": "A", "n": 4, "fail_rate": 0.25,
                                   "examples": [{"inputs": [["bad"]], "detail": "said positive"}]},
                                  {"model": "B", "n": 4, "fail_rate": None, "examples": []}]}],
           "capabilities": {"Vocabulary": {"A": 0.25, "B": None}}}
    table, fails, bars = views.checklist_views(res)
    assert table.loc[0, "A fail %"] == 25.0 and pd.isna(table.loc[0, "B fail %"])
    assert list(fails["inputs"]) == ["bad"] and bars[1] == {"capability": "Vocabulary", "model": "B",
                                                             "fail rate": 0.0}


def test_facts_handler_tables_every_fact_per_model(ctx, tiny_pair, monkeypatch):
    res, summary, table, frame, again = facts.facts(ctx, "a fine film\n\nan awful film")
    assert res["n_inputs"] == 2 and list(table.columns) == ["fact", *ctx.names]
    layers = [m.model.config.num_hidden_layers for m in tiny_pair.models]
    assert len(frame) == sum(layers) and frame is again
    assert "parameters" in summary and "the example above" not in summary
    # nothing typed here: the shared example (every tab's) first, then shipped examples
    from app.core.execution import engine as engine_module

    seen, real_run = [], engine_module.Engine.run
    monkeypatch.setattr(engine_module.Engine, "run", lambda self, pair, job, exs, **kw: seen.append(
        [e.texts for e in exs]) or real_run(self, pair, job, exs, **kw))
    res, summary, *_ = facts.facts(ctx, "", "my own sentence", None)
    shipped = api.resolve_dataset(tiny_pair, None, api.FACTS_SHIPPED - 1, visitor=False).examples
    assert seen[-1] == [("my own sentence",), *(e.texts for e in shipped)]
    assert res["n_inputs"] == 1 + len(shipped) and "the example above, then shipped examples" in summary


def test_projection_handler_writes_what_it_shows(ctx):
    summary, text, a, b, overlay, csv, png, state = projection.project(ctx, "sentiment_plain", None, "pca", "cls",
                                                                       -1, "gold", 12)
    assert "points" not in summary and summary["n"] == 12
    written = pd.read_csv(csv)
    assert len(written) == 24 and set(written["model"]) == set(ctx.names)
    assert len(a["value"]) == len(b["value"]) == 12 and a["x_lim"] == overlay["x_lim"]
    assert png.endswith(".png") and "Procrustes" in text
    assert len(state["texts"]) == 12 and "texts" not in summary  # the examples, kept server-side for picking


def test_attack_examples_keep_only_labels_the_task_has(tiny_nli_pair):
    rows = attacks.attack_examples(tiny_nli_pair)
    assert rows and all(r[-1] in (*tiny_nli_pair.task.labels, None) for r in rows)


def test_bound_handlers_show_gradio_the_inputs_without_ctx(ctx):
    """Gradio reads the handler's signature: `ctx` hidden, a default of None making a gradio_client input
    optional, and the names callers use by keyword (the README's attack call) unchanged."""
    handler = bind(attacks.attack, ctx)
    params = inspect.signature(handler).parameters
    assert list(params)[:8] == ["text", "text2", "recipe", "label", "dataset", "n",
                                "query_budget", "time_limit"]
    assert params["text2"].default is None and params["dataset"].default is None
    assert handler.__name__ == "do_attack"  # the job and its error messages are named as the endpoint
    for tab in (compare.predict, saliency.saliency, counterfactuals.counterfactual):
        assert inspect.signature(bind(tab, ctx)).parameters["text2"].default is None
    assert inspect.signature(bind(benchmark.benchmark, ctx)).parameters["uploaded"].default is None


def _attacked(outcome_a: str, outcome_b: str) -> dict:
    def result(model, outcome):
        r = {"model": model, "outcome": outcome, "queries": 12, "seconds": 0.5, "adversarial": None, "marked": None,
             "perturbed_words_pct": None, "original_label": "positive", "original_confidence": 0.97}
        if outcome == "success":
            r |= {"adversarial": ["a grate film"], "marked": [["a ", False], ["grate", True], [" film", False]],
                  "marked_original": [["a ", False], ["great", True], [" film", False]], "swaps": [["great", "grate"]],
                  "adversarial_label": "negative", "adversarial_confidence": 0.61, "perturbed_words_pct": 33.3}
        else:
            r["why"] = "query budget of 12 spent"
        return r

    return {"examples": [{"index": 0, "texts": ["a great film"], "gold": "positive",
                          "results": [result("A", outcome_a), result("B", outcome_b)],
                          "transfer": [{"from": "A", "to": "B", "label_before": "positive",
                                        "label_after": "positive", "other_was_correct": True, "fooled": False}]}],
            "summary": {m: {"success_rate": None, "transfer_rate": None, "attacked": 1, "skipped": 0,
                            "avg_queries": 12} for m in "AB"}, "comparison": None}


def test_attack_panel_shows_the_labels_before_and_after_and_why_an_attack_failed():
    """As TextAttack's demo: the label and confidence moved between, the changed words of the original in the
    original label's colour and their replacements in the new one's, the transfer; a failure says why."""
    res = _attacked("success", "failed")
    _, (won, lost), table, _ = views.attack_views(res, ["A", "B"], ["negative", "positive"])
    assert "positive (97%) → <b>negative</b> (61%)" in won and "great → grate" in won
    assert f'background:{views.LABEL_TINTS[1]};padding:0 2px;border-radius:3px">great</mark>' in won
    assert f'background:{views.LABEL_TINTS[0]};padding:0 2px;border-radius:3px">grate</mark>' in won
    assert "does not fool B (positive → positive)" in won
    assert "<b>failed</b>: query budget of 12 spent" in lost
    assert list(table["outcome"]) == ["positive → negative", "failed: query budget of 12 spent"]


def test_picking_an_attack_row_shows_that_examples_panels(ctx):
    res = _attacked("success", "failed")
    res["examples"].append(_attacked("failed", "failed")["examples"][0] | {"index": 1})
    first = attacks.show_example(ctx, res, 1)  # the first example's second model
    second = attacks.show_example(ctx, res, 2)
    assert "grate" in first[0] and "grate" not in second[0] and "failed" in second[0]
    assert attacks.show_example(ctx, None, 0) == ["", ""]


def test_every_method_side_by_side_explains_one_class_with_its_faithfulness(offline_pair):
    """ferret's table: each method's maps equal that method asked alone for the same class, each row coloured
    by its own scale, and the faithfulness beside it."""
    ctx = Ctx.of(offline_pair)
    res, table = saliency.saliency_methods(ctx, DISAGREE)
    assert sorted({r["method"] for r in res["rows"]}) == sorted(api.METHODS) and len(res["rows"]) == 10
    label = api.predict(offline_pair, DISAGREE)["models"][0]["label"]
    assert res["target_label"] == label and f"Every map explains <b>{label}</b>" in table
    alone = api.saliency(offline_pair, DISAGREE, method="occlusion", target=label)
    rows = [r for r in res["rows"] if r["method"] == "occlusion"]
    for r, m, f in zip(rows, alone["maps"], alone["faithfulness"]):
        assert r["scores"] == pytest.approx(m["scores"], abs=1e-6)
        assert r["comprehensiveness"] == pytest.approx(f["comprehensiveness"], abs=1e-6)
    # words are rows, one table per model, a column per method: it fits a page's width, and a phone's
    words = len(res["words"])
    assert table.count("<table") == 2 and table.count("<tr>") == 2 * (1 + words + 2)  # head, words, faithfulness
    for model in ctx.names:
        part = table.split(f"<b>{model}</b>")[1].split("</table>")[0]
        tops = part.count(">+1.00<") + part.count(">-1.00<") + part.count(">1.00<")
        assert part.count("<th>") == 1 + 5 and tops >= 5  # each column's top
        # gradient norm has no sign: its column in amber, unsigned (it was red, "supports", like the highlight)
        assert part.count("rgba(217,119,6") == words and part.count(">1.00<") >= 1
    assert "agreement (rank correlation) under each method" in table


def test_a_picked_row_loads_its_example_into_every_tab_and_opens_compare(ctx):
    """Linked views: the benchmark's disagreements, CheckList failures, attack rows and projection points each
    name the example a row shows; loading it fills every tab's (text, text2) boxes and selects Compare."""
    from app.ui.common import load_texts

    bench = {"disagreements": {"examples": [{"texts": ["first"]}, {"texts": ["second", "pair"]}]}}
    assert benchmark.disagreement_texts(bench, 1) == ["second", "pair"]
    assert benchmark.disagreement_texts(bench, 2) is None
    suite = {"tests": [{"name": "t", "results": [
        {"model": "A", "examples": [{"inputs": [["x1"], ["x2"]], "detail": "d"}, {"inputs": [["y"]], "detail": ""}]},
        {"model": "B", "examples": [{"inputs": [["z"]], "detail": "d"}]}]}]}
    assert [checklist.failure_texts(suite, k) for k in range(4)] == [["x1"], ["y"], ["z"], None]
    attacked = _attacked("success", "failed")
    assert attacks.attacked_texts(attacked, 0) == ["a grate film"]  # the adversarial text
    assert attacks.attacked_texts(attacked, 1) == ["a great film"]  # no adversarial: the original
    out = load_texts(["premise", "hypothesis"], 6, switch=True, note="from somewhere")
    assert out[:6] == ["premise", "hypothesis"] * 3 and out[6].selected == "compare" and out[7] == "from somewhere"
    assert load_texts(["one"], 4, switch=False)[:4] == ["one", ""] * 2
    assert all(u == {"__type__": "update"} for u in load_texts(None, 4, True))
    # the note under the example: where it came from and its gold label
    bench = {"dataset": "sst2 dev", "disagreements": {"examples": [{"texts": ["first"], "gold": "negative",
                                                                    "index": 41}]}}
    assert benchmark.disagreement_note(bench, 0) == (
        "<small>picked from the benchmark's disagreements on sst2 dev, row 42 · gold label **negative**</small>")
    sliced = {"dataset": "d", "slices": [{"name": "word: <b>", "gold": ["positive"], "examples": [["x"]]}]}
    assert "slice «word: &lt;b&gt;» of d" in benchmark.slice_note(sliced, 0)
    assert "gold label **positive**" in benchmark.slice_note(sliced, 0)
    note = checklist.failure_note(suite, 2)
    assert "«t», failed by B" in note and "d" in note and "gold label" not in note
    note = attacks.attacked_note(attacked | {"recipe": "deepwordbug"}, 0)
    assert "deepwordbug on" in note and "gold label **positive**" in note and "its adversarial text" in note
    state = {"points": [{"index": 3, "gold": "negative"}], "picked": [3], "texts": [[f"t{i}"] for i in range(5)]}
    assert "row 4 · gold label **negative**" in projection.picked_note(state, 0)


def test_a_range_drawn_on_a_projection_lists_every_point_in_it_by_its_row(ctx):
    """Every point in the brushed range is picked (a brush once took only the 30 nearest its middle), listed in
    the dataset's order under the dataset's own row numbers (a slice's points keep the whole dataset's)."""
    n = 100
    points = [{"model": m, "index": i, "row": 10 * i + 7, "x": float(i), "y": 0.0, "text": f"t{i}", "gold": "",
               **{f"{n} prediction": "p" for n in ctx.names}} for m in ctx.names for i in range(n)]
    state = {"points": points, "texts": [[f"t{i}"] for i in range(n)], "picked": [], "dataset": "d @rows:1-2000",
             "name": "d"}
    for i, p in enumerate(points):  # the second model's cloud lies elsewhere: the same examples, other places
        p["x"] = p["x"] if p["model"] == ctx.names[0] else 1000.0 - i
    table, state, *plots = projection.points_in(ctx, state, ctx.names[0], [52.6, 5.2])
    assert list(table["row"]) == [10 * i + 7 for i in range(6, 53)]  # 47 points, more than the old 30
    assert projection.picked_texts(state, 1) == ["t7"] and projection.picked_texts(state, 47) is None
    assert projection.picked_dataset(state)[1] == "d @rows:" + ",".join(str(10 * i + 7) for i in range(6, 53))
    assert projection.clicked_texts(state, "67/123") == ["t6"] and projection.clicked_index(state, "68/1") is None
    assert "row 67" in projection.clicked_note(state, "67/123")
    table, state, *plots = projection.points_in(ctx, state, ctx.names[0], [2.6, 5.2])
    # the other plot colours the same three examples as picked, wherever its model put them; the brushed plot is
    # left as drawn, keeping its brush's rectangle (a redraw dropped it)
    assert len(plots) == 2 and plots[0] == {"__type__": "update"}
    frame = plots[1]["value"]
    assert plots[1]["color"] == "picked" and set(frame.model) == {ctx.names[1]}
    assert sorted(frame[frame.picked == projection.PICKED]["index"]) == [3, 4, 5]
    # a range drawn on the other plot now: the first, coloured by no pick yet, is redrawn with the new pick; the
    # second, coloured by the earlier pick, is redrawn too (its colours would say the old pick)
    _, state, *plots = projection.points_in(ctx, state, ctx.names[1], [895.5, 897.5])  # its x: 897, 896
    assert [sorted(p["value"][p["value"].picked == projection.PICKED]["index"]) for p in plots] == [[3, 4]] * 2
    assert projection.points_in(ctx, state, ctx.names[0], None)[2] == {"__type__": "update"}


def test_a_point_clicked_on_a_projection_is_read_by_its_row():
    """The page's script sends "<row>/<click time>" (the tooltip's row, 1-based): that example's texts and a note
    saying where it came from; anything else (no row, row 0, past the end, a stray value) loads nothing."""
    state = {"points": [{"index": 2, "gold": "positive"}], "texts": [["t0"], ["t1"], ["t2", "u2"]], "picked": []}
    assert projection.clicked_texts(state, "3/1795736171641") == ["t2", "u2"]
    assert "the projection, row 3 · gold label **positive**" in projection.clicked_note(state, "3/17")
    # "²" and "١" pass str.isdigit(); int() refused the first with a raw "invalid literal" (issue 58)
    for value in ("0/17", "4/17", "x/17", "", "-1/2", None, "²/17", "١/17", "9" * 5000 + "/1", "3\x00/1"):
        assert projection.clicked_texts(state, value) is None, value
    assert projection.clicked_texts(None, "1/1") is None


def test_a_projections_exports_are_kept_only_for_the_latest_requests(monkeypatch):
    """Each request's CSV and PNG folder: the oldest removed once more than EXPORTS_KEPT exist."""
    monkeypatch.setattr(projection, "_EXPORTS", [])
    monkeypatch.setattr(projection, "EXPORTS_KEPT", 3)
    made = [projection.export_dir() for _ in range(5)]
    assert [d.exists() for d in made] == [False, False, True, True, True]
    for d in made[2:]:
        import shutil

        shutil.rmtree(d)


def test_the_banner_is_one_line_naming_both_models(tiny_pair, offline_pair):
    from app.ui import banner

    line = banner(offline_pair)
    assert "\n" not in line and line.count("<small>") == 3  # each model's source, and the device's name
    assert all(f"**{m.name}** <small>{m.spec.source}</small>" in line for m in offline_pair.models)
    assert line.endswith(f" · on cpu <small>{offline_pair.hardware()['device_name']}</small>")
    assert "⚠" not in line


def test_inside_tab_handlers_show_the_facades_cka_and_attention(ctx, tiny_pair):
    from app.ui import inside

    res, summary, fig = inside.similarity(ctx, "sentiment_plain", 30, "mean")
    direct = api.similarity(tiny_pair, "sentiment_plain", limit=30, pooling="mean")
    assert res["cross"] == direct["cross"] and len(fig.axes) == 4  # three heatmaps and the colour bar
    assert summary.count("→") == sum(j is not None for j in res["best_b_for_a"])
    res, fig = inside.attention(ctx, "a fine film", None, -1, "0")
    assert res["head"] == 0 and [m["units"] for m in res["models"]][0][0] == "[CLS]"
    assert res["models"][0]["map"] == api.attention(tiny_pair, "a fine film", head=0).models[0]["map"]


def test_slices_handler_shows_the_facades_slices(ctx, tiny_pair):
    """Benchmark's "Where they differ": the facade's slices, one table row per slice in its order, the summary's
    count, and a picked row opens the slice's first example."""
    from .conftest import shared

    path = str(shared("glue", "sst2", "dev.tsv"))
    res, summary, _, table = benchmark.slices(ctx, path, None, 120, "accuracy", 10, 0)
    direct = api.slices(tiny_pair, path, limit=120, metric="accuracy", min_size=10, clusters=0).to_dict()
    assert res["slices"] == direct["slices"] and res["findings"] == direct["findings"]
    assert list(table["slice"]) == [s["name"] for s in res["slices"]]
    assert f"{res['candidates_tested']} candidate slices" in summary
    assert benchmark.slice_texts(res, 0) == res["slices"][0]["examples"][0]
    assert benchmark.slice_texts(res, len(res["slices"])) is None


def test_the_first_screen_names_the_task_both_models_and_what_to_try(offline_pair):
    """Under the banner: the task with its fields and labels, each model's parameters (Model facts' count) and
    depth, the device, and three numbered first steps that name real tabs."""
    from app.core.present import views
    from app.ui import build

    info = api.overview(offline_pair)
    text = views.first_screen(info)
    facts = api.facts(offline_pair, ["a fine film", "an awful film"])
    assert "Task **sst2**: sentence → negative / positive." in text
    for m, f in zip(offline_pair.models, facts["models"]):
        assert f"**{m.name}** {f['parameters'] / 1e6:.1f}M parameters, {f['layers']} layers" in text
    assert "sharing one set of weights" in text and "answering on cpu" in text
    assert all(f"**{k}.**" in text for k in (1, 2, 3)) and "*Benchmark*" in text and "*Saliency*" in text
    demo = build(offline_pair)
    shown = [c.value for c in demo.blocks.values() if type(c).__name__ == "Markdown"]
    assert text in shown


def test_a_picked_counterfactual_edit_becomes_the_example_in_the_tables_order(ctx):
    """The changes table puts the edits that flip one model only first; a picked row loads that row's edited
    input, with a note naming the edit and whom it flips."""
    a, b = ctx.names
    change = lambda text, flipped: {"generator": "wordnet_synonym", "edited": [text], "original": ["a fine film"],  # noqa: E731
                                    "edits": [["fine", text.split()[1]]], "flipped": flipped,
                                    "before": [{"label": "positive"}] * 2, "after": [{"label": "positive"}] * 2,
                                    "deltas": [{"positive": -0.1}] * 2}
    res = {"models": [a, b], "flip_rate": [0.5, 0.5], "examples": [
        change("a nice film", [False, False]), change("a good film", [True, True]), change("a ok film", [False, True])]}
    frame = views.changes_frame(res, [a, b])
    assert list(frame["flips"]) == [f"{b} only", "both", "none"]
    assert [counterfactuals.edited_texts(res, k) for k in range(4)] == [["a ok film"], ["a good film"],
                                                                       ["a nice film"], None]
    assert f"flips {b} only" in counterfactuals.edited_note(res, 0)


def test_a_picked_slice_or_brushed_points_become_a_dataset_that_reads_those_rows(ctx):
    """The slice picked in Benchmark, or the points a brush picked on the projection, become a dataset spec
    (`api.slice_spec`) every dataset field can take; it reads exactly those rows back."""
    res = {"dataset": "sentiment_plain", "slices": [{"name": "word: film", "rows": [3, 1, 5]}]}
    name, spec = benchmark.slice_dataset("sentiment_plain", None, res, 0)
    assert spec == "sentiment_plain @rows:3,1,5" and name == "slice «word: film» of sentiment_plain (3 rows)"
    assert benchmark.slice_dataset("sentiment_plain", None, res, None) is None
    whole = api.resolve_dataset(ctx.pair, "sentiment_plain")
    assert [e.texts for e in api.resolve_dataset(ctx.pair, spec).examples] == [whole.examples[i].texts
                                                                               for i in (2, 0, 4)]
    state = {"picked": [4, 0], "dataset": "sentiment_plain", "name": "sentiment_plain", "texts": [],
             "points": [{"index": i, "row": i + 1} for i in range(5)]}
    assert projection.picked_dataset(state) == ("2 points picked on the projection of sentiment_plain",
                                                "sentiment_plain @rows:5,1")
    assert projection.picked_dataset(state | {"picked": []}) is None


def test_every_handlers_defaults_are_its_capabilitys_declared_ones():
    """Issue 59: a handler's default is what gradio_client sends when an input is left out; it was typed again in
    the tab ("predicted" where the declaration says "", None where it says 0.001, "mean" where it says None).
    Every parameter of a tab's handler named as an option of its capability defaults to the declared default."""
    import importlib
    import inspect as pyinspect

    from app.core.declare import capabilities

    declared = {c.name: {o.name: o.default for o in c.options} for c in capabilities.declared()}
    checked = 0
    for module in ("saliency", "benchmark", "projection", "attacks", "checklist", "counterfactuals", "inside"):
        mod = importlib.import_module(f"app.ui.{module}")
        for name, fn in vars(mod).items():
            cap = {"saliency_dataset": "saliency"}.get(name, name)
            if not (pyinspect.isfunction(fn) and fn.__module__ == mod.__name__ and cap in declared):
                continue
            for p in pyinspect.signature(fn).parameters.values():
                if p.name in declared[cap]:
                    assert p.default == declared[cap][p.name], (module, name, p.name, p.default)
                    checked += 1
    assert checked >= 25  # every tab with a declared capability was read


def test_every_action_shows_progress_that_moves():
    """No action sits on a frozen bar: before the core's first report (one sentence: none at all) the page reads
    "working" with the seconds so far, then the core's fraction with them, then "finishing" while the run goes on
    after its last step (single-sentence actions sat at 0% or 10%, attention at 100% from 0.7 s to 19 s)."""
    import time as _time

    from app.ui.common import Ticker

    shown, now = [], [0.0]
    ticker = Ticker(lambda value, desc="", unit="steps": shown.append((value, desc, unit)), "explaining",
                    every=0.01, clock=lambda: now[0])
    with ticker as report:
        now[0] = 3.0
        _time.sleep(0.1)  # the ticker's own updates, with no report from the core
        assert shown[0] == ((0, None), "explaining: working", "s") and shown[-1] == ((3, None), "explaining: working",
                                                                                    "s")
        now[0] = 5.0
        report(1, 4)  # one step in 5 s: three more at that pace
        assert shown[-1] == (0.25, "explaining · 1 of 4 · 5 s, about 15 s left", "steps")
        now[0] = 120.0
        report(2, 1000)
        assert shown[-1] == (0.002, "explaining · 2 of 1,000 · 120 s, about 16.6 h left", "steps")
        report(4, 4)
        now[0] = 19.0
        _time.sleep(0.1)
        assert shown[-1] == (1.0, "explaining: finishing · 19 s", "steps")
    count = len(shown)
    _time.sleep(0.1)
    assert len(shown) <= count + 1  # it stops with the run


def test_a_declared_tabs_handler_ticks_while_its_run_reports_nothing(ctx, monkeypatch):
    """The generated handlers run inside a ticker: a run that reports nothing still shows "working"."""
    shown = []
    res, *_ = saliency.saliency(ctx, "a fine film", None, "occlusion",
                                progress=lambda value, desc="", unit="steps": shown.append((value, desc)))
    assert res["method"] == "occlusion" and shown[0] == ((0, None), "explaining on both models: working")


def test_a_row_picked_in_a_sorted_table_opens_that_row(tiny_pair, monkeypatch):
    """A table the visitor sorted (its header's menu) numbers its rows as shown, and so does Gradio's select event:
    sorted descending, the first row of Benchmark's disagreements opened the unsorted table's first example. Every
    linked table of the app finds the picked row by its values in the table as the server sent it (`rows_of`,
    from the JSON the page hands back): Benchmark's, Find slices', Counterfactuals', a brush's, CheckList's and
    the attacks'."""
    from app.ui import build, common

    built = []
    of = Ctx.of.__func__
    monkeypatch.setattr(Ctx, "of", classmethod(lambda cls, *a, **k: built.append(of(cls, *a, **k)) or built[-1]))
    build(tiny_pair)
    ctx = built[-1]
    links = {id(t): (texts_of, rows_of) for t, _, texts_of, _, _, rows_of in ctx.links}
    assert all(rows_of for t, *_, rows_of in ctx.links if not isinstance(t, gr.Textbox))

    def by_texts(texts_of):  # the link whose rows open `texts_of`'s example
        return next(v for v in links.values() if v[0] is texts_of)

    from .conftest import shared

    path = str(shared("glue", "sst2", "dev.tsv"))
    bench = benchmark.benchmark(ctx, path, None, 150)
    found = benchmark.slices(ctx, path, None, 150, "accuracy", 10, 0)
    edits = counterfactuals.counterfactual(ctx, "", None, "dataset_flip_rate", "the -> a, a -> the", path, 40)
    n = 6
    points = [{"model": m, "index": i, "row": 3 * i + 1, "x": float(i), "y": 0.0, "text": f"t{i}", "gold": "g",
               **{f"{m_} prediction": "p" for m_ in ctx.names}} for m in ctx.names for i in range(n)]
    state = {"points": points, "texts": [[f"t{i}"] for i in range(n)], "picked": [], "dataset": "d", "name": "d"}
    picked, state, *_ = projection.points_in(ctx, state, ctx.names[0], [0.5, 4.5])
    suite = {"tests": [{"capability": "Vocabulary", "name": "t1", "type": "MFT", "expectation": "positive",
                        "paired": {"p_value": 0.5, "p_holm": 1.0},
                        "results": [{"model": "A", "n": 4, "fail_rate": 0.5, "examples": [
                            {"inputs": [["bad"]], "detail": "said positive"}, {"inputs": [["worse"]], "detail": ""}]},
                                    {"model": "B", "n": 4, "fail_rate": None, "examples": []}]}],
             "capabilities": {"Vocabulary": {"A": 0.5, "B": None}}}
    attacked = _attacked("success", "failed")
    cases = [(bench[0], bench[3], benchmark.disagreement_texts), (found[0], found[3], benchmark.slice_texts),
             (edits[0], edits[3], counterfactuals.edited_texts), (state, picked, projection.picked_texts),
             (suite, views.checklist_views(suite)[1], checklist.failure_texts),
             (attacked, views.attack_views(attacked, ctx.names, ["negative", "positive"])[2], attacks.attacked_texts)]
    for res, sent, texts_of in cases:
        res = json.loads(json.dumps(res, default=str))  # as the page hands it back
        _, rows_of = by_texts(texts_of)
        assert len(sent) >= 2, texts_of.__name__
        assert rows_of(res).values.tolist() == sent.values.tolist(), texts_of.__name__  # the table as sent
        last = json.loads(json.dumps(sent.values.tolist()[-1], default=str))
        evt = gr.SelectData(None, {"index": [0, 1], "value": last[1], "row_value": last})  # sorted: shown first
        row = common.on_select(lambda ctx_, res_, row_: row_, ctx, rows_of)(res, evt)
        assert row == len(sent) - 1 and texts_of(res, row) != texts_of(res, 0), texts_of.__name__
        unsorted = gr.SelectData(None, {"index": [1, 0], "value": last[0], "row_value": sent.values.tolist()[1]})
        assert common.on_select(lambda ctx_, res_, row_: row_, ctx, rows_of)(res, unsorted) == 1


def test_saliency_drawn_on_one_scale_for_both_models_or_each_its_own(offline_pair):
    """The colour scale redraws the result on the page, no model run: each model's largest score drawn full, or
    one scale for both, where the model with the smaller scores is paler by the ratio of the two largest; the
    chart's bars follow; a sentence changed since the run is not drawn on the old maps."""
    ctx = Ctx.of(offline_pair)
    res, *_ = saliency.saliency(ctx, DISAGREE, None, "occlusion", "predicted", "1e-03", "prob")
    tops = [max(abs(s) for s in m["scores"]) for m in res["maps"]]
    assert max(tops) > 1.5 * min(tops)  # the case in question: one model's scores are smaller

    def deepest(shown):  # the largest |shade| of a highlight
        return max(abs(v) for _, v in shown if isinstance(v, float))

    own, shared = (saliency.drawn(ctx, res, DISAGREE, None, scale) for scale in saliency.SCALES)
    assert [deepest(h) for h in own[:2]] == pytest.approx([1.0, 1.0])
    assert [deepest(h) for h in shared[:2]] == pytest.approx([t / max(tops) for t in tops], abs=1e-3)
    for fig, whose in ((own[2], "model's largest"), (shared[2], "both models' largest")):
        assert whose in fig.axes[0].get_ylabel()
        assert max(abs(p.get_height()) for p in fig.axes[0].patches) == pytest.approx(1.0, abs=1e-3)
    per_model = [max(abs(p.get_height()) for p in c.patches) for c in shared[2].axes[0].containers]
    assert sorted(per_model) == pytest.approx(sorted(t / max(tops) for t in tops), abs=1e-3)
    changed = saliency.drawn(ctx, res, "An entirely different sentence.", None, "one for both models")
    assert changed[0] == {"__type__": "update"} and "press Explain" in changed[-1]
