"""Confusion matrices with facets and ROC / precision-recall curves of both models (issue 71, what LIT does): the
counts against scikit-learn's on predictions made independently, DeLong's paired test against its definition
(every positive-negative pair counted) and its calibration, the curves' points against scikit-learn's, and the
command line, the app and the facade giving one answer."""
import json

import numpy as np
import pytest
from sklearn.metrics import (
    average_precision_score,
    confusion_matrix,
    precision_recall_curve,
    roc_auc_score,
    roc_curve,
)

from .conftest import SENTENCES, shared


def _structural(positive, scores):
    """DeLong's components from their definition: each positive's share of negatives it outranks (ties 1/2),
    each negative's share of positives that outrank it; the AUCs and their covariance."""
    aucs, v10, v01 = [], [], []
    for s in scores:
        x, y = s[positive], s[~positive]
        psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
        aucs.append(psi.mean())
        v10.append(psi.mean(1))
        v01.append(psi.mean(0))
    return np.array(aucs), np.cov(v10) / positive.sum() + np.cov(v01) / (~positive).sum()


def test_delong_equals_its_definition_and_scikit_learns_auc():
    from app.core.ground.significance import delong

    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(8, 80))
        y = rng.random(n) < rng.uniform(0.2, 0.8)
        y[:2], y[2:4] = True, False
        a = np.round(rng.random(n) + 0.6 * y, 1)  # rounded: ties, which count one half
        b = np.round(rng.random(n) + 0.2 * y + 0.3 * a, 1)
        auc, cov = delong(y, np.stack([a, b]))
        want_auc, want_cov = _structural(y, [a, b])
        np.testing.assert_allclose(auc, want_auc, atol=1e-12)
        np.testing.assert_allclose(auc, [roc_auc_score(y, a), roc_auc_score(y, b)], atol=1e-12)
        np.testing.assert_allclose(cov, want_cov, atol=1e-12)


def test_delongs_paired_test_holds_its_level_and_its_interval_agrees_with_its_p():
    """Two scorers of one quality on the same items (correlated through the items): about 5% of 400 datasets
    call them different at 0.05, and in every one the interval excludes 0 exactly when p < 0.05."""
    from app.core.ground.significance import compare_auc

    rng = np.random.default_rng(11)
    calls = 0
    for _ in range(400):
        y = rng.random(60) < 0.5
        y[:2], y[2:4] = True, False
        shared_noise = rng.normal(size=60)
        a, b = (y + shared_noise + rng.normal(size=60) for _ in range(2))
        cmp = compare_auc(y, a, b)
        lo, hi = cmp["difference_interval"]
        assert (cmp["p_value"] < 0.05) == (lo > 0 or hi < 0), cmp
        assert lo < cmp["difference"] < hi
        calls += cmp["p_value"] < 0.05
    assert 0.02 <= calls / 400 <= 0.09, calls


def test_a_perfect_ranking_has_no_normal_interval_and_says_why():
    from app.core.ground.significance import compare_auc
    from app.core.present.views import verdict

    y = np.array([True] * 5 + [False] * 5)
    perfect = np.arange(10, 0, -1, dtype=float)
    cmp = compare_auc(y, perfect, perfect)
    assert cmp["values"] == [1.0, 1.0] and cmp["intervals"] == [[None, None], [None, None]]
    assert cmp["difference_interval"] == [None, None] and cmp["p_value"] == 1.0
    text = verdict(cmp, ["A", "B"])
    assert "variance is 0" in text and "too few" not in text, text


def test_average_precision_under_resampling_weights_equals_scikit_learns():
    from app.core.ground.significance import average_precision, compare_average_precision

    rng = np.random.default_rng(5)
    y = rng.random(50) < 0.4
    s = np.round(rng.random(50) + 0.5 * y, 2)
    w = rng.multinomial(50, np.full(50, 1 / 50), size=30)
    w = w[(w * y).sum(1) > 0]
    np.testing.assert_allclose(average_precision(y, s, w),
                               [average_precision_score(y, s, sample_weight=wi) for wi in w], atol=1e-12)
    cmp = compare_average_precision(y, s, rng.random(50))
    assert cmp["values"][0] == pytest.approx(average_precision_score(y, s))
    lo, hi = cmp["difference_interval"]
    assert lo <= cmp["difference"] <= hi


