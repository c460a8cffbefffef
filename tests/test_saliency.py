import numpy as np
import pytest
import torch

from app.core.execution.inference import encode_one, predict
from app.core.ground.alignment import edit_texts
from app.core.ground.data import Example
from app.core.ground.errors import InputError
from app.core.techniques.explanation import explain
from app.core.techniques.faithfulness import faithfulness, top_words
from app.core.techniques.gradients import forward_embeds
from app.core.techniques.saliency import METHODS, IntegratedGradients, Occlusion, method

EX = Example(("a gorgeous , witty , seductive movie .",))


@pytest.mark.parametrize("which", [0, 1])
def test_integrated_gradients_completeness(tiny_pair, which):
    """Sum of attributions = F(input) - F(baseline), both from ordinary forward passes, within the delta."""
    clf = tiny_pair.models[which]
    ig = IntegratedGradients(clf, tolerance=1e-3)
    sal = ig.attribute(EX, "positive")
    enc, _ = encode_one(clf, EX)
    with torch.no_grad():
        kw = {k: v for k, v in enc.items() if k in ("attention_mask", "token_type_ids")}
        f = lambda ids: float(torch.softmax(clf.model(input_ids=ids, **kw).logits, -1)[0, 1])
        expected = f(enc["input_ids"]) - f(ig.baseline_ids(enc))
    total = sum(sal.token_scores)
    assert abs(total - expected) <= sal.delta + 1e-6
    assert sal.delta <= 1e-3
    assert sum(sal.scores) == pytest.approx(total, abs=1e-6)  # words carry every token's share


@pytest.mark.parametrize("which", [0, 1])
def test_first_round_equals_captum_layer_integrated_gradients(offline_pair, which):
    """With the plain Gauss-Legendre rule, ours is Captum's LayerIntegratedGradients (the tutorial's setup)."""
    from captum.attr import LayerIntegratedGradients

    clf = offline_pair.models[which]
    ig = IntegratedGradients(clf, tolerance=1.0, start_steps=16, rule="gauss_legendre")  # stops after one round
    sal = ig.attribute(EX, "positive")
    assert sal.n_steps == 16
    enc, _ = encode_one(clf, EX)
    kw = {k: v for k, v in enc.items() if k in ("attention_mask", "token_type_ids")}

    def forward(ids):
        n = ids.shape[0]
        return torch.softmax(clf.model(input_ids=ids, **{k: v.expand(n, -1) for k, v in kw.items()}).logits, -1)[:, 1]

    lig = LayerIntegratedGradients(forward, clf.model.base_model.embeddings)
    attr, delta = lig.attribute(enc["input_ids"], baselines=ig.baseline_ids(enc), n_steps=16,
                                method="gausslegendre", return_convergence_delta=True)
    np.testing.assert_allclose(sal.token_scores, attr[0].sum(-1).detach().numpy(), atol=2e-5)
    assert sal.delta == pytest.approx(abs(float(delta)), abs=2e-5)


def test_ig_reports_a_large_delta(tiny_pair):
    sal = IntegratedGradients(tiny_pair.models[0], tolerance=1e-12, start_steps=2, max_steps=5).attribute(EX)
    assert sal.n_steps == 2 + 3 and "exceeds" in sal.note


def test_ig_refines_a_steep_path(offline_pair):
    """An SST-2 dev sentence whose offline-BERT path has a sharp jump near alpha 0.5: the 16 first steps leave a
    delta above 0.1 and the tutorial's 50 plain steps stay above the tolerance; the sinh-mapped rounds get under
    it within 16 + 24 + 36 evaluations."""
    clf = offline_pair.models[0]
    ex = Example(("even horror fans will most likely not find what they 're seeking with trouble every day ; "
                  "the movie lacks both thrills and humor .",))
    first = IntegratedGradients(clf, tolerance=1.0).attribute(ex)
    plain50 = IntegratedGradients(clf, tolerance=1.0, start_steps=50, rule="gauss_legendre").attribute(ex)
    refined = IntegratedGradients(clf, tolerance=1e-3).attribute(ex)
    assert first.delta > 0.1 and plain50.delta > 1e-3
    assert refined.delta <= 1e-3 and 16 < refined.n_steps <= 76
    assert refined.note == ""


