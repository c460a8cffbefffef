"""The front ends' summaries, tables and highlighted words, built from the facade's results without Gradio:
what a researcher reads in the app and on the command line."""
import pandas as pd
import pytest


def test_disagreement_table_says_who_is_right():
    from app.core.present.views import disagreement_frame

    res = {"disagreements": {"total": 2, "examples": [
        {"index": 4, "texts": ["a premise", "a hypothesis"], "gold": "entailment",
         "predictions": ["entailment", "not_entailment"], "confidence": [0.9, 0.8], "right": "BERT"},
        {"index": 0, "texts": ["x " * 400], "gold": "a", "predictions": ["b", "c"], "confidence": [0.5, 0.6],
         "right": None}]}}
    frame = disagreement_frame(res, ["BERT", "ALBERT"])
    assert frame.iloc[0].tolist() == [5, "a premise ‖ a hypothesis", "entailment", "entailment", "not_entailment",
                                      "BERT"]
    assert frame.iloc[1]["right"] == "neither" and "more characters" in frame.iloc[1]["input"]
    scores = {"disagreements": {"total": 1, "examples": [
        {"index": 2, "texts": ["s1", "s2"], "gold": 3.5, "predictions": [1.234, 4.0], "gap": 2.766}]}}
    assert disagreement_frame(scores, ["A", "B"]).iloc[0].tolist() == [3, "s1 ‖ s2", "3.5", "1.23", "4.00",
                                                                       "gap 2.77"]


def test_dataset_counterfactual_summary_says_whether_the_flip_rates_differ():
    from app.core.ground.significance import compare_events
    from app.core.present.views import counterfactual_summary

    cmp = compare_events([True] * 12 + [False] * 88, [False] * 100, metric="flip rate")
    res = {"flip_rate": [0.12, 0.0], "only": [[{}] * 12, []], "changed": 100, "edits": "word_replacement",
           "examples_changed": 100, "dataset": "sst2/dev", "comparison": cmp}
    text = counterfactual_summary(res, ["BERT", "ALBERT"])
    assert "ALBERT − BERT flip rate: -0.120" in text and "BERT's flip rate is higher beyond chance on these 100 edits" \
        in text and f"p = {cmp['p_value']:.3g} (McNemar, exact)" in text


def test_attack_summary_says_why_examples_were_skipped():
    from app.core.present.views import attack_line

    s = {"success_rate": None, "attacked": 0, "skipped": 2, "avg_queries": None, "transfer_rate": None}
    assert attack_line("BERT", s) == ("**BERT**: success n/a of 0 attacked (2 skipped: already wrong on the gold "
                                       "label), 0 queries, transfer n/a")
    s |= {"success_rate": 0.5, "attacked": 4, "skipped": 0, "avg_queries": 80.4, "transfer_rate": 0.25}
    assert attack_line("<b>", s) == "**&lt;b&gt;**: success 50% of 4 attacked, 80 queries, transfer 25%"
    s |= {"avg_perturbed_words_pct": 12.34, "avg_seconds": 0.456, "transfer_n": 2}
    assert attack_line("<b>", s, markdown=False) == ("<b>: success 50% of 4 attacked, 80 queries, 12.3% of words "
                                                     "perturbed, 0.46 s/example, transfer 25% of 2")


def test_saliency_summary_shows_no_negative_zero_and_names_a_regression_score():
    from app.core.present.views import saliency_summary

    base = {"model": "BERT", "seconds": 0.25, "delta": None, "note": ""}
    res = {"maps": [base | {"target_label": "positive", "probability": 0.9981},
                    base | {"model": "STS", "target_label": None, "probability": None}],
           "faithfulness": [{"comprehensiveness": 0.0021, "sufficiency": -0.00004}] * 2, "agreement": None}
    first, second, _ = saliency_summary(res).split("\n\n")
    assert first == ("**BERT** explains *positive* (p=0.998): comprehensiveness 0.002, sufficiency 0.000, 250 ms")
    assert second.startswith("**STS** explains the score: comprehensiveness 0.002, sufficiency 0.000")


