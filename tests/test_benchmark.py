"""Benchmark rows: accuracy from the same predictions a user gets, parameter counts, a readable table."""
import numpy as np
import pytest

from app.core.ground.data import Dataset, Example, load_dataset
from app.core.ground.errors import InputError
from app.core.present.views import benchmark_table
from app.core.techniques.benchmark import benchmark, quality

from .conftest import shared


def test_accuracy_and_parameters_match_the_core(tiny_pair):
    ds = load_dataset(shared("glue", "sst2", "dev.tsv")).head(40)
    res = benchmark(tiny_pair, ds)
    preds = tiny_pair.predict(ds.examples)
    gold = [e.label for e in ds.examples]
    for row, pred, _clf in zip(res["models"], preds, tiny_pair.models):
        assert row["accuracy"] == pytest.approx(np.mean([p == g for p, g in zip(pred.predicted, gold)]))
        assert row["parameters"] == sum(row[f"parameters_{k}"] for k in ("embeddings", "encoder", "head"))
        assert row["n"] == 40 and row["latency_ms_median"] <= row["latency_ms_p95"]
    assert res["ratios"]["parameters_b_over_a"] == pytest.approx(
        res["models"][1]["parameters"] / res["models"][0]["parameters"])
    table = benchmark_table(res)
    assert all(clf.name in table for clf in tiny_pair.models) and "engine: Ray" not in table


def test_table_names_the_ray_engine(tiny_pair):
    ds = load_dataset(shared("glue", "sst2", "dev.tsv")).head(10)
    res = benchmark(tiny_pair, ds) | {"engine": {"engine": "ray", "workers": 2, "address": "local Ray instance",
                                                 "wall_seconds": 3.25, "examples_per_s_both_models": 6.2}}
    assert "engine: Ray, 2 workers (local Ray instance), wall 3.2 s, 6.2 examples/s" in benchmark_table(res)


def test_unlabelled_or_foreign_labels_are_clear_errors(tiny_pair):
    with pytest.raises(InputError, match="dataset: x has no labelled examples"):
        benchmark(tiny_pair, Dataset("x", [Example(("a film",))]))
    clf = tiny_pair.models[0]
    pred = tiny_pair.predict([Example(("a film",))])[0]
    with pytest.raises(InputError, match=r"gold labels \['neutral'\] are not among"):
        quality(clf, pred, ["neutral"])


def test_foreign_labels_are_refused_before_any_prediction(tiny_pair, monkeypatch):
    """AG News on a sentiment pair: the message comes before the models read 7,600 texts, not after."""
    from app.core.execution import inference

    def no_predict(*a, **k):
        raise AssertionError("predicted before the labels were checked")

    monkeypatch.setattr(inference, "predict", no_predict)  # what the engine's prediction batch function calls
    ds = Dataset("news", [Example(("stocks rose",), "Business"), Example(("a fine film",), "positive")])
    with pytest.raises(InputError, match=r"dataset: gold labels \['Business'\] are not among"):
        benchmark(tiny_pair, ds)


def test_a_pair_without_a_task_is_told_to_give_one(tiny_dirs):
    """Configs without label names give LABEL_0/LABEL_1: SST-2's gold labels can't be scored, and the message
    says how to name them."""
    from app.core.execution.pair import Pair

    pair = Pair.resolve(models=[str(tiny_dirs["bert"]), str(tiny_dirs["albert"])])
    assert pair.task.labels == ("LABEL_0", "LABEL_1")
    ds = Dataset("d", [Example(("a fine film",), "positive")])
    with pytest.raises(
        InputError, match=r"its config names no labels: give the pair.s task with --task \(e.g. --task sst2\)"
    ):
        benchmark(pair, ds)


