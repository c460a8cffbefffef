"""Slice discovery (app/core/techniques/slices.py): it finds a difference planted in one model and, on two models whose
errors differ by chance alone, reports a slice in no more than 5% of runs."""
import numpy as np
import pytest

from app.core.ground.data import load_dataset
from app.core.ground.errors import InputError
from app.core.ground.runtime import SHARED_DATA
from app.core.techniques import slices

MODELS = ("first", "second")
LABELS = ("negative", "positive")


@pytest.fixture(scope="module")
def sst2():
    ds = load_dataset(SHARED_DATA / "glue" / "sst2" / "dev.tsv")
    texts = [e.texts[0] for e in ds.examples]
    gold = np.asarray([LABELS.index(e.label) if isinstance(e.label, str) else int(e.label) for e in ds.examples])
    return texts, gold


def _noisy(gold, rate, rng):
    """Answers that are wrong on a random `rate` of the examples."""
    wrong = rng.random(len(gold)) < rate
    return np.where(wrong, 1 - gold, gold)


def test_a_planted_difference_comes_out_on_top(sst2):
    """The second model answers wrongly on every text holding "film" (117 of SST-2 dev's 872), both otherwise
    err at random: "word: film" is the first slice, a finding with q < 0.05, with the accuracies on it as planted."""
    texts, gold = sst2
    rng = np.random.default_rng(0)
    first = _noisy(gold, 0.12, rng)
    second = _noisy(gold, 0.12, rng)
    film = np.asarray(["film" in slices.words(t) for t in texts])
    second = np.where(film, 1 - gold, second)
    res = slices.find(texts, gold, first, second, models=MODELS, label_names=LABELS)
    top = res["slices"][0]
    assert top["name"] == "word: film" and top["q"] < 0.05, res["slices"][:3]
    assert top["size"] == film.sum() == 117 and top["accuracy"]["second"] == 0.0
    assert top["accuracy"]["first"] == pytest.approx((first[film] == gold[film]).mean())
    assert top["indices"] == np.flatnonzero(film).tolist()
    assert top["gap_examples"] < 0 and top["effect"] < -0.5


def test_a_planted_disagreement_is_found_by_agreement(sst2):
    """The models disagree wherever "but" is in the text (108 texts) and agree elsewhere; by agreement the
    first finding is that word."""
    texts, gold = sst2
    first = _noisy(gold, 0.1, np.random.default_rng(1))
    but = np.asarray(["but" in slices.words(t) for t in texts])
    second = np.where(but, 1 - first, first)
    res = slices.find(texts, gold, first, second, models=MODELS, label_names=LABELS, metric="agreement")
    top = res["slices"][0]
    assert top["name"] == "word: but" and top["q"] < 0.05 and top["agreement"] == 0.0
    assert res["overall"]["agreement"] == pytest.approx(1 - 108 / 872)


def test_chance_differences_are_reported_in_at_most_five_percent_of_runs(sst2):
    """Twenty seeds of two models with the same error rate and independent errors (the null: no slice is really
    different), on every candidate: at most one run of twenty reports any slice with q < 0.05. Two models with
    the same answers report none."""
    texts, gold = sst2
    runs_with_findings = 0
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        res = slices.find(texts, gold, _noisy(gold, 0.15, rng), _noisy(gold, 0.15, rng), models=MODELS,
                          label_names=LABELS)
        assert res["candidates_tested"] > 100
        runs_with_findings += res["findings"] > 0
    assert runs_with_findings <= 1
    same = _noisy(gold, 0.15, np.random.default_rng(7))
    res = slices.find(texts, gold, same, same, models=MODELS, label_names=LABELS)
    assert res["findings"] == 0 and all(s["p"] == 1.0 for s in res["slices"])


def test_q_values_are_benjamini_hochbergs():
    from scipy.stats import false_discovery_control

    p = np.random.default_rng(3).random(200) ** 3
    np.testing.assert_allclose(slices.benjamini_hochberg(p), false_discovery_control(p, method="bh"), rtol=1e-12)
    assert slices.benjamini_hochberg([]).size == 0


