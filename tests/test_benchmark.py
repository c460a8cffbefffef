"""Benchmark rows: accuracy from the same predictions a user gets, parameter counts, a readable table."""
import numpy as np
import pytest

from app.core.benchmark import benchmark, format_table, quality
from app.core.data import Dataset, Example, load_dataset
from app.core.errors import InputError

from .conftest import shared


def test_accuracy_and_parameters_match_the_core(tiny_pair):
    ds = load_dataset(shared("glue", "sst2", "dev.tsv")).head(40)
    res = benchmark(tiny_pair, ds)
    preds = tiny_pair.predict(ds.examples)
    gold = [e.label for e in ds.examples]
    for row, pred, clf in zip(res["models"], preds, tiny_pair.models):
        assert row["accuracy"] == pytest.approx(np.mean([p == g for p, g in zip(pred.predicted, gold)]))
        assert row["parameters"] == sum(row[f"parameters_{k}"] for k in ("embeddings", "encoder", "head"))
        assert row["n"] == 40 and row["latency_ms_median"] <= row["latency_ms_p95"]
    assert res["ratios"]["parameters_b_over_a"] == pytest.approx(
        res["models"][1]["parameters"] / res["models"][0]["parameters"])
    table = format_table(res)
    assert all(clf.name in table for clf in tiny_pair.models) and "engine: Ray" not in table


def test_table_names_the_ray_engine(tiny_pair):
    ds = load_dataset(shared("glue", "sst2", "dev.tsv")).head(10)
    res = benchmark(tiny_pair, ds) | {"engine": {"engine": "ray", "workers": 2, "address": "local Ray instance",
                                                 "wall_seconds": 3.25, "examples_per_s_both_models": 6.2}}
    assert "engine: Ray, 2 workers (local Ray instance), wall 3.2 s, 6.2 examples/s" in format_table(res)


def test_unlabelled_or_foreign_labels_are_clear_errors(tiny_pair):
    with pytest.raises(InputError, match="dataset: x has no labelled examples"):
        benchmark(tiny_pair, Dataset("x", [Example(("a film",))]))
    clf = tiny_pair.models[0]
    pred = tiny_pair.predict([Example(("a film",))])[0]
    with pytest.raises(InputError, match=r"gold labels \['neutral'\] are not among"):
        quality(clf, pred, ["neutral"])


def test_a_pair_without_a_task_is_told_to_give_one(tiny_dirs):
    """Configs without label names give LABEL_0/LABEL_1: SST-2's gold labels can't be scored, and the message
    says how to name them."""
    from app.core.pair import Pair

    pair = Pair.resolve(models=[str(tiny_dirs["bert"]), str(tiny_dirs["albert"])])
    assert pair.task.labels == ("LABEL_0", "LABEL_1")
    ds = Dataset("d", [Example(("a fine film",), "positive")])
    with pytest.raises(InputError, match=r"its config names no labels: give the pair.s task with --task \(e.g. --task sst2\)"):
        benchmark(pair, ds)
