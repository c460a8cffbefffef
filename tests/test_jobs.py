"""Work that stops: deadlines and cancellation checked between batches, shown by what the work reports (steps,
batches, examples done) under an injected clock, never by a wall-clock bound."""
import dataclasses

import numpy as np
import pytest

from app.core.ground import jobs
from app.core.ground.data import Example


class Clock:
    """Time that moves only when told to."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_job_stops_at_its_first_check_past_the_deadline():
    clock = Clock()
    job = jobs.Job(seconds=5, clock=clock)
    with jobs.running(job):
        for step in range(5):
            jobs.checkpoint(step, 10, "steps")
            clock.now += 1  # at 5 s the budget is spent, not exceeded
        jobs.checkpoint(5, 10, "steps")
        clock.now += 0.5
        with pytest.raises(jobs.Stopped, match=r"^stopped after 6 of 10 steps: the request's 5 s time budget") as err:
            jobs.checkpoint(6, 10, "steps")
    assert err.value.job is job and job.stopped and job.progress == (6, 10)
    jobs.checkpoint()  # outside a job nothing is ever stopped


def test_a_nested_budget_stops_with_its_request():
    outer = jobs.Job(name="request")
    inner = jobs.Job(seconds=60, clock=Clock(), parent=outer)
    outer.cancel()
    with jobs.running(inner, record=False):
        with pytest.raises(jobs.Stopped, match="cancelled") as err:
            jobs.checkpoint()
    assert err.value.job is outer  # the attack can tell its own timeout from the request's end


def test_prediction_stops_between_batches_when_the_client_leaves(tiny_pair):
    from app.core.execution.inference import predict

    clf = tiny_pair.models[0]
    checks = []
    job = jobs.Job(alive=lambda: len(checks) < 3)
    original = job.checkpoint

    def counting(*a, **k):
        checks.append(a)
        return original(*a, **k)

    job.checkpoint = counting
    exs = [Example((f"a fine film number {i}",)) for i in range(100)]
    with jobs.running(job), pytest.raises(jobs.Stopped, match="stopped after 16 of 100 predictions: the client"):
        predict(clf, exs, batch_size=8)
    assert job.progress == (16, 100)  # two batches of 8 ran; the third never started
    assert predict(clf, exs, batch_size=8).probs.shape == (100, 2)  # no job, no stop


def test_saliency_over_a_dataset_keeps_what_it_explained(tiny_pair):
    """Cut by its budget inside the third example (at 6 s of 5), the answer is about the two finished and says
    where it was cut."""
    from app.core.techniques import explanation

    clock = Clock()
    exs = [Example((f"a film that was fine , number {i}",)) for i in range(10)]
    real = explanation.explain

    def slow(*a, **k):  # each explanation takes 2 s of the injected clock
        out = real(*a, **k)
        clock.now += 2
        return out

    job = jobs.Job(seconds=5, clock=clock)
    with jobs.running(job), pytest.MonkeyPatch.context() as mp:
        mp.setattr(explanation, "explain", slow)
        res = explanation.explain_dataset(tiny_pair.models, exs, "gradient_x_input")
    assert res["n"] == 2 == len(res["examples"])
    assert res["stopped"]["done"] == 2 and res["stopped"]["total"] == 10
    assert "5 s time budget" in res["stopped"]["reason"]
    assert explanation.explain_dataset(tiny_pair.models, exs[:2], "gradient_x_input")["stopped"] is None


def test_an_attack_stops_at_its_deadline_by_search_steps(offline_pair):
    """A 5 s limit, each search step taking 1 s of an injected clock: the attack answers 6 steps (the one under
    way at the deadline ends 1 s past it) and begins none after it; TextAttack's search wanted far more."""
    from app.core.techniques import attacks

    clf = offline_pair.models[0]
    ex = Example(("the acting , costumes , music , cinematography and sound are all astounding and the film is "
                  "a gorgeous , witty , seductive joy from start to finish .",), "positive")
    wrapper = attacks.make_wrapper(clf)
    clock = Clock()
    real_predict = attacks.predict

    def step(*a, **kw):  # each search step's predictions take 1 s, and none moves the model off its answer,
        out = real_predict(*a, **kw)  # so the search never ends early by succeeding
        clock.now += 1
        gold = np.eye(len(clf.labels))[clf.labels.index("positive")]
        return dataclasses.replace(out, probs=np.tile(0.1 + 0.8 * gold, (len(out.probs), 1)))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(attacks, "predict", step)
        attacks._seed(ex, 0, 0)
        res = attacks.attack_one(clf, "deepwordbug", ex, query_budget=100_000, time_limit=5, wrapper=wrapper,
                                 clock=clock)
        attacks._seed(ex, 0, 0)
        free = attacks.attack_one(clf, "deepwordbug", ex, query_budget=100_000, time_limit=None, wrapper=wrapper)
    assert res["outcome"] == "timeout" and "time limit of 5 s" in res["why"]
    assert res["steps"] == 6 and res["steps_past_deadline"] == 1
    assert free["steps"] > res["steps"]  # unbounded, the same search goes on


def test_a_stopped_request_keeps_the_attacks_it_finished(offline_pair):
    from app.core import api

    finished = []
    job = jobs.Job(alive=lambda: not finished)  # the client leaves once the first example is done
    with jobs.running(job):
        res = api.attack(offline_pair, recipe="deepwordbug", dataset="sentiment_plain", n=5, query_budget=50,
                         time_limit=30, progress=lambda done, total: finished.append(done))
    assert res["stopped"] == {"reason": "the client disconnected", "done": 1, "total": 5,
                              "what": "examples attacked"}
    assert [r["index"] for r in res["examples"]] == [0] and finished == [1]
