import numpy as np
import pytest

from app.core.ground.data import Example
from app.core.techniques.facts import count_parameters, layer_transitions, model_facts, parameter_split, shares_layers

from .conftest import SENTENCES


def test_parameter_split_adds_up_and_counts_shared_once(tiny_pair):
    bert, albert = (m.model for m in tiny_pair.models)
    for m in (bert, albert):
        assert sum(parameter_split(m).values()) == count_parameters(m)
    assert not shares_layers(bert) and shares_layers(albert)
    # ALBERT: 3 layers, one set of layer weights; adding layers adds no parameters
    layer = albert.albert.encoder.albert_layer_groups[0]
    assert parameter_split(albert)["encoder"] == sum(p.numel() for p in layer.parameters())


def test_parameter_split_finds_each_familys_modules(tiny_pair, family_dirs):
    """The split counted against each family's own modules: DistilBERT's encoder is called `transformer` and
    its head has a `pre_classifier`; ELECTRA projects its embeddings with `embeddings_project`."""
    from app.core.models.loading import load
    from app.core.models.registry import TASKS, ModelSpec

    count = lambda *mods: sum(p.numel() for m in mods for p in m.parameters())
    models = {k: load(ModelSpec(k, str(v), k, TASKS["sst2"])).model for k, v in family_dirs.items()}
    bert = tiny_pair.models[0].model
    expected = {
        "bert": (bert, (bert.bert.embeddings,), (bert.bert.encoder,), (bert.bert.pooler, bert.classifier)),
        "distilbert": (
            models["distilbert"],
            (models["distilbert"].distilbert.embeddings,),
            (models["distilbert"].distilbert.transformer,),
            (models["distilbert"].pre_classifier, models["distilbert"].classifier),
        ),
        "electra": (
            models["electra"],
            (models["electra"].electra.embeddings, models["electra"].electra.embeddings_project),
            (models["electra"].electra.encoder,),
            (models["electra"].classifier,),
        ),
        "roberta": (
            models["roberta"],
            (models["roberta"].roberta.embeddings,),
            (models["roberta"].roberta.encoder,),
            (models["roberta"].classifier,),
        ),
    }
    for name, (model, emb, enc, head) in expected.items():
        split = parameter_split(model)
        assert split == {"embeddings": count(*emb), "encoder": count(*enc), "head": count(*head)}, name
        assert sum(split.values()) == count_parameters(model)


def test_layer_transitions_against_hand_computation(tiny_pair):
    from app.core.techniques.embeddings import hidden_states

    clf = tiny_pair.models[1]
    ex = Example((SENTENCES[0],))
    t = layer_transitions(clf, [ex])
    s, _ = hidden_states(clf, ex)
    assert len(t["l2"]) == clf.model.config.num_hidden_layers
    assert t["l2"][0] == np.float32(np.linalg.norm(s[1] - s[0], axis=-1).mean())
    cos = (s[1] * s[2]).sum(-1) / (np.linalg.norm(s[1], axis=-1) * np.linalg.norm(s[2], axis=-1))
    assert abs(t["cosine"][1] - cos.mean()) < 1e-5


def test_model_facts_fields(tiny_pair):
    f = model_facts(tiny_pair.models[0], [Example((s,)) for s in SENTENCES])
    assert "latency_ms" not in f and "throughput_per_s" not in f  # speed is the facts' paired measurement only
    assert f["parameters"] == count_parameters(tiny_pair.models[0].model)


def test_model_facts_name_the_linear_layers_product(tiny_pair):
    """The latency shown depends on the matrix product; the facts say which one the model runs."""
    from app.core.techniques.facts import linear_layers

    from .test_kernels import forced

    clf = tiny_pair.models[0]
    with forced(clf.model, "onednn"):  # whichever this CPU chose: each backend, explicitly
        assert linear_layers(clf.model).startswith("oneDNN (")
    with forced(clf.model, "blas"):
        assert linear_layers(clf.model).startswith("PyTorch default")


def test_facts_name_the_bad_input_line(tiny_pair):
    """The facts field takes one input per line; a bad one is named by its line, not only by the task's field."""
    from app.core import api
    from app.core.ground.errors import LensError

    with pytest.raises(LensError, match=r"texts, line 2: field 'sentence' has only invisible characters \(U\+200B\)"):
        api.facts(tiny_pair, ["a fine film", "\u200b"])


