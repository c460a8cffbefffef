"""The study's models at full size, through `--models`: TextAttack zoo file layout (`.bin` weights, no label names
in the config, `vocab.txt` / `spiece.model`), the exact `bert-base-uncased` and `albert-base-v2` architectures with
seeded random weights (tests/base_fixtures.py). What only the real weights can show (their accuracies) needs the
hub; everything else about loading and running them is checked here."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from . import base_fixtures
from .conftest import SHARED

pytestmark = pytest.mark.slow
SENTENCE = "The cities were beautiful but the hotel was dreadful."


@pytest.fixture(scope="module")
def base_dirs():
    return base_fixtures.build(SHARED)


@pytest.fixture(scope="module")
def base_pair(base_dirs):
    from app.core.execution.pair import Pair

    return Pair.resolve(models=[str(base_dirs["bert"]), str(base_dirs["albert"])], task="sst2")


def test_the_fixtures_are_laid_out_as_textattacks_zoo(base_dirs):
    for family, d in base_dirs.items():
        names = {p.name for p in d.iterdir()}
        tokenizer = {"vocab.txt"} if family == "bert" else {"spiece.model"}
        assert {"config.json", "pytorch_model.bin", "tokenizer_config.json", "special_tokens_map.json"} | tokenizer \
            <= names
        assert not any(n.endswith(".safetensors") for n in names)
        cfg = json.loads((d / "config.json").read_text())
        assert "id2label" not in cfg and cfg["model_type"] == family and cfg["hidden_size"] == 768
    assert json.loads((base_dirs["albert"] / "config.json").read_text())["vocab_size"] == 30000


def test_bin_weights_load_only_with_weights_only(base_dirs, monkeypatch):
    from app.core.models import loading
    from app.core.models.registry import TASKS, ModelSpec

    calls = []
    real = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: calls.append(k.get("weights_only")) or real(*a, **k))
    clf = loading.load(ModelSpec("b", str(base_dirs["albert"]), "albert", TASKS["sst2"]))
    assert calls and all(w is True for w in calls)
    assert clf.labels == ("negative", "positive")  # the task's label facts: the config names none


def test_parameter_counts_equal_the_published_architectures(base_pair):
    """Counted independently from the architectures' shapes: 109,483,778 and 11,685,122 with a 2-class head."""
    from app.core import api

    res = api.facts(base_pair, [SENTENCE, "What a lovely film"])
    bert, albert = res["models"]
    assert bert["parameters"] == base_fixtures.published_parameters("bert") == 109_483_778
    assert albert["parameters"] == base_fixtures.published_parameters("albert") == 11_685_122
    assert res["ratios"]["parameters"] == pytest.approx(11_685_122 / 109_483_778)
    assert len(albert["transitions"]["l2"]) == 12 == len(bert["transitions"]["l2"])


def test_predict_agrees_with_the_models_own_forward(base_pair):
    """The [CLS]-only last layer (12 shared layers for ALBERT) gives the full forward's answer."""
    from app.core import api

    res = api.predict(base_pair, SENTENCE)
    for clf, rec in zip(base_pair.models, res["models"]):
        enc = clf.tokenizer(SENTENCE, return_tensors="pt")
        with torch.no_grad():
            ref = torch.softmax(clf.model(**enc).logits, -1)[0].numpy()
        got = np.array([rec["probabilities"][k] for k in clf.labels])
        np.testing.assert_allclose(got, ref, atol=1e-5)
        assert rec["label"] in ("negative", "positive")


@pytest.mark.parametrize("method", ["gradient_norm", "gradient_x_input", "integrated_gradients", "occlusion", "lime"])
def test_every_saliency_method_aligns_wordpiece_and_sentencepiece_word_for_word(base_pair, method):
    from app.core import api

    res = api.saliency(base_pair, SENTENCE, None, method=method, tolerance="1e-02" if method == "integrated_gradients"
                       else None)
    a, b = res["maps"]
    assert a["words"] == b["words"] == ["The", "cities", "were", "beautiful", "but", "the", "hotel", "was",
                                        "dreadful", "."]
    assert all(np.isfinite(a["scores"])) and any(a["scores"]) and any(b["scores"])
    assert a["target_label"] == b["target_label"]  # one class explained for both
    if method == "integrated_gradients":
        assert all(m["delta"] <= 1e-2 for m in res["maps"])


