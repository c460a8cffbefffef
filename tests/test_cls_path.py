"""The [CLS]-only last layer gives the model's own logits and gradients, and steps aside where it can't."""
from types import SimpleNamespace

import pytest
import torch

from app.core.execution import cls_path
from app.core.execution.inference import encode_one
from app.core.ground.data import Example
from app.core.techniques.gradients import forward_from_layer, layer_outputs


def _rows(clf, texts):
    enc, _ = encode_one(clf, Example(texts))
    ids, mask, tt = enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids")
    states, _ = layer_outputs(clf, ids, mask, tt)
    alphas = torch.tensor([0.0, 0.3, 0.7, 1.0])[:, None, None]
    return alphas * states, ids, mask, tt  # a path from zero to the input, as integrated gradients walks it


def _logits_and_grads(clf, states, ids, mask, tt, cls_only):
    s = states.clone().requires_grad_(True)
    with torch.enable_grad():
        out = forward_from_layer(clf, s, ids, mask, tt, cls_only=cls_only)
        (g,) = torch.autograd.grad(torch.softmax(out, -1)[:, -1].sum(), s)
    return out.detach(), g


@pytest.mark.parametrize("pair_name,which,texts", [
    ("tiny_pair", 0, ("a gorgeous , witty , seductive movie .",)),
    ("tiny_pair", 1, ("a gorgeous , witty , seductive movie .",)),
    ("tiny_nli_pair", 0, ("The cat sat on the mat.", "A cat is sitting.")),  # segments
    ("offline_pair", 0, ("it 's a charming and often affecting journey .",)),
    ("offline_pair", 1, ("it 's a charming and often affecting journey .",)),
])
def test_same_logits_and_gradients_as_the_full_forward(request, pair_name, which, texts):
    clf = request.getfixturevalue(pair_name).models[which]
    states, ids, mask, tt = _rows(clf, texts)
    assert cls_path.logits(clf, states, mask) is not None  # the fast path is taken for these layouts
    fast, g_fast = _logits_and_grads(clf, states, ids, mask, tt, True)
    full, g_full = _logits_and_grads(clf, states, ids, mask, tt, False)
    torch.testing.assert_close(fast, full, atol=2e-5, rtol=0)
    assert float((g_fast - g_full).abs().max()) <= 1e-4 * float(g_full.abs().max())
    assert not torch.allclose(fast[0], fast[-1])  # rows differ: not one row broadcast


def test_albert_with_several_groups_and_inner_layers():
    """The group schedule (layer i runs group int(i / (layers / groups)), each with its inner layers) is
    followed, so a grouped ALBERT matches its own forward."""
    from transformers import AlbertConfig, AlbertForSequenceClassification

    torch.manual_seed(0)
    cfg = AlbertConfig(vocab_size=50, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_hidden_groups=2,
                       inner_group_num=2, num_attention_heads=4, intermediate_size=37, num_labels=3)
    model = AlbertForSequenceClassification(cfg).eval()
    ids = torch.randint(5, 50, (1, 9))
    with torch.no_grad():
        states = model.albert.embeddings(input_ids=ids).repeat(3, 1, 1) * torch.tensor([0.2, 0.6, 1.0])[:, None, None]
        fast = cls_path.logits(SimpleNamespace(model=model), states, torch.ones_like(ids))
        full = model.classifier(model.albert.pooler_activation(model.albert.pooler(
            model.albert.encoder(states).last_hidden_state[:, 0])))
    torch.testing.assert_close(fast, full, atol=2e-5, rtol=0)


def test_steps_aside_for_unknown_layouts_and_training(tiny_pair):
    from transformers import BertConfig, BertForSequenceClassification

    clf = tiny_pair.models[0]
    states, ids, mask, _ = _rows(clf, ("a fine film",))
    rel = BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1,
                                                   num_attention_heads=4, intermediate_size=37,
                                                   position_embedding_type="relative_key")).eval()
    assert cls_path.logits(SimpleNamespace(model=rel), torch.zeros(1, 4, 32), None) is None
    clf.model.train()
    try:
        assert cls_path.logits(clf, states, mask) is None
    finally:
        clf.model.eval()


@pytest.mark.parametrize("pair_name,which", [("tiny_pair", 0), ("tiny_pair", 1), ("tiny_nli_pair", 0),
                                             ("offline_pair", 0), ("offline_pair", 1)])
def test_padded_batches_match_the_models_forward(request, pair_name, which):
    """`predict` pads each batch to its longest input; the [CLS]-only path must ignore the padding exactly as
    the model's own forward does."""
    from app.core.execution.inference import pad, tokenize

    clf = request.getfixturevalue(pair_name).models[which]
    texts = ["a film .", "a gorgeous , witty , seductive movie that never once loses its nerve .", "bad"]
    exs = [Example((t, "A cat is sitting.")) if clf.task.two_texts else Example((t,)) for t in texts]
    batch = pad(clf, tokenize(clf, exs), list(range(len(exs))))
    assert not bool(batch["attention_mask"].all())  # really padded
    with torch.no_grad():
        fast = cls_path.inputs_logits(clf, batch)
        full = clf.model(**batch).logits
    torch.testing.assert_close(fast, full, atol=2e-5, rtol=0)


@pytest.mark.parametrize("pair_name,which", [("tiny_pair", 0), ("tiny_pair", 1), ("offline_pair", 0),
                                             ("offline_pair", 1)])
