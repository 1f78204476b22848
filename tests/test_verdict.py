"""The verdict's checks that assume less than its pooled model (shapelab/verdict.py, its tables
in shapelab/report.py): each shape's own spread, the seed-paired test under the same Holm family
and the words when the two tests disagree, an interim report's seeds; the controls' share of a
shape's difference (Fieller, shapelab/controls.py); and the loss read at equal time and FLOPs
along the trajectories (shapelab/cost.py). On made-up losses whose answers are known or computed
another way (scipy, brute force)."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from shapelab import controls, cost, report, verdict

SEEDS = [1, 2, 3, 4, 5, 6, 7, 8, 9]  # the first selects the rate (phase 1), 8 verdict seeds
SEED_EFFECT = [0.0, 0.012, -0.008, 0.004, -0.011, 0.007, -0.003, 0.009, -0.006]
WIGGLE = [0.0, 1, -1, 1, -1, 1, -1, 1, -1]  # a residual pattern that sums to zero over seeds


def rows_of(shapes, seeds=SEEDS):
    """shape_rows of {name: [loss per seed]} (every shape at one rate, 2e-3)."""
    losses = {(name, 2e-3, s): v for name, values in shapes.items()
              for s, v in zip(seeds, values)}
    return verdict.shape_rows(losses, list(shapes), [2e-3], seeds, "GPT")


def shape(offset, spread=0.0, pattern=WIGGLE, shift=0):
    """Losses 1.6 + offset + the seed's effect + spread x the pattern (rotated by shift)."""
    turned = pattern[:1] + pattern[1:][shift:] + pattern[1:][:shift]
    return [1.6 + offset + e + spread * w for e, w in zip(SEED_EFFECT, turned)]


def test_the_paired_test_is_students_t_on_the_shapes_own_differences():
    rows = rows_of({"GPT": shape(0, 0.002), "a": shape(-0.01, 0.004, shift=1),
                    "b": shape(0.003, 0.003, shift=2)})
    gpt = [rows["GPT"]["losses"][s] for s in SEEDS[1:]]
    for name in ("a", "b"):
        paired = rows[name]["diff"]["paired"]
        mine = [rows[name]["losses"][s] for s in SEEDS[1:]]
        expected = stats.ttest_rel(mine, gpt)
        interval = expected.confidence_interval()
        assert paired["p"] == pytest.approx(expected.pvalue, rel=1e-9)
        assert (paired["lo"], paired["hi"]) == pytest.approx((interval.low, interval.high))
        assert paired["df"] == 7 and paired["mean"] == pytest.approx(rows[name]["diff"]["mean"])


def test_the_own_spreads_mean_square_is_the_pooled_one_and_a_wide_shape_is_caught():
    shapes = {"GPT": shape(0, 0.002), "a": shape(0.0, 0.002, shift=1),
              "b": shape(0.0, 0.002, shift=3), "wide": shape(0.0, 0.03, shift=2)}
    rows = rows_of(shapes)
    model = {n: {s: rows[n]["losses"][s] for s in SEEDS[1:]} for n in shapes}
    spread = verdict.spread_check(model, SEEDS[1:])
    sigma = rows["a"]["diff"]["sigma"]
    assert np.mean([sd ** 2 for sd in spread["own_sd"].values()]) == pytest.approx(sigma ** 2)
    assert spread["own_sd"]["wide"] > 2 * spread["own_sd"]["a"]  # (its noise moves the seed means)
    assert spread["df_each"] == pytest.approx(3 * 7 / 4)
    assert spread["bartlett_p"] < 0.001 and spread["levene_p"] < 0.05
    alike = verdict.spread_check({n: model[n] for n in ("GPT", "a", "b")}, SEEDS[1:])
    assert alike["bartlett_p"] > 0.05  # the same spread, rotated: nothing found
    assert rows["wide"]["diff"]["own_sd"] == pytest.approx(spread["own_sd"]["wide"])
    assert rows["GPT"]["own_sd"] == pytest.approx(spread["own_sd"]["GPT"])