def test_ig_is_thread_safe(offline_pair):
    """The embedding-layer hook is per thread: concurrent maps equal sequential ones."""
    from concurrent.futures import ThreadPoolExecutor

    clf = offline_pair.models[0]
    texts = [Example((t,)) for t in ("a gorgeous , witty , seductive movie .", "the plot is dull and far too long .",
                                     "an utterly charming , funny film .", "it never quite works .")]
    seq = [IntegratedGradients(clf).attribute(e).token_scores for e in texts]
    with ThreadPoolExecutor(4) as pool:
        par = list(pool.map(lambda e: IntegratedGradients(clf).attribute(e).token_scores, texts))
    for a, b in zip(seq, par):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("which", [0, 1])
def test_gradient_x_input_matches_finite_difference(tiny_pair, which):
    """Sum of gradient x input over the words = d/da F(special tokens, a * word tokens) at a = 1."""
    clf = tiny_pair.models[which]
    sal = method("gradient_x_input", clf).attribute(EX, "positive")
    enc, al = encode_one(clf, EX)
    model = clf.model.double()
    try:
        with torch.no_grad():
            emb = clf.model.get_input_embeddings()(enc["input_ids"]).double()
        words = torch.tensor([w is not None for w in al.token_word]).view(1, -1, 1)

        def f(a):
            with torch.no_grad():
                x = torch.where(words, a * emb, emb)
                return torch.softmax(forward_embeds(clf, x, enc["attention_mask"], enc.get("token_type_ids")), -1)[
                    0, 1
                ].item()

        eps = 1e-5
        fd = (f(1 + eps) - f(1 - eps)) / (2 * eps)
    finally:
        model.float()
    assert sum(sal.scores) == pytest.approx(fd, rel=1e-3, abs=1e-6)


def test_occlusion_is_the_probability_change_of_removing_the_word(tiny_pair):
    clf = tiny_pair.models[1]
    sal = Occlusion(clf).attribute(EX, "positive")
    _, al = encode_one(clf, EX)
    p0 = predict(clf, [EX]).probs[0, 1]
    for i in (0, 1, 5):
        without = Example(edit_texts(EX.texts, al.words, {i: ""}))
        assert sal.scores[i] == pytest.approx(p0 - predict(clf, [without]).probs[0, 1], abs=1e-6)
    assert edit_texts(EX.texts, al.words, {1: ""}) == ("a , witty , seductive movie .",)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_scores_every_word_of_both_models(tiny_pair, name):
    text = "I ❤️ this café — don't you? 👍🏽"
    out = explain(tiny_pair.models, Example((text,)), name)
    a, b = out["maps"]
    assert a.words == b.words and len(a.scores) == len(a.words) == len(b.scores)
    assert all(np.isfinite(a.scores)) and all(np.isfinite(b.scores))
    assert any(abs(s) > 0 for s in a.scores) and any(abs(s) > 0 for s in b.scores)  # a map, not zeros
    for f in out["faithfulness"]:
        assert set(f) >= {"comprehensiveness", "sufficiency"}


def test_pairs_are_explained_per_field(tiny_nli_pair):
    out = explain(tiny_nli_pair.models, Example(("The cat sat on the mat.", "A cat sits.")), "gradient_x_input")
    assert out["maps"][0].fields == [0] * 7 + [1] * 4


def test_ig_on_a_regression_head_integrates_the_score(tiny_dirs, tmp_path):
    """STS-B models output one similarity score: F is that score (no softmax), per field words kept apart."""
    from app.core.execution.pair import Pair

    from .conftest import _tiny_bert

    reg = _tiny_bert(tmp_path / "reg", num_labels=1)
    pair = Pair.resolve(models=[str(reg), str(reg)], task="stsb")
    clf = pair.models[0]
    ex = Example(("a man is playing a guitar .", "a person plays an instrument ."))
    ig = IntegratedGradients(clf, tolerance=1e-5)
    sal = ig.attribute(ex)
    enc, _ = encode_one(clf, ex)
    with torch.no_grad():
        kw = {k: v for k, v in enc.items() if k in ("attention_mask", "token_type_ids")}
        f = lambda ids: float(clf.model(input_ids=ids, **kw).logits[0, 0])
        expected = f(enc["input_ids"]) - f(ig.baseline_ids(enc))
    assert sal.probability is None and sal.target_label is None
    assert abs(sum(sal.token_scores) - expected) <= sal.delta + 1e-6 and sal.delta <= 1e-5
    assert sorted(set(sal.fields)) == [0, 1]


