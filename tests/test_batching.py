"""Concurrent one-item calls answered together: each caller gets its own answer, waiting callers share a pass, a
failed pass is retried by each caller alone, and the facade's /predict answers concurrent visitors as it answers
one."""
import threading

import numpy as np
import pytest

from app.core.execution.batching import Combiner


def _concurrently(fn, items):
    out, errors = [None] * len(items), [None] * len(items)

    def run(k):
        try:
            out[k] = fn(items[k])
        except Exception as exc:  # noqa: BLE001 - returned to the test
            errors[k] = exc

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out, errors


def _behind_a_held_pass(fn, first, items, max_items: int = 32):
    """Callers of `items` arriving while the first pass (on `first`) holds the model: that pass is released once
    they have all queued. Returns (the first caller's answer, the others' answers and errors, each pass's size,
    the combiner)."""
    started, release, sizes, results = threading.Event(), threading.Event(), [], {}

    def held(xs):
        sizes.append(len(xs))
        if len(sizes) == 1:
            started.set()
            assert release.wait(60)
        return fn(xs)

    combiner = Combiner(held, max_items=max_items)
    lead = threading.Thread(target=lambda: results.update(first=combiner(first)))
    lead.start()
    assert started.wait(60)  # the first pass runs, holding the model

    def release_when_queued():
        while len(combiner._pending) < len(items):
            threading.Event().wait(0.01)
        release.set()

    threading.Thread(target=release_when_queued).start()
    out, errors = _concurrently(combiner, items)
    lead.join(60)
    return results.get("first"), out, errors, sizes, combiner


def test_callers_who_wait_share_one_pass_and_each_gets_its_own_answer():
    first, out, errors, sizes, combiner = _behind_a_held_pass(lambda xs: [x * 10 for x in xs], 1, list(range(2, 9)))
    assert first == 10 and out == [20, 30, 40, 50, 60, 70, 80] and errors == [None] * 7
    assert sizes == [1, 7] and combiner.passes == 2 and combiner.largest == 7


def test_a_lone_call_runs_alone():
    combiner = Combiner(lambda xs: [len(xs)] * len(xs))
    assert [combiner(i) for i in range(3)] == [1, 1, 1] and combiner.largest == 1


def test_a_failed_pass_is_retried_by_each_caller_alone():
    """One bad item fails the pass: the good items still get their answers, the bad one its own error."""
    def fn(xs):
        if "bad" in xs:
            raise ValueError("bad item")
        return [x.upper() for x in xs]

    first, out, errors, sizes, _ = _behind_a_held_pass(fn, "lead", ["a", "bad", "c"])
    assert first == "LEAD" and out[0] == "A" and out[2] == "C" and out[1] is None
    assert isinstance(errors[1], ValueError) and errors[0] is None and errors[2] is None
    assert sizes[:2] == [1, 3]  # the shared pass failed; then each alone


def test_max_items_caps_a_pass():
    first, out, errors, sizes, _ = _behind_a_held_pass(lambda xs: list(xs), 0, [1, 2, 3, 4, 5], max_items=2)
    assert first == 0 and out == [1, 2, 3, 4, 5] and max(sizes) == 2 and sum(sizes) == 6


def test_concurrent_predictions_answer_as_one_at_a_time(tiny_pair, monkeypatch):
    """The facade's predict, 12 visitors at once: each gets the answer it gets alone (up to the padding's float
    noise) and its own input echoed, however the passes fell."""
    from app.core import api

    texts = [f"a {'really ' * k}good film" for k in range(12)]
    alone = [api.predict(tiny_pair, t) for t in texts]
    combiner = api.predict_combiner(tiny_pair)
    before = combiner.passes
    together, errors = _concurrently(lambda t: api.predict(tiny_pair, t), texts)
    assert errors == [None] * 12
    for a, b in zip(alone, together):
        assert a["input"] == b["input"]
        for ma, mb in zip(a["models"], b["models"]):
            assert ma["label"] == mb["label"] and ma["model"] == mb["model"]
            np.testing.assert_allclose(list(ma["probabilities"].values()), list(mb["probabilities"].values()),
                                       atol=1e-5)
    assert 1 <= combiner.passes - before <= 12
    with pytest.raises(api.InputError, match="empty"):  # a bad input is refused before it joins a pass
        api.predict(tiny_pair, "   ")
