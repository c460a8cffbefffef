"""Explanations of a pair: both models compared on one class, and the dataset statistics as the per-example
numbers aggregated."""
import numpy as np
import pytest
import torch

from app.core.ground.data import Example, load_dataset
from app.core.techniques.explanation import explain, on_class
from app.core.techniques.faithfulness import agreement
from app.core.techniques.saliency import METHODS, IntegratedGradients, WordSaliency, method

from .conftest import shared

EX = Example(("a gorgeous , witty , seductive movie .",))


@pytest.mark.parametrize("name", ["gradient_norm", "gradient_x_input", "occlusion", "lime", "integrated_gradients"])
def test_agreement_compares_both_models_on_one_class(offline_pair, name):
    """Offline BERT calls this negative and ALBERT positive. Each explaining its own prediction, the agreement
    must still be the one of both explaining BERT's class: with two classes ALBERT's map for it is its own
    negated (unchanged for gradient norms). By default both maps explain BERT's class, as if it was asked for."""
    ex = Example(("The cities were beautiful but the hotel was dreadful.",))
    own = explain(offline_pair.models, ex, name, same_class=False)
    first, second = own["maps"]
    assert first.target_label != second.target_label  # the case in question
    same = explain(offline_pair.models, ex, name, first.target_label)
    default = explain(offline_pair.models, ex, name)
    assert [m.target_label for m in default["maps"]] == [first.target_label] * 2
    if name != "lime":  # LIME samples: the same class, other draws
        for d, m in zip(default["maps"], same["maps"]):
            np.testing.assert_allclose(d.scores, m.scores, atol=1e-5)
    assert same["maps"][1].target_label == first.target_label == own["agreement_label"]
    assert own["agreement"] == pytest.approx(same["agreement"], abs=1e-9)
    assert own["agreement"] == pytest.approx(agreement(first, same["maps"][1]), abs=1e-9)
    restated = on_class(offline_pair.models[1], ex, second, first.target_label, name)
    np.testing.assert_allclose(restated.scores, same["maps"][1].scores, atol=1e-5)  # exact but for rounding
    if METHODS[name].signed:  # the naive comparison has the opposite sign
        assert agreement(first, second) == pytest.approx(-own["agreement"], abs=1e-9)


def test_agreement_with_three_classes_attributes_the_common_class(tmp_path):
    """Three classes: no sign rule, so the second model is explained again for the first one's class."""
    from transformers import BertForSequenceClassification

    from app.core.execution.pair import Pair

    from .conftest import _tiny_bert, copy_tokenizer

    first_dir = _tiny_bert(tmp_path / "a", num_labels=3)
    m = BertForSequenceClassification.from_pretrained(first_dir)
    with torch.no_grad():  # the second model's class k scores as the first's class k - 1: they always disagree
        m.classifier.weight.copy_(m.classifier.weight.roll(1, 0))
        m.classifier.bias.copy_(m.classifier.bias.roll(1, 0))
    m.save_pretrained(tmp_path / "b")
    copy_tokenizer(first_dir, tmp_path / "b")
    pair = Pair.resolve(models=[str(first_dir), str(tmp_path / "b")], task="snli")
    ex = Example(("A man sleeps.", "A person rests."))
    own = explain(pair.models, ex, "gradient_x_input", same_class=False)
    first, second = own["maps"]
    same = explain(pair.models, ex, "gradient_x_input", first.target_label)
    default = explain(pair.models, ex, "gradient_x_input")
    assert default["maps"][1].target_label == first.target_label
    np.testing.assert_allclose(default["maps"][1].scores, same["maps"][1].scores, atol=1e-6)
    assert first.target_label != second.target_label and own["agreement_label"] == first.target_label
    assert own["agreement"] == pytest.approx(same["agreement"], abs=1e-9)