def test_a_verdict_word_only_where_the_pooled_and_the_paired_test_agree():
    """'lucky' is better by 0.012 with a wide spread of its own: five quiet shapes make the
    pooled SE small enough to call it better, its own eight differences do not. 'steady' is
    better by 0.006 on every seed, among loud shapes: the paired test sees it, the pooled one
    does not. Each row says which assumption its word hangs on."""
    quiet = {"GPT": shape(0, 0.001), **{f"q{i}": shape(0.0, 0.001, shift=i) for i in range(1, 5)},
             "lucky": shape(-0.012, 0.018, pattern=[0, 1, -1, -1, 1, 1, -1, 1, -1])}
    rows = rows_of(quiet)
    d = rows["lucky"]["diff"]
    assert d["holm"] and not d["paired"]["holm"]
    assert rows["lucky"]["verdict"] == (
        f"better under the pooled spread only (its own spread: p = {d['paired']['p']:.4f} "
        f"against Holm's {d['paired']['holm_level']:.4f})")
    assert verdict.short_verdict(rows["lucky"]) == "better under the pooled spread only"
    loud = {"GPT": shape(0, 0.02), **{f"l{i}": shape(0.0, 0.02, shift=i) for i in range(1, 4)},
            "steady": [v - 0.006 + 0.0004 * w for v, w in zip(shape(0, 0.02), WIGGLE[::-1])]}
    rows = rows_of(loud)
    d = rows["steady"]["diff"]
    assert d["paired"]["holm"] and not d["holm"]
    assert rows["steady"]["verdict"].startswith(
        "better under its own spread (paired by seed) only (the pooled spread: p = ")
    table = report.spread_table(rows, "GPT")
    assert "| paired alone rejects |" in table and "| neither rejects |" in table
    # where both reject, the words are the pooled model's alone
    both = rows_of({"GPT": shape(0, 0.002), "a": shape(-0.02, 0.002, shift=1),
                    "b": shape(0, 0.002, shift=2)})
    d = both["a"]["diff"]
    assert d["holm"] and d["paired"]["holm"]
    assert both["a"]["verdict"] == verdict.verdict({k: v for k, v in d.items() if k != "paired"})
    assert both["a"]["verdict"].startswith("better by 0.0200 [")
    assert verdict.short_verdict(both["a"]).startswith("better by 0.020 [")


def test_short_words_say_narrow_below_what_one_test_detects():
    row = dict(verdict="x", diff=dict(mean=-0.007, lo=-0.012, hi=-0.002, se=0.0026, holm=True,
                                      detectable=0.0075, detectable_family=0.0097,
                                      paired=dict(holm=True)))
    assert verdict.short_verdict(row) == "better by 0.007 [0.002, 0.012], narrow"
    row["diff"].update(holm=False, paired=dict(holm=False))
    assert verdict.short_verdict(row) == "no difference > 0.010"
    assert verdict.short_verdict(dict(verdict="baseline", diff=None)) == "baseline"


def test_fiellers_interval_is_every_share_the_paired_seeds_cannot_reject():
    rng = np.random.default_rng(0)
    b = list(-0.02 + 0.004 * rng.standard_normal(8))  # the reference's differences
    a = [0.6 * x + 0.003 * e for x, e in zip(b, rng.standard_normal(8))]  # ~60% of them
    ratio, lo, hi = controls.fieller_ratio(a, b)
    assert ratio == pytest.approx(np.mean(a) / np.mean(b)) and lo < ratio < hi
    t = stats.t.ppf(0.975, 7)

    def t_of(r):  # the paired t of a - r b
        d = np.array(a) - r * np.array(b)
        return abs(d.mean()) / (d.std(ddof=1) / math.sqrt(len(d)))
    assert t_of(lo) == pytest.approx(t) and t_of(hi) == pytest.approx(t)
    assert t_of((lo + hi) / 2) < t and t_of(lo - 0.05) > t and t_of(hi + 0.05) > t
    noise = list(0.004 * rng.standard_normal(8))  # a reference not clear of zero: unbounded
    assert controls.fieller_ratio(a, noise)[1:] == (None, None)
    assert controls.share_text(dict(ratio=0.6, lo=None, hi=None)) == "60% [unbounded]"


@pytest.mark.parametrize("lo, hi, words", [
    (0.2, 0.8, "part of it"), (0.4, 1.3, "all of it"), (-0.3, 0.7, "none of it"),
    (-0.5, 1.5, "cannot tell"), (None, None, "no share to read")])
