"""The facade's declared results: what each capability returns is its declared type, its JSON is JSON, and a
technique's key that no result declares is caught rather than dropped."""
import dataclasses
import json
from dataclasses import fields

import pytest

from app.core import api
from app.core.declare.results import RESULTS, CounterfactualResult, PredictResult, SaliencyDatasetResult


def test_every_result_reads_like_its_json():
    res = PredictResult(task="sst2", fields=["sentence"], input=["x"], models=[{"model": "A"}])
    assert res.to_dict() == {"task": "sst2", "fields": ["sentence"], "input": ["x"], "models": [{"model": "A"}]}
    assert dict(res) == res.to_dict() and res["task"] == res.task == "sst2" and len(res) == 4
    with pytest.raises(KeyError):
        res["nope"]
    with pytest.raises(dataclasses.FrozenInstanceError):  # a front end can't change what the core computed
        res.task = "other"


def test_a_field_that_does_not_apply_is_absent_as_in_the_json():
    """A single input's counterfactual has no flip rate: not in its JSON, not `in` it, `.get` gives the default;
    the attribute reads None. A field without a default (an attack's `stopped`) is always there."""
    res = CounterfactualResult("word_replacement", ["A", "B"], [{"edited": ["x"]}])
    assert "flip_rate" not in res and "flip_rate" not in res.to_dict() and res.flip_rate is None
    assert res.get("per_model", []) == [] and "changes" in res
    with pytest.raises(KeyError):
        res["comparison"]
    attack = api.AttackResult(recipe="r", models=[], examples=[], stopped=None, resumed=0, settings={}, summary={},
                              comparison=None)
    assert "stopped" in attack and attack["stopped"] is None


def test_an_undeclared_key_from_a_technique_is_an_error():
    raw = {"method": "m", "n": 1, "models": [], "comprehensiveness": [], "sufficiency": [],
           "random_comprehensiveness": [], "agreement": {}, "examples": [], "stopped": None}
    assert SaliencyDatasetResult.of(raw, dataset="d", output="prob").n == 1
    with pytest.raises(TypeError, match=r"undeclared field\(s\) \['surprise'\]"):
        SaliencyDatasetResult.of(raw | {"surprise": 1}, dataset="d", output="prob")


def test_every_declared_result_says_what_it_holds_in_its_own_words():
    """A result's docstring is written for it (dataclasses generate one from the signature when it isn't: the
    old check of `__doc__` could not fail), and it declares fields."""
    for cls in RESULTS:
        own = cls.__dict__.get("__doc__") or ""
        assert own and not own.startswith(f"{cls.__name__}(") and [f.name for f in fields(cls)], cls


def test_the_facade_returns_declared_results_whose_json_round_trips(tiny_pair):
    answers = {
        api.PredictResult: api.predict(tiny_pair, "a fine film"),
        api.SaliencyResult: api.saliency(tiny_pair, "a fine film", method="gradient_x_input"),
        api.CounterfactualResult: api.counterfactual(tiny_pair, "the cities were lovely", None,
                                                     generator="word_replacement", replacements="cities -> townships"),
        api.BenchmarkResult: api.benchmark(tiny_pair, "sentiment_plain", 10),
        api.FactsResult: api.facts(tiny_pair, ["a fine film"]),
        api.SaliencyDatasetResult: api.saliency(tiny_pair, dataset="sentiment_plain", method="gradient_x_input",
                                                limit=3),
        api.ProjectionResult: api.project(tiny_pair, "sentiment_plain", projection="pca", layer=-1, pooling="cls",
                                          limit=12),
    }
    for cls, res in answers.items():
        assert type(res) is cls
        back = json.loads(json.dumps(res.to_dict()))
        assert set(back) == set(res) and back == json.loads(json.dumps(dict(res)))


def test_nested_rows_are_declared_all_the_way_down():
    """A nested row with a key its row type doesn't declare is refused where the result is made, naming the key
    and the type to declare it in; declared keys (and rows in lists of lists) pass."""
    from app.core.declare.results import CounterfactualResult, PredictResult

    row = {"model": "a", "label": "positive", "probabilities": {"positive": 1.0}, "latency_ms": 2.0}
    assert PredictResult(task="sst2", fields=["sentence"], input=["x"], models=[row])["models"] == [row]
    with pytest.raises(TypeError, match=r"PredictResult.models: undeclared key\(s\) \['mood'\]; declare them in "
                                        r"ModelAnswer"):
        PredictResult(task="sst2", fields=["sentence"], input=["x"], models=[row | {"mood": "sunny"}])
    change = {"original": ["a"], "edited": ["b"], "edits": [["a", "b"]], "generator": "word_replacement",
              "before": [], "after": [], "deltas": [], "flipped": [False], "validity": None}
    assert CounterfactualResult("g", ["a"], only=[[change], []])["only"] == [[change], []]
    with pytest.raises(TypeError, match=r"CounterfactualResult.only: undeclared key\(s\) \['why'\]"):
        CounterfactualResult("g", ["a"], only=[[], [change | {"why": "?"}]])
