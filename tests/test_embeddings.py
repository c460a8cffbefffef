import numpy as np
import pytest

from app.core.ground.data import Example
from app.core.ground.errors import InputError
from app.core.techniques.embeddings import embed, hidden_states

from .conftest import SENTENCES


def test_mean_pooled_matches_sentence_transformers(minilm_classifier):
    from sentence_transformers import SentenceTransformer

    from app.core.models.offline import minilm_dir

    st = SentenceTransformer(str(minilm_dir()), device="cpu")
    ref = st.encode(SENTENCES, normalize_embeddings=True)
    ours = embed(minilm_classifier, [Example((s,)) for s in SENTENCES], pooling="mean")
    ours /= np.linalg.norm(ours, axis=1, keepdims=True)
    cos = (ours * ref).sum(1)
    assert cos.min() > 0.999


def test_cls_and_layers_agree_with_hidden_states(tiny_pair):
    for clf in tiny_pair.models:
        ex = Example((SENTENCES[0],))
        states, tokens = hidden_states(clf, ex)
        assert states.shape[0] == clf.model.config.num_hidden_layers + 1
        assert states.shape[1] == len(tokens)
        for layer in (0, 1, -1):
            cls = embed(clf, [ex, Example((SENTENCES[1],))], layer=layer, pooling="cls")
            np.testing.assert_allclose(cls[0], states[layer][0], atol=1e-5)
            mean = embed(clf, [ex], layer=layer, pooling="mean")
            np.testing.assert_allclose(mean[0], states[layer].mean(0), atol=1e-5)


@pytest.mark.parametrize("pair_name", ["tiny_pair", "offline_pair"])
def test_one_pass_gives_the_embeddings_and_the_predictions_of_two(pair_name, request):
    """`embed_and_predict` (a projection's one pass) against `embed` and `predict` run apart, at every depth."""
    from app.core.execution.inference import predict
    from app.core.techniques.embeddings import embed_and_predict

    exs = [Example((s,)) for s in SENTENCES]
    for clf in request.getfixturevalue(pair_name).models:
        logits = predict(clf, exs).logits
        for layer in (0, 1, -1):
            for pooling in ("cls", "mean"):
                vectors, got = embed_and_predict(clf, exs, layer=layer, pooling=pooling)
                np.testing.assert_allclose(vectors, embed(clf, exs, layer=layer, pooling=pooling), atol=2e-5)
                np.testing.assert_allclose(got, logits, atol=2e-5)
        assert not np.allclose(embed_and_predict(clf, exs, layer=0)[0], embed_and_predict(clf, exs, layer=-1)[0])


def test_albert_layers_differ_though_weights_are_shared(tiny_pair):
    states, _ = hidden_states(tiny_pair.models[1], Example((SENTENCES[2],)))
    assert not np.allclose(states[1], states[2])


def test_bad_layer_and_pooling(tiny_pair):
    clf = tiny_pair.models[0]
    with pytest.raises(InputError, match="layer: 9 is out of range"):
        embed(clf, [Example(("x",))], layer=9)
    with pytest.raises(InputError, match="pooling: 'max'"):
        embed(clf, [Example(("x",))], pooling="max")
