"""The verdict's arithmetic on small made-up records whose answers are computed another way: the
rate choice and its edge rule, the pooled model (a least-squares fit), Holm, the smallest
detectable difference, the paired test beside it; the controls' share (Fieller) and the loss at
equal time and FLOPs (cost.py)."""

import math

import numpy as np
import pytest
from scipy import stats

from shapelab import controls, cost, verdict


def test_the_rate_of_the_lowest_loss_and_an_end_flagged():
    assert verdict.choose_rate({1e-3: 2.0, 2e-3: 1.9, 4e-3: 1.95}) == (2e-3, "")
    assert verdict.choose_rate({1e-3: 1.8, 2e-3: 1.9}) == (1e-3, "lowest")
    assert verdict.choose_rate({1e-3: None, 2e-3: 1.9}) == (2e-3, "highest")
    assert verdict.choose_rate({2e-3: 1.9}) == (2e-3, "only")
    assert verdict.choose_rate({1e-3: None, 2e-3: math.nan}) == (None, "")
    # past the end it chose, a step of the list's ratio (at least x1.5), up to `extend` rates
    listed = [1e-3, 2e-3, 4e-3]
    assert verdict.next_rate(listed, {1e-3: 2.0, 2e-3: 1.9, 4e-3: 1.8}, listed, 2) == 8e-3
    assert verdict.next_rate([1e-3, 1.2e-3], {1e-3: 2.0, 1.2e-3: 1.9}, [1e-3, 1.2e-3], 1) == 1.8e-3
    grown = [*listed, 8e-3, 1.6e-2]
    assert verdict.next_rate(grown, dict(zip(grown, [5, 4, 3, 2, 1])), listed, 2) is None
    assert verdict.next_rate(listed, {1e-3: 2.0, 2e-3: 1.8, 4e-3: 1.9}, listed, 2) is None


def test_the_pooled_model_holm_and_the_detectable_difference():
    """Three shapes x four seeds: d, SE and the residual df of the additive model equal a
    least-squares fit with shape and seed indicators; Holm's steps; the words."""
    losses = {"GPT": [1.60, 1.62, 1.59, 1.61], "a": [1.57, 1.60, 1.555, 1.585],
              "b": [1.601, 1.622, 1.594, 1.609]}
    seeds = [11, 12, 13, 14]
    diffs = verdict.pooled_differences({n: dict(zip(seeds, v)) for n, v in losses.items()},
                                       "GPT")
    y = np.concatenate(list(losses.values()))
    design = np.array([[1, i == 1, i == 2] + [j == s for s in (1, 2, 3)]
                       for i in range(3) for j in range(4)], dtype=float)
    coef, residual, *_ = np.linalg.lstsq(design, y, rcond=None)
    df = 12 - 6
    se = math.sqrt(residual[0] / df * 2 / 4)
    for name, k in (("a", 1), ("b", 2)):
        d = diffs[name]
        assert (d["df"], d["mean"], d["se"]) == (df, pytest.approx(coef[k]), pytest.approx(se))
        t = stats.t.ppf(0.975, df)
        assert d["lo"] == pytest.approx(coef[k] - t * se)
        assert d["hi"] == pytest.approx(coef[k] + t * se)
        assert d["p"] == pytest.approx(2 * stats.t.sf(abs(coef[k]) / se, df))
        assert d["detectable_family"] == pytest.approx(
            (stats.t.ppf(1 - 0.05 / 4, df) + stats.t.ppf(0.8, df)) * se)
    assert diffs["a"]["holm"] and verdict.verdict(diffs["a"]).startswith("better by 0.0275 [")
    assert not diffs["b"]["holm"] and verdict.verdict(diffs["b"]) == (
        f"no difference > {diffs['b']['detectable_family']:.4f}")
    assert verdict.holm({"a": 0.001, "b": 0.03, "c": 0.04}) == (
        {"a": True, "b": False, "c": False}, {"a": 0.05 / 3, "b": 0.025, "c": 0.05})
    assert verdict.holm({"a": 0.02, "b": 0.01})[0] == {"b": True, "a": True}
    one = verdict.shape_rows({("GPT", 1, 0): 1.7, ("GPT", 1, 1): 1.6, ("a", 1, 0): 1.6,
                              ("a", 1, 1): 1.5}, ["GPT", "a"], [1], [0, 1], "GPT")
    assert one["a"]["verdict"] == "no verdict (1 verdict seed; 2 needed)"