def test_each_controls_reading_says_only_what_its_interval_can(lo, hi, words):
    share = dict(ratio=0.5, lo=lo, hi=hi)
    assert words in controls.share_reading(share, "hourglass")
    made = {"GPT wide": dict(reading=dict(share=share)), "hourglass same-d": {}}
    text = controls.controls_reading(made, "hourglass")
    assert text.count("\n- ") == 0 and "the reallocation alone" in text  # one control read
    made["hourglass same-d"] = dict(reading=dict(share=dict(ratio=0.5, lo=0.1, hi=0.9)))
    assert "need not add up to 100%" in controls.controls_reading(made, "hourglass")


def test_an_interim_verdict_names_the_seeds_its_means_are_over():
    shapes = {"GPT": shape(0, 0.002), "a": shape(-0.01, 0.002, shift=1)}
    losses = {(n, 2e-3, s): v for n, values in shapes.items() for s, v in zip(SEEDS, values)}
    losses[("GPT", 2e-3, 10)] = losses[("a", 2e-3, 10)] = 1.6
    del losses[("a", 2e-3, 9)]  # seeds 2-8 every shape has; 9 the GPT alone
    planned = SEEDS + [10, 11]
    rows = verdict.shape_rows(losses, list(shapes), [2e-3], planned, "GPT")
    assert verdict.seeds_in_verdict(rows) == [2, 3, 4, 5, 6, 7, 8, 10]
    footer = report.verdict_footer(rows, [2e-3], planned, "GPT")
    assert ("- verdict seeds: 2-8, 10, 8 of the 10 planned (2-11): an interim look, the others not "
            "finished by every shape yet (the selection seed 1 chose") in footer
    done = report.verdict_footer(rows_of(shapes), [2e-3], SEEDS, "GPT")
    assert "- verdict seeds: 2, 3, 4, 5, 6, 7, 8, 9 (the selection seed 1 chose" in done


# ----------------------------------------------------------------------------------------
# The cost beside the loss


def test_the_loss_between_evaluations_is_read_in_log_tokens():
    curve = [dict(tokens=0, val_loss=4.0), dict(tokens=100, val_loss=2.0),
             dict(tokens=400, val_loss=1.6), dict(tokens=800, val_loss=1.5)]
    assert cost.loss_at(curve, 200) == pytest.approx(2.0 - 0.4 * 0.5)  # half-way in log tokens
    assert cost.loss_at(curve, 50) == pytest.approx(3.0)  # from step 0: linear in tokens
    assert cost.loss_at(curve, 800) == 1.5 and cost.loss_at(curve, 400) == 1.6
    assert cost.loss_at(curve, 801) is None  # never past the end


