"""The Gradio app, launched here and driven through gradio_client like a user's script would."""
import gradio as gr
import pytest

from app.core.data import Example


def test_predict_api(client, tiny_pair):
    res, *rest = client.predict("a fine film", "", api_name="/predict")
    assert [m["model"] for m in res["models"]] == [m.name for m in tiny_pair.models]
    direct = tiny_pair.predict([Example(("a fine film",))])
    for m, p in zip(res["models"], direct):
        assert m["probabilities"]["positive"] == pytest.approx(float(p.probs[0, 1]), abs=1e-6)


def test_saliency_api_keeps_html_as_text(client):
    res, hl_a, hl_b, summary, bars = client.predict("<b>great</b> film", "", "gradient_x_input", "predicted",
                                                    api_name="/saliency")
    assert res["maps"][0]["words"] == ["<", "b", ">", "great", "</", "b", ">", "film"]
    shown = "".join(d["token"] for d in hl_a)
    assert shown == "<b>great</b> film"


def test_saliency_api_takes_the_ig_tolerance(client):
    res, *_ , summary, _ = client.predict("a gorgeous , witty , seductive movie .", "", "integrated_gradients",
                                          "predicted", "1e-05", api_name="/saliency")
    assert all(m["delta"] <= 1e-5 for m in res["maps"])
    assert "IG delta" in summary
    res, *_ = client.predict("a fine film", "", "integrated_gradients", "predicted", api_name="/saliency")
    assert all(m["delta"] <= 1e-3 for m in res["maps"])  # left out, the tolerance is the default 1e-3


def test_saliency_api_explains_the_logit_when_asked(client, tiny_pair):
    """The sixth input picks the explained output; the summary says a logit is explained; left out, the
    probability, as before it existed."""
    from app.core import api

    res, *_, summary, _ = client.predict("a fine film", "", "occlusion", "positive", "1e-03", "logit",
                                         api_name="/saliency")
    direct = api.saliency(tiny_pair, "a fine film", method="occlusion", target="positive", output="logit")
    assert res["output"] == "logit" and "the logit of *positive*" in summary
    assert res["maps"][0]["scores"] == pytest.approx(direct["maps"][0]["scores"], abs=1e-6)
    res, *_ = client.predict("a fine film", "", "occlusion", "positive", api_name="/saliency")
    assert res["output"] == "prob"


def test_counterfactual_api(client):
    res, summary, plot, table = client.predict("the cities were lovely", "", "word_replacement",
                                               "cities -> townships", None, 100, api_name="/counterfactual")
    assert res["changes"][0]["edited"] == ["the townships were lovely"]
    assert "edit" in summary


def test_project_api(client):
    res, summary, *_ = client.predict("sentiment_plain", None, "pca", "cls", -1, "gold", 30, api_name="/project")
    assert res["n"] == 30 and 0 <= res["knn_overlap"] <= 1
    assert "nearest" in summary
    again = client.predict("sentiment_plain", None, "pca", "cls", -1, "gold", 30, api_name="/project")[1]
    assert again.count("from cache") == 2 and "computed" not in again  # the second run reuses both models' vectors


def test_benchmark_api_scores_both_models_with_the_paired_test(client, tiny_pair):
    from app.core.benchmark import benchmark
    from app.core.data import load_dataset

    from .conftest import shared

    path = str(shared("glue", "sst2", "dev.tsv"))
    res, summary, plot, table = client.predict(path, None, 40, api_name="/benchmark")
    direct = benchmark(tiny_pair, load_dataset(path).head(40))
    assert res["n"] == 40 and res["comparison"]["values"] == pytest.approx(direct["comparison"]["values"])
    assert res["comparison"]["only_right"] == direct["comparison"]["only_right"]
    assert f"p = {res['comparison']['p_value']:.3g}" in summary and "40 labelled examples" in summary
    assert len(table["data"]) == min(100, res["disagreements"]["total"])
    assert [row[0] for row in table["data"]] == [e["index"] + 1 for e in res["disagreements"]["examples"]]


