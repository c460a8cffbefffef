import numpy as np
import pytest
import torch

from app.core.execution.inference import encode_one
from app.core.ground.data import Example
from app.core.techniques.gradients import forward_embeds, input_gradients


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("score", ["prob", "logit"])
def test_gradient_matches_finite_differences(tiny_pair, which, score):
    clf = tiny_pair.models[which]
    ex = Example(("a gorgeous , witty , seductive movie .",))
    g = input_gradients(clf, ex, target="positive", score=score)
    enc, _ = encode_one(clf, ex)
    rng = np.random.default_rng(0)
    direction = torch.tensor(rng.standard_normal(g.embeddings.shape), dtype=torch.float64)
    direction /= direction.norm()
    model = clf.model.double()
    try:
        base = torch.tensor(g.embeddings, dtype=torch.float64).unsqueeze(0)
        eps = 1e-5

        def f(x):
            with torch.no_grad():
                logits = forward_embeds(clf, x, enc["attention_mask"], enc.get("token_type_ids"))
            return (torch.softmax(logits, -1) if score == "prob" else logits)[0, g.target].item()

        fd = (f(base + eps * direction) - f(base - eps * direction)) / (2 * eps)
    finally:
        model.float()
    analytic = float((torch.tensor(g.gradients, dtype=torch.float64) * direction).sum())
    assert analytic == pytest.approx(fd, rel=1e-3, abs=1e-7)


def test_gradients_are_deterministic_in_eval_mode(tiny_pair):
    clf = tiny_pair.models[1]
    ex = Example(("the movie fails to live up to the sum of its parts .",))
    a = input_gradients(clf, ex)
    b = input_gradients(clf, ex)
    np.testing.assert_array_equal(a.gradients, b.gradients)
    assert a.target == int(np.argmax(a.probs))
    assert not any(p.grad is not None for p in clf.model.parameters())


def test_gradient_shapes_follow_the_tokenizer(tiny_pair):
    for clf in tiny_pair.models:
        g = input_gradients(clf, Example(("short text",)))
        assert g.gradients.shape == g.embeddings.shape
        assert g.gradients.shape[0] == len(g.tokens)
        assert g.embeddings.shape[1] == clf.model.get_input_embeddings().embedding_dim


@pytest.mark.parametrize("which", [0, 1])
def test_embedding_layer_round_trip(tiny_pair, which):
    """Feeding the recorded embedding-layer output back in reproduces the logits; other rows get other logits."""
    from app.core.techniques.gradients import forward_from_layer, layer_outputs

    clf = tiny_pair.models[which]
    enc, _ = encode_one(clf, Example(("a gorgeous , witty , seductive movie .",)))
    ids, mask, tt = enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids")
    states, logits = layer_outputs(clf, ids, mask, tt)
    with torch.no_grad():
        again = forward_from_layer(clf, torch.cat([states, 0 * states]), ids, mask, tt)
        plain = clf.model(
            **{k: v for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        ).logits
    torch.testing.assert_close(again[:1], logits, atol=1e-6, rtol=0)
    torch.testing.assert_close(logits, plain, atol=1e-6, rtol=0)
    assert not torch.allclose(again[1], logits[0])
    # the hook is inert outside these calls
    with torch.no_grad():
        torch.testing.assert_close(clf.model(input_ids=ids, attention_mask=mask).logits, plain, atol=1e-6, rtol=0)
