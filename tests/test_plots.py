from app.core.plots import counterfactual_figure, grouped_bars, saliency_figure, transition_labels, transitions_figure


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
    assert ax.get_ylabel() == "share of 20 edits"


def test_saliency_figure_numbers_repeated_words_and_keeps_both_models():
    res = {"method": "integrated_gradients",
           "maps": [{"model": "BERT", "words": ["good", "good", "film"], "scores": [0.5, -0.25, 0.125]},
                    {"model": "ALBERT", "words": ["good", "good", "film"], "scores": [0.0, 0.75, -0.5]}]}
    ax = saliency_figure(res).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1:good", "2:good", "3:film"]
    assert [round(b.get_height(), 6) for b in ax.patches] == [0.5, -0.25, 0.125, 0.0, 0.75, -0.5]
    assert ax.get_title() == "integrated gradients, per word"
    res["maps"][0]["target_label"], res["maps"][1]["target_label"] = "negative", "positive"
    legend = saliency_figure(res).axes[0].get_legend().get_texts()
    assert [t.get_text() for t in legend] == ["BERT: negative", "ALBERT: positive"]


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
