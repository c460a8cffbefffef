"""LIT wrappers validated with LIT's own validator, and a real LIT server queried over HTTP."""
import json
import urllib.request

import numpy as np
import pytest

from app.core.data import Example
from app.core.inference import predict
from app.core.saliency import GradientXInput
from lit_models.models import LensModel, models_for
from lit_models.server import GENERATORS, SALIENCE, datasets_for, make_server

from .conftest import shared


def _validate(pair, dataset_spec, limit=8):
    from lit_nlp.lib import validation

    for name, ds in datasets_for(pair, [dataset_spec] if dataset_spec else None, limit).items():
        validation.validate_dataset(ds)
        for model in models_for(pair.models).values():
            validation.validate_model(model, ds)


def test_validation_tiny_single_text(tiny_pair):
    _validate(tiny_pair, None)


def test_validation_tiny_pairs(tiny_nli_pair):
    _validate(tiny_nli_pair, None)


def test_validation_offline_pair_on_sst2_dev(offline_pair):
    _validate(offline_pair, str(shared("glue", "sst2", "dev.tsv")), limit=6)


def test_flipped_tokens_are_fed_back(tiny_pair):
    m = models_for(tiny_pair.models)[tiny_pair.models[0].name]
    out = list(m.predict([{"sentence": "a good film"}]))[0]
    assert out["tokens_sentence"] == ["a", "good", "film"]
    flipped = list(m.predict([{"sentence": "a bad film", "tokens_sentence": ["a", "bad", "film"]}]))[0]
    direct = predict(tiny_pair.models[0], [Example(("a bad film",))]).probs[0]
    np.testing.assert_allclose(flipped["probas"], direct, atol=1e-5)


def test_embedding_table_is_the_models(tiny_pair):
    for clf in tiny_pair.models:
        vocab, table = LensModel.from_classifier(clf).get_embedding_table()
        assert len(vocab) == table.shape[0] == clf.model.get_input_embeddings().num_embeddings
        assert clf.tokenizer.convert_tokens_to_ids(vocab[100]) == 100


def _post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def lit_server(offline_pair):
    server = make_server(offline_pair, [str(shared("glue", "sst2", "dev.tsv"))], limit=20, port=None,
                         server_type="notebook")
    srv = server.serve()
    try:
        yield f"http://localhost:{srv.port}", offline_pair
    finally:
        srv.stop()


def test_server_info_lists_models_datasets_and_components(lit_server):
    url, pair = lit_server
    info = _post(url, "/get_info", {})
    names = [m.name for m in pair.models]
    assert set(info["models"]) == set(names)
    assert "sst2/dev" in info["datasets"]
    for n in names:
        m = info["models"][n]
        assert "sst2/dev" in m["datasets"]
        for interp in (*SALIENCE, "umap", "pca"):
            assert interp in m["interpreters"], (n, interp)
        for gen in GENERATORS:
            assert gen in m["generators"], (n, gen)
    assert "LensModel" in info["initSpecs"]["models"]
    # the page reads layouts[defaultLayout]: with none set, LIT's front end threw and showed no module
    assert info["defaultLayout"] in info["layouts"]


def test_server_preds_and_salience_equal_the_core(lit_server):
    url, pair = lit_server
    text = "a gorgeous , witty , seductive movie ."
    from lit_nlp.api.dataset import input_hash

    data = {"sentence": text}
    data["_id"] = input_hash(data)
    inputs = [{"id": data["_id"], "data": data}]
    for clf in pair.models:
        preds = _post(url, f"/get_preds?model={clf.name}&dataset_name=sst2/dev&requested_types=MulticlassPreds", {"inputs": inputs})
        core = predict(clf, [Example((text,))]).probs[0]
        np.testing.assert_allclose(preds[0]["probas"], core, atol=1e-5)
        sal = _post(url, f"/get_interpretations?model={clf.name}&dataset_name=sst2/dev&interpreter=Grad ⋅ Input".replace(" ", "%20").replace("⋅", "%E2%8B%85"),
                    {"inputs": inputs})
        lit_scores = np.asarray(sal[0]["token_grad_sentence"]["salience"])
        ours = GradientXInput(clf).attribute(Example((text,)))
        tok = np.asarray(ours.token_scores[1:-1])  # word tokens, [CLS]/[SEP] excluded as in LIT's field tokens
        tok = tok + np.finfo(np.float32).eps  # LIT's normalize_scores: add eps, then make |scores| sum to 1
        np.testing.assert_allclose(lit_scores, tok / np.abs(tok).sum(), atol=1e-4)
