"""The Gradio app, launched here and driven through gradio_client like a user's script would."""
import html

import gradio as gr
import pytest

from app.core.ground.data import Example


def test_predict_api(client, tiny_pair):
    res, *rest = client.predict("a fine film", "", api_name="/predict")
    assert [m["model"] for m in res["models"]] == [m.name for m in tiny_pair.models]
    direct = tiny_pair.predict([Example(("a fine film",))])
    for m, p in zip(res["models"], direct):
        assert m["probabilities"]["positive"] == pytest.approx(float(p.probs[0, 1]), abs=1e-6)


def test_predict_answers_the_pages_direct_route_with_the_same_json(client):
    """/predict is off the queue, so the page POSTs it to /run/predict: its JSON must arrive as an object there,
    as through the queue (Gradio's RootModel arrived as the string "root={...}")."""
    import httpx

    dep = next(d for d in client.config["dependencies"] if d.get("api_name") == "predict")
    assert dep["queue"] is False
    r = httpx.post(client.src.rstrip("/") + "/gradio_api/run/predict",
                   json={"data": ["a fine film", ""], "session_hash": "direct-test"}, timeout=60)
    r.raise_for_status()
    direct = r.json()["data"][0]
    queued = client.predict("a fine film", "", api_name="/predict")[0]
    assert isinstance(direct, dict) and direct["input"] == ["a fine film"]
    for d, q in zip(direct["models"], queued["models"]):
        assert d["label"] == q["label"] and d["probabilities"] == pytest.approx(q["probabilities"], abs=1e-6)


def test_a_refused_prediction_stays_on_the_page_and_still_raises_for_scripts(client):
    """Gradio's page closes an error of an event outside the queue after 10 s, whatever its duration, leaving bare
    "Error" badges: the page's direct /run/predict answers a refusal with the message in Compare's text (it stays
    until the next run) and empty results; gradio_client, through the queue, still gets the error."""
    import httpx
    from gradio_client.exceptions import AppError

    r = httpx.post(client.src.rstrip("/") + "/gradio_api/run/predict",
                   json={"data": ["   ", ""], "session_hash": "refused-test"}, timeout=60)
    r.raise_for_status()
    raw, *labels, text = r.json()["data"]
    assert raw is None and not any(labels) and len(labels) == 2
    assert text == "**Not answered:** field 'sentence' is empty"
    with pytest.raises(AppError, match="field 'sentence' is empty"):
        client.predict("   ", "", api_name="/predict")


def test_saliency_api_keeps_html_as_text(client):
    res, hl_a, hl_b, summary, bars, largest = client.predict("<b>great</b> film", "", "gradient_x_input", "predicted",
                                                    api_name="/saliency")
    assert res["maps"][0]["words"] == ["<", "b", ">", "great", "</", "b", ">", "film"]
    shown = "".join(d["token"] for d in hl_a)
    assert shown == "<b>great</b> film"


def test_saliency_api_takes_the_ig_tolerance(client):
    res, *_, summary, _, _ = client.predict("a gorgeous , witty , seductive movie .", "", "integrated_gradients",
                                          "predicted", "1e-05", api_name="/saliency")
    assert all(m["delta"] <= 1e-5 for m in res["maps"])
    assert "IG delta" in summary
    res, *_ = client.predict("a fine film", "", "integrated_gradients", "predicted", api_name="/saliency")
    assert all(m["delta"] <= 1e-3 for m in res["maps"])  # left out, the tolerance is the default 1e-3


