"""Linear CKA against independent references: invariances that define it, the minibatch estimator against the
full-batch unbiased formula computed here in float64, and the two models' real layers."""
import numpy as np
import pytest

from app.core.ground.data import Example, load_dataset
from app.core.ground.errors import InputError
from app.core.techniques.embeddings import embed, embed_layers
from app.core.techniques.similarity import MinibatchCKA, hsic1, in_minibatches, layer_similarity, linear_cka

from .conftest import shared


def _orthogonal(d, rng):
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return q


def test_cka_is_one_under_rotation_and_isotropic_scaling_and_low_for_unrelated_features():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 16))
    y = 3.7 * x @ _orthogonal(16, rng)
    assert linear_cka(x, y) == pytest.approx(1.0, abs=1e-12)
    acc = MinibatchCKA()
    for s in range(0, 200, 50):
        acc.update(x[None, s:s + 50], y[None, s:s + 50])
    assert acc.value()[0, 0] == pytest.approx(1.0, abs=1e-9)
    assert linear_cka(x, rng.normal(size=(200, 16))) < 0.2
    # not invariant to an arbitrary (non-orthogonal) linear map: the property is specific
    assert linear_cka(x, x @ np.diag(np.linspace(0.1, 10, 16))) < 0.95


def _unbiased_cka_full(x, y):
    """The full-batch unbiased CKA written out directly (Song et al.'s HSIC₁ over all n examples, float64)."""
    def h(k, lm):
        n = len(k)
        k, lm = k - np.diag(np.diag(k)), lm - np.diag(np.diag(lm))
        return (np.trace(k @ lm) + k.sum() * lm.sum() / ((n - 1) * (n - 2)) - 2 / (n - 2) * k.sum(0) @ lm.sum(0)) \
            / (n * (n - 3))

    k, lm = x @ x.T, y @ y.T
    return h(k, lm) / np.sqrt(h(k, k) * h(lm, lm))


def test_hsic1_is_the_formula():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(30, 5)), rng.normal(size=(30, 7))
    k, lm = x @ x.T, y @ y.T
    n = 30
    kt, lt = k - np.diag(np.diag(k)), lm - np.diag(np.diag(lm))
    ones = np.ones(n)
    ref = (np.trace(kt @ lt) + (ones @ kt @ ones) * (ones @ lt @ ones) / ((n - 1) * (n - 2))
           - 2 / (n - 2) * ones @ kt @ lt @ ones) / (n * (n - 3))
    assert hsic1(k, lm) == pytest.approx(ref, rel=1e-10)
    with pytest.raises(InputError, match="at least 4 examples"):
        hsic1(k[:3, :3], lm[:3, :3])


def test_the_hsic_table_is_the_formula_cell_by_cell():
    """Every pair of layers' HSIC at once (matrix products over the stacks) against the trace formula, pair by pair."""
    from app.core.techniques.similarity import hsic_table

    rng = np.random.default_rng(2)
    n = 12
    gx = np.stack([x @ x.T for x in rng.normal(size=(3, n, 5))])
    gy = np.stack([y @ y.T for y in rng.normal(size=(4, n, 7))])
    kept = gx.copy()
    ones = np.ones(n)

    def ref(k, lm):
        kt, lt = k - np.diag(np.diag(k)), lm - np.diag(np.diag(lm))
        return (np.trace(kt @ lt) + (ones @ kt @ ones) * (ones @ lt @ ones) / ((n - 1) * (n - 2))
                - 2 / (n - 2) * ones @ kt @ lt @ ones) / (n * (n - 3))

    table = hsic_table(gx, gy)
    assert table.shape == (3, 4)
    np.testing.assert_allclose(table, [[ref(k, lm) for lm in gy] for k in gx], rtol=1e-10)
    np.testing.assert_array_equal(gx, kept)  # the diagonals it zeroes are its own copy's


def test_minibatch_estimate_agrees_with_the_full_batch_formula_within_its_interval(offline_pair):
    """On 384 SST-2 dev sentences, both offline models' top and middle layers: the minibatch CKA lies close to
    the full-batch unbiased value, which lies inside the minibatch bootstrap interval."""
    exs = load_dataset(shared("glue", "sst2", "dev.tsv")).examples[:384]
    a, b = (embed_layers(clf, exs, pooling="cls") for clf in offline_pair.models)
    res = layer_similarity(in_minibatches(a, b, size=64))
    assert res["minibatches"] == 6 and res["n"] == 384
    for i, j in [(6, 6), (3, 4), (1, 6)]:
        full = _unbiased_cka_full(a[i].astype(np.float64), b[j].astype(np.float64))
        got = res["cross"]["cka"][i][j]
        assert res["cross"]["low"][i][j] - 0.02 <= full <= res["cross"]["high"][i][j] + 0.02, (i, j, full, got)
        assert abs(got - full) < 0.1
    # a model against itself: exactly 1 on the diagonal, symmetric; the [CLS] vector before the first layer is
    # the same for every input, so its row is undefined (None), not a number
    self_a = np.array(res["a"]["cka"][1:], dtype=float)[:, 1:]
    np.testing.assert_allclose(np.diag(self_a), 1.0, atol=1e-9)
    np.testing.assert_allclose(self_a, self_a.T, atol=1e-9)
    assert res["a"]["cka"][0] == [None] * 7 and res["best_b_for_a"][0] is None