def test_curve_points_are_scikit_learns():
    from app.core.techniques.confusion import curve_points

    rng = np.random.default_rng(8)
    y = rng.random(40) < 0.5
    s = np.round(rng.random(40) + 0.4 * y, 1)
    pts = curve_points(y, s)
    fpr, tpr, thresholds = roc_curve(y, s, drop_intermediate=False)
    np.testing.assert_allclose(pts["fpr"], fpr)
    np.testing.assert_allclose(pts["tpr"], tpr)
    np.testing.assert_allclose(pts["thresholds"], thresholds[1:])
    precision, recall, _ = precision_recall_curve(y, s)
    np.testing.assert_allclose(pts["precision"], precision[:-1][::-1])  # scikit-learn's run from the lowest score
    np.testing.assert_allclose(pts["recall"], recall[:-1][::-1])


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """A labelled file whose rows 1-24 hold SST-2-like sentences of both labels and several lengths."""
    path = tmp_path_factory.mktemp("confusion") / "rows.jsonl"
    forms = ("{}", "{} but not really", "not {}", "{} , it never lets up .")
    texts = [forms[i // len(SENTENCES) % len(forms)].format(SENTENCES[i % len(SENTENCES)]) for i in range(24)]
    path.write_text("".join(json.dumps({"text": t, "label": "positive" if i % 3 else "negative"}) + "\n"
                            for i, t in enumerate(texts)), encoding="utf-8")
    return path


def _reference(pair, path, rows=None):
    """Each model's predicted label per row, predicted here (not through the cache the capability reads)."""
    from app.core.execution.inference import predict
    from app.core.ground.data import load_dataset

    ds = load_dataset(str(path))
    examples = ds.examples if rows is None else [ds.examples[r - 1] for r in rows]
    return [ex.label for ex in examples], [predict(clf, examples) for clf in pair.models], examples


def test_confusion_matrices_per_facet_are_the_counts_of_independent_predictions(tiny_pair, labelled):
    from app.core import api
    from app.core.techniques.slices import length_bins, words

    rows = [3, 1, 7, 9, 10, 12, 14, 15, 18, 20, 21, 24]
    spec = api.slice_spec(str(labelled), rows)
    gold, preds, examples = _reference(tiny_pair, labelled, rows)
    labels = list(tiny_pair.models[0].labels)
    for facet in ("none", "length", "negation", "agreement"):
        res = api.confusion(tiny_pair, dataset=spec, facet=facet, visitor=False)
        assert res.labels == labels and res.n == len(rows) and res.facet == facet
        assert sum(part["n"] for part in res.facets) == len(rows)  # the parts split the rows, none twice
        seen = set()
        for part in res.facets:
            members = _members(part["name"], examples, preds)
            assert part["n"] == int(members.sum()), part["name"]
            for m, pred in enumerate(preds):
                got = [pred.predicted[i] for i in np.flatnonzero(members)]
                want = confusion_matrix([gold[i] for i in np.flatnonzero(members)], got, labels=labels)
                assert part["matrices"][m] == want.tolist(), (facet, part["name"])
                assert part["accuracy"][m] == pytest.approx(np.trace(want) / part["n"])
                # each cell's rows are the dataset's own numbers of the examples counted there
                for t, q in np.ndindex(len(labels), len(labels)):
                    cell = part["cells"][m][t][q]
                    assert len(cell) == want[t, q]
                    for r in cell:
                        i = rows.index(r)
                        assert gold[i] == labels[t] and pred.predicted[i] == labels[q] and members[i]
                        seen.add((facet, m, r))
            assert part["comparison"]["n"] == part["n"] and part["comparison"]["test"] == "McNemar, exact"
        if facet == "agreement":  # (the tiny random models may agree nowhere: the offline pair's test has both)
            for agree in (p for p in res.facets if p["name"] == "the models agree"):
                assert agree["matrices"][0] == agree["matrices"][1]
        if facet == "length":  # the slices' own bins: a facet and a slice of one name hold the same examples
            bins = length_bins([len(words(" ".join(ex.texts))) for ex in examples])
            assert [(p["name"], p["n"]) for p in res.facets] == [(n, int(m.sum())) for n, m in bins if m.any()]
        assert len({r for f, m, r in seen if f == facet and m == 0}) == len(rows)


def _members(name: str, examples, preds) -> np.ndarray:
    from app.core.techniques.slices import MARKERS, length_bins, words

    if name == "all examples":
        return np.ones(len(examples), dtype=bool)
    if name.startswith("length:"):
        return dict(length_bins([len(words(" ".join(ex.texts))) for ex in examples]))[name]
    agree = np.asarray(preds[0].predicted) == np.asarray(preds[1].predicted)
    if name.startswith("the models"):
        return agree if name.endswith("agree") else ~agree
    has = np.asarray([bool(set(words(" ".join(ex.texts))) & MARKERS["negation"]) for ex in examples])
    return has if name.startswith("with ") else ~has


def test_curves_are_each_models_probabilities_ranked_and_the_areas_compared_paired(tiny_pair, labelled):
    from app.core import api

    gold, preds, _ = _reference(tiny_pair, labelled)
    res = api.curves(tiny_pair, dataset=str(labelled), visitor=False)
    assert res.positive == "positive" and res.positives == gold.count("positive") and res.n == len(gold)
    y = np.asarray([g == "positive" for g in gold])
    k = list(tiny_pair.models[0].labels).index("positive")
    for m, pred in enumerate(preds):
        s = pred.probs[:, k]
        assert res.auc["values"][m] == pytest.approx(roc_auc_score(y, s), abs=1e-6)
        assert res.average_precision["values"][m] == pytest.approx(average_precision_score(y, s), abs=1e-6)
        fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
        np.testing.assert_allclose(res.roc[m]["x"], fpr, atol=1e-6)
        np.testing.assert_allclose(res.roc[m]["y"], tpr, atol=1e-6)
    assert res.auc["test"] == "DeLong, paired" and res.average_precision["test"] == "paired bootstrap"
    negative = api.curves(tiny_pair, dataset=str(labelled), positive="negative", visitor=False)
    assert negative.positives == gold.count("negative")
    j = list(tiny_pair.models[0].labels).index("negative")
    assert negative.auc["values"] == pytest.approx([roc_auc_score(~y, p.probs[:, j]) for p in preds], abs=1e-6)


def test_curves_and_confusion_refuse_what_they_cannot_answer(tiny_pair, labelled, tmp_path):
    from app.core import api
    from app.core.ground.errors import InputError

    with pytest.raises(InputError, match=r"positive: 'neutral' is not one of the models' labels"):
        api.curves(tiny_pair, dataset=str(labelled), positive="neutral", visitor=False)
    one = tmp_path / "one.jsonl"
    one.write_text("".join(json.dumps({"text": s, "label": "positive"}) + "\n" for s in SENTENCES))
    with pytest.raises(InputError, match="are all 'positive'; curves need examples of both"):
        api.curves(tiny_pair, dataset=str(one), visitor=False)
    with pytest.raises(InputError, match=r"facet: 'colour' is not one of \['none', 'length'"):
        api.confusion(tiny_pair, dataset=str(labelled), facet="colour", visitor=False)
    unlabelled = tmp_path / "plain.jsonl"
    unlabelled.write_text("".join(json.dumps({"text": s}) + "\n" for s in SENTENCES))
    with pytest.raises(InputError, match="has no gold labels"):
        api.confusion(tiny_pair, dataset=str(unlabelled), visitor=False)


def test_the_command_line_prints_the_facades_numbers(offline_pair, capsys):
    """On the offline pair and SST-2 dev: `--json` is the facade's answer, and the text the same numbers."""
    from app.cli import main
    from app.core import api

    dev = str(shared("glue", "sst2", "dev.tsv"))
    assert main(["curves", "--pair", "offline", "--dataset", dev, "--limit", "200", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = api.curves(offline_pair, dataset=dev, limit=200, visitor=False).to_dict()
    assert got["auc"] == want["auc"] and got["roc"] == want["roc"] and got["pr"] == want["pr"]
    assert main(["confusion", "--pair", "offline", "--dataset", dev, "--limit", "200", "--facet", "negation"]) == 0
    text = capsys.readouterr().out
    res = api.confusion(offline_pair, dataset=dev, limit=200, facet="negation", visitor=False)
    for part in res.facets:
        assert f"{part['name']} (n={part['n']:,})" in text
        assert f"{part['accuracy'][0]:.1%}" in text and f"{part['accuracy'][1]:.1%}" in text
    auc = want["auc"]
    assert f"ROC AUC of {want['models'][0]}: {auc['values'][0]:.3f}" in _text_of(want)
    agree, differ = api.confusion(offline_pair, dataset=dev, limit=200, facet="agreement", visitor=False).facets
    assert agree["name"] == "the models agree" and agree["matrices"][0] == agree["matrices"][1]
    # where they differ, every example one model gets right the other gets wrong: the accuracies sum to 1
    assert differ["n"] > 0 and sum(differ["accuracy"]) == pytest.approx(1.0)


def _text_of(res: dict) -> str:
    from app.core.declare.results import CurvesResult
    from app.core.present.views import text_of

    return text_of(CurvesResult.of(res))
