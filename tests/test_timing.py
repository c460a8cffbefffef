"""Timing, one way for every figure: the paired latency comparison against an injected clock, and latency and
throughput read from the same predictions the models make."""
from __future__ import annotations

import dataclasses

import pytest

from app.core.ground.errors import InputError
from app.core.techniques import timing
from app.core.techniques.timing import latency, latency_comparison, throughput_comparison


def test_latency_comparison_finds_a_model_that_is_slower_by_a_known_amount(tiny_pair, monkeypatch):
    """On an injected clock (a busy machine can't make this flaky): each call costs 1 ms plus seeded noise, the
    second model 4 ms more. The paired comparison must find about 4 ms beyond chance, and nothing when both
    cost the same."""
    import numpy as np

    from app.core.ground.data import Example

    exs = [Example((f"a film number {i}, rather good",)) for i in range(16)]
    now = [0.0]
    rng = np.random.default_rng(0)
    extra = {tiny_pair.models[1].name: 0.004}
    real = timing.predict

    def predict(clf, examples, **kw):
        now[0] += 0.001 + extra.get(clf.name, 0.0) + float(rng.uniform(0, 0.001))
        return real(clf, examples, **kw)

    monkeypatch.setattr(timing, "predict", predict)
    cmp = latency_comparison(tiny_pair.models, exs, clock=lambda: now[0])
    assert cmp["n"] == 16 and cmp["metric"] == "latency (ms)" and cmp["p_value"] < 0.01
    assert 3.5 < cmp["difference"] < 4.5 and cmp["difference_interval"][0] > 3.0
    extra.clear()
    same = latency_comparison(tiny_pair.models, exs, clock=lambda: now[0])
    assert same["p_value"] > 0.01 and abs(same["difference"]) < 0.5
    with pytest.raises(InputError, match="texts: a latency comparison needs two models"):
        latency_comparison(tiny_pair.models[:1], exs)


def test_latency_and_throughput_report_the_injected_costs(tiny_pair, monkeypatch):
    """Each one-example prediction costs 2 ms and a batch of n costs n ms on a fake clock: latency is their
    median and p95, throughput n over the batch's seconds."""
    from app.core.ground.data import Example

    exs = [Example((f"a film number {i}",)) for i in range(12)]
    now = [0.0]
    real = timing.predict

    def predict(clf, examples, **kw):
        cost = 0.002 if len(examples) == 1 else 0.001 * len(examples)
        now[0] += cost
        return dataclasses.replace(real(clf, examples, **kw), seconds=cost)

    monkeypatch.setattr(timing, "predict", predict)
    clf = tiny_pair.models[0]
    lat = latency(clf, exs, n=5, clock=lambda: now[0])
    assert lat["latency_ms_median"] == pytest.approx(2.0) and lat["latency_ms_p95"] == pytest.approx(2.0)
    out = throughput_comparison([clf, tiny_pair.models[1]], exs, rounds=4)
    assert out["values"] == pytest.approx([1000.0, 1000.0]) and out["n"] == 4  # n examples over their n ms


def test_a_text_cost_is_a_robust_line_through_what_was_measured():
    """Seconds per text as a + b * tokens (Theil-Sen): one slow measurement (a start-up hiccup, 2 s against tens
    of ms) is outvoted by the rest, a long text is priced as long, and texts of nearly one size say nothing of the
    slope (their timing noise once priced a long text 3x too dear)."""
    import random

    from app.core.techniques.timing import TextCost

    cost = TextCost([(c, 0.010 + 0.0001 * c) for c in (5, 12, 25, 100, 250, 500)])
    assert cost.line() == pytest.approx((0.010, 0.0001))
    cost.observe(8, 2.0)  # a hiccup
    assert cost.seconds(8) == pytest.approx(0.0108, rel=0.2) and cost.seconds(512) == pytest.approx(0.061, rel=0.2)

    start = TextCost([(12, 0.014), (128, 0.038)])  # as LIT's start-up measures: a typical row, a long one
    rng = random.Random(0)
    for _ in range(TextCost.WINDOW + 10):  # sentences of 20-24 tokens, timed with a drift upwards in their size
        c = rng.randint(20, 24)
        start.observe(c, 0.0146 + 0.003 * (c - 20) / 4 * rng.uniform(0.5, 1.5))  # 4 tokens: +3 ms, as noisy
    assert start.seconds(128) == pytest.approx(0.038, rel=0.25) and start.seconds(22) == pytest.approx(0.0161,
                                                                                                        rel=0.2)
    assert len(start) == 2 + TextCost.WINDOW  # the window forgets, the start-up measurements stay

    flat = TextCost.fixed(1.0)
    assert flat.seconds(0) == flat.seconds(10_000) == 1.0
    for _ in range(TextCost.WINDOW):  # what the texts now cost outvotes what they cost at start
        flat.observe(100, 0.02)
    assert flat.seconds(100) == pytest.approx(0.02)
    assert TextCost([(10, 0.5), (1000, 0.1)]).line() == (pytest.approx(0.3), 0.0)  # never a negative slope
    with pytest.raises(InputError, match="text cost: nothing measured yet"):
        TextCost().seconds(10)
