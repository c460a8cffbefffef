import pytest

from app.core.present.plots import (
    counterfactual_figure,
    grouped_bars,
    saliency_figure,
    transition_labels,
    transitions_figure,
)


def test_grouped_bars_put_models_side_by_side_not_stacked():
    rows = [{"word": "1:good", "model": "BERT", "score": 0.3},
            {"word": "1:good", "model": "ALBERT", "score": -0.2},
            {"word": "2:film", "model": "BERT", "score": 0.1},
            {"word": "2:film", "model": "ALBERT", "score": 0.05}]
    fig = grouped_bars(rows, "word", "score", "model", "score")
    ax = fig.axes[0]
    bars = ax.patches
    assert [round(b.get_height(), 6) for b in bars] == [0.3, 0.1, -0.2, 0.05]
    assert all(b.get_y() == 0 for b in bars)  # every bar starts at zero: nothing stacked
    assert len({round(b.get_x(), 6) for b in bars}) == 4
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["BERT", "ALBERT"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1:good", "2:film"]


def test_grouped_bars_draw_on_a_given_axis_with_missing_values_as_zero():
    from matplotlib.figure import Figure

    fig = Figure()
    axes = fig.subplots(1, 2)
    rows = [{"d": "sst2", "model": "BERT", "v": 0.9}, {"d": "imdb", "model": "ALBERT", "v": None}]
    assert grouped_bars(rows, "d", "v", "model", "acc", ax=axes[1], title="accuracy") is fig
    assert [round(b.get_height(), 6) for b in axes[1].patches] == [0.9, 0.0, 0.0, 0.0]
    assert axes[1].get_title() == "accuracy" and not axes[0].patches


def test_rates_keep_a_zero_to_one_axis_even_when_all_are_zero():
    rows = [{"model": m, "measure": "success rate", "value": 0.0} for m in ("BERT", "ALBERT")]
    assert grouped_bars(rows, "model", "value", "measure", "rate", ylim=(0, 1)).axes[0].get_ylim() == (0, 1)
    lo, hi = grouped_bars(rows, "model", "value", "measure", "rate").axes[0].get_ylim()
    assert lo < 0 < hi < 0.1  # matplotlib's own span around zero bars: why rates pass ylim


def test_counterfactual_plot_shows_each_models_own_delta():
    change = {"edits": [["cities", "townships"]], "before": [{"label": "positive"}, {"label": "negative"}],
              "deltas": [{"positive": -0.25, "negative": 0.25}, {"positive": -0.1, "negative": 0.1}]}
    ax = counterfactual_figure({"generator": "word_replacement", "changes": [change]}, ["BERT", "ALBERT"]).axes[0]
    assert [round(b.get_height(), 6) for b in ax.patches] == [-0.25, 0.1]  # each model's own label
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1: cities→townships"]
    flips = {"generator": "dataset_flip_rate", "flip_rate": [0.2, 0.05], "only": [[1, 2, 3], []], "changed": 20}
    ax = counterfactual_figure(flips, ["BERT", "ALBERT"]).axes[0]
    assert [round(b.get_height(), 6) for b in ax.patches] == [0.2, 0.15, 0.05, 0.0]
    assert ax.get_ylabel() == "share of the edits" and ax.get_title() == "20 edits; flip rate with its 95% interval"
    with_ci = counterfactual_figure(flips | {"comparison": {"intervals": [[0.05, 0.4], [0.0, 0.2]]}},
                                    ["BERT", "ALBERT"]).axes[0]
    caps = sorted(round(y, 6) for line in with_ci.lines if line.get_marker() not in (None, "None", "")
                  for y in line.get_ydata())
    assert caps == [0.0, 0.05, 0.2, 0.4]  # the flip rates' intervals; "flips only this model" has none


def test_saliency_figure_numbers_repeated_words_and_keeps_both_models():
    res = {"method": "integrated_gradients",
           "maps": [{"model": "BERT", "words": ["good", "good", "film"], "scores": [0.5, -0.25, 0.125]},
                    {"model": "ALBERT", "words": ["good", "good", "film"], "scores": [0.0, 0.75, -0.5]}]}
    ax = saliency_figure(res).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1:good", "2:good", "3:film"]
    # each model over its own largest |score| (BERT's 0.5, ALBERT's 0.75)
    assert [round(b.get_height(), 6) for b in ax.patches] == [1.0, -0.5, 0.25, 0.0, 1.0, round(-0.5 / 0.75, 6)]
    assert ax.get_title() == "integrated gradients, per word"
    res["maps"][0]["target_label"], res["maps"][1]["target_label"] = "negative", "positive"
    legend = saliency_figure(res).axes[0].get_legend().get_texts()
    assert [t.get_text() for t in legend] == ["BERT: negative", "ALBERT: positive"]
    for m in res["maps"]:
        m["output"] = "logit"
    legend = saliency_figure(res).axes[0].get_legend().get_texts()
    assert [t.get_text() for t in legend] == ["BERT: logit of negative", "ALBERT: logit of positive"]


def test_saliency_figure_of_a_long_input_shows_the_words_read_and_at_most_the_largest():
    """Words past both models' cut have no bars; of more words than the chart holds, the largest |scores| in
    either model stay, in text order (a 16,000-word input drew a figure too wide to encode: the app failed)."""
    words = [f"w{i}" for i in range(200)]
    first = [0.0] * 200
    second = [0.0] * 200
    for i in range(100):
        first[i], second[i] = 0.001 * i, -0.0005 * i
    first[7], second[50] = 5.0, -9.0
    res = {"method": "occlusion",
           "maps": [{"model": "BERT", "words": words, "scores": first, "unread": list(range(100, 200))},
                    {"model": "ALBERT", "words": words, "scores": second, "unread": list(range(120, 200))}]}
    ax = saliency_figure(res, most=10).axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["8:w7", "51:w50"] + [f"{i + 1}:w{i}" for i in range(92, 100)]
    assert ax.get_title() == "occlusion, per word: the 10 of 200 words with the largest scores"
    ax = saliency_figure(res, most=150).axes[0]  # ALBERT read up to word 120, BERT to 100: 120 words shown
    assert len(ax.get_xticklabels()) == 120 and ax.get_title().endswith("the 120 of 200 words read")


def test_layer_transition_axis_names_whole_transitions():
    """transitions[i] is hidden state i -> i + 1 (0: the embedding output): the app's plot and the CLI/report
    figure both say so, and a shallower model's line stops at its last layer."""
    assert transition_labels(3) == ["0→1", "1→2", "2→3"]
    fig = transitions_figure({"BERT": {"l2": [1.0, 2.0, 3.0], "cosine": [0.9, 0.8, 0.7]},
                              "ALBERT": {"l2": [3.0, 2.0], "cosine": [0.5, 0.6]}})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0→1", "1→2", "2→3"]
    assert [len(line.get_xdata()) for line in ax.get_lines()] == [3, 2]


def _bench(metric, cmp):
    return {"n": 200, "models": [{"model": "BERT", metric: 0.9}, {"model": "ALBERT", metric: 0.8}], "comparison": cmp}


def test_benchmark_figure_draws_the_intervals_and_the_table_of_who_is_right():
    from app.core.present.plots import benchmark_figure

    cmp = {
        "metric": "accuracy",
        "confidence": 0.95,
        "intervals": [[0.86, 0.94], [0.75, 0.85]],
        "test": "McNemar, exact",
        "p_value": 0.0123,
        "both_right": 150,
        "only_right": [30, 10],
        "both_wrong": 10,
    }
    fig = benchmark_figure(_bench("accuracy", cmp))
    bars, table = fig.axes
    assert [round(p.get_height(), 6) for p in bars.patches] == [0.9, 0.8]
    caps = sorted(round(y, 6) for line in bars.lines for y in line.get_ydata())  # the error bars' caps
    assert caps == [0.75, 0.85, 0.86, 0.94]
    assert bars.get_ylim() == (0.0, 1.0)  # bars from zero: a cut axis makes a small gap look large
    assert "95% exact interval" in bars.get_title()  # McNemar's own: Clopper-Pearson, not a bootstrap
    assert sorted(t.get_text() for t in table.texts) == sorted(["150", "30", "10", "10"])
    assert table.texts[1].get_text() == "30" and "p = 0.0123" in table.get_title()  # row: BERT right, ALBERT wrong
    assert [t.get_text() for t in table.get_xticklabels()] == ["ALBERT right", "ALBERT wrong"]


def test_benchmark_figure_of_a_regression_pair_or_an_undefined_test_has_the_bars_alone():
    from app.core.present.plots import benchmark_figure

    cmp = {"metric": "pearson", "confidence": 0.95, "intervals": [[0.8, 0.95], [0.7, 0.9]]}
    assert len(benchmark_figure(_bench("pearson", cmp)).axes) == 1
    fig = benchmark_figure(_bench("pearson", {"undefined": "a model gives every example the same score"}))
    assert len(fig.axes) == 1 and [round(p.get_height(), 6) for p in fig.axes[0].patches] == [0.9, 0.8]


def test_grouped_bars_draw_an_interval_where_a_row_has_one():
    rows = [{"d": "sst2", "model": "BERT", "acc": 0.9, "ci": [0.87, 0.93]},
            {"d": "sst2", "model": "ALBERT", "acc": 0.85, "ci": None}]
    ax = grouped_bars(rows, "d", "acc", "model", "accuracy", interval="ci").axes[0]
    marked = lambda a: [line for line in a.lines if line.get_marker() not in (None, "None", "")]  # error-bar caps
    caps = sorted(round(y, 6) for line in marked(ax) for y in line.get_ydata())
    assert caps == [0.87, 0.93]  # one error bar, BERT's; ALBERT's row has none
    assert not marked(grouped_bars(rows, "d", "acc", "model", "accuracy").axes[0])


def test_saliency_dataset_figure_shows_intervals_and_the_spread_of_agreement():
    from app.core.present.plots import saliency_dataset_figure

    m = lambda v: {"mean": v, "interval": [v - 0.05, v + 0.05], "n": 3}
    res = {"method": "integrated_gradients", "n": 3, "models": ["BERT", "ALBERT"],
           "comprehensiveness": [m(0.5), m(0.6)], "random_comprehensiveness": [m(0.15), m(0.1)],
           "sufficiency": [m(0.05), m(-0.02)],
           "examples": [{"agreement": 0.4}, {"agreement": None}, {"agreement": -0.2}, {"agreement": 0.7}]}
    bars, hist = saliency_dataset_figure(res).axes
    assert sorted(round(p.get_height(), 6) for p in bars.patches) == sorted([0.5, 0.15, 0.05, 0.6, 0.1, -0.02])
    assert sum(p.get_height() for p in hist.patches) == 3 and "3 defined" in hist.get_title()


def test_saliency_figure_of_a_pair_marks_where_the_second_text_starts():
    """An RTE map's bars run premise then hypothesis: a dashed line between them and each part named; a single
    text gets neither."""
    words = ["cities", "protested", ".", "people", "protested"]
    res = {"method": "occlusion", "fields": ["premise", "hypothesis"],
           "maps": [{"model": m, "words": words, "fields": [0, 0, 0, 1, 1], "scores": [0.1, 0.2, 0.0, 0.3, -0.1]}
                    for m in ("BERT", "ALBERT")]}
    ax = saliency_figure(res).axes[0]
    assert [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"] == [2.5]
    assert [(t.get_text(), round(t.get_position()[0], 6)) for t in ax.texts] == [("premise", -0.4),
                                                                                  ("hypothesis", 2.6)]
    single = {"method": "occlusion", "fields": ["sentence"],
              "maps": [{"model": "BERT", "words": words, "fields": [0] * 5, "scores": [0.1] * 5}]}
    ax = saliency_figure(single).axes[0]
    assert not ax.texts and not [line for line in ax.get_lines() if line.get_linestyle() == "--"]


def test_the_saliency_chart_and_the_highlight_agree_on_each_models_top_word():
    """A model with scores a hundred times smaller (ALBERT's occlusion) gets bars as tall as its highlight is
    deep: per model, the chart's tallest bar is the highlight's strongest word, and both reach 1. An unsigned
    method is drawn as magnitudes from zero and labelled so."""
    from app.core.present.views import highlight

    text = "the plot is bad and the acting is a mess"
    words = text.split()
    res = {"method": "occlusion", "signed": True, "maps": [
        {"model": "BERT", "words": words, "scores": [0.01, 0.2, 0.0, -0.9, 0.0, 0.01, 0.3, 0.0, 0.0, -0.5]},
        {"model": "ALBERT", "words": words, "scores": [0.0, -0.004, 0.0, 0.001, 0.0, 0.0, 0.002, 0.0, 0.0, -0.008]}]}
    ax = saliency_figure(res).axes[0]
    heights = [b.get_height() for b in ax.patches]
    for k, m in enumerate(res["maps"]):
        bars = heights[k * len(words): (k + 1) * len(words)]
        spans = [(w, v) for w, v in highlight(m, [text]) if v is not None]
        chart_top = max(range(len(words)), key=lambda i: abs(bars[i]))
        highlight_top = max(range(len(spans)), key=lambda i: abs(spans[i][1]))
        assert chart_top == highlight_top and spans[highlight_top][0] == words[chart_top]
        assert abs(bars[chart_top]) == pytest.approx(1.0) == abs(spans[highlight_top][1])
    assert "+ for the class" in ax.get_ylabel() and ax.get_ylim()[0] < 0
    res |= {"method": "gradient_norm", "signed": False}
    for m in res["maps"]:
        m["scores"] = [abs(x) for x in m["scores"]]
    ax = saliency_figure(res).axes[0]
    assert ax.get_ylim()[0] == 0 and "no sign" in ax.get_ylabel()


def test_cka_and_attention_plots_read_without_the_docs():
    """CKA: layer 0 is labelled as the embedding output, an undefined cell is drawn grey (masked), the best
    matches are marked large enough to see. Attention: both models on one colour scale (issue 60: on a scale each,
    ALBERT's nearly uniform map looked as intense as BERT's)."""
    import math

    from app.core.present.plots import attention_figure, similarity_figure

    nan = math.nan
    cka = [[nan, nan, nan], [nan, 0.9, 0.4], [nan, 0.5, 0.8]]
    res = {"models": ["BERT", "ALBERT"], "cross": {"cka": cka}, "a": {"cka": cka}, "b": {"cka": cka},
           "best_b_for_a": [None, 1, 2]}
    fig = similarity_figure(res)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["emb", "1", "2"]
    image = ax.get_images()[0].get_array()
    assert image.mask[0].all() and not image.mask[1:, 1:].any()
    marks = [line for line in ax.lines if line.get_marker() == "o"]
    assert len(marks) == 2 and all(line.get_markersize() >= 10 for line in marks)
    att = {"head": None, "models": [
        {"model": "BERT", "layer": 2, "units": ["a", "b"], "map": [[0.9, 0.1], [0.2, 0.8]]},
        {"model": "ALBERT", "layer": 2, "units": ["a", "b"], "map": [[0.06, 0.04], [0.05, 0.05]]}]}
    images = [a.get_images()[0] for a in attention_figure(att).axes if a.get_images()]
    assert [round(im.get_clim()[1], 6) for im in images[:2]] == [0.9, 0.9]


@pytest.mark.parametrize("signed", [True, False])
def test_the_saliency_charts_axis_label_fits_inside_the_figure(signed):
    """The y label said what the bars are on one line taller than the figure, so the app showed its middle."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    res = {"method": "integrated_gradients", "signed": signed, "fields": ["text"],
           "maps": [{"model": m, "target_label": "positive", "words": ["a", "fine", "film"], "fields": [0, 0, 0],
                     "scores": [0.1, 0.5, -0.2], "unread": []} for m in ("BERT", "ALBERT")]}
    fig = saliency_figure(res)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    label = fig.axes[0].yaxis.label
    box = label.get_window_extent(canvas.get_renderer())
    assert label.get_text().startswith("score" if signed else "magnitude")
    assert box.y0 >= 0 and box.y1 <= fig.bbox.y1 and box.x0 >= 0, (box, fig.bbox)


def test_a_counterfactual_chart_numbers_edits_as_the_table_marks_the_uncounted_and_fits_its_label():
    """The single-sentence chart's bars are numbered in the table's order (counted edits first), an edit that
    fails the meaning check is marked †, and the y label fits inside the figure (it was clipped)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    def change(new, valid):
        return {"edits": [["plot", new]], "before": [{"label": "positive"}] * 2,
                "deltas": [{"positive": -0.1}, {"positive": -0.2}],
                "validity": {"part_of_speech_kept": True, "usual_sense": valid, "cosine": 0.9, "valid": valid}}

    res = {"generator": "wordnet_synonym", "changes": [change("secret plan", False), change("story", True)]}
    fig = counterfactual_figure(res, ["BERT", "ALBERT"])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1: plot→story", "2: plot→secret plan †"]
    assert "† not counted" in ax.get_title()
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    box = ax.yaxis.label.get_window_extent(canvas.get_renderer())
    assert box.y0 >= 0 and box.y1 <= fig.bbox.y1 and box.x0 >= 0, (box, fig.bbox)


def _texts_of(fig) -> list:
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]


def test_figures_are_drawn_at_100_dpi_with_no_text_under_7_points():
    """What a phone reader's 9 px rests on: the app shows a figure at its drawn size on a narrow screen (the browser
    test checks the scale), Gradio draws it at the figure's dpi, and 7 pt at 100 dpi is 9.7 px. Every font size
    written in the figures' module is 7 pt or more, and the figures drawn here carry none smaller."""
    import inspect
    import re

    import numpy as np

    from app.core.ground.significance import compare_accuracy, compare_auc, compare_average_precision
    from app.core.present import plots

    sizes = [float(v) for v in re.findall(r"\b(?:fontsize|size|labelsize)=([0-9.]+)", inspect.getsource(plots))]
    assert sizes and min(sizes) >= 7, sorted(sizes)[:3]
    rng = np.random.default_rng(0)
    y = rng.random(60) < 0.5
    a, b = y + rng.normal(size=60), y + rng.normal(size=60)
    curves = {"dataset": "d", "n": 60, "models": ["BERT", "ALBERT"], "positive": "positive", "positives": int(y.sum()),
              "roc": [{"model": m, "x": [0, 0.5, 1], "y": [0, 0.8, 1]} for m in ("BERT", "ALBERT")],
              "pr": [{"model": m, "x": [0.5, 1], "y": [0.9, 0.5]} for m in ("BERT", "ALBERT")],
              "auc": compare_auc(y, a, b), "average_precision": compare_average_precision(y, a, b, resamples=50)}
    gold = ["p" if v else "n" for v in y]
    part = {"name": "all examples", "n": 60, "matrices": [[[20, 5], [6, 29]], [[18, 7], [9, 26]]],
            "accuracy": [0.8, 0.7], "comparison": compare_accuracy(gold, gold[::-1], gold)}
    confusion = {"dataset": "d", "n": 60, "models": ["BERT", "ALBERT"], "labels": ["n", "p"], "facet": "none",
                 "facets": [part, part]}
    cmp = {"metric": "accuracy", "confidence": 0.95, "intervals": [[0.86, 0.94], [0.75, 0.85]],
           "test": "McNemar, exact", "p_value": 0.0123, "both_right": 150, "only_right": [30, 10], "both_wrong": 10}
    figures = [plots.benchmark_figure(_bench("accuracy", cmp)), plots.curves_figure(curves),
               plots.confusion_figure(confusion)]
    for fig in figures:
        assert fig.dpi == 100
        small = [(t.get_text(), t.get_fontsize()) for t in _texts_of(fig) if t.get_fontsize() < 7]
        assert not small, small
