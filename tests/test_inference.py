import numpy as np
import pytest

from app.core.execution.inference import check_examples, predict
from app.core.ground.data import Example
from app.core.ground.errors import InputError
from app.core.models.registry import TASKS

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


@pytest.mark.parametrize("side", ["right", "left"])
def test_padding_gives_the_tokenizers_own_tensors(tiny_pair, tiny_nli_pair, family_dirs, side):
    """The core's numpy padding against the tokenizer's own `pad`, on batches of mixed lengths: one text, two
    texts with segment ids, a family without segment ids, and either padding side."""
    import copy

    import torch

    from app.core.execution.inference import length_batches, pad, tokenize
    from app.core.models.loading import ModelSpec, get_classifier

    distil = get_classifier(ModelSpec("d", str(family_dirs["distilbert"]), "distilbert", TASKS["sst2"]))
    pairs = [Example((s, SENTENCES[-1 - i])) for i, s in enumerate(SENTENCES)]
    for clf, exs in [(m, [Example((s,)) for s in SENTENCES]) for m in tiny_pair.models] + \
                    [(m, pairs) for m in tiny_nli_pair.models] + [(distil, [Example((s,)) for s in SENTENCES])]:
        clf = copy.copy(clf)
        clf._local = type(clf._local)()
        tok = copy.deepcopy(clf.base_tokenizer)
        tok.padding_side = side
        clf.base_tokenizer = tok
        enc = tokenize(clf, exs)
        for idx in length_batches(enc, 3):
            idx = np.concatenate([idx, idx[:1]]) if len(idx) > 1 else idx
            rows = {k: [enc[k][i] for i in idx] for k in tok.model_input_names if k in enc}
            want = tok.pad(rows, return_tensors="pt")
            got = pad(clf, enc, idx)
            assert sorted(got) == sorted(k for k in want if k in ("input_ids", "attention_mask", "token_type_ids"))
            for k in got:
                assert torch.equal(got[k], want[k]), (clf.name, side, k)
            assert got.padded is (not bool(want["attention_mask"].all()))  # said on the host, as the mask says


def test_results_gathered_on_a_device_come_back_in_order_once():
    """The deferred path a GPU takes (results kept on the device, one copy back), run on the CPU by naming a
    device that is not the CPU."""
    from types import SimpleNamespace

    import torch

    from app.core.execution.inference import Gathered

    out = np.zeros((5, 2), dtype=np.float32)
    rows = Gathered(SimpleNamespace(device="meta"), out)
    assert rows.defer
    rows.put(np.array([3, 0]), torch.tensor([[3.0, 3.5], [0.0, 0.5]]))
    rows.put(np.array([4, 1, 2]), torch.tensor([[4.0, 4.5], [1.0, 1.5], [2.0, 2.5]], dtype=torch.float16))
    assert not out.any()  # nothing copied back before the end
    assert rows.finish() is out
    np.testing.assert_array_equal(out, np.array([[i, i + 0.5] for i in range(5)], dtype=np.float32))
    cpu = Gathered(SimpleNamespace(device="cpu"), np.zeros((2, 1), dtype=np.float32))
    cpu.put(np.array([1]), torch.tensor([[7.0]]))
    assert not cpu.defer and cpu.out[1, 0] == 7.0  # the CPU writes each batch as it comes


def _fresh(clf):
    """A copy of `clf` with a tokenizer of its own (the direct path's check is kept on the tokenizer)."""
    import copy

    clf = copy.copy(clf)
    clf._local = type(clf._local)()
    clf.base_tokenizer = copy.deepcopy(clf.base_tokenizer)
    clf.base_tokenizer.__dict__.pop("_albert_lens_direct", None)  # checked afresh
    return clf


def test_direct_tokenizing_gives_the_wrappers_ids(tiny_pair, tiny_nli_pair):
    """Ids read straight from the Rust tokenizer against the wrapper's own call, for both families, for pairs
    (longest-first truncation) and past the max length, with the check's inputs and well beyond them."""
    from app.core.execution.inference import tokenize

    long = "the film " * 200
    singles = [Example((s,)) for s in SENTENCES * 3] + [Example((long,)), Example(("a",))]
    pairs = [Example((a, b)) for a, b in zip(SENTENCES * 3, reversed(SENTENCES * 3))] + \
        [Example((long, "short one")), Example(("short one", long)), Example((long, long))]
    for clf, exs in [(m, singles) for m in tiny_pair.models] + [(m, pairs) for m in tiny_nli_pair.models]:
        clf = _fresh(clf)
        for max_length in (None, 12):
            got = tokenize(clf, exs, max_length=max_length)
            assert clf.tokenizer._albert_lens_direct is True, clf.name  # the direct path was taken
            cols = list(zip(*(ex.texts for ex in exs)))
            want = clf.tokenizer(*[list(c) for c in cols], truncation=True, max_length=max_length or clf.max_length)
            for name in ("input_ids", "token_type_ids"):
                if name in want and name in got.columns:
                    assert [list(x) for x in got[name]] == [list(x) for x in want[name]], (clf.name, name)
            assert got.lengths.tolist() == [len(x) for x in want["input_ids"]]


def test_single_texts_whose_segment_ids_are_not_all_zero_keep_the_wrappers_ids(tiny_pair):
    """The direct path writes a single text's segment ids as zeros without reading them; a tokenizer whose
    template gives [CLS] segment 1 (here rewritten so) fails the check and keeps the wrapper's own ids."""
    from tokenizers.processors import TemplateProcessing

    from app.core.execution.inference import tokenize

    clf = _fresh(tiny_pair.models[0])
    tok = clf.base_tokenizer
    cls, sep = tok.cls_token, tok.sep_token
    tok._tokenizer.post_processor = TemplateProcessing(
        single=f"{cls}:1 $A:0 {sep}:0", pair=f"{cls}:1 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, tok.cls_token_id), (sep, tok.sep_token_id)])
    exs = [Example((s,)) for s in SENTENCES]
    got = tokenize(clf, exs)
    assert tok._albert_lens_direct is False
    want = tok([e.texts[0] for e in exs], truncation=True, max_length=clf.max_length)
    assert [list(x) for x in got["token_type_ids"]] == [list(x) for x in want["token_type_ids"]]
    assert all(x[0] == 1 for x in got["token_type_ids"])


def test_a_tokenizer_whose_wrapper_differs_keeps_the_wrappers_ids(tiny_pair):
    """Where the wrapper's ids differ from the Rust tokenizer's (here a wrapper that adds to every id), the
    check sends that tokenizer down the wrapper's path, and predictions use the wrapper's ids."""
    from app.core.execution.inference import tokenize

    clf = _fresh(tiny_pair.models[0])
    tok = clf.base_tokenizer
    plain = type(tok)

    class Shifted(plain):
        def __call__(self, *a, **k):
            enc = plain.__call__(self, *a, **k)
            enc["input_ids"] = [[i + 1 for i in ids] for ids in enc["input_ids"]]
            return enc

    tok.__class__ = Shifted
    exs = [Example((s,)) for s in SENTENCES]
    got = tokenize(clf, exs)
    assert tok._albert_lens_direct is False
    want = plain.__call__(tok, [e.texts[0] for e in exs], truncation=True, max_length=clf.max_length)
    assert [list(x) for x in got["input_ids"]] == [[i + 1 for i in ids] for ids in want["input_ids"]]
    assert [list(x) for x in tokenize(clf, exs)["input_ids"]] == [list(x) for x in got["input_ids"]]