def test_benchmark_api_names_a_dataset_without_labels(client, tmp_path):
    from gradio_client.exceptions import AppError

    unlabelled = tmp_path / "u.jsonl"
    unlabelled.write_text('{"text": "a fine film"}\n{"text": "a dull film"}\n', encoding="utf-8")
    with pytest.raises(AppError, match="dataset: .* has no labelled examples to score"):
        client.predict(str(unlabelled), None, 10, api_name="/benchmark")


def test_disagreement_table_says_who_is_right():
    from app.ui import _disagreement_frame

    res = {"disagreements": {"total": 2, "examples": [
        {"index": 4, "texts": ["a premise", "a hypothesis"], "gold": "entailment",
         "predictions": ["entailment", "not_entailment"], "confidence": [0.9, 0.8], "right": "BERT"},
        {"index": 0, "texts": ["x " * 400], "gold": "a", "predictions": ["b", "c"], "confidence": [0.5, 0.6],
         "right": None}]}}
    frame = _disagreement_frame(res, ["BERT", "ALBERT"])
    assert frame.iloc[0].tolist() == [5, "a premise ‖ a hypothesis", "entailment", "entailment", "not_entailment",
                                      "BERT"]
    assert frame.iloc[1]["right"] == "neither" and "more characters" in frame.iloc[1]["input"]
    scores = {"disagreements": {"total": 1, "examples": [
        {"index": 2, "texts": ["s1", "s2"], "gold": 3.5, "predictions": [1.234, 4.0], "gap": 2.766}]}}
    assert _disagreement_frame(scores, ["A", "B"]).iloc[0].tolist() == [3, "s1 ‖ s2", "3.5", "1.23", "4.00",
                                                                       "gap 2.77"]


def test_checklist_api_gives_each_test_its_paired_p_value(client):
    from .conftest import shared

    res, verdict, plot, table, fails = client.predict(str(shared("checklist", "sentiment_suite.json.gz")), None, 5,
                                                      api_name="/checklist")
    cols = table["headers"]
    assert cols[-3:] == ["p (McNemar)", "p (Holm)", "expectation"]
    for row, t in zip(table["data"], res["tests"]):
        assert row[cols.index("p (McNemar)")] == pytest.approx(t["paired"]["p_value"], abs=5e-5)
        assert t["paired"]["p_holm"] >= t["paired"]["p_value"]
    assert verdict == res["summary"] and "differ beyond chance" in verdict


def test_dataset_counterfactual_summary_says_whether_the_flip_rates_differ():
    from app.core.significance import compare_events
    from app.ui import _counterfactual_summary

    cmp = compare_events([True] * 12 + [False] * 88, [False] * 100, metric="flip rate")
    res = {"flip_rate": [0.12, 0.0], "only": [[{}] * 12, []], "changed": 100, "edits": "word_replacement",
           "examples_changed": 100, "dataset": "sst2/dev", "comparison": cmp}
    text = _counterfactual_summary(res, ["BERT", "ALBERT"])
    assert "ALBERT − BERT flip rate: -0.120" in text and "BERT's flip rate is higher beyond chance on these 100 edits" \
        in text and f"p = {cmp['p_value']:.3g} (McNemar, exact)" in text


def test_saliency_dataset_api(client):
    res, summary, plot, table = client.predict("sentiment_plain", "gradient_norm", "1e-03", 6,
                                               api_name="/saliency_dataset")
    assert res["n"] == 6 and res["method"] == "gradient_norm" and len(res["examples"]) == 6
    assert "comprehensiveness" in summary and "random ranking" in summary and "Rank agreement" in summary
    assert [row[0] for row in table["data"]] == [i + 1 for i in res["lowest_agreement"]]


def test_saliency_dataset_names_a_bad_method_and_is_capped_when_hosted(tiny_pair, monkeypatch):
    from app.core import api
    from app.core.errors import InputError

    with pytest.raises(InputError, match="method: 'shap' is not one of"):
        api.saliency_dataset(tiny_pair, "sentiment_plain", "shap")
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")  # each example is a full explanation by both models
    res = api.saliency_dataset(tiny_pair, api.released_dev_set(tiny_pair), "gradient_norm", 500)
    assert res["n"] == api.limits()["max_saliency_examples"] == 50


def test_facts_api(client, tiny_pair):
    res, summary, *_ = client.predict("", api_name="/facts")
    assert res["latency_comparison"]["n"] == res["n_inputs"] and "both models in turns" in summary
    assert res["models"][1]["shares_layers"] is True
    assert res["models"][0]["parameters"] > res["models"][1]["parameters"]