def test_candidates_keep_to_the_size_bounds_and_test_each_set_once(sst2):
    texts, gold = sst2
    found = slices.candidates(texts, gold, LABELS, min_size=30)
    keys = [np.packbits(c.members).tobytes() for c in found]
    assert len(keys) == len(set(keys))
    assert all(30 <= c.members.sum() <= len(texts) - 30 for c in found)
    kinds = {c.kind for c in found}
    assert {"gold", "length", "marker", "word", "bigram"} <= kinds
    lengths = [c for c in found if c.kind == "length"]
    assert sum(c.members.sum() for c in lengths) == len(texts)  # the bins cover every text once
    neg = next(c for c in found if c.name.startswith("negation"))
    assert neg.members.sum() == sum(bool(set(slices.words(t)) & slices.MARKERS["negation"]) for t in texts)


def test_clusters_are_named_by_their_words():
    """Two groups of texts with separable embeddings: each cluster is one group, named by its own words."""
    texts = ["war army battle troops"] * 30 + ["market stocks shares profit"] * 30
    gold = [0] * 30 + [1] * 30
    rng = np.random.default_rng(0)
    emb = np.vstack([rng.normal(5, 1, (30, 8)), rng.normal(-5, 1, (30, 8))])
    found = [c for c in slices.candidates(texts, gold, LABELS, 10, {"m": emb}, clusters=2) if c.kind == "cluster"]
    # the gold-label candidates hold the same two groups and come first, so the clusters are dropped as repeats
    assert found == []
    groups = slices._clusters({"m": emb}, [set(t.split()) for t in texts], 2, 0)
    assert sorted(int(c.members.sum()) for c in groups) == [30, 30]
    for c in groups:
        words = set(c.name.split(": ", 1)[1].split(", "))
        assert words <= set(texts[0].split()) or words <= set(texts[-1].split())


def test_bad_requests_name_their_field(sst2):
    texts, gold = sst2
    with pytest.raises(InputError, match="metric: 'recall' is not one of"):
        slices.find(texts, gold, gold, gold, models=MODELS, label_names=LABELS, metric="recall")
    with pytest.raises(InputError, match="min_size: 500 needs a dataset of at least 1000"):
        slices.find(texts, gold, gold, gold, models=MODELS, label_names=LABELS, min_size=500)
    with pytest.raises(InputError, match="predictions for 872 gold labels"):
        slices.find(texts, gold, gold[:5], gold, models=MODELS, label_names=LABELS)


def test_the_facade_tests_the_pairs_own_answers(tiny_pair):
    """`api.slices` on 200 SST-2 dev rows with the tiny pair: its overall accuracies are the benchmark's, each
    reported slice's accuracies are recomputed from the pair's own predictions over its indices, its example
    texts are those rows' texts, and the embedding clusters were candidates."""
    from app.core import api

    data = str(SHARED_DATA / "glue" / "sst2" / "dev.tsv")
    res = api.slices(tiny_pair, data, limit=200, min_size=10, clusters=3, visitor=False)
    bench = api.benchmark(tiny_pair, data, 200, visitor=False)
    names = [m.name for m in tiny_pair.models]
    for m, row in zip(names, bench.models):
        assert res.overall["accuracy"][m] == pytest.approx(row["accuracy"])
    ds = api.resolve_dataset(tiny_pair, data, 200, visitor=False)
    preds = tiny_pair.predict(ds.examples)
    right = [np.asarray([p == e.label for p, e in zip(pred.predicted, ds.examples)]) for pred in preds]
    assert res.candidates_tested > 20 and res.n == 200 and len(res.slices) == 20
    for s in res.slices[:5]:
        idx = np.asarray(s["indices"])
        assert len(idx) == s["size"] >= 10
        for m, r in zip(names, right):
            assert s["accuracy"][m] == pytest.approx(r[idx].mean())
        assert s["examples"] == [list(ds.examples[i].texts) for i in idx[:5]]
    assert res.to_dict()["metric"] == "accuracy"
    tested = slices.candidates([" / ".join(e.texts) for e in ds.examples],
                               [LABELS.index(e.label) for e in ds.examples], LABELS, 10)
    assert res.candidates_tested > len(tested)  # the clusters of both models' embeddings were tested too