def test_hidden_states_of_every_layer_match(request, pair_name, which):
    """Embeddings at any layer, run only that far, equal the model's own hidden_states (padding ignored as the
    model ignores it); the [CLS]-only variant equals their position 0."""
    from app.core.execution.inference import pad, tokenize

    clf = request.getfixturevalue(pair_name).models[which]
    exs = [Example((t,)) for t in ["a film .", "a gorgeous , witty , seductive movie that never loses its nerve ."]]
    batch = pad(clf, tokenize(clf, exs), [0, 1])
    keep = batch["attention_mask"].bool()
    with torch.no_grad():
        ref = clf.model.base_model(**batch, output_hidden_states=True).hidden_states
        for layer in range(len(ref)):
            ours = cls_path.hidden_state(clf, batch, layer)
            torch.testing.assert_close(ours[keep], ref[layer][keep], atol=5e-5, rtol=0)
            cls = cls_path.hidden_state(clf, batch, layer, cls_only=True)
            torch.testing.assert_close(cls[:, 0], ref[layer][:, 0], atol=5e-5, rtol=0)


def test_grouped_albert_hidden_states_count_group_calls():
    from transformers import AlbertConfig, AlbertForSequenceClassification

    torch.manual_seed(0)
    cfg = AlbertConfig(vocab_size=50, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_hidden_groups=2,
                       inner_group_num=2, num_attention_heads=4, intermediate_size=37)
    model = AlbertForSequenceClassification(cfg).eval()
    ids = torch.randint(5, 50, (2, 7))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    with torch.no_grad():
        ref = model.albert(**inputs, output_hidden_states=True).hidden_states
        if len(ref) == 1 + cfg.num_hidden_layers * cfg.inner_group_num:  # transformers 5: one per inner layer
            ref = ref[:: cfg.inner_group_num]  # the state after each group call, as 4.x lists them
        for layer in range(5):
            torch.testing.assert_close(cls_path.hidden_state(SimpleNamespace(model=model), inputs, layer),
                                       ref[layer], atol=2e-5, rtol=0)


def test_the_mask_asks_the_device_nothing_off_the_cpu():
    """Off the CPU the mask is built without asking whether anything is padded (a host sync that made the CPU
    wait for every queued batch): shown on the meta device, where asking for a value raises."""
    import torch

    from app.core.execution.cls_path import _additive_mask

    ones = torch.ones(2, 5, dtype=torch.long)
    assert _additive_mask(ones, 2, torch.float32) is None  # the CPU: nothing padded, no mask
    meta = _additive_mask(ones.to("meta"), 2, torch.float32)
    assert meta is not None and meta.shape == (2, 1, 1, 5) and meta.device.type == "meta"
    padded = ones.clone()
    padded[1, 3:] = 0
    m = _additive_mask(padded, 2, torch.float32)
    assert m[1, 0, 0, 3] == torch.finfo(torch.float32).min and m[0].abs().max() == 0
    # what the batch's maker knew on the host (`inference.Batch.padded`) decides off the CPU too: no padding,
    # no mask (SDPA without one); padding, the mask, without the CPU's question; a CUDA graph's always has one
    assert _additive_mask(ones.to("meta"), 2, torch.float32, padded=False) is None
    assert torch.equal(_additive_mask(padded, 2, torch.float32, padded=True), m)
    assert _additive_mask(ones, 2, torch.float32, always=True, padded=False) is not None


@pytest.mark.parametrize("pair_name,which", [("tiny_pair", 0), ("tiny_pair", 1), ("tiny_nli_pair", 0)])
def test_a_batch_that_says_it_is_unpadded_runs_without_a_mask(request, pair_name, which, monkeypatch):
    """`inference.pad` says whether its batch has padding; the [CLS] path then builds no mask for one without
    (the GPU's SDPA runs unmasked) and the logits are the model's own, for a batch of equal lengths and for one
    of mixed lengths, through `inputs_logits`, `hidden_state` and `inputs_logits_and_state`."""
    from app.core.execution import inference

    clf = request.getfixturevalue(pair_name).models[which]
    texts = ["a film .", "the plot .", "a gorgeous , witty , seductive movie that never once loses its nerve ."]
    exs = [Example((t, "A cat is sitting.")) if clf.task.two_texts else Example((t,)) for t in texts]
    enc = inference.tokenize(clf, exs)
    same, mixed = inference.pad(clf, enc, [0, 1]), inference.pad(clf, enc, [0, 1, 2])
    assert int(enc.lengths[0]) == int(enc.lengths[1]) != int(enc.lengths[2])
    assert same.padded is False and mixed.padded is True
    asked = []
    real = cls_path._additive_mask
    monkeypatch.setattr(cls_path, "_additive_mask",
                        lambda m, *a, **k: asked.append(k.get("padded")) or real(m, *a, **k))
    with torch.no_grad():
        for batch in (same, mixed):
            asked.clear()
            full = clf.model(**batch, output_hidden_states=True)
            torch.testing.assert_close(cls_path.inputs_logits(clf, batch), full.logits, atol=2e-5, rtol=0)
            torch.testing.assert_close(cls_path.hidden_state(clf, batch, 2), full.hidden_states[2], atol=2e-5, rtol=0)
            logits, state = cls_path.inputs_logits_and_state(clf, batch, 1)
            torch.testing.assert_close(logits, full.logits, atol=2e-5, rtol=0)
            torch.testing.assert_close(state, full.hidden_states[1], atol=2e-5, rtol=0)
            assert asked == [batch.padded] * 3  # each path passed on what the batch said
