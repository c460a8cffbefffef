"""One forward/backward pass per example, as LIT asks for it, on any family's layout of special tokens."""
import numpy as np
import pytest

from app.core.execution.inference import predict
from app.core.ground.data import Example
from app.core.models.loading import load
from app.core.models.registry import TASKS, ModelSpec
from app.core.techniques.inspection import inspect

PAIR = Example(("A man is sleeping on the couch.", "A person rests."))


def _clf(path, task):
    return load(ModelSpec("M", str(path), "model", TASKS[task]))


@pytest.mark.parametrize("kind", ["bert", "roberta", "distilbert"])
def test_fields_sit_where_the_tokenizer_puts_them(kind, tiny_dirs, family_dirs):
    """BERT: [CLS] a [SEP] b [SEP]; RoBERTa: <s> a </s></s> b </s>; DistilBERT takes no segment ids. Each field's
    tokens are the tokenizer's own for that field, and the probabilities equal a normal prediction."""
    path = tiny_dirs["bert"] if kind == "bert" else family_dirs[kind]
    clf = _clf(path, "rte")
    r = inspect(clf, PAIR)
    tok = clf.tokenizer
    for text, got in zip(PAIR.texts, r["field_tokens"]):
        assert got == tok.convert_ids_to_tokens(tok(text, add_special_tokens=False)["input_ids"])
    assert np.abs(r["probas"] - predict(clf, [PAIR]).probs[0]).max() < 1e-5
    assert [g.shape[0] for g in r["grads"]] == [len(t) for t in r["field_tokens"]]


def test_given_embeddings_replace_a_field_in_its_place(family_dirs):
    """LIT's integrated gradients feeds interpolated embeddings back per field: the second field of a RoBERTa
    pair starts after two separators, and feeding its own embeddings back changes nothing."""
    clf = _clf(family_dirs["roberta"], "rte")
    r = inspect(clf, PAIR)
    again = inspect(clf, PAIR, embeddings=[None, r["input_embs"][1]])
    assert np.abs(again["probas"] - r["probas"]).max() < 1e-6
    zeroed = inspect(clf, PAIR, embeddings=[None, np.zeros_like(r["input_embs"][1])])
    assert np.abs(zeroed["probas"] - r["probas"]).max() > 1e-6
    with pytest.raises(Exception, match=r"input_embs for field 1: shape \(2, 32\) does not match"):
        inspect(clf, PAIR, embeddings=[None, np.zeros((2, 32))])


def test_lits_gradients_are_the_saliencys(tiny_pair):
    """One gradient path: LIT's per-field gradients are saliency's token gradients of the same class's
    probability, split at the special tokens, and a finite difference along them agrees."""
    from app.core.techniques.gradients import input_gradients

    clf = tiny_pair.models[0]
    ex = Example(("a gorgeous , witty , seductive movie .",))
    lit = inspect(clf, ex, target="positive")
    ours = input_gradients(clf, ex, "positive", score="prob")
    assert ours.target == lit["target"] == clf.labels.index("positive")
    np.testing.assert_allclose(lit["grads"][0], ours.gradients[1:-1], atol=1e-7)  # without [CLS] and [SEP]
    step = 1e-3 * lit["grads"][0] / np.linalg.norm(lit["grads"][0])
    moved = inspect(clf, ex, target="positive", embeddings=[lit["input_embs"][0] + step], gradients=False)
    gain = moved["probas"][lit["target"]] - lit["probas"][lit["target"]]
    assert gain == pytest.approx(float((lit["grads"][0] * step).sum()), rel=0.05)