def test_facts_lines_of_a_pair_task_split_at_the_tab(tiny_nli_pair):
    """One rule for the app's field and the CLI's lines: premise<TAB>hypothesis, or one text used for both."""
    from app.core import api
    from app.core.ground.errors import LensError

    assert api.facts(tiny_nli_pair, ["A man sleeps.\tA person rests.", "A man sleeps."])["n_inputs"] == 2
    with pytest.raises(LensError, match=r"texts, line 2: field 'hypothesis' has only invisible characters"):
        api.facts(tiny_nli_pair, ["A man sleeps.", "A man sleeps.\t\u200b"])


def test_facts_latency_ratio_and_its_verdict_come_from_one_measurement(tiny_pair, monkeypatch):
    """Model facts printed "latency 3.69x" (the second model slower) directly above "the first model's latency is
    higher beyond chance", and "latency 0.80x" beside table medians of 139 and 31 ms: ratio, table and verdict
    came from different timings. With a clock that makes the second model 3x slower one input at a time and 3x
    slower over a batch, and each model's own timing saying the opposite, the table, the headline ratios and the
    verdicts all read the paired measurements, each figure with its interval."""
    import dataclasses
    import functools

    from app.core import api
    from app.core.present import views
    from app.core.techniques import facts as facts_module
    from app.core.techniques import timing

    second = tiny_pair.models[1]
    clock = {"t": 0.0}
    real_predict, real_facts, real_comparison = timing.predict, facts_module.model_facts, timing.latency_comparison

    def timed_predict(clf, exs, **kw):  # the injected clock moves 1 ms for the first model, 3 ms for the second
        cost = 0.003 if clf is second else 0.001
        clock["t"] += cost
        return dataclasses.replace(real_predict(clf, exs, **kw), seconds=cost * len(exs))

    monkeypatch.setattr(timing, "predict", timed_predict)
    # where the engine's batch functions (`facts.facts_batch`, `timing.latency_batch`) find them
    monkeypatch.setattr(timing, "latency_comparison", functools.partial(real_comparison, clock=lambda: clock["t"]))
    monkeypatch.setattr(facts_module, "model_facts", lambda clf, exs: {**real_facts(clf, exs),
                                                                       "latency_ms": 1.0 if clf is second else 10.0})
    res = api.facts(tiny_pair, [f"film number {i} was fine" for i in range(12)])
    assert res["latency_comparison"]["values"] == pytest.approx([1.0, 3.0])
    assert res["ratios"]["latency"] == pytest.approx(3.0)
    names = [m.name for m in tiny_pair.models]
    summary, _, _ = views.facts_views(res, names, ["0→1"] * 8)
    assert "latency **3.00×**" in summary
    assert f"{names[1]}'s latency (ms) is higher beyond chance on these 12 inputs" in summary
    thr = res["throughput_comparison"]
    assert thr["values"] == pytest.approx([1000.0, 1000.0 / 3]) and thr["n"] == timing.THROUGHPUT_ROUNDS
    assert res["ratios"]["throughput"] == pytest.approx(1 / 3) and "throughput **0.33×**" in summary
    assert f"{names[0]}'s throughput (inputs/s) is higher beyond chance on these {thr['n']} rounds" in summary
    for m, lat, rate in zip(res["models"], (1.0, 3.0), (1000.0, 1000.0 / 3)):  # the table: the same figures
        assert m["latency_ms"] == pytest.approx(lat) and m["throughput_per_s"] == pytest.approx(rate)
        assert m["latency_ms_interval"] == pytest.approx([lat, lat]) and m["throughput_interval"][0] <= rate
    _, table, _ = views.facts_views(res, names, ["0→1"] * 8)
    row = table[table.fact == views.fact_label("latency_ms")]
    assert list(row[names[1]]) == ["3.0 (3.0–3.0)"] and list(row[names[0]]) == ["1.0 (1.0–1.0)"]


def test_the_facts_table_reads_in_words(tiny_pair):
    """Model facts' table: every row a label in words (no raw keys), booleans as yes / no, and the long
    matrix-product note under the summary instead of in a column."""
    import html

    from app.core import api
    from app.core.present import views

    res = api.facts(tiny_pair, ["a fine film", "an awful film"])
    names = [m.name for m in tiny_pair.models]
    summary, table, _ = views.facts_views(res, names, ["0→1"] * 8)
    facts = list(table["fact"])
    assert not [f for f in facts if "_" in f], facts
    assert "one layer's weights shared by every depth" in facts and "parameters: embeddings" in facts
    shared = table.set_index("fact").loc["one layer's weights shared by every depth"]
    assert list(shared) == ["yes" if m["shares_layers"] else "no" for m in res["models"]]
    assert "linear layers" not in facts and "Matrix products: " in summary
    assert all(html.escape(m["linear_layers"]) in summary for m in res["models"])