def test_projection_axes_fit_the_points_not_zero():

    from app.core.present.views import span

    assert span(pd.Series([9.0, 12.0])) == pytest.approx([8.85, 12.15])
    assert span(pd.Series([3.0, 3.0])) == [2.5, 3.5]


def test_facts_table_text():
    from app.core.present.views import fact_text

    assert [fact_text(v) for v in (1007916, 3.205184, 555.51321, True, "bert")] == \
        ["1,007,916", "3.21", "556", "True", "bert"]


def test_counterfactual_notes_say_which_model_they_are_about():
    from app.core.present.views import counterfactual_summary

    res = {"generator": "ablation_flip", "changes": [{"flipped": [True, False]}],
           "per_model": [{"model": "BERT", "size": 1}, {"model": "<ALBERT>", "note": "no set of up to 3 flips it"}]}
    assert counterfactual_summary(res, ["BERT", "<ALBERT>"]) == (
        "1 edit(s); label flips: **BERT** 1 · **&lt;ALBERT&gt;** 0<br>**&lt;ALBERT&gt;**: no set of up to 3 flips it")


def test_changes_table_leads_with_examples_that_flip_one_model_only():
    from app.core.present.views import changes_frame

    def change(text, flipped):
        return {"edited": [text], "edits": [["film", "movie"]], "generator": "word_replacement",
                "before": [{"label": "positive"}] * 2, "after": [{"label": "negative"}] * 2,
                "flipped": flipped, "deltas": [{"positive": -0.5}] * 2}

    res = {"generator": "dataset_flip_rate", "flip_rate": [0.4, 0.6],
           "examples": [change("a", [False, False]), change("b", [True, True]), change("c", [False, True]),
                        change("d", [True, False]), change("e", [False, True])]}
    frame = changes_frame(res, ["BERT", "ALBERT"])
    assert list(frame["edited"]) == ["c", "d", "e", "b", "a"]
    assert list(frame["flips"]) == ["ALBERT only", "BERT only", "ALBERT only", "both", "none"]
    assert list(frame.columns[-3:]) == ["ALBERT before", "ALBERT after", "ALBERT Δp"]
    mixed = change("f", [False, False]) | {"before": [{"label": "negative"}, {"label": "positive"}],
                                           "deltas": [{"negative": 0.25, "positive": -0.25}, {"positive": -0.5}]}
    frame = changes_frame({"generator": "word_replacement", "changes": [res["examples"][0], mixed]},
                           ["BERT", "ALBERT"])
    assert list(frame["BERT Δp"]) == [-0.5, 0.25] and not frame.isna().any().any()  # no column per label
    single = changes_frame({"generator": "word_replacement", "changes": res["examples"]}, ["BERT", "ALBERT"])
    assert list(single["edited"]) == ["a", "b", "c", "d", "e"]  # one input's edits keep their order
    long = "a fine film. " * 100
    edited = long[:650] + "a fine movie." + long[663:]
    cell = changes_frame({"generator": "word_replacement", "changes": [change(edited, [False, False])
                                                                       | {"original": [long]}]},
                          ["BERT", "ALBERT"])["edited"][0]
    assert "a fine «movie»." in cell and cell.startswith("…") and cell.endswith("…") and len(cell) < 400