def test_saliency_api_explains_the_logit_when_asked(client, tiny_pair):
    """The sixth input picks the explained output; the summary says a logit is explained; left out, the
    probability, as before it existed."""
    from app.core import api

    res, *_, summary, _, _ = client.predict("a fine film", "", "occlusion", "positive", "1e-03", "logit",
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
    from app.core.ground.data import load_dataset
    from app.core.techniques.benchmark import benchmark

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


def test_checklist_api_gives_each_test_its_paired_p_value(client):
    from .conftest import shared

    res, verdict, plot, table, fails, every = client.predict(str(shared("checklist", "sentiment_suite.json.gz")),
                                                             None, 5, api_name="/checklist")
    assert every["data"] == [] and not any(t.get("cases") for t in res["tests"])  # over a dataset's rows only
    cols = table["headers"]
    assert cols[-4:] == ["p (McNemar)", "p (Holm)", "expectation", "left out"]
    for row, t in zip(table["data"], res["tests"]):
        assert row[cols.index("left out")] == (t["left_out"] or "")
        if not t["paired"]:  # every case expects "neutral", which the tiny pair does not predict
            assert row[cols.index("p (McNemar)")] is None and "expects 'neutral'" in t["left_out"]
            continue
        assert row[cols.index("p (McNemar)")] == pytest.approx(t["paired"]["p_value"], abs=5e-5)
        assert t["paired"]["p_holm"] >= t["paired"]["p_value"]
    assert html.unescape(verdict) == res["summary"] and "differ beyond chance" in verdict
    # over a dataset's rows (by keyword, as a script names the options): every case with its row, as the core says
    dev = str(shared("glue", "sst2", "dev.tsv"))
    res, _, _, _, fails, every = client.predict(suite="", sample=20, over="dataset", dataset=f"{dev} @rows:11-40",
                                                api_name="/checklist")
    cases = sorted(((c["row"], t["name"]) for t in res["tests"] for c in t["cases"]), key=lambda r: r[0])
    assert [(r[0], r[1]) for r in every["data"]] == cases and all(11 <= r <= 40 for r, _ in cases)
    assert every["headers"][0] == fails["headers"][0] == "row"


def test_saliency_dataset_api(client):
    res, summary, plot, table = client.predict("sentiment_plain", "gradient_norm", "1e-03", 6,
                                               api_name="/saliency_dataset")
    assert res["n"] == 6 and res["method"] == "gradient_norm" and len(res["examples"]) == 6
    assert "comprehensiveness" in summary and "random ranking" in summary and "Rank agreement" in summary
    assert [row[0] for row in table["data"]] == [i + 1 for i in res["lowest_agreement"]]


def test_saliency_dataset_names_a_bad_method_and_is_capped_when_hosted(tiny_pair, monkeypatch):
    from app.core import api
    from app.core.ground.errors import InputError

    with pytest.raises(InputError, match="method: 'shap' is not one of"):
        api.saliency(tiny_pair, dataset="sentiment_plain", method="shap")
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")  # each example is a full explanation by both models
    res = api.saliency(tiny_pair, dataset=api.released_dev_set(tiny_pair), method="gradient_norm")
    assert res["n"] == api.limits()["max_saliency_examples"] == 50
    with pytest.raises(InputError, match="limit: 500 is more than this server takes; give a whole number from 1 to 50"):
        api.saliency(tiny_pair, dataset=api.released_dev_set(tiny_pair), method="gradient_norm", limit=500)


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
    """Every dataset field opens on one dataset, the one Benchmark scores: the task's released dev split where it
    is here (Projection and Saliency had opened on the 30 shipped examples beside Benchmark's SST-2 dev), else
    the shipped examples the pair can read (single sentences or sentence pairs); every field offers both. The
    Behavioural tab proposes a released suite only when its labels fit the task (none for RTE)."""
    from app.core import api
    from app.ui import build
    from app.ui.common import Ctx

    pair = request.getfixturevalue(fixture)
    demo = build(pair)
    (dev,) = api.released_datasets(pair)  # offered by name: "sst2 dev (released GLUE)"
    fields = [b for b in demo.blocks.values() if isinstance(b, gr.Dropdown) and "dataset" in (b.label or "")]
    # (Behavioural's is the dataset its perturbations are made from)
    assert len(fields) == 7 and all(dev in [v for _, v in f.choices] for f in fields)
    # one first value for all but the attack's (an attack runs on the input unless a dataset is picked)
    assert {f.value for f in fields} == {dev, ""} and sum(f.value == dev for f in fields) == 6
    for f in fields:
        if f.value:
            assert all(len(e.texts) == len(pair.task.fields) for e in api.resolve_dataset(pair, f.value, 5).examples)
    # where the released data is not beside the checkout (a Space), the shipped examples the task reads
    no_dev = Ctx(pair, Ctx.of(pair).heavy, False, [])
    from unittest import mock

    with mock.patch.object(api, "released_datasets", lambda p: {}):
        assert no_dev.default_dataset == expected
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


def test_attack_examples_carry_their_gold_label(tiny_pair, tiny_nli_pair):
    """An attack needs the input's gold label: the Attacks tab's examples fill it in from the shipped files,
    and leave it to the user where the task has no such label (RTE's not_entailment on a 3-way NLI pair)."""
    from types import SimpleNamespace

    from app.core.models.registry import TASKS
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
    from app.core.techniques.counterfactuals import parse_pairs, replace_words
    from app.ui import _default_swaps, _shipped

    for pair in (tiny_pair, tiny_nli_pair):
        pairs = parse_pairs(_default_swaps(pair))
        assert "cities" in pairs  # the study's own probe stays
        hit = [e for e in _shipped(pair) if replace_words(e, pairs)[1]]
        assert hit and hit[0] == _shipped(pair)[0]  # the first example, the one people click, has one


def test_app_launch_warms_umap_wordnet_and_the_meaning_encoder_even_if_one_fails(monkeypatch):
    """The warm-up thread runs each step; a failing one (here UMAP) is logged and the next still runs; the
    sentence encoder that checks a WordNet swap's meaning is loaded too (the first swap waited for it)."""
    import app.core.techniques.counterfactuals as counterfactuals
    import app.core.techniques.meaning as meaning
    import app.core.techniques.projection as projection
    from app.ui import _warm_up

    called = []

    def broken():
        called.append("umap")
        raise RuntimeError("numba unavailable")

    monkeypatch.setattr(projection, "warm_up", broken)
    monkeypatch.setattr(counterfactuals, "warm_up", lambda: called.append("wordnet"))
    monkeypatch.setattr(meaning, "embed", lambda texts: called.append("encoder"))
    monkeypatch.delenv("ALBERT_LENS_WARM_UP", raising=False)  # the suite's servers skip them (conftest.py)
    _warm_up().join(timeout=10)
    assert called == ["umap", "wordnet", "encoder"]
    # the operator's switch, read as every on/off setting is: off, none of them, in the app's thread and in each
    # worker's set-up (`api.warm_ups`)
    for value, want in (("0", []), ("off", []), ("1", ["umap", "wordnet", "encoder"])):
        called.clear()
        monkeypatch.setenv("ALBERT_LENS_WARM_UP", value)
        _warm_up().join(timeout=10)
        assert called == want, value


def test_attack_api_takes_named_arguments(client):
    """The names gradio_client users see (README) are part of the API: calling by them must keep working, and
    the dataset may be left out (its default is the "none" choice: attack the text)."""
    res, summary, *_ = client.predict(text="a gorgeous , witty , seductive movie .", text2="",
                                      recipe="deepwordbug", label="positive",
                                      n=1, query_budget=40, time_limit=20, api_name="/attack")
    assert res["recipe"] == "deepwordbug" and len(res["examples"]) == 1
    assert res["examples"][0]["texts"] == ["a gorgeous , witty , seductive movie ."]
    assert all(r["queries"] is None or r["queries"] <= 40 for r in res["examples"][0]["results"])
    assert set(res["summary"]) == set(res["models"])


def test_attack_summary_says_a_long_input_was_attacked_where_the_model_reads_it(client):
    text = "a gorgeous , witty , seductive movie . " * 300
    res, summary, *_ = client.predict(text=text, text2="", recipe="deepwordbug", label="positive",
                                      dataset=None, n=1, query_budget=20, time_limit=20,
                                      api_name="/attack")
    notes = [r.get("note") for r in res["examples"][0]["results"]]
    assert all(n and "the rest of the input is left as it was" in n for n in notes)
    assert all(n.replace("'", "&#x27;") in summary for n in notes)


def test_the_client_api_requires_only_what_each_endpoint_needs(client):
    """`client.view_api()`: an input with a sensible default is optional (the second text of a one-sentence
    model, the dataset of an attack on the typed text, the upload beside a named dataset); outputs have short
    names; no default is a path on the server."""
    info = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    required = {name: [p["parameter_name"] for p in e["parameters"] if not p["parameter_has_default"]]
                for name, e in info.items()}
    assert required == {"/predict": ["text"], "/saliency": ["text"], "/saliency_methods": ["text"],
                        "/saliency_dataset": [], "/counterfactual": [], "/project": [], "/benchmark": [], "/slices": [],
                        "/confusion": [], "/curves": [],
                        "/facts": [], "/attack": [], "/checklist": [], "/attack_stop": [], "/similarity": [],
                        "/attention": ["text"], "/tokens": ["text"], "/locate": ["text"]}, required
    for name, e in info.items():
        assert all(len(r["label"]) <= 30 for r in e["returns"]), (name, [r["label"] for r in e["returns"]])
        defaults = [p["parameter_default"] for p in e["parameters"]]
        assert not [d for d in defaults if isinstance(d, str) and d.startswith("/")], (name, defaults)
    # and a call by keyword with only the required input runs as the README shows
    res, *_ = client.predict(text="a fine film", api_name="/predict")
    assert res["input"] == ["a fine film"]



def test_a_handlers_error_stays_on_screen_as_one_escaped_line():
    """Gradio closed an error after 10 s, leaving bare "Error" badges and no reason: the app's errors stay until
    the reader closes them, ours as written (escaped), anything else as one line naming the handler."""
    import gradio as gr

    from app.core.ground.errors import InputError
    from app.ui.common import guarded

    @guarded
    def do_benchmark():
        raise InputError("dataset: <missing.tsv> not found")

    @guarded
    def do_project():
        raise KeyError("/srv/secret/path")

    with pytest.raises(gr.Error) as ours:
        do_benchmark()
    assert ours.value.message == "dataset: &lt;missing.tsv&gt; not found" and ours.value.duration is None
    with pytest.raises(gr.Error) as other:
        do_project()
    assert other.value.duration is None and "/srv" not in other.value.message
    assert other.value.message.startswith("something went wrong in project (KeyError)")


def test_slices_api_answers_under_the_facades_names(client, tiny_pair):
    """gradio_client's /slices takes the facade's inputs in order (dataset, upload, max examples, metric,
    min_size, clusters) and answers with its result; a dataset without labels is a message naming it."""
    from gradio_client.exceptions import AppError

    from app.core import api

    from .conftest import shared

    path = str(shared("glue", "sst2", "dev.tsv"))
    res, summary, plot, table = client.predict(path, None, 80, "agreement", 10, 0, api_name="/slices")
    direct = api.slices(tiny_pair, path, limit=80, metric="agreement", min_size=10, clusters=0).to_dict()
    assert res["metric"] == "agreement" and res["slices"] == direct["slices"]
    assert [row[0] for row in table["data"]] == [s["name"] for s in res["slices"]]
    with pytest.raises(AppError, match="min_size: 3 is too small"):
        client.predict(path, None, 80, "accuracy", 3, 0, api_name="/slices")


def test_confusion_and_curves_answer_under_the_facades_names_in_the_benchmark_tab(client, tiny_pair):
    """gradio_client's /confusion and /curves (the Benchmark tab's "How each errs") take the dataset fields the
    tab shares with /benchmark, then their option; they answer with the facade's result, its text and a figure,
    and a class the models lack is a message naming the field."""
    from gradio_client.exceptions import AppError

    from app.core import api

    from .conftest import shared

    path = str(shared("glue", "sst2", "dev.tsv"))
    res, text, plot = client.predict(path, None, 60, "length", api_name="/confusion")
    assert res == api.confusion(tiny_pair, path, limit=60, facet="length").to_dict()
    assert all(f"{part['name']} (n={part['n']:,})" in text for part in res["facets"]) and plot
    res, text, plot = client.predict(path, None, 60, "negative", api_name="/curves")
    direct = api.curves(tiny_pair, path, limit=60, positive="negative").to_dict()
    assert res["positive"] == "negative" and res["auc"] == direct["auc"] and res["roc"] == direct["roc"]
    assert f"ROC AUC of {res['models'][0]}: {res['auc']['values'][0]:.3f}" in text and plot
    assert client.predict(path, None, 60, api_name="/curves")[0]["positive"] == "positive"
    with pytest.raises(AppError, match="positive: 'neutral' is not one of the models' labels"):
        client.predict(path, None, 60, "neutral", api_name="/curves")


def test_every_tab_reads_one_example_and_a_pick_has_compare_answer_it(tiny_pair, tmp_path, monkeypatch):
    """One example for the whole app: every endpoint that reads a text reads the same two boxes, shown once; a
    pick that opens Compare (a benchmark row, a slice, a CheckList failure, a projection point) is followed, once
    it has loaded, by Compare's own prediction into Compare's outputs, and a pick that loaded nothing runs nothing.
    A slice, brushed points or pinned edits saved as a set become every dataset field's value."""
    import json

    from app.core import api
    from app.core.ground import saved
    from app.ui import build
    from app.ui.common import when_given

    demo = build(tiny_pair)
    boxes = [b for b in demo.blocks.values() if isinstance(b, gr.Textbox)
             and b.elem_id in ("example-text", "example-text2")]
    assert len(boxes) == 2
    fns = {f.api_name: f for f in demo.fns.values() if f.api_name}
    readers = ("predict", "saliency", "saliency_methods", "counterfactual", "attention", "attack")
    for name in readers:
        assert [i._id for i in fns[name].inputs[:2]] == [b._id for b in boxes], name
    every_box = [b for b in demo.blocks.values() if isinstance(b, gr.Textbox) and b.label and
                 b.label.split(" ·")[0] in tiny_pair.task.fields]
    assert every_box == boxes[:1]  # no tab has a text box of its own any more
    click = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "projection-click")
    picks = {f._id: f for f in demo.fns.values() if f.outputs and any(isinstance(o, gr.Tabs) for o in f.outputs)
             and (f.collects_event_data or [t[0] for t in f.targets] == [click._id])}
    answered = [f for f in demo.fns.values() if f.trigger_after in picks and f.trigger_only_on_success]
    # benchmark rows, slices, CheckList failures, picked projection points, counterfactual edits, a point clicked on
    # the projection (its row, from the page's script), the examples nearest the input ("where is my sentence");
    # an attack's rows set the example but keep the Attacks tab (its panels show the picked row); each pick also
    # sets the note under it
    assert len(picks) == 8 and len(answered) == 7 and len({f.trigger_after for f in answered}) == 7
    assert all(f.outputs[-1].elem_id == "example-note" for f in picks.values())
    # a slice picked in Benchmark or points brushed on the projection become every dataset field's value
    fields = [b for b in demo.blocks.values() if isinstance(b, gr.Dropdown) and "dataset" in (b.label or "")]
    slicers = [f for f in demo.fns.values() if len(f.outputs) > 1 and f.outputs[-1].elem_id == "example-note"
               and f._id not in picks]
    # (and Counterfactuals' pinned edits, saved as a set)
    assert len(slicers) == 3 and len(fields) >= 6
    for f in slicers:
        assert {o._id for o in f.outputs[:-1]} == {b._id for b in fields}
    monkeypatch.setattr(saved, "root", lambda: tmp_path / "saved")
    edit = json.loads(json.dumps(api.counterfactual(tiny_pair, "a fine film", generator="your_edit",
                                                    edited="a dull film").to_dict()))
    *updates, note = next(f for f in slicers if len(f.inputs) == 3).fn(edit["changes"], "ui set", True)
    assert all(u["value"] == "saved:ui set" and ("saved «ui set» (2 examples)", "saved:ui set") in u["choices"]
               for u in updates) and "saved 2 examples as «ui set»" in note
    assert [e.texts for e in api.resolve_dataset(tiny_pair, "saved:ui set").examples] == [("a fine film",),
                                                                                        ("a dull film",)]
    brushed = {"picked": [1, 2], "dataset": "sentiment_plain @rows:4-9", "name": "sentiment_plain, 6 picked rows",
               "points": [{"index": i, "row": i + 4} for i in range(6)]}  # a brush over a slice: its own rows
    *updates, note = next(f for f in slicers if len(f.inputs) == 1).fn(brushed)
    assert all(u["value"] == "sentiment_plain @rows:5,6" for u in updates) and "2 points picked" in note
    for f in answered:
        assert [o._id for o in f.outputs] == [o._id for o in fns["predict"].outputs]
        assert [i._id for i in f.inputs] == [b._id for b in boxes]
    run = answered[0].fn
    out = run("a fine film", "")
    assert out[0]["models"][0]["model"] == tiny_pair.models[0].name  # Compare's JSON, for the picked text
    assert run("", "") == [{"__type__": "update"}] * 4 == when_given(lambda *a: 1 / 0, 4)("  ")