def test_errors_are_messages_not_tracebacks(client):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="field 'sentence' is empty"):
        client.predict("   ", "", api_name="/predict")
    with pytest.raises(AppError, match="none of"):
        client.predict("no match here", "", "word_replacement", "cities -> townships", None, 10,
                       api_name="/counterfactual")


@pytest.mark.parametrize("fixture,expected,suite", [("tiny_pair", "sentiment_plain", "sentiment_suite.json.gz"),
                                                    ("tiny_nli_pair", "rte_pairs", None)])
def test_projection_and_checklist_defaults_fit_the_task(request, fixture, expected, suite):
    """The Projection tab (and saliency over a dataset) opens on examples the pair can read (single sentences or
    sentence pairs), and every dataset field offers the released dev split; the Behavioural tab proposes a
    released suite only when its labels fit the task (none for RTE)."""
    from app.core import api
    from app.ui import build

    pair = request.getfixturevalue(fixture)
    demo = build(pair)
    drop = [b for b in demo.blocks.values() if getattr(b, "label", "") and b.label.startswith("dataset (shipped")]
    assert len(drop) == 2 and {d.value for d in drop} == {expected}  # projection, saliency over a dataset
    ds = api.resolve_dataset(pair, drop[0].value)
    assert all(len(e.texts) == len(pair.task.fields) for e in ds.examples)
    # every dataset field (benchmark, projection, saliency and flip rate over a dataset, attacks) offers the
    # task's released dev split, and it reads as the task's examples
    (dev,) = api.released_datasets(pair)  # offered by name: "sst2 dev (released GLUE)"
    fields = [b for b in demo.blocks.values() if isinstance(b, gr.Dropdown) and "dataset" in (b.label or "")]
    assert len(fields) == 5 and all(dev in [v for _, v in f.choices] for f in fields)
    assert len(api.resolve_dataset(pair, dev, 5).examples[0].texts) == len(pair.task.fields)
    box = [b for b in demo.blocks.values() if getattr(b, "label", "") and b.label.startswith("CheckList suite")]
    assert len(box) == 1
    assert box[0].value == ("sentiment (released CheckList)" if suite else None)
    if suite:  # the name reads as the released file
        assert api.released_suites(pair)[box[0].value].endswith(suite)
    notes = [b.value for b in demo.blocks.values() if isinstance(b, gr.Markdown) and "No released CheckList" in
             (b.value or "")]
    if suite:
        assert notes == []
    else:  # the empty box is explained
        assert len(notes) == 1 and "*rte* task" in notes[0]


def test_attack_summary_says_why_examples_were_skipped():
    from app.ui import _attack_line

    s = {"success_rate": None, "attacked": 0, "skipped": 2, "avg_queries": None, "transfer_rate": None}
    assert _attack_line("BERT", s) == ("**BERT**: success n/a of 0 attacked (2 skipped: already wrong on the gold "
                                       "label), 0 queries, transfer n/a")
    s |= {"success_rate": 0.5, "attacked": 4, "skipped": 0, "avg_queries": 80.4, "transfer_rate": 0.25}
    assert _attack_line("<b>", s) == "**&lt;b&gt;**: success 50% of 4 attacked, 80 queries, transfer 25%"


def test_saliency_summary_shows_no_negative_zero_and_names_a_regression_score():
    from app.ui import _saliency_summary

    base = {"model": "BERT", "seconds": 0.25, "delta": None, "note": ""}
    res = {"maps": [base | {"target_label": "positive", "probability": 0.9981},
                    base | {"model": "STS", "target_label": None, "probability": None}],
           "faithfulness": [{"comprehensiveness": 0.0021, "sufficiency": -0.00004}] * 2, "agreement": None}
    first, second, _ = _saliency_summary(res).split("\n\n")
    assert first == ("**BERT** explains *positive* (p=0.998): comprehensiveness 0.002, sufficiency 0.000, 250 ms")
    assert second.startswith("**STS** explains the score: comprehensiveness 0.002, sufficiency 0.000")


