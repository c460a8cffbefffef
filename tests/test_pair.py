"""A pair of any two families answers every capability: the product's promise beyond BERT and ALBERT."""
import json
import shutil

import numpy as np
import pytest
import torch

from app.core import api
from app.core.pair import Pair


def _tiny(kind: str, path, tokenizer_from):
    """A tiny random model of `kind`, saved with BERT's tokenizer; DistilBERT and RoBERTa tokenizers return no
    segment ids, so those two say so in their tokenizer config, as their own tokenizers would."""
    from transformers import AutoModelForSequenceClassification, DistilBertConfig, ElectraConfig, RobertaConfig

    size = dict(num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, hidden_size=32)
    config = {
        "distilbert": lambda: DistilBertConfig(vocab_size=30522, dim=32, n_layers=2, n_heads=2, hidden_dim=37),
        "roberta": lambda: RobertaConfig(vocab_size=30522, pad_token_id=0, **size),
        "electra": lambda: ElectraConfig(vocab_size=30522, embedding_size=16, **size),
    }[kind]()
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(path)
    for f in tokenizer_from.iterdir():
        if f.name.startswith(("tokenizer", "vocab", "special")):
            shutil.copy(f, path / f.name)
    if kind in ("distilbert", "roberta"):
        cfg = json.loads((path / "tokenizer_config.json").read_text())
        cfg["model_input_names"] = ["input_ids", "attention_mask"]
        (path / "tokenizer_config.json").write_text(json.dumps(cfg))
    return path


@pytest.fixture(scope="module")
def family_pairs(tiny_dirs, tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    dirs = {k: _tiny(k, root / k, tiny_dirs["bert"]) for k in ("distilbert", "roberta", "electra")}
    return {"distilbert-roberta": Pair.resolve(models=[str(dirs["distilbert"]), str(dirs["roberta"])], task="sst2"),
            "electra-albert": Pair.resolve(models=[str(dirs["electra"]), str(tiny_dirs["albert"])], task="sst2")}


@pytest.mark.parametrize("name", ["distilbert-roberta", "electra-albert"])
def test_other_families_answer_every_capability(family_pairs, name):
    pair = family_pairs[name]
    text = "A gorgeous, witty film about cities."
    preds = api.predict(pair, text)["models"]
    assert all(abs(sum(m["probabilities"].values()) - 1) < 1e-5 for m in preds)
    ig = api.saliency(pair, text, method="integrated_gradients", tolerance=1e-4)
    words = ["A", "gorgeous", ",", "witty", "film", "about", "cities", "."]
    for m in ig["maps"]:  # completeness on the model's own path; the same words whatever the tokenizer
        assert m["delta"] <= 1e-4 and m["words"] == words and len(m["scores"]) == len(words)
        # [CLS] and [SEP] are kept in the baseline, so they take no attribution: not even in RoBERTa, whose
        # positions come from the ids (a [PAD] baseline would shift them unless it keeps the input's)
        assert m["token_scores"][0] == m["token_scores"][-1] == 0.0
        assert abs(sum(m["token_scores"]) - sum(m["scores"])) < 1e-9
    occ = api.saliency(pair, text, method="occlusion")
    assert all(np.isfinite(m["scores"]).all() for m in occ["maps"])
    swap = api.counterfactual(pair, text, generator="word_replacement", replacements="cities -> townships")
    assert list(swap["changes"][0]["edited"]) == ["A gorgeous, witty film about townships."]
    hot = api.counterfactual(pair, text, generator="hotflip")
    assert len(hot["per_model"]) == 2
    proj = api.project(pair, None, method="pca", layer=1, pooling="mean")
    assert len(proj["points"]) == 2 * proj["n"] and 0 <= proj["knn_overlap"] <= 1
    facts = api.facts(pair, [text])
    assert all(m["parameters"] > 0 for m in facts["models"])
