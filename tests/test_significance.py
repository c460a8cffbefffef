"""The paired comparison of two models: exact McNemar p-values, bootstrap intervals equal to resampling the
examples themselves, Cohen's kappa by its definition, Pearson against scipy, and clear errors."""
from math import comb

import numpy as np
import pytest
from scipy.stats import pearsonr

from app.core.ground.errors import InputError
from app.core.ground.significance import compare_accuracy, compare_correlation, mcnemar_exact
from app.core.present.views import verdict


def _labels(rng, n, acc, gold):
    """Predictions right with probability `acc`, otherwise the other label."""
    right = rng.random(n) < acc
    return np.where(right, gold, np.where(gold == "positive", "negative", "positive"))


def test_mcnemar_is_the_exact_two_sided_binomial_of_the_discordant_examples():
    # 10 vs 2 discordant: 2 * P(X <= 2), X ~ Binomial(12, 1/2)
    assert mcnemar_exact(10, 2) == pytest.approx(2 * sum(comb(12, k) for k in range(3)) / 2**12)
    assert mcnemar_exact(2, 10) == pytest.approx(mcnemar_exact(10, 2))
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(5, 5) == 1.0


def test_accuracy_table_agreement_and_kappa_by_their_definitions():
    gold = ["positive", "positive", "negative", "negative", "positive", "negative", "positive", "negative"]
    first = ["positive", "negative", "negative", "positive", "positive", "negative", "positive", "positive"]
    second = ["positive", "positive", "negative", "negative", "negative", "negative", "negative", "positive"]
    cmp = compare_accuracy(gold, first, second)
    a = [f == g for f, g in zip(first, gold)]
    b = [s == g for s, g in zip(second, gold)]
    assert cmp["values"] == pytest.approx([np.mean(a), np.mean(b)])
    assert cmp["difference"] == pytest.approx(np.mean(b) - np.mean(a))
    assert cmp["both_right"] == sum(x and y for x, y in zip(a, b))
    assert cmp["only_right"] == [sum(x and not y for x, y in zip(a, b)), sum(y and not x for x, y in zip(a, b))]
    assert cmp["both_wrong"] == sum(not x and not y for x, y in zip(a, b))
    assert cmp["both_right"] + sum(cmp["only_right"]) + cmp["both_wrong"] == len(gold)
    po = np.mean([f == s for f, s in zip(first, second)])
    pe = sum(first.count(lab) * second.count(lab) for lab in ("positive", "negative")) / len(gold) ** 2
    assert cmp["agreement"] == pytest.approx(po)
    assert cmp["kappa"] == pytest.approx((po - pe) / (1 - pe))
    assert cmp["p_value"] == pytest.approx(mcnemar_exact(*cmp["only_right"]))


def test_independent_events_get_exact_intervals_that_agree_with_mcnemar():
    """Each model's rate: scipy's exact (Clopper-Pearson) interval. The difference: McNemar's exact test inverted,
    so its interval excludes 0 exactly when p < 0.05, which a bootstrap interval beside McNemar's p did not
    (-0.110 to -0.005 with p = 0.0614 on SST-2's 200 first rows)."""
    from scipy.stats import binomtest

    rng = np.random.default_rng(1)
    gold = rng.choice(["positive", "negative"], 600)
    first, second = _labels(rng, 600, 0.85, gold), _labels(rng, 600, 0.8, gold)
    cmp = compare_accuracy(gold, first, second)
    for got, right in zip(cmp["intervals"], (first == gold, second == gold)):
        ci = binomtest(int(right.sum()), 600).proportion_ci(0.95, method="exact")
        assert got == pytest.approx([ci.low, ci.high])
    b, c = cmp["only_right"]
    d, q = binomtest(b + c, 600).proportion_ci(0.95, "exact"), binomtest(c, b + c).proportion_ci(0.95, "exact")
    ends = [x * (2 * y - 1) for x in (d.low, d.high) for y in (q.low, q.high)]
    assert cmp["difference_interval"] == pytest.approx([min(ends), max(ends)])
    lo, hi = cmp["difference_interval"]
    assert lo < cmp["difference"] < hi
    # the verdict and the interval agree, over many tables, at the edge of significance too
    for only_first in range(0, 40):
        for only_second in (0, 5, 12, 20, 31):
            g = ["y"] * (only_first + only_second + 50)
            a = ["y"] * only_first + ["n"] * only_second + ["y"] * 50
            z = ["n"] * only_first + ["y"] * only_second + ["y"] * 50
            t = compare_accuracy(g, a, z)
            lo, hi = t["difference_interval"]
            assert (lo <= 0 <= hi) == (t["p_value"] > 0.05), (only_first, only_second, t)
            assert lo < hi