def test_projection_axes_fit_the_points_not_zero():
    import pandas as pd

    from app.ui import _span

    assert _span(pd.Series([9.0, 12.0])) == pytest.approx([8.85, 12.15])
    assert _span(pd.Series([3.0, 3.0])) == [2.5, 3.5]


def test_facts_table_text():
    from app.ui import _fact_text

    assert [_fact_text(v) for v in (1007916, 3.205184, 555.51321, True, "bert")] == \
        ["1,007,916", "3.21", "556", "True", "bert"]


def test_attack_examples_carry_their_gold_label(tiny_pair, tiny_nli_pair):
    """An attack needs the input's gold label: the Attacks tab's examples fill it in from the shipped files,
    and leave it to the user where the task has no such label (RTE's not_entailment on a 3-way NLI pair)."""
    from types import SimpleNamespace

    from app.core.registry import TASKS
    from app.ui import _attack_examples

    rows = _attack_examples(tiny_pair)
    assert len(rows) == 8 and all(len(r) == 2 for r in rows)
    assert rows[1] == ["Terrible film. I walked out after forty minutes.", "negative"]
    assert {r[1] for r in rows} == {"negative", "positive"}
    rte = _attack_examples(tiny_nli_pair)
    assert rte[0][1] == "People in cities protested against hospital closures." and rte[0][2] == "entailment"
    assert rte[1][2] == "not_entailment"
    snli = _attack_examples(SimpleNamespace(task=TASKS["snli"]))
    assert [r[2] for r in snli] == [g if g == "entailment" else None for *_, g in rte]
    assert None in [r[2] for r in snli]  # not_entailment is no SNLI label


def test_default_replacements_apply_to_the_shipped_examples(tiny_pair, tiny_nli_pair):
    """Generate with the default replacements works on the examples as shipped (it named no word before)."""
    from app.core.counterfactuals import parse_pairs, replace_words
    from app.ui import _default_swaps, _shipped

    for pair in (tiny_pair, tiny_nli_pair):
        pairs = parse_pairs(_default_swaps(pair))
        assert "cities" in pairs  # the study's own probe stays
        hit = [e for e in _shipped(pair) if replace_words(e, pairs)[1]]
        assert hit and hit[0] == _shipped(pair)[0]  # the first example, the one people click, has one


def test_counterfactual_notes_say_which_model_they_are_about():
    from app.ui import _counterfactual_summary

    res = {"generator": "ablation_flip", "changes": [{"flipped": [True, False]}],
           "per_model": [{"model": "BERT", "size": 1}, {"model": "<ALBERT>", "note": "no set of up to 3 flips it"}]}
    assert _counterfactual_summary(res, ["BERT", "<ALBERT>"]) == (
        "1 edit(s); label flips: **BERT** 1 · **&lt;ALBERT&gt;** 0<br>**&lt;ALBERT&gt;**: no set of up to 3 flips it")


def test_app_launch_warms_umap_and_wordnet_even_if_one_fails(monkeypatch):
    """The warm-up thread runs each step; a failing one (here UMAP) is logged and the next still runs."""
    import app.core.counterfactuals as counterfactuals
    import app.core.projection as projection
    from app.ui import _warm_up

    called = []

    def broken():
        called.append("umap")
        raise RuntimeError("numba unavailable")

    monkeypatch.setattr(projection, "warm_up", broken)
    monkeypatch.setattr(counterfactuals, "warm_up", lambda: called.append("wordnet"))
    _warm_up().join(timeout=10)
    assert called == ["umap", "wordnet"]


def test_attack_api_takes_named_arguments(client):
    """The names gradio_client users see (README) are part of the API: calling by them must keep working, and
    the dataset may be left out (its default is the "none" choice: attack the text)."""
    res, summary, *_ = client.predict(text="a gorgeous , witty , seductive movie .", text2="",
                                      recipe_name="deepwordbug", gold_label="positive",
                                      n_examples=1, query_budget=40, time_limit_s=20, api_name="/attack")
    assert res["recipe"] == "deepwordbug" and len(res["examples"]) == 1
    assert res["examples"][0]["texts"] == ["a gorgeous , witty , seductive movie ."]
    assert all(r["queries"] is None or r["queries"] <= 40 for r in res["examples"][0]["results"])
    assert set(res["summary"]) == set(res["models"])