def test_ig_baseline_is_the_tutorials_even_for_unknown_and_typed_special_tokens(tiny_pair):
    """Captum's tutorial baseline is [CLS] [PAD]... [SEP]: an emoji's [UNK] and a typed "[MASK]" are text, so they
    become [PAD] too (a special-tokens mask kept them, and gave them no attribution)."""
    clf = tiny_pair.models[0]
    tok = clf.tokenizer
    ex = Example(("I loved it 😍 , a [MASK] of a film",))
    enc, _ = encode_one(clf, ex)
    ids = enc["input_ids"][0].tolist()
    assert tok.unk_token_id in ids and tok.mask_token_id in ids
    ref = [tok.cls_token_id] + [tok.pad_token_id] * (len(ids) - 2) + [tok.sep_token_id]
    ig = IntegratedGradients(clf, tolerance=1e-4)
    assert ig.baseline_ids(enc)[0].tolist() == ref
    sal = ig.attribute(ex)
    unk = ids.index(tok.unk_token_id)
    assert sal.token_scores[unk] != 0.0 and sal.delta <= 1e-4


@pytest.fixture(scope="module")
def short_bert(tmp_path_factory):
    """A BERT that reads 16 tokens, so that a sentence is a long input."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    from app.core.models.loading import load
    from app.core.models.offline import minilm_dir
    from app.core.models.registry import TASKS, ModelSpec

    d = tmp_path_factory.mktemp("short") / "m"
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=16)
    BertForSequenceClassification(config).save_pretrained(d)
    BertTokenizerFast.from_pretrained(minilm_dir()).save_pretrained(d)
    return {task: load(ModelSpec("M", str(d), "bert", TASKS[task])) for task in ("sst2", "rte")}


LONG = ("the plot was dull but the actors were wonderful and the music was moving , though the ending felt "
        "rushed and the middle dragged on for far too long , a mixed bag overall")


@pytest.mark.parametrize("task", ["sst2", "rte"])
def test_edits_of_the_window_predict_as_edits_of_the_whole_text(short_bert, task):
    """What makes the window safe: removing any of the words the model read (one, a random half, all of them)
    gives the model the same input whether the whole text or the window is edited."""
    from app.core.execution.inference import windowed

    clf = short_bert[task]
    ex = Example((LONG,) if task == "sst2" else ("the film was long .", LONG))
    _, al = encode_one(clf, ex)
    window = windowed(clf, ex, al)
    assert al.cut and sum(map(len, window.texts)) < sum(map(len, ex.texts))
    rng = np.random.default_rng(0)
    seen = al.seen
    edits = [{i: ""} for i in seen] + [{i: "" for i in seen}]
    edits += [{i: "" for i in seen if rng.random() < 0.5} for _ in range(8)]
    full = predict(clf, [Example(edit_texts(ex.texts, al.words, e)) for e in edits], validate=False).probs
    short = predict(clf, [Example(edit_texts(window.texts, al.words, e)) for e in edits], validate=False).probs
    np.testing.assert_allclose(short, full, atol=1e-6)


def test_perturbing_methods_read_a_huge_input_a_window_at_a_time(tiny_pair, monkeypatch):
    """Occlusion of every word of a 100,000-character review made ~16,000 copies of it and held tens of GB of
    token ids (the app was killed for memory). Only the words the model read are perturbed, each copy is cut
    a window past them, and the words past the cut score 0, as the note says."""
    import app.core.execution.inference as inference
    from app.core.techniques.counterfactuals import ablation_flip

    clf = tiny_pair.models[0]
    huge = Example(("The acting was superb but the plot dragged. " * 2300,))
    longest = []
    real = inference.tokenize

    def spy(clf_, examples, *a, **kw):
        longest.extend(sum(map(len, e.texts)) for e in examples)
        return real(clf_, examples, *a, **kw)

    monkeypatch.setattr(inference, "tokenize", spy)
    for name in ("occlusion", "lime"):
        longest.clear()
        sal = method(name, clf).attribute(huge)
        assert len(sal.scores) == len(sal.words) > 16000 and "input cut at" in sal.note
        seen = sal.alignment.seen
        assert len(seen) < clf.max_length and not any(sal.scores[i] for i in sal.alignment.cut)
        assert sum(n > 3000 for n in longest) == 1  # the input itself is read once, whole
        longest.clear()
        faithfulness(clf, huge, sal)  # the input's own probability comes from the map: only the 10 edits are read
        assert sum(n > 3000 for n in longest) == 0 and len(longest) == 10
    longest.clear()
    ablation_flip(clf, huge)
    assert sum(n > 3000 for n in longest) == 1


@pytest.mark.parametrize("which", [0, 1])
def test_logit_output_completeness_finite_difference_and_occlusion(tiny_pair, which):
    """Explaining the logit: IG's attributions sum to z(input) - z(baseline) within the delta; gradient x input
    is the finite difference of the logit; occlusion is the logit's change when a word is removed."""
    clf = tiny_pair.models[which]
    ig = IntegratedGradients(clf, tolerance=1e-4, output="logit")
    sal = ig.attribute(EX, "positive")
    enc, al = encode_one(clf, EX)
    kw = {k: v for k, v in enc.items() if k in ("attention_mask", "token_type_ids")}
    with torch.no_grad():
        z = lambda ids: float(clf.model(input_ids=ids, **kw).logits[0, 1])
        expected = z(enc["input_ids"]) - z(ig.baseline_ids(enc))
    assert sal.output == "logit" and abs(sum(sal.token_scores) - expected) <= sal.delta + 1e-5
    assert sal.delta <= 1e-4

    gxi = method("gradient_x_input", clf, output="logit").attribute(EX, "positive")
    with torch.no_grad():
        emb = clf.model.get_input_embeddings()(enc["input_ids"])
    words = torch.tensor([w is not None for w in al.token_word]).view(1, -1, 1)

    def f(a):
        with torch.no_grad():
            x = torch.where(words, a * emb, emb)
            return forward_embeds(clf, x, enc["attention_mask"], enc.get("token_type_ids"))[0, 1].double().item()

    eps = 1e-3
    assert sum(gxi.scores) == pytest.approx((f(1 + eps) - f(1 - eps)) / (2 * eps), rel=2e-2, abs=1e-4)

    occ = Occlusion(clf, output="logit").attribute(EX, "positive")
    z0 = predict(clf, [EX]).logits[0, 1]
    for i in (0, 1, 5):
        without = Example(edit_texts(EX.texts, al.words, {i: ""}))
        assert occ.scores[i] == pytest.approx(z0 - predict(clf, [without]).logits[0, 1], abs=1e-5)