def test_saliency_over_a_dataset_is_the_per_example_numbers_aggregated(offline_pair):
    """Every per-example figure is what `explain` gives that example; the random ranking deals the same scores
    among the words read; the paired comparison and the agreement summarise exactly those rows."""
    from app.core.techniques.explanation import explain, explain_dataset
    from app.core.techniques.faithfulness import shuffled, top_words

    exs = load_dataset(shared("glue", "sst2", "dev.tsv")).examples[:8]
    res = explain_dataset(offline_pair.models, exs, "gradient_x_input", shown=3)
    assert res["n"] == 8 and res["models"] == [m.name for m in offline_pair.models]
    for row, ex in zip(res["examples"], exs):
        one = explain(offline_pair.models, ex, "gradient_x_input")
        assert row["comprehensiveness"] == pytest.approx([f["comprehensiveness"] for f in one["faithfulness"]],
                                                         abs=1e-6)
        assert row["agreement"] == pytest.approx(one["agreement"]) and row["label"] == one["agreement_label"]
        assert row["top_words"] == [top_words(m) for m in one["maps"]]
    for k in range(2):
        assert res["comprehensiveness"][k]["mean"] == pytest.approx(np.mean([r["comprehensiveness"][k]
                                                                             for r in res["examples"]]))
    cmp = res["comprehensiveness_comparison"]
    assert cmp["values"] == pytest.approx([res["comprehensiveness"][k]["mean"] for k in range(2)])
    agree = [res["examples"][i]["agreement"] for i in res["lowest_agreement"]]
    assert len(agree) == 3 and agree == sorted(agree) and agree[0] == min(r["agreement"] for r in res["examples"])
    # the random ranking: the read words' scores, dealt again
    sal = IntegratedGradients(offline_pair.models[0]).attribute(exs[0])
    sal = WordSaliency(**{**sal.__dict__, "scores": [float(i + 1) for i in range(len(sal.scores))]})
    dealt = shuffled(sal, np.random.default_rng(0))
    assert sorted(dealt.scores) == sorted(sal.scores) and dealt.scores != sal.scores


def test_logit_maps_are_restated_by_attributing_again_not_negated(offline_pair):
    """Two logits are not tied as two probabilities are (p and 1 - p): ALBERT's logit map is restated for
    BERT's class by a new attribution, equal to asking for that class directly; the agreement is on it."""
    ex = Example(("The cities were beautiful but the hotel was dreadful.",))
    own = explain(offline_pair.models, ex, "gradient_x_input", output="logit", same_class=False)
    first, second = own["maps"]
    assert first.target_label != second.target_label and first.output == second.output == "logit"
    asked = method("gradient_x_input", offline_pair.models[1], output="logit").attribute(ex, first.target_label)
    restated = on_class(offline_pair.models[1], ex, second, first.target_label, "gradient_x_input", output="logit")
    np.testing.assert_allclose(restated.scores, asked.scores, atol=1e-6)
    assert not np.allclose(restated.scores, [-s for s in second.scores], atol=1e-3)  # negating would be wrong
    assert own["agreement"] == pytest.approx(agreement(first, asked), abs=1e-9)


@pytest.mark.parametrize("name", ["integrated_gradients", "gradient_x_input", "gradient_norm", "occlusion"])
def test_one_request_runs_each_model_once_on_the_explained_input(offline_pair, name):
    """A saliency request with its faithfulness computes each model's logits on the unedited input once: the
    method's forward pass picks the class, and faithfulness reads the input's probability from the map rather
    than predicting it again. Counted where every forward over ids starts, the word-embedding lookup: rows equal
    to the input's own ids (padding aside)."""
    from app.core import api
    from app.core.execution.inference import encode_one

    text = "The cities were beautiful but the hotel was dreadful."
    pair = offline_pair.fp32
    seen: dict[str, int] = {}
    handles = []
    for clf in pair.models:
        ids = encode_one(clf, Example((text,)))[0]["input_ids"][0]
        pad = clf.tokenizer.pad_token_id

        def count(module, inputs, output, ids=ids, pad=pad, name=clf.name):
            rows = inputs[0]
            if rows.dim() != 2 or rows.shape[1] < len(ids):
                return
            same = (rows[:, : len(ids)] == ids).all(1) & (rows[:, len(ids):] == pad).all(1)
            seen[name] = seen.get(name, 0) + int(same.sum())

        handles.append(clf.model.get_input_embeddings().register_forward_hook(count))
    try:
        out = api.saliency(pair, text, method=name)
    finally:
        for h in handles:
            h.remove()
    assert seen == {m.name: 1 for m in pair.models}
    assert all(f["comprehensiveness"] is not None for f in out.faithfulness)