def test_a_verdict_word_needs_the_pooled_and_the_paired_test():
    """A shape that moves with the GPT seed by seed passes its own paired test, while a wild third
    shape widens the pooled spread: the verdict names the assumption it hangs on."""
    gpt = [1.60, 1.63, 1.58, 1.62, 1.59, 1.61]
    shapes = {"GPT": gpt, "steady": [v - 0.004 for v in gpt],
              "wild": [1.70, 1.55, 1.68, 1.52, 1.66, 1.57]}
    shapes["steady"][0] += 0.0005
    losses = {(n, 2e-3, s): v for n, vs in shapes.items() for s, v in zip(range(7), [0, *vs])}
    rows = verdict.shape_rows(losses, list(shapes), [2e-3], list(range(7)), "GPT")
    d = rows["steady"]["diff"]
    assert d["paired"]["holm"] and not d["holm"]
    assert rows["steady"]["verdict"] == "better under its own spread only"
    assert d["paired"]["p"] == pytest.approx(stats.ttest_1samp(
        [a - b for a, b in zip(shapes["steady"], gpt)], 0).pvalue)


def test_fiellers_interval_is_every_share_the_paired_seeds_cannot_reject():
    rng = np.random.default_rng(0)
    b = list(-0.02 + 0.004 * rng.standard_normal(8))
    a = [0.6 * x + 0.003 * e for x, e in zip(b, rng.standard_normal(8))]
    ratio, lo, hi = controls.fieller_ratio(a, b)
    t = stats.t.ppf(0.975, 7)

    def t_of(r):  # the paired t of a - r b
        d = np.array(a) - r * np.array(b)
        return abs(d.mean()) / (d.std(ddof=1) / math.sqrt(len(d)))
    assert lo < ratio < hi and t_of(lo) == pytest.approx(t) and t_of(hi) == pytest.approx(t)
    assert controls.fieller_ratio(a, list(0.004 * rng.standard_normal(8)))[1:] == (None, None)


def run(curve_losses, speed, machine="CPU A", tokens=800):
    points = [0, tokens // 4, tokens // 2, 3 * tokens // 4, tokens]
    return dict(curve=[dict(tokens=t, val_loss=v) for t, v in zip(points, curve_losses)],
                tokens_per_s=speed, machine=machine, val_loss=curve_losses[-1])


def test_equal_time_and_flops_read_the_costlier_run_part_way():
    """Half the GPT's speed on the machine both ran on (seed 3's other machine left out): read at
    half its tokens, in log tokens between evaluations; twice: the GPT read at half of its own."""
    seeds = [1, 2, 3]
    gpt = {s: run([4, 2.0, 1.8, 1.7, 1.60 + 0.01 * s], 1000) for s in seeds}
    slow = {s: run([4, 2.1, 1.9 + 0.01 * s, 1.7, 1.55], 500) for s in seeds}
    slow[3] = run([4, 2.1, 1.93, 1.7, 1.55], 2000, machine="CPU B")
    fast = {s: run([4, 2.2, 1.9, 1.7, 1.62], 2000) for s in seeds}
    rows = cost.cost_rows({"GPT": gpt, "slow": slow, "fast": fast},
                          {"GPT": 100, "slow": 125, "fast": 80}, seeds, "GPT", 800)
    assert rows["slow"]["speed"] == 0.5 and rows["slow"]["machines"] == {"CPU A": 2}
    assert rows["slow"]["time"]["shape"] == pytest.approx(1.92)
    assert rows["fast"]["time"]["read"] == "baseline"
    assert rows["fast"]["time"]["diff"]["mean"] == pytest.approx(1.62 - 1.8)
    expected = 1.7 + (1.55 - 1.7) * math.log(640 / 600) / math.log(800 / 600)
    assert rows["slow"]["flops_reading"]["shape"] == pytest.approx(expected)
    assert cost.loss_at(run([4, 2, 1.6, 1.5, 1.4], 1)["curve"], 100) == pytest.approx(3.0)