def test_output_is_checked_and_reported_by_the_api(tiny_pair):
    from app.core import api

    with pytest.raises(InputError, match="output: 'logits' is not one of"):
        api.saliency(tiny_pair, "a fine film", method="occlusion", output="logits")
    res = api.saliency(tiny_pair, "a fine film", method="occlusion", output="logit")
    assert res["output"] == "logit" and all(m["output"] == "logit" for m in res["maps"])
    assert api.saliency(tiny_pair, "a fine film", method="occlusion")["output"] == "prob"
    over = api.saliency(tiny_pair, dataset="sentiment_plain", method="occlusion", limit=3, output="logit")
    exs = api.resolve_dataset(tiny_pair, "sentiment_plain", 3).examples
    direct = explain(tiny_pair.models, exs[0], "occlusion", output="logit")
    assert over["output"] == "logit" and over["examples"][0]["top_words"][0] == top_words(direct["maps"][0])


def test_ig_first_round_fits_the_tolerance(offline_pair):
    """A tighter tolerance starts with more nodes (a first round that misses is thrown away): 16 down to 1e-3,
    8 more per decade, at most 40; a given start_steps wins, and max_steps caps it."""
    rounds = {t: IntegratedGradients.first_round(t) for t in (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, float("inf"))}
    assert rounds == {1e-2: 16, 1e-3: 16, 1e-4: 24, 1e-5: 32, 1e-6: 40, 1e-7: 40, float("inf"): 16}
    assert IntegratedGradients.first_round(5e-4) == 18 and IntegratedGradients.first_round(0.0) == 40
    clf = offline_pair.models[1]
    assert IntegratedGradients(clf, tolerance=1e-6, start_steps=20).start_steps == 20
    assert IntegratedGradients(clf, tolerance=1e-6, max_steps=30).start_steps == 30
    # BERT on this sentence: 40 first nodes meet 1e-6 in one round; from 16, the rounds of 16 and 24 are spent
    # before one of 36 meets it (76 evaluations)
    clf = offline_pair.models[0]
    ex = Example(("the acting , costumes , music , cinematography and sound are all astounding .",))
    sized = IntegratedGradients(clf, tolerance=1e-6).attribute(ex)
    sixteen = IntegratedGradients(clf, tolerance=1e-6, start_steps=16).attribute(ex)
    assert sized.n_steps == 40 and sized.delta <= 1e-6
    assert sixteen.n_steps > 40 and sixteen.delta <= 1e-6