def test_the_app_waits_for_its_own_server_where_gradio_gives_up_after_one_slow_answer(monkeypatch):
    """Gradio checks that its server answers on localhost before `launch()` returns and gives up after one HEAD
    of over 3 s: on a busy CPU the app failed to start ("When localhost is not accessible, a shareable link must
    be created", seen in a test run). The app's launch asks `answers`, which tries again until `READY_S`."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from gradio import networking

    import app.ui as ui

    from .conftest import free_port

    heads = []

    class Slow(BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 - the stdlib's name
            heads.append(time.monotonic())
            time.sleep(4 if len(heads) == 1 else 0)  # the first answer takes longer than Gradio waits
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/"
    try:
        assert not networking.url_ok(url)  # Gradio's own check
        heads.clear()  # the same slow first answer again
        assert ui.answers(url, wait_s=20) and heads
        heads.clear()
        assert not ui.answers(f"http://127.0.0.1:{free_port()}/", wait_s=1)  # nothing there: no answer
    finally:
        server.shutdown()
        server.server_close()

    asked = []
    monkeypatch.setattr(ui, "answers", lambda u, wait_s=ui.READY_S: asked.append(u) or True)
    with gr.Blocks() as demo:
        gr.Markdown("hello")
    ui._page_at_launch(demo)
    _, local, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True,
                              quiet=True)
    try:
        assert asked == [local] and networking.url_ok is not ui.answers  # asked for this launch, then put back
    finally:
        demo.close()