def test_every_checked_edit_says_whether_it_is_counted_and_the_counted_lead():
    """WordNet swaps are checked for meaning: each row says "yes" or why not (the trial found "bad -> big" and
    "plot -> plot of land" at the top with nothing saying the rates leave them out); counted rows come first, on
    one input and over a dataset; generators whose edits aren't checked get no column."""
    from app.core.present.views import changes_frame, changes_in_order, counted
    from app.core.techniques.meaning import MIN_COSINE

    def change(text, flipped, validity):
        return {"edited": [text], "original": ["a plot"], "edits": [["plot", text.split()[-1]]],
                "generator": "wordnet_synonym", "before": [{"label": "positive"}] * 2,
                "after": [{"label": "negative"}] * 2, "flipped": flipped, "deltas": [{"positive": -0.5}] * 2,
                "validity": validity}

    ok = {"part_of_speech_kept": True, "usual_sense": True, "cosine": 0.93, "valid": True}
    sense = {"part_of_speech_kept": True, "usual_sense": False, "cosine": 0.9, "valid": False}
    drift = {"part_of_speech_kept": True, "usual_sense": None, "cosine": MIN_COSINE - 0.1, "valid": False}
    both = {"part_of_speech_kept": False, "usual_sense": False, "cosine": 0.5, "valid": False}
    one = {"generator": "wordnet_synonym", "changes": [change("a scheme", [True, False], sense),
                                                        change("a story", [False, False], ok),
                                                        change("a land", [False, True], both),
                                                        change("a secret", [False, False], drift)]}
    frame = changes_frame(one, ["BERT", "ALBERT"])
    assert list(frame["edited"]) == ["a «story»", "a «scheme»", "a «land»", "a «secret»"]
    assert list(frame["counted"]) == [
        "yes", "no: not the word's usual sense",
        f"no: another part of speech, not the word's usual sense, meaning moved (cosine 0.50 < {MIN_COSINE:g})",
        f"no: meaning moved (cosine {MIN_COSINE - 0.1:.2f} < {MIN_COSINE:g})"]
    order = [c["edited"][0] for c in changes_in_order(one, ["BERT", "ALBERT"])]
    assert order == ["a story", "a scheme", "a land", "a secret"]  # a picked row is the edit at its place
    over = one | {"generator": "dataset_wordnet_synonym", "flip_rate": [0.5, 0.5], "examples": one["changes"]}
    over.pop("changes")
    frame = changes_frame(over, ["BERT", "ALBERT"])
    assert list(frame["counted"])[:1] == ["yes"] and all(c.startswith("no") for c in list(frame["counted"])[1:])
    assert list(frame["flips"])[1:] == ["BERT only", "ALBERT only", "none"]  # flips order within the uncounted
    assert counted({"edited": ["x"]}) == ""
    plain = {"generator": "word_replacement", "changes": [{k: v for k, v in c.items() if k != "validity"}
                                                          for c in one["changes"]]}
    assert "counted" not in changes_frame(plain, ["BERT", "ALBERT"]).columns


def test_highlight_keeps_the_text_and_puts_what_the_model_did_not_read_in_one_short_span():
    """Every character of both fields comes back in order; past the cut, a field's rest is one plain span (a
    100,000-character review was 16,000 unscored spans for the browser), shortened when long."""
    from app.core.present.views import highlight

    texts = ["A fine  film.", " ".join(f"w{i}" for i in range(10))]
    scores = [1.0, -2.0, 0.5, 0.0] + [0.1] * 5 + [0.0] * 5
    spans = highlight({"scores": scores, "unread": list(range(9, 14))}, texts)
    assert "".join(t for t, _ in spans) == texts[0] + "  ‖  " + texts[1]
    assert spans[:3] == [("A", 0.5), (" ", None), ("fine", -1.0)]
    assert spans[-1] == (" w5 w6 w7 w8 w9", None) and spans[-2] == ("w4", 0.05)
    long = "fine " * 2000
    spans = highlight({"scores": [1.0] + [0.0] * 1999, "unread": list(range(1, 2000))}, [long])
    assert spans[0] == ("fine", 1.0) and spans[1][0].endswith(
        f"… [{len(long) - 4 - 300:,} more characters, not read]")
    assert len(spans) == 2 and spans[1][0].startswith(long[4:304])
    from app.core.present.views import clip  # the attack tab's untouched rest and adversarial column use the same cut

    assert clip("x" * 400) == "x" * 400 and clip("x" * 1000) == "x" * 300 + " … [700 more characters]"


def test_the_checklist_legend_explains_every_test_type_the_released_suites_use():
    from app.core.present import views
    from app.core.techniques import checklist as cl

    from .conftest import shared

    used = set()
    for suite in sorted(shared("checklist").glob("*_suite.json.gz")):
        used |= {t.type for t in cl.load_suite(suite).tests}
    assert used and used <= set(views.CHECKLIST_TYPES)
    legend = views.checklist_types_legend()
    assert all(f"**{kind}**, " in legend for kind in used)


