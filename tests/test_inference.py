import numpy as np
import pytest

from app.core.data import Example
from app.core.errors import InputError
from app.core.inference import check_examples, predict
from app.core.registry import TASKS

from .conftest import SENTENCES


def _batched_equals_single(clf, examples):
    batched = predict(clf, examples, batch_size=4)
    for i, ex in enumerate(examples):
        single = predict(clf, [ex])
        np.testing.assert_allclose(batched.logits[i], single.logits[0], atol=1e-5)
    return batched


@pytest.mark.parametrize("which", [0, 1])
def test_batched_equals_one_at_a_time_tiny(tiny_pair, which):
    clf = tiny_pair.models[which]
    pred = _batched_equals_single(clf, [Example((s,)) for s in SENTENCES])
    assert pred.probs.shape == (len(SENTENCES), 2)
    np.testing.assert_allclose(pred.probs.sum(1), 1, atol=1e-6)


def test_batched_equals_one_at_a_time_pairs(tiny_nli_pair):
    exs = [Example((a, b)) for a, b in zip(SENTENCES, reversed(SENTENCES))]
    for clf in tiny_nli_pair.models:
        _batched_equals_single(clf, exs)


def test_batched_equals_one_at_a_time_real_minilm(minilm_classifier):
    _batched_equals_single(minilm_classifier, [Example((s,)) for s in SENTENCES])


def test_results_come_back_in_input_order(tiny_pair):
    clf = tiny_pair.models[0]
    exs = [Example((s,)) for s in SENTENCES]
    fwd = predict(clf, exs)
    rev = predict(clf, exs[::-1])
    np.testing.assert_allclose(fwd.logits, rev.logits[::-1], atol=1e-5)


def test_pair_predicts_for_both(tiny_pair):
    preds = tiny_pair.predict([Example(("good",)), Example(("bad",))])
    assert [p.model for p in preds] == [m.name for m in tiny_pair.models]
    assert all(len(p.predicted) == 2 for p in preds)
    rec = preds[0].record(0)
    assert set(rec["probabilities"]) == {"negative", "positive"}


def test_input_checks_name_the_field():
    with pytest.raises(InputError, match="field 'sentence' is empty"):
        check_examples(TASKS["sst2"], [Example(("   ",))])
    with pytest.raises(InputError, match="field 'hypothesis' is missing"):
        check_examples(TASKS["rte"], [Example(("only a premise",))])
    with pytest.raises(InputError, match="example 2: field 'premise' is empty"):
        check_examples(TASKS["rte"], [Example(("a", "b")), Example(("", "b"))])


def test_huge_input_is_truncated_not_rejected(tiny_pair):
    pred = predict(tiny_pair.models[1], [Example(("word " * 20000,))])
    assert pred.n_tokens == 128