def run(curve_losses, speed, machine="CPU A", tokens=800):
    """A made-up result: evaluations at 0, 1/4, 1/2, 3/4 and all of the tokens."""
    points = [0, tokens // 4, tokens // 2, 3 * tokens // 4, tokens]
    return dict(curve=[dict(tokens=t, val_loss=v) for t, v in zip(points, curve_losses)],
                tokens_per_s=speed, machine=machine, val_loss=curve_losses[-1])


def test_equal_time_reads_the_slower_shape_where_it_had_used_the_gpts_time():
    """The slow shape runs at half the GPT's speed on the machines both ran on (seed 3 ran on
    another machine: left out of the ratio), so it is read at half its tokens; the fast shape at
    twice, so the GPT is read at half of its own. FLOPs: 1.25x the GPT's per token, read at 0.8
    of its tokens; 0.8x, the GPT read at 0.8 of its."""
    seeds = [1, 2, 3]
    gpt = {s: run([4, 2.0, 1.8, 1.7, 1.60 + 0.01 * s], 1000) for s in seeds}
    slow = {s: run([4, 2.1, 1.9 + 0.01 * s, 1.7, 1.55], 500) for s in seeds}
    slow[3] = run([4, 2.1, 1.93, 1.7, 1.55], 2000, machine="CPU B")
    fast = {s: run([4, 2.2, 1.9, 1.7, 1.62], 2000) for s in seeds}
    rows = cost.cost_rows({"GPT": gpt, "slow": slow, "fast": fast},
                          {"GPT": 100, "slow": 125, "fast": 80}, seeds, "GPT", 800)
    assert rows["slow"]["speed"] == 0.5 and rows["slow"]["machines"] == {"CPU A": 2}
    time = rows["slow"]["time"]
    assert time["read"] == "shape" and time["shape"] == pytest.approx(1.92)
    assert time["diff"]["mean"] == pytest.approx(1.92 - 1.62)
    fast_time = rows["fast"]["time"]
    assert rows["fast"]["speed"] == 2.0 and fast_time["read"] == "baseline"
    assert fast_time["shape"] is None and fast_time["diff"]["mean"] == pytest.approx(1.62 - 1.8)
    at = 0.8 * 800  # the slow shape's FLOPs reading, between the evaluations at 600 and 800
    expected = 1.7 + (1.55 - 1.7) * math.log(at / 600) / math.log(800 / 600)
    assert rows["slow"]["flops_reading"]["shape"] == pytest.approx(expected)
    assert rows["fast"]["flops_reading"]["read"] == "baseline"
    table = cost.cost_table(rows, "GPT", {"GPT": 1.62, "slow": 1.55, "fast": 1.62})
    assert "| slow | 0.50x (2 on CPU A) | 1.9200 | +0.3000 [" in table
    assert "| fast | 2.00x (3 on CPU A) | - (faster: not extrapolated) | -0.1800 [" in table
    assert "(GPT read part-way)" in table and "| 0.80x | - (cheaper: not extrapolated) |" in table
    alone = cost.cost_rows({"GPT": gpt, "b": {s: dict(slow[s], machine="CPU B") for s in seeds}},
                           {"GPT": 100, "b": 100}, seeds, "GPT", 800)
    assert alone["b"]["speed"] is None and alone["b"]["time"] is None  # no machine in common
    assert "- (no seed on the same machine)" in cost.cost_table(alone, "GPT",
                                                               {"GPT": 1.6, "b": 1.55})


def test_a_shape_of_another_session_takes_its_speed_from_one_bench_run(tmp_path):
    """A shape whose runs share no session with the GPT's (here: another machine) gets its speed
    from bench.py's JSON of one run: the eager rows of its first dtype, the baseline's speed from
    the same rows; a shape the bench did not measure keeps the paired runs' (none: no reading)."""
    seeds = [1, 2, 3]
    gpt = {s: run([4, 2.0, 1.8, 1.7, 1.60 + 0.01 * s], 1000) for s in seeds}
    later = {s: run([4, 2.1, 1.9 + 0.01 * s, 1.7, 1.55], 9999, machine="CPU B") for s in seeds}
    path = tmp_path / cost.SPEED_BENCH
    assert cost.bench_speeds(path, {"GPT", "later"}) == ({}, None)  # no file: no bench
    row = dict(mode="eager", dtype="bfloat16", oom=False)
    path.write_text(json.dumps(dict(machine="AMD EPYC (AVX512-BF16)", rows=[
        dict(row, model="GPT", tokens_per_s=800.0), dict(row, model="later", tokens_per_s=400.0),
        dict(row, model="other", tokens_per_s=100.0),
        dict(row, model="later", mode="compiled", tokens_per_s=4000.0),
        dict(row, model="later", dtype="float32", tokens_per_s=40.0)])))
    bench = cost.bench_speeds(path, {"GPT", "later"})
    assert bench == ({"GPT": 800.0, "later": 400.0}, "AMD EPYC (AVX512-BF16)")
    runs = {"GPT": gpt, "later": later, "unmeasured": later}
    rows = cost.cost_rows(runs, {n: 100 for n in runs}, seeds, "GPT", 800, bench)
    assert rows["later"]["speed"] == 0.5 and rows["later"]["time"]["read"] == "shape"
    assert rows["later"]["time"]["shape"] == pytest.approx(1.92)  # read at half its tokens
    assert rows["unmeasured"]["speed"] is None and rows["GPT"]["speed"] == 1.0
    table = cost.cost_table(rows, "GPT", {"GPT": 1.62, "later": 1.55, "unmeasured": 1.55})
    assert "| later | 0.50x (bench.py, one run on AMD EPYC) | 1.9200 |" in table
    assert "one run of bench.py" in cost.cost_footer("GPT", "1-3", 100, "r/speed_bench.json")
    assert "bench.py" not in cost.cost_footer("GPT", "1-3", 100)


def test_machine_labels_drop_the_units():
    assert cost.machine_label("Intel(R) Xeon(R) Processor (AMX, AVX512-BF16)") == "Intel Xeon"
    assert cost.machine_label("AMD EPYC (AVX512-BF16)") == "AMD EPYC"
    assert cost.machine_label("NVIDIA H200") == "NVIDIA H200"