def test_generators_read_as_words_and_flip_rates_fill_their_axis():
    """A table's generator column names each generator in words, and a dataset's flip rates of a few percent
    get an axis that fits them, with the interval's top inside it."""
    from app.core.api import GENERATORS
    from app.core.present.plots import counterfactual_figure
    from app.core.present.views import generator_name

    names = {generator_name(g) for g in GENERATORS}
    assert "WordNet synonym" in names and "word swap" in names and not any("_" in n for n in names)
    res = {"flip_rate": [0.039, 0.06], "changed": 385, "only": [[{}] * 12, [{}] * 20],
           "comparison": {"intervals": [[0.02, 0.058], [0.04, 0.082]]}}
    ax = counterfactual_figure(res, ["BERT", "ALBERT"]).axes[0]
    low, high = ax.get_ylim()
    assert low == 0 and 0.082 < high <= 0.11


def test_edited_words_are_marked_in_the_changes_table():
    from app.core.present.views import mark_edits

    assert mark_edits("the cities were lovely", "the townships were lovely") == "the «townships» were lovely"
    assert mark_edits("the film , the food", "the movie , the meal") == "the «movie» , the «meal»"
    assert mark_edits("a very good film", "a good film") == "a «∅» good film"
    assert mark_edits("same", "same") == "same"
    # the marks wrap words the edit put in and nothing else: without them the text is the edited text
    edited = "it 's a charming and often affecting journeying ."
    assert mark_edits("it 's a charming and often affecting journey .", edited).replace("«", "").replace("»", "") \
        == edited


def test_the_command_lines_saliency_text_is_written_in_views():
    """The CLI prints `views.saliency_text`: a row per word some model read (the words past every model's cut
    summed up in one line), each model's column headed by the class it explains, faithfulness and agreement."""
    from app.core.present import views

    maps = [{"model": m, "target_label": "positive", "words": ["a", "fine", "film"], "fields": [0, 0, 0],
             "scores": [0.0, s, -0.00001], "probability": 0.9, "seconds": 0.012, "delta": None, "note": "",
             "unread": [2]} for m, s in (("BERT", 0.5), ("ALBERT", -0.25))]
    res = {"method": "occlusion", "output": "logit", "maps": maps, "agreement": None, "agreement_label": "positive",
           "faithfulness": [{"comprehensiveness": 0.4, "sufficiency": 0.1}] * 2}
    lines = views.saliency_text(res, "offline", ["text"]).splitlines()
    assert lines[0] == "occlusion · pair offline"
    assert "BERT (logit of positive)" in lines[2] and "ALBERT (logit of positive)" in lines[2]
    assert lines[3].split() == ["1", "a", "+0.0000", "+0.0000"]
    assert lines[4].split() == ["2", "fine", "+0.5000", "-0.2500"]
    assert "1 words past the cut" in lines[5] and not any(" film " in ln for ln in lines)
    assert "BERT: p=0.900, comprehensiveness 0.400, sufficiency 0.100, 12 ms" in lines
    assert lines[-1] == "rank agreement on positive (Spearman): undefined"


def test_highlight_reads_the_words_places_from_the_map(tiny_pair):
    """The map carries each word's place in its text (the core's alignment found it): the highlight built from
    them is the one re-splitting the text gave."""
    from app.core import api
    from app.core.present.views import highlight

    text = "A  gorgeous,witty ,  seductive   movie ."
    res = api.saliency(tiny_pair, text, method="gradient_x_input")
    for m in res["maps"]:
        assert [text[a:b] for a, b in m["spans"]] == m["words"]
        assert highlight(m, [text]) == highlight({k: v for k, v in m.items() if k != "spans"}, [text])


@pytest.mark.parametrize("p, shown", [(1.66e-4, "0.000166"), (3e-12, "3e-12"), (0.0505, "0.0505"), (1.0, "1"),
                                      (2.5e-5, "2.5e-05")])
def test_a_p_value_keeps_its_digits_however_small(p, shown):
    """LIT's Metrics table printed McNemar's p = 1.66e-4 as "0.000"; LIT gets the app's own words for it."""
    from app.core.present import views

    assert views.p_text(p) == shown and float(shown) == pytest.approx(p, rel=1e-2)
