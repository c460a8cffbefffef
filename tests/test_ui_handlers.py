"""The app's handlers as plain functions, no server: each tab's handler against the facade it calls, and the
wiring Gradio reads from them (optional inputs, names)."""
import inspect
import json

import pandas as pd
import pytest

from app.core import api, views
from app.core.errors import LensError
from app.ui import attacks, benchmark, checklist, compare, counterfactuals, facts, projection, saliency
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
    json.dumps(res)  # the JSON output is JSON


def test_saliency_panels_explain_one_class_and_say_which(offline_pair):
    """The two offline models disagree on this input: both panels still explain the first model's class, and
    each panel's title names it; the agreement is on that class."""
    ctx = Ctx.of(offline_pair)
    preds = [m["label"] for m in api.predict(offline_pair, DISAGREE)["models"]]
    assert preds[0] != preds[1]  # the case in question
    res, map_a, map_b, summary, _ = saliency.saliency(ctx, DISAGREE, None, "gradient_x_input")
    assert [m["target_label"] for m in res["maps"]] == [preds[0]] * 2 == [res["agreement_label"]] * 2
    titles = [u["label"] for u in saliency.headers(res)]
    assert titles == [f"{n} · explains {preds[0]}" for n in ctx.names]
    asked = api.saliency(offline_pair, DISAGREE, method="gradient_x_input", target=preds[0])
    assert res["maps"][1]["scores"] == pytest.approx(asked["maps"][1]["scores"], abs=1e-6)
    assert [w for w, _ in map_a if w.strip()] == res["maps"][0]["words"]
    assert summary.count(f"*{preds[0]}*") >= 2


def test_saliency_asked_for_another_class_explains_it_in_both(offline_pair):
    ctx = Ctx.of(offline_pair)
    res, *_ = saliency.saliency(ctx, DISAGREE, None, "occlusion", "positive")
    assert [m["target_label"] for m in res["maps"]] == ["positive", "positive"]


def test_counterfactual_controls_follow_the_generator():
    """Replacements only for word replacement; the dataset and its limit only for the dataset_* generators."""
    shown = {g: [u["visible"] for u in counterfactuals._controls(g)] for g in api.GENERATORS}
    assert shown["word_replacement"] == [True, False, False]
    assert shown["wordnet_synonym"] == [False, False, False]
    assert shown["dataset_flip_rate"] == [True, True, True]
    assert shown["dataset_wordnet_antonym"] == [False, True, True]


def test_counterfactual_handler_tables_each_edit(ctx):
    res, summary, _, table = counterfactuals.counterfactual(ctx, "the cities were lovely", None, "word_replacement",
                                                      "cities -> townships")
    assert list(res["changes"][0]["edited"]) == ["the townships were lovely"]
    assert list(table["edited"]) == ["the townships were lovely"] and "1 edit(s)" in summary


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


def test_facts_handler_tables_every_fact_per_model(ctx, tiny_pair):
    res, summary, table, frame, again = facts.facts(ctx, "a fine film\n\nan awful film")
    assert res["n_inputs"] == 2 and list(table.columns) == ["fact", *ctx.names]
    layers = [m.model.config.num_hidden_layers for m in tiny_pair.models]
    assert len(frame) == sum(layers) and frame is again
    assert "parameters" in summary


def test_projection_handler_writes_what_it_shows(ctx):
    summary, text, a, b, overlay, csv, png = projection.project(ctx, "sentiment_plain", None, "pca", "cls", -1,
                                                                "gold", 12)
    assert "points" not in summary and summary["n"] == 12
    written = pd.read_csv(csv)
    assert len(written) == 24 and set(written["model"]) == set(ctx.names)
    assert len(a["value"]) == len(b["value"]) == 12 and a["x_lim"] == overlay["x_lim"]
    assert png.endswith(".png") and "Procrustes" in text


def test_attack_examples_keep_only_labels_the_task_has(tiny_nli_pair):
    rows = attacks.attack_examples(tiny_nli_pair)
    assert rows and all(r[-1] in (*tiny_nli_pair.task.labels, None) for r in rows)


def test_bound_handlers_show_gradio_the_inputs_without_ctx(ctx):
    """Gradio reads the handler's signature: `ctx` hidden, a default of None making a gradio_client input
    optional, and the names callers use by keyword (the README's attack call) unchanged."""
    handler = bind(attacks.attack, ctx)
    params = inspect.signature(handler).parameters
    assert list(params)[:8] == ["text", "text2", "recipe_name", "gold_label", "dataset", "n_examples",
                                "query_budget", "time_limit_s"]
    assert params["text2"].default is None and params["dataset"].default is None
    assert handler.__name__ == "do_attack"  # the job and its error messages are named as the endpoint
    for tab in (compare.predict, saliency.saliency, counterfactuals.counterfactual):
        assert inspect.signature(bind(tab, ctx)).parameters["text2"].default is None
    assert inspect.signature(bind(benchmark.benchmark, ctx)).parameters["uploaded"].default is None