@pytest.mark.parametrize("name", ["integrated_gradients", "occlusion"])
def test_one_request_checks_its_example_once(offline_pair, name, monkeypatch):
    """The explained example is validated once per request, by the facade: each model's encoding and predictions
    receive it checked. Counted where a text is checked, `blank_reason`, once per field; an edited copy is a new
    example and is checked again."""
    from app.core import api
    from app.core.execution import inference

    calls: list[str] = []
    real = inference.blank_reason
    monkeypatch.setattr(inference, "blank_reason", lambda text: calls.append(text) or real(text))
    text = "The cities were beautiful but the hotel was dreadful."
    api.saliency(offline_pair, text, method=name)
    assert calls.count(text) == 1
    copy = inference.check_examples(offline_pair.task, [Example((text,))])
    assert calls.count(text) == 2 and copy == [Example((text,))]
    with pytest.raises(api.InputError, match="field 'hypothesis' is missing"):  # another shape: read again
        inference.check_examples(api.TASKS["rte"], copy)


def test_faithfulness_from_the_maps_logits_equals_predicting_the_input(offline_pair):
    """The input's probability read from the map's logits gives the faithfulness a fresh prediction gives."""
    from dataclasses import replace

    from app.core.techniques.faithfulness import faithfulness

    ex = Example(("The cities were beautiful but the hotel was dreadful.",))
    for clf in offline_pair.models:
        for name in ("integrated_gradients", "gradient_x_input", "occlusion"):
            sal = method(name, clf).attribute(ex)
            assert sal.logits is not None
            ours, fresh = faithfulness(clf, ex, sal), faithfulness(clf, ex, replace(sal, logits=None))
            for key in ("comprehensiveness", "sufficiency"):
                assert ours[key] == pytest.approx(fresh[key], abs=2e-6)


def test_each_model_explains_its_own_prediction_when_asked(offline_pair):
    """target "own" (the app's "each model's own"): where the models disagree, each map explains its own model's
    prediction, equal to the map asked for that class by name; the methods side by side say each model's class."""
    from app.core import api
    from app.core.present import views

    text = "The cities were beautiful but the hotel was dreadful."
    said = [m["label"] for m in api.predict(offline_pair, text)["models"]]
    assert said[0] != said[1]  # the case in question
    own = api.saliency(offline_pair, text, method="gradient_x_input", target="own")
    assert [m["target_label"] for m in own["maps"]] == said
    for k, label in enumerate(said):
        alone = api.saliency(offline_pair, text, method="gradient_x_input", target=label)
        np.testing.assert_allclose(own["maps"][k]["scores"], alone["maps"][k]["scores"], atol=1e-6)
    assert own["agreement_label"] == said[0]  # the agreement still compares both on one class
    default = api.saliency(offline_pair, text, method="gradient_x_input")
    assert [m["target_label"] for m in default["maps"]] == [said[0]] * 2
    table = api.saliency_methods(offline_pair, text, target="own")
    assert table["target_labels"] == dict(zip([m.name for m in offline_pair.models], said))
    rows = {r["model"]: r["scores"] for r in table["rows"] if r["method"] == "gradient_x_input"}
    for m in own["maps"]:
        np.testing.assert_allclose(rows[m["model"]], m["scores"], atol=1e-6)
    shown = views.methods_table(table)
    assert all(f"{m.name} <b>{lab}</b>" in shown for m, lab in zip(offline_pair.models, said))