def test_the_albert_tokenizer_has_the_pieces_the_corpora_support(base_pair):
    albert = base_pair.models[1]
    n = albert.tokenizer.vocab_size
    assert 5_000 < n <= 30_000  # a real SentencePiece model, within the published embedding table
    assert albert.tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]", "<pad>"]) == [2, 3, 0]


def test_a_counterfactual_an_attack_and_a_projection_at_base_size(base_pair):
    from app.core import api

    cf = api.counterfactual(base_pair, SENTENCE, None, generator="word_replacement", replacements="cities -> townships")
    (change,) = cf["changes"]
    assert list(change["edited"]) == ["The townships were beautiful but the hotel was dreadful."]
    label = api.predict(base_pair, "a fine film")["models"][0]["label"]
    att = api.attack(base_pair, "a fine film", None, recipe="deepwordbug", label=label, dataset=None, n=1,
                     query_budget=30, time_limit=60)
    first = att["examples"][0]["results"]
    assert [r["model"] for r in first] == [m.name for m in base_pair.models]
    assert all(r["outcome"] in ("success", "failed", "skipped", "timeout") for r in first)
    assert first[0]["outcome"] != "skipped"  # the gold label is BERT's own answer
    proj = api.project(base_pair, "sentiment_plain", projection="pca", layer=-1, pooling="cls", limit=20)
    assert proj["n"] == 20 and 0 <= proj["knn_overlap"] <= 1
    assert len(proj["points"]) == 40


def test_the_lit_wrappers_validate_at_base_size(base_pair):
    from lit_nlp.lib import validation

    from lit_models.models import models_for
    from lit_models.server import datasets_for

    for ds in datasets_for(base_pair, None, 3).values():
        validation.validate_dataset(ds)
        for model in models_for(base_pair.models).values():
            validation.validate_model(model, ds)
            assert len([k for k in model.output_spec() if k.endswith("/attention")]) == 12


def test_the_core_layers_give_the_stock_models_gradients(base_pair):
    """An IG round on the core's path (oneDNN products where chosen, fused `gelu_new`, [CLS]-only last layer)
    against the model's own forward on transformers' stock layers: the same probabilities and gradients."""
    from app.core.ground import kernels

    albert = base_pair.models[1]
    assert albert.model.config.hidden_act == "gelu_new"
    # the kernels are timed at load (`kernels.tune`): on a CPU where transformers' own GELU won, the fused one,
    # which this test checks, is put in for it and taken out after
    swapped = kernels.fuse_activations(albert.model)
    try:
        assert len(kernels.fused(albert.model)) == 1
        _same_probabilities_and_gradients(base_pair)
    finally:
        for m in kernels.fused(albert.model) if swapped else ():  # as the timing left it
            m.__class__ = kernels._new_gelu_class()


def _same_probabilities_and_gradients(base_pair) -> None:
    from app.core.execution import cls_path
    from app.core.ground import kernels

    for clf in base_pair.models:
        enc = clf.tokenizer([SENTENCE], return_tensors="pt")
        states = cls_path._embedding_output(clf, enc).detach()
        rows = states * torch.linspace(0.2, 1, 6)[:, None, None]  # six points along a path to the input

        def grads(fn):
            x = rows.clone().requires_grad_(True)
            probs = torch.softmax(fn(x), -1)[:, 1]
            (g,) = torch.autograd.grad(probs.sum(), x)
            return probs.detach(), g

        ours = grads(lambda x: cls_path.logits(clf, x, enc["attention_mask"]))
        with kernels.stock(clf.model):
            base = clf.model.base_model
            pool = ((lambda h: base.pooler_activation(base.pooler(h[:, 0]))) if clf.family == "albert"
                    else base.pooler)
            ref = grads(lambda x: clf.model.classifier(pool(base.encoder(x)[0])))
        torch.testing.assert_close(ours[0], ref[0], atol=1e-5, rtol=1e-4)
        scale = ref[1].abs().max()
        assert (ours[1] - ref[1]).abs().max() <= 1e-3 * scale