def test_changes_table_leads_with_examples_that_flip_one_model_only():
    from app.ui import _changes_frame

    def change(text, flipped):
        return {"edited": [text], "edits": [["film", "movie"]], "generator": "word_replacement",
                "before": [{"label": "positive"}] * 2, "after": [{"label": "negative"}] * 2,
                "flipped": flipped, "deltas": [{"positive": -0.5}] * 2}

    res = {"generator": "dataset_flip_rate", "flip_rate": [0.4, 0.6],
           "examples": [change("a", [False, False]), change("b", [True, True]), change("c", [False, True]),
                        change("d", [True, False]), change("e", [False, True])]}
    frame = _changes_frame(res, ["BERT", "ALBERT"])
    assert list(frame["edited"]) == ["c", "d", "e", "b", "a"]
    assert list(frame["flips"]) == ["ALBERT only", "BERT only", "ALBERT only", "both", "none"]
    assert list(frame.columns[-3:]) == ["ALBERT before", "ALBERT after", "ALBERT Δp"]
    mixed = change("f", [False, False]) | {"before": [{"label": "negative"}, {"label": "positive"}],
                                           "deltas": [{"negative": 0.25, "positive": -0.25}, {"positive": -0.5}]}
    frame = _changes_frame({"generator": "word_replacement", "changes": [res["examples"][0], mixed]},
                           ["BERT", "ALBERT"])
    assert list(frame["BERT Δp"]) == [-0.5, 0.25] and not frame.isna().any().any()  # no column per label
    single = _changes_frame({"generator": "word_replacement", "changes": res["examples"]}, ["BERT", "ALBERT"])
    assert list(single["edited"]) == ["a", "b", "c", "d", "e"]  # one input's edits keep their order
    long = "a fine film. " * 100
    edited = long[:650] + "a fine movie." + long[663:]
    cell = _changes_frame({"generator": "word_replacement", "changes": [change(edited, [False, False])
                                                                       | {"original": [long]}]},
                          ["BERT", "ALBERT"])["edited"][0]
    assert "a fine movie." in cell and cell.startswith("…") and cell.endswith("…") and len(cell) < 400


def test_highlight_keeps_the_text_and_puts_what_the_model_did_not_read_in_one_short_span():
    """Every character of both fields comes back in order; past the cut, a field's rest is one plain span (a
    100,000-character review was 16,000 unscored spans for the browser), shortened when long."""
    from app.ui import _highlight

    texts = ["A fine  film.", " ".join(f"w{i}" for i in range(10))]
    scores = [1.0, -2.0, 0.5, 0.0] + [0.1] * 5 + [0.0] * 5
    spans = _highlight({"scores": scores, "unread": list(range(9, 14))}, texts)
    assert "".join(t for t, _ in spans) == texts[0] + "  ‖  " + texts[1]
    assert spans[:3] == [("A", 0.5), (" ", None), ("fine", -1.0)]
    assert spans[-1] == (" w5 w6 w7 w8 w9", None) and spans[-2] == ("w4", 0.05)
    long = "fine " * 2000
    spans = _highlight({"scores": [1.0] + [0.0] * 1999, "unread": list(range(1, 2000))}, [long])
    assert spans[0] == ("fine", 1.0) and spans[1][0].endswith(
        f"… [{len(long) - 4 - 300:,} more characters, not read]")
    assert len(spans) == 2 and spans[1][0].startswith(long[4:304])
    from app.ui import _clip  # the attack tab's untouched rest and adversarial column use the same cut

    assert _clip("x" * 400) == "x" * 400 and _clip("x" * 1000) == "x" * 300 + " … [700 more characters]"


def test_attack_summary_says_a_long_input_was_attacked_where_the_model_reads_it(client):
    text = "a gorgeous , witty , seductive movie . " * 300
    res, summary, *_ = client.predict(text=text, text2="", recipe_name="deepwordbug", gold_label="positive",
                                      dataset=None, n_examples=1, query_budget=20, time_limit_s=20,
                                      api_name="/attack")
    notes = [r.get("note") for r in res["examples"][0]["results"]]
    assert all(n and "the rest of the input is left as it was" in n for n in notes)
    assert all(n.replace("'", "&#x27;") in summary for n in notes)