def test_no_events_in_small_counts_get_an_exact_bound_not_a_zero_width_interval():
    """29 edits, none of which flipped either model: "+0.000 to +0.000" claimed certainty; 0 of 29 is anything
    up to 0.119 (in groups: up to what the groups, counted as single items, allow)."""
    from scipy.stats import binomtest

    from app.core.ground.significance import compare_events

    none = [False] * 29
    cmp = compare_events(none, none)
    top = binomtest(0, 29).proportion_ci(0.95, "exact").high
    assert cmp["intervals"] == [[0.0, pytest.approx(top)]] * 2 and top == pytest.approx(0.119, abs=5e-4)
    assert cmp["difference_interval"] == [pytest.approx(-top), pytest.approx(top)] and cmp["p_value"] == 1.0
    grouped = compare_events(none, none, [k // 3 for k in range(29)])  # 10 sentences' edits
    top10 = binomtest(0, 10).proportion_ci(0.95, "exact").high
    assert grouped["intervals"][0] == [0.0, pytest.approx(top10)]
    assert grouped["difference_interval"] == [pytest.approx(-top10), pytest.approx(top10)]
    every = compare_events([True] * 29, [True] * 29, [k // 3 for k in range(29)])
    assert every["intervals"][1] == [pytest.approx(1 - top10), 1.0]


def test_a_paired_permutations_interval_is_the_test_inverted():
    """A throughput gap on six rounds: "-21.3 to -5.4" (a bootstrap) beside "p = 0.0505, not distinguishable
    from chance" (a permutation test). The interval is now every shift the exact test keeps, found here by brute
    force over a fine grid, and the verdict agrees with it."""
    from itertools import product

    from app.core.ground.significance import compare_means

    rng = np.random.default_rng(3)
    for trial in range(12):
        n = int(rng.integers(6, 11))
        a = rng.normal(100, 3, n)
        b = a + rng.normal(rng.choice([0.0, 2.0, 6.0]), 4, n)
        d = b - a
        cmp = compare_means(a, b)
        flips = np.array(list(product((-1.0, 1.0), repeat=n)))

        def p(delta):
            x = d - delta
            return np.mean(np.abs(flips @ x) / n >= abs(x.mean()) - 1e-12)

        grid = np.linspace(d.min() - 1, d.max() + 1, 4001)
        kept = grid[[p(g) > 0.05 for g in grid]]
        lo, hi = cmp["difference_interval"]
        step = grid[1] - grid[0]
        assert lo == pytest.approx(kept.min(), abs=step) and hi == pytest.approx(kept.max(), abs=step), trial
        assert cmp["p_value"] == pytest.approx(p(0.0)) and cmp["test"] == "paired permutation, exact"
        assert (lo <= 0 <= hi) == (cmp["p_value"] > 0.05), trial
    # five pairs: no flip of five signs is rarer than 1/16, so no shift is rejected at 0.05: unbounded, and said
    few = compare_means([1.0, 2, 3, 4, 5], [2.0, 3.5, 3.9, 5.2, 6])
    assert few["difference_interval"] == [None, None]
    assert verdict(few, ["A", "B"]).startswith("B − A mean: +1.120 (5 examples are too few to bound a 95% interval)")


def test_a_real_gap_is_found_and_identical_models_are_not_told_apart():
    rng = np.random.default_rng(0)
    gold = rng.choice(["positive", "negative"], 800)
    strong, weak = _labels(rng, 800, 0.92, gold), _labels(rng, 800, 0.80, gold)
    cmp = compare_accuracy(gold, weak, strong)
    assert cmp["p_value"] < 1e-4 and cmp["difference_interval"][0] > 0
    assert verdict(cmp, ["W", "S"]).endswith("S's accuracy is higher beyond chance on these 800 examples")
    same = compare_accuracy(gold, strong, strong)
    reach = 1 - 0.025 ** (1 / 800)  # no item told apart: the exact bound of 0 discordant in 800
    assert same["p_value"] == 1.0 and same["difference"] == 0
    assert same["difference_interval"] == [pytest.approx(-reach), pytest.approx(reach)]
    assert same["agreement"] == 1.0 and same["kappa"] == pytest.approx(1.0)
    assert verdict(same, ["W", "S"]).endswith("not distinguishable from chance on these 800 examples")


def test_kappa_is_undefined_when_both_models_always_say_the_same_one_label():
    cmp = compare_accuracy(["positive", "negative"], ["positive", "positive"], ["positive", "positive"])
    assert cmp["kappa"] is None and cmp["agreement"] == 1.0


def test_correlations_match_scipy_and_a_better_regressor_wins():
    rng = np.random.default_rng(2)
    gold = rng.uniform(0, 5, 300)
    good, poor = gold + rng.normal(0, 0.5, 300), gold + rng.normal(0, 2.0, 300)
    cmp = compare_correlation(gold, poor, good)
    assert cmp["values"] == pytest.approx([pearsonr(poor, gold)[0], pearsonr(good, gold)[0]])
    assert cmp["agreement"] == pytest.approx(pearsonr(poor, good)[0])
    assert cmp["p_value"] < 0.01 and cmp["difference_interval"][0] > 0
    for (lo, hi), v in zip(cmp["intervals"], cmp["values"]):
        assert lo < v < hi
    same = compare_correlation(gold, good, good)
    assert same["difference"] == 0 and same["p_value"] == 1.0


@pytest.mark.parametrize("call, message", [
    (lambda: compare_accuracy([], [], []), "dataset: no labelled examples"),
    (lambda: compare_accuracy(["a", "b"], ["a"], ["a", "b"]), "predictions: 1 and 2 predictions for 2 gold"),
    (lambda: compare_correlation([1.0, 2.0], [1.0, 2.0], [1.0, 2.0]), "dataset: 2 scored examples; a corr"),
    (lambda: compare_correlation([3.0] * 5, [1.0, 2, 3, 4, 5], [1.0, 2, 3, 4, 5]), "every gold score is the same"),
    (lambda: compare_correlation([1.0, 2, 3, 4], [2.0] * 4, [1.0, 2, 3, 4]), "predictions: a model gives every"),
])
def test_bad_input_names_what_is_wrong(call, message):
    with pytest.raises(InputError, match=message):
        call()


def test_events_in_groups_resample_whole_groups():
    """Ten edits of one sentence flip together or not at all: they are one observation, not ten. The grouped
    intervals are those of resampling the groups themselves, and wider than treating edits as independent."""
    from app.core.ground.significance import compare_events

    rng = np.random.default_rng(4)
    groups = np.repeat(np.arange(30), 10)
    first = np.repeat(rng.random(30) < 0.3, 10)
    second = np.repeat(rng.random(30) < 0.5, 10)
    grouped = compare_events(first, second, groups, resamples=4000, seed=1)
    naive = compare_events(first, second, resamples=4000, seed=1)
    assert grouped["test"] == "bootstrap over 30 groups" and grouped["groups"] == 30
    assert naive["test"] == "McNemar, exact" and grouped["values"] == naive["values"]
    width = lambda c: c["difference_interval"][1] - c["difference_interval"][0]
    assert width(grouped) > 2 * width(naive)
    picks = np.random.default_rng(9).integers(0, 30, size=(4000, 30))
    fa, fb = first.reshape(30, 10).mean(1), second.reshape(30, 10).mean(1)  # equal group sizes: mean of means
    ref = np.percentile(fb[picks].mean(1) - fa[picks].mean(1), [2.5, 97.5])
    assert grouped["difference_interval"] == pytest.approx(ref, abs=0.03)
    # one item per group is no grouping at all: McNemar, as without groups
    alone = compare_events(first, second, np.arange(300), resamples=4000, seed=1)
    assert {k: v for k, v in alone.items() if k != "groups"} == naive


def test_events_name_the_mismatch():
    from app.core.ground.significance import compare_events

    with pytest.raises(InputError, match="items: nothing to compare"):
        compare_events([], [])
    with pytest.raises(InputError, match="items: 3 and 3 outcomes, 2 groups"):
        compare_events([True] * 3, [False] * 3, [0, 1])


def test_paired_permutation_p_value_matches_the_exact_sign_flip_distribution():
    from itertools import product

    from app.core.ground.significance import compare_means

    a = np.array([0.2, 0.5, 0.1, 0.7, 0.3, 0.4, 0.6, 0.2, 0.5, 0.3])
    b = a + np.array([0.1, 0.05, 0.2, -0.02, 0.15, 0.1, 0.0, 0.12, -0.05, 0.08])
    d = b - a
    flips = np.array(list(product((-1.0, 1.0), repeat=10)))
    exact = np.mean(np.abs((flips * d).mean(1)) >= abs(d.mean()) - 1e-12)
    cmp = compare_means(a, b, resamples=20000, seed=5)
    assert cmp["p_value"] == pytest.approx(exact, abs=0.005)
    assert cmp["values"] == pytest.approx([a.mean(), b.mean()]) and cmp["difference"] == pytest.approx(d.mean())
    lo, hi = cmp["difference_interval"]
    assert lo < d.mean() < hi
    same = compare_means(a, a)
    assert same["p_value"] == 1.0 and same["difference_interval"] == [0.0, 0.0]
    with pytest.raises(InputError, match="items: 2 and 3 scores"):
        compare_means([1, 2], [1, 2, 3])


def test_mean_interval_skips_undefined_values():
    from app.core.ground.significance import mean_interval

    m = mean_interval([0.2, None, 0.4, float("nan"), 0.6])
    assert m["n"] == 3 and m["mean"] == pytest.approx(0.4) and m["interval"][0] < 0.4 < m["interval"][1]
    assert mean_interval([None]) == {"mean": None, "interval": None, "n": 0}
