"""A pair of any two families answers every capability: the product's promise beyond BERT and ALBERT."""
import numpy as np
import pytest

from app.core import api
from app.core.execution.pair import Pair


@pytest.fixture(scope="module")
def family_pairs(family_dirs, tiny_dirs):
    d = {k: str(v) for k, v in family_dirs.items()}
    return {"distilbert-roberta": Pair.resolve(models=[d["distilbert"], d["roberta"]], task="sst2"),
            "electra-albert": Pair.resolve(models=[d["electra"], str(tiny_dirs["albert"])], task="sst2")}


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
        # [CLS] and [SEP] (<s>, </s>) are kept in the baseline, so they take no attribution: not even in RoBERTa, whose
        # positions come from the ids (a [PAD] baseline would shift them unless it keeps the input's)
        assert m["token_scores"][0] == m["token_scores"][-1] == 0.0
        assert abs(sum(m["token_scores"]) - sum(m["scores"])) < 1e-9
    occ = api.saliency(pair, text, method="occlusion")
    assert all(np.isfinite(m["scores"]).all() for m in occ["maps"])
    swap = api.counterfactual(pair, text, generator="word_replacement", replacements="cities -> townships")
    assert list(swap["changes"][0]["edited"]) == ["A gorgeous, witty film about townships."]
    hot = api.counterfactual(pair, text, generator="hotflip")
    assert len(hot["per_model"]) == 2
    proj = api.project(pair, None, projection="pca", layer=1, pooling="mean")
    assert len(proj["points"]) == 2 * proj["n"] and 0 <= proj["knn_overlap"] <= 1
    facts = api.facts(pair, [text])
    assert all(m["parameters"] > 0 for m in facts["models"])


def test_a_pair_whose_configs_name_outputs_differently_is_refused_until_a_task_names_them(tiny_dirs):
    """The offline BERT's config says negative/positive, a tiny model's LABEL_0/LABEL_1: matched by name, the
    second would be wrong on every gold label and no class could be explained on both. --task names both."""
    from app.core.execution.pair import PairError

    loose = Pair.resolve(models=["offline:bert-sst2", str(tiny_dirs["bert"])])
    for attr in ("heads", "models"):
        with pytest.raises(PairError, match=r"models: offline:bert-sst2 answers with labels \['negative', "
                                            r"'positive'\] and .* with labels \['LABEL_0', 'LABEL_1'\]; give --task"):
            getattr(loose, attr)
    named = Pair.resolve(models=["offline:bert-sst2", str(tiny_dirs["bert"])], task="sst2")
    assert [m.labels for m in named.models] == [("negative", "positive")] * 2
    assert api.predict(named, "a fine film")["models"][1]["label"] in ("negative", "positive")