def test_every_layer_embedding_is_the_one_embed_gives(offline_pair):
    exs = [Example(("a gorgeous , witty , seductive movie .",)), Example(("the plot made no sense",))]
    clf = offline_pair.models[1]
    layers = embed_layers(clf, exs, pooling="mean")
    for layer in (0, 3, -1):
        np.testing.assert_allclose(layers[layer], embed(clf, exs, layer=layer, pooling="mean"), atol=1e-5)


def test_too_few_examples_are_refused():
    with pytest.raises(InputError, match="at least 8 examples"):
        layer_similarity(in_minibatches(np.zeros((2, 5, 3)), np.zeros((2, 5, 3))))


def test_the_facade_streams_batches_and_the_cli_prints_the_same(offline_pair, capsys):
    """`api.similarity` embeds batch by batch (memory of one batch): the same numbers as embedding everything
    first; the CLI's --json is the facade's answer."""
    import json

    from app import cli
    from app.core import api

    res = api.similarity(offline_pair, "sentiment_plain", limit=30, pooling="mean", minibatch=10)
    exs = api.resolve_dataset(offline_pair, "sentiment_plain", 30).examples
    a, b = (embed_layers(clf, exs, pooling="mean") for clf in offline_pair.models)
    whole = layer_similarity(in_minibatches(a, b, size=10))
    np.testing.assert_allclose(np.array(res.cross["cka"], dtype=float), np.array(whole["cross"]["cka"], dtype=float),
                               atol=1e-6)
    assert res.minibatches == 3 and res.n == 30 and res.models == [m.name for m in offline_pair.models]
    # embedded in chunks of 8 minibatches (here 64 and 36 examples): the minibatches are still the dataset's own
    sst2 = str(shared("glue", "sst2", "dev.tsv"))
    chunked = api.similarity(offline_pair, sst2, limit=100, pooling="cls", minibatch=8)
    exs = api.resolve_dataset(offline_pair, sst2, 100).examples
    a, b = (embed_layers(clf, exs) for clf in offline_pair.models)
    whole = layer_similarity(in_minibatches(a, b, size=8))
    assert chunked.minibatches == whole["minibatches"] == 13
    for key in ("cross", "a", "b"):
        # float32 rounding differs with the padding (minibatches of 8 amplify it to ~1e-3); minibatches of other
        # examples differ by ~0.1
        np.testing.assert_allclose(np.array(chunked[key]["cka"], dtype=float),
                                   np.array(whole[key]["cka"], dtype=float), atol=5e-3)
    assert cli.main(["similarity", "--pair", "offline", "--dataset", "sentiment_plain", "--limit", "30",
                     "--pooling", "mean", "--minibatch", "10", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose(np.array(printed["cross"]["cka"], dtype=float),
                               np.array(res.cross["cka"], dtype=float), atol=1e-6)
    with pytest.raises(InputError, match="minibatch"):
        api.similarity(offline_pair, "sentiment_plain", limit=30, minibatch=-3)


def test_word_rows_are_each_words_token_mean_and_both_models_read_the_same_words(offline_pair):
    """Independent reference: each example's own hidden states (one forward of its own) averaged over the tokens
    the core's alignment gives each word; WordPiece and SentencePiece then give the same rows."""
    from app.core.execution.inference import encode_one
    from app.core.ground.alignment import split_words
    from app.core.techniques.embeddings import hidden_states, word_layers
    from app.core.techniques.similarity import minibatch_stats, similarity_batch

    exs = [Example(("A gripping, well-acted thriller.",)), Example(("Unwatchable nonsense; avoid it",)),
           Example(("The cinematography is stunning but the plot drags",)), Example(("Not bad at all!",))]
    per_model = []
    for clf in offline_pair.models:
        rows, seen = word_layers(clf, exs, batch_size=3)  # two length batches: rows go back in input order
        ref = []
        for ex in exs:
            states, _ = hidden_states(clf, ex)
            _, al = encode_one(clf, ex)
            ref.extend(states[:, toks].mean(1) for toks in al.word_tokens)
        ref = np.stack(ref, axis=1)
        assert seen.all() and rows.shape == ref.shape
        np.testing.assert_allclose(rows, ref, atol=2e-4)
        per_model.append(rows)
    words = sum(len(split_words(ex.texts[0])) for ex in exs)  # punctuation marks are words of their own
    assert per_model[0].shape[1] == per_model[1].shape[1] == words == 26
    (got,) = similarity_batch(offline_pair, exs, pooling="words", minibatch=100)
    want = minibatch_stats(*per_model)
    assert got["n"] == words
    np.testing.assert_allclose(got["ab"], want["ab"], rtol=1e-3, atol=1e-6)


def test_word_pooling_through_the_facade_counts_words_and_is_refused_by_name_when_unknown(offline_pair):
    from app.core import api
    from app.core.ground.alignment import split_words

    res = api.similarity(offline_pair, "sentiment_plain", limit=24, pooling="words", minibatch=32)
    exs = api.resolve_dataset(offline_pair, "sentiment_plain", 24).examples
    assert res.n == sum(len(split_words(t)) for ex in exs for t in ex.texts)  # short texts: every word read
    cross = np.array(res.cross["cka"], dtype=float)
    assert cross.shape == (7, 7) and np.nanmax(cross) <= 1 + 1e-9
    # word vectors at the input are each model's word embedding: the same words, so related, not constant
    assert cross[0, 0] > 0.3
    with pytest.raises(InputError, match=r"pooling: 'tokens' is not one of \['cls', 'mean', 'words'\]"):
        api.similarity(offline_pair, "sentiment_plain", limit=24, pooling="tokens")


def test_few_minibatches_get_an_interval_from_half_samples_as_wide_as_the_estimates_own_spread():
    """Issue 71: CKA on a brushed slice ran on one minibatch, and its "interval" was its value. With fewer than
    8 minibatches the interval now comes from half-samples of the examples; its width is measured here against the
    estimator's real spread, the standard deviation of the estimate over 300 independent datasets from one model
    (a reference the interval never sees): about as wide where layers share structure, never narrower where
    they share none (there a half-sample's estimate spreads more: conservative)."""
    from app.core.techniques.similarity import minibatch_stats, summarise

    mix = np.random.default_rng(99).normal(size=(4, 6, 16))

    def dataset(rng, n=40):
        z = rng.normal(size=(n, 6))
        a = np.stack([z @ mix[0] + rng.normal(size=(n, 16)), np.tanh(z @ mix[1])])
        b = np.stack([z @ mix[2] + 2 * rng.normal(size=(n, 16)), (z ** 2) @ mix[3]])  # layer 1: nothing shared
        return a, b

    rng = np.random.default_rng(1)
    spread = np.array([summarise([minibatch_stats(*dataset(rng))])["cross"]["cka"] for _ in range(300)]).std(0)
    ratios = []
    for seed in range(6):
        res = summarise([minibatch_stats(*dataset(rng), halves=200, seed=seed)])
        assert res["minibatches"] == 1 and res["interval"] == "half-samples of the examples"
        lo, hi, value = (np.array(res["cross"][k]) for k in ("low", "high", "cka"))
        assert np.all(lo < value) and np.all(value < hi)
        ratios.append((hi - lo) / (2 * 1.96 * spread))
    ratios = np.mean(ratios, 0)
    assert 0.75 < ratios[0, 0] < 1.5 and 0.75 < ratios[1, 0] < 1.5, ratios  # shared structure
    assert ratios[0, 1] > 0.8 and ratios[1, 1] > 0.8, ratios  # nothing shared: not narrower than the truth
    # without half-samples one minibatch has no interval, and says so
    alone = summarise([minibatch_stats(*dataset(rng))])
    assert alone["interval"] is None and alone["cross"]["low"] == alone["cross"]["cka"]


def test_cka_on_a_small_slice_says_how_many_and_how_its_interval_was_drawn(offline_pair, capsys):
    from app import cli
    from app.core import api

    res = api.similarity(offline_pair, "sentiment_plain", limit=24, pooling="cls", minibatch=128)
    assert res.minibatches == 1 and res.interval == "half-samples of the examples"
    lo, hi, cka = (np.array(res.cross[k], dtype=float) for k in ("low", "high", "cka"))
    defined = ~np.isnan(cka)
    assert np.all(lo[defined] < hi[defined])  # an interval, not the value twice
    assert cli.main(["similarity", "--pair", "offline", "--dataset", "sentiment_plain", "--limit", "24"]) == 0
    assert ("24 examples, cls pooling, 1 minibatch of about 24; intervals: half-samples of the examples"
            in capsys.readouterr().out)