def test_the_facade_refuses_what_it_cannot_answer(tiny_pair, tmp_path):
    from app.core import api

    data = str(SHARED_DATA / "glue" / "sst2" / "dev.tsv")
    with pytest.raises(InputError, match="metric: 'f1' is not one of"):
        api.slices(tiny_pair, data, limit=100, metric="f1")
    with pytest.raises(InputError, match="min_size: 2 is too small"):
        api.slices(tiny_pair, data, limit=100, min_size=2)
    with pytest.raises(InputError, match="clusters: 30 is out of range; give a whole number from 0 to 20"):
        api.slices(tiny_pair, data, limit=100, clusters=30)
    unlabelled = tmp_path / "texts.tsv"
    unlabelled.write_text("sentence\n" + "\n".join(f"text number {i}" for i in range(50)) + "\n")
    with pytest.raises(InputError, match="has no gold labels"):
        api.slices(tiny_pair, str(unlabelled), limit=50, visitor=False)


def test_the_command_line_prints_the_facades_answer(tiny_dirs, tiny_pair, capsys):
    """`albert-lens slices --json` is the facade's result; without --json, the view's table with every slice's
    name; --metric offers the core's metrics."""
    import json

    from app import cli
    from app.core import api

    data = str(SHARED_DATA / "glue" / "sst2" / "dev.tsv")
    args = ["slices", "--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "sst2",
            "--dataset", data, "--limit", "120", "--min-size", "10", "--clusters", "0", "--metric", "agreement"]
    assert cli.main([*args, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got.pop("hardware")["device"] == "cpu"  # every --json names the device that answered
    want = api.slices(tiny_pair, data, limit=120, metric="agreement", min_size=10, clusters=0, visitor=False).to_dict()
    assert got == json.loads(json.dumps(want))
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert f"{got['candidates_tested']} candidate slices of at least 10 examples" in out
    assert all(s["name"][:40] in out for s in got["slices"])
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command" or getattr(a, "choices", None)
               and "slices" in (a.choices or {}))
    metric = next(a for a in sub.choices["slices"]._actions if a.dest == "metric")
    assert tuple(metric.choices) == slices.METRICS


def test_the_figure_draws_each_slices_accuracies(sst2):
    """The plot's bars are the slices' accuracies (the strongest at the top), findings in bold."""
    from app.core.present.plots import slices_figure

    texts, gold = sst2
    rng = np.random.default_rng(0)
    first, second = _noisy(gold, 0.12, rng), _noisy(gold, 0.12, rng)
    film = np.asarray(["film" in slices.words(t) for t in texts])
    res = slices.find(texts, gold, first, np.where(film, 1 - gold, second), models=MODELS, label_names=LABELS)
    ax = slices_figure(res, rows=5).axes[0]
    shown = res["slices"][:5][::-1]
    bars = [p.get_width() for p in ax.patches]
    assert bars == pytest.approx([s["accuracy"]["first"] for s in shown] + [s["accuracy"]["second"] for s in shown])
    ticks = ax.get_yticklabels()
    assert ticks[-1].get_text() == "word: film" and ticks[-1].get_fontweight() == "bold"
    assert [t.get_fontweight() == "bold" for t in ticks] == [s["q"] < 0.05 for s in shown]


def test_find_slices_again_makes_no_forward_pass(tiny_pair, tmp_path, monkeypatch):
    """Predictions and the clusters' embeddings are kept by content (the projection's cache): Find slices run
    again with another smallest size or metric, or after a projection of the same rows at the top layer's [CLS],
    reads them instead of running both models again; the answers are the same."""
    from app.core import api
    from app.core.techniques import projection

    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "cache"))
    passes = []
    for name in ("embed_and_predict", "predict", "embed"):
        real = getattr(projection, name)
        monkeypatch.setattr(projection, name,
                            lambda *a, real=real, name=name, **k: passes.append(name) or real(*a, **k))
    data = str(SHARED_DATA / "glue" / "sst2" / "dev.tsv")
    first = api.slices(tiny_pair, data, limit=120, min_size=10, clusters=3, visitor=False)
    assert passes  # the first run computed them
    done = len(passes)
    again = api.slices(tiny_pair, data, limit=120, min_size=12, clusters=3, metric="agreement", visitor=False)
    assert len(passes) == done and again.n == first.n == 120
    same = api.slices(tiny_pair, data, limit=120, min_size=10, clusters=3, visitor=False)
    assert same.to_dict() == first.to_dict() and len(passes) == done