def test_paired_comparison_and_disagreements_on_sst2_dev(offline_pair, offline_sst2_dev):
    """The benchmark's paired test counts the same right/wrong answers its accuracy rows come from, and lists
    exactly the examples the two models answer differently, one model right first (each model's answers: the
    run's fp32 reference of SST-2 dev, the first 300)."""
    from app.core.ground.significance import mcnemar_exact

    ds = load_dataset(shared("glue", "sst2", "dev.tsv")).head(300)
    res = benchmark(offline_pair, ds)
    a, b = (p.predicted[:300] for p in offline_sst2_dev[1])
    gold = [e.label for e in ds.examples]
    cmp = res["comparison"]
    assert cmp["values"] == pytest.approx([r["accuracy"] for r in res["models"]])
    only_a = sum(x == g != y for x, y, g in zip(a, b, gold))
    only_b = sum(y == g != x for x, y, g in zip(a, b, gold))
    assert cmp["only_right"] == [only_a, only_b] and cmp["p_value"] == pytest.approx(mcnemar_exact(only_a, only_b))
    differ = [i for i in range(300) if a[i] != b[i]]
    dis = res["disagreements"]
    assert dis["total"] == len(differ) and sorted(e["index"] for e in dis["examples"]) == differ[:100]
    one_right = [e["right"] is not None for e in dis["examples"]]
    assert one_right == sorted(one_right, reverse=True) and sum(one_right) == only_a + only_b
    for e in dis["examples"]:
        assert e["predictions"] == [a[e["index"]], b[e["index"]]] and e["texts"] == list(ds.examples[e["index"]].texts)
        assert e["right"] in (None, *[m.name for m in offline_pair.models])
    table = benchmark_table(res)
    assert f"only BERT {only_a}, only ALBERT {only_b}" in table and "p = " in table and "(McNemar, exact)" in table


def test_regression_pairs_get_correlations_and_the_largest_gaps(tiny_dirs, tmp_path):
    from scipy.stats import pearsonr

    from app.core.execution.pair import Pair

    from .conftest import _tiny_albert, _tiny_bert

    pair = Pair.resolve(models=[str(_tiny_bert(tmp_path / "b", num_labels=1)),
                                str(_tiny_albert(tmp_path / "a", num_labels=1))], task="stsb")
    ds = load_dataset(shared("glue", "stsb", "dev.tsv"), task="stsb").head(60)
    res = benchmark(pair, ds)
    a, b = (p.scores for p in pair.predict(ds.examples))
    gold = [e.label for e in ds.examples]
    cmp = res["comparison"]
    assert cmp["metric"] == "pearson" and cmp["values"] == pytest.approx([pearsonr(a, gold)[0], pearsonr(b, gold)[0]],
                                                                         abs=1e-6)
    gaps = [e["gap"] for e in res["disagreements"]["examples"]]
    assert gaps == sorted(gaps, reverse=True) and gaps[0] == pytest.approx(float(np.max(np.abs(a - b))), abs=1e-6)
    assert "The two models' scores correlate at" in benchmark_table(res)


def test_a_result_cached_before_the_paired_test_still_formats(tiny_pair):
    ds = load_dataset(shared("glue", "sst2", "dev.tsv")).head(10)
    res = benchmark(tiny_pair, ds)
    old = {k: v for k, v in res.items() if k not in ("comparison", "disagreements")}
    assert benchmark_table(res).startswith(benchmark_table(old) + "\n") and "McNemar" not in benchmark_table(old)


def test_find_slices_after_benchmark_runs_no_model_and_answers_the_same(tiny_pair, tmp_path, monkeypatch):
    """Benchmark's timed pass keeps its predictions and the top layer's [CLS] vectors by content: Find slices on
    the same rows (clusters included) then runs neither model (a second pass of each took 51-57 s on SST-2 dev),
    and answers as it does computing them itself; the kept vectors are `embed`'s."""
    from app.core import api
    from app.core.techniques import projection
    from app.core.techniques.embeddings import embed

    data = str(shared("glue", "sst2", "dev.tsv"))
    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "alone"))
    alone = api.slices(tiny_pair, data, limit=90, min_size=10, clusters=3, visitor=False)

    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "shared"))
    scored = api.benchmark(tiny_pair, data, limit=90, visitor=False)
    passes = []
    for name in ("embed_and_predict", "predict", "embed"):
        real = getattr(projection, name)
        monkeypatch.setattr(projection, name,
                            lambda *a, real=real, name=name, **k: passes.append(name) or real(*a, **k))
    after = api.slices(tiny_pair, data, limit=90, min_size=10, clusters=3, visitor=False)
    assert passes == [] and after.to_dict() == alone.to_dict() and scored.n == after.n == 90
    labelled = [ex for ex in load_dataset(data).head(90).examples if ex.label is not None]
    for clf in tiny_pair.models:
        kept, cached = projection.cached_embeddings(clf, labelled, layer=-1, pooling="cls")
        assert cached and np.allclose(kept, embed(clf, labelled, layer=-1, pooling="cls"), atol=1e-5)
