"""experiments/cea_ood_verdict.py: CEA against FFN-Wider out of distribution, along each run's
trajectory at equal in-domain loss, paired by seed. On made-up records whose answer is known: the
alignment, the interval and its words, which runs take part, and the report when no run has a
trajectory yet."""

import csv
import json
import math
import sys

import pytest
from scipy import stats

from conftest import ROOT, run_here
from shapelab.sweep import config_text

sys.path.insert(0, str(ROOT / "experiments"))
import cea_ood_verdict  # noqa: E402

VAL = (4.4, 2.4, 2.1, 1.9, 1.8, 1.75, 1.72)  # a run's val loss at its seven evaluations
SEEDS = (1337, 1338, 1339, 1340, 1341)


def curve(shift, ood_of_val):
    """Seven evaluations, val losses VAL + shift, each with the OOD loss ood_of_val(val)."""
    return [dict(iter=100 * i, tokens=0, val_loss=v + shift, elapsed_s=0.0,
                 ood_loss=ood_of_val(v + shift), ood={"science": ood_of_val(v + shift)})
            for i, v in enumerate(VAL)]


def records(tmp_path, c, noise=(0.0,) * 5, with_ood=True, rates=(8e-3, 4e-3),
            verdict_seeds=SEEDS[1:]):
    """A record_dir: results.json choosing 8e-3 for both shapes with seeds SEEDS (the first
    selects), and runs of FFN-Wider and CEA at every seed whose OOD loss is 1 + 0.5 val (+ c for
    CEA, + the seed's noise). The in-domain losses differ between the shapes and seeds, so only
    an alignment at equal in-domain loss finds c. The selection seed's runs and the runs at
    another rate have a CEA difference of +1: they must take no part. verdict_seeds: the seeds
    the comparison's verdict is over (fewer than SEEDS[1:]: an interim report)."""
    folder = tmp_path / "records"
    (folder / "runs").mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(dict(
        settings=dict(seeds=list(SEEDS), eval_ood="fortunes"),
        verdicts=[dict(shape=shape, lr=lr, seeds=list(verdict_seeds)) for shape, lr in (
            ("GPT", 2e-3), ("FFN-Wider", 8e-3), ("CEA", 8e-3))])))
    for lr in rates:
        for i, seed in enumerate(SEEDS):
            for slug, shape_shift in (("ffn-wider", 0.0), ("cea", 0.03)):
                off = 1.0 if lr != 8e-3 or seed == SEEDS[0] else c + noise[i]
                extra = off if slug == "cea" else 0.0
                run = folder / "runs" / f"{slug}-lr{lr:.0e}-s{seed}".replace("e-0", "e-")
                run.mkdir()
                (run / "config.py").write_text(config_text(dict(learning_rate=lr, seed=seed)))
                points = curve(shape_shift + 0.01 * i, lambda v: 1.0 + 0.5 * v + extra)
                if not with_ood:
                    points = [{k: p[k] for k in ("iter", "tokens", "val_loss", "elapsed_s")}
                              for p in points]
                result = dict(val_loss=points[-1]["val_loss"], curve=points)
                if with_ood:
                    result["ood_texts"] = {"science": "ab" * 32}
                (run / "result.json").write_text(json.dumps(result))
    return folder


def test_ood_is_read_where_a_run_first_reaches_each_in_domain_loss():
    points = [(4.0, 5.0), (2.0, 3.0), (1.5, 2.0), (1.6, 9.0), (1.2, 1.0)]
    assert cea_ood_verdict.ood_at(points, 3.0) == 4.0  # linear in val loss between evaluations
    assert cea_ood_verdict.ood_at(points, 1.55) == pytest.approx(2.1)  # the first time, not later
    assert cea_ood_verdict.ood_at(points, 1.2) == 1.0
    assert cea_ood_verdict.ood_at(points, 1.0) is None  # never reached
    levels = cea_ood_verdict.choose_levels([points, [(3.0, 0), (1.4, 0)]], 4, 0.3)
    assert levels == pytest.approx([1.4, 1.5, 1.6, 1.7])  # from the lowest every run reaches


def test_paired_differences_at_equal_in_domain_loss_with_a_t_interval(tmp_path):
    rates, first, verdict_seeds, _ = cea_ood_verdict.comparison(records(tmp_path, -0.05))
    assert (rates, first, verdict_seeds) == ({"FFN-Wider": 8e-3, "CEA": 8e-3}, 1337, [*SEEDS[1:]])
    noise = (0.0, 0.004, -0.002, 0.001, -0.003)
    folder = records(tmp_path / "noisy", -0.05, noise)
    runs = cea_ood_verdict.runs_at(folder, rates, verdict_seeds)
    assert sorted(runs) == sorted((shape, s) for shape in ("FFN-Wider", "CEA") for s in SEEDS[1:])
    analysis = cea_ood_verdict.analyse(runs, verdict_seeds)
    assert analysis["seeds"] == [*SEEDS[1:]] and len(analysis["levels"]) == 4
    assert analysis["levels"][0] == pytest.approx(1.72 + 0.03 + 0.01 * 4)  # every run reaches it
    diffs = [-0.05 + n for n in noise[1:]]
    for level, s in zip(analysis["levels"], analysis["summaries"]):  # the same at every level
        rows = [r for r in analysis["rows"] if r["level"] == level]
        assert [r["diff"] for r in rows] == pytest.approx(diffs)
        assert rows[0]["ffn_wider"] == pytest.approx(1.0 + 0.5 * level)
    s = analysis["summaries"][0]
    se = stats.tstd(diffs) / math.sqrt(4)
    assert s["mean"] == pytest.approx(-0.05) and s["se"] == pytest.approx(se)
    assert s["hi"] - s["mean"] == pytest.approx(stats.t.ppf(0.975, 3) * se)
    assert s["detectable"] == pytest.approx((stats.t.ppf(0.975, 3) + stats.t.ppf(0.8, 3)) * se)
    level = analysis["levels"][0]
    assert cea_ood_verdict.words(s, level) == (
        f"CEA lower OOD loss by 0.0500 [{-s['hi']:.4f}, {-s['lo']:.4f}] at in-domain loss "
        f"{level:.3f}")
    wide = dict(s, mean=0.01, lo=-0.02, hi=0.04, detectable=0.05)
    assert cea_ood_verdict.words(wide, 1.8) == (
        "no difference larger than 0.0500 detected at in-domain loss 1.800")
    assert cea_ood_verdict.words(dict(wide, lo=0.002), 1.8).startswith("CEA higher OOD loss by")


def test_the_report_csv_and_figure(tmp_path):
    folder = records(tmp_path, -0.05, (0.0, 0.004, -0.002, 0.001, -0.003))
    out = tmp_path / "report" / "cea_ood"
    done = run_here("experiments/cea_ood_verdict.py", folder, f"--out={out}", "--levels=1.8,1.9")
    assert done.returncode == 0, done.stdout + done.stderr
    report = (tmp_path / "report" / "cea_ood.md").read_text()
    assert "**At in-domain loss 1.800 (the first of --levels), CEA's OOD loss minus " \
           "FFN-Wider's over 4 seeds: -0.0500 [" in report
    assert ": CEA lower OOD loss by 0.0500 [" in report and "seed 1337 chose the rates" in report
    assert "science `" + "ab" * 32 + "`" in report and "as the runs recorded them" in report
    with open(tmp_path / "report" / "cea_ood.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8 and {r["seed"] for r in rows} == {str(s) for s in SEEDS[1:]}
    assert all(abs(float(r["cea_minus_ffn_wider"]) + 0.05) < 0.005 for r in rows)
    assert (tmp_path / "report" / "cea_ood.png").stat().st_size > 10_000


def test_without_trajectories_the_report_says_so_and_how_to_get_them(tmp_path):
    rates = {"FFN-Wider": 8e-3, "CEA": 8e-3}
    folder = records(tmp_path, -0.05, with_ood=False)
    runs = cea_ood_verdict.runs_at(folder, rates, [*SEEDS[1:]])
    analysis = cea_ood_verdict.analyse(runs, [*SEEDS[1:]])
    text = cea_ood_verdict.report(analysis, rates, 1337, [*SEEDS[1:]], "texts", "cmd")
    assert ("**No OOD trajectory yet: 0 verdict seed(s) have OOD loss along the runs of both "
            "shapes (2 needed; FFN-Wider: 4 run(s) recorded, 0 with one") in text
    assert "`python compare.py config/compare_verdict_cpu.py`" in text
    one = {**runs, **cea_ood_verdict.runs_at(records(tmp_path / "ood", -0.05), rates, [1338])}
    assert cea_ood_verdict.analyse(one, [*SEEDS[1:]])["seeds"] == [1338]  # one seed: no interval
    assert "No OOD trajectory yet: 1 verdict seed(s)" in cea_ood_verdict.report(
        cea_ood_verdict.analyse(one, [*SEEDS[1:]]), rates, 1337, [*SEEDS[1:]], "texts", "cmd")


def test_the_report_goes_beside_the_runs_it_reads(tmp_path):
    folder = records(tmp_path, -0.05, (0.0, 0.004, -0.002, 0.001, -0.003))
    cea_ood_verdict.main([str(folder), "--levels=1.8"])
    assert "CEA lower OOD loss by 0.0500" in (folder / "cea_ood.md").read_text()
    assert (folder / "cea_ood.csv").exists() and (folder / "cea_ood.png").exists()


def test_an_interim_comparison_is_read_over_the_seeds_its_verdict_is_over(tmp_path):
    """A report over fewer seeds than planned (the verdict over 1338-1339; runs of 1340 and 1341
    recorded for these two shapes, not yet for every shape): the analysis reads the verdict's
    seeds, not every seed with a run."""
    folder = records(tmp_path, -0.05, (0.0, 0.004, -0.002, 0.5, 0.5), verdict_seeds=SEEDS[1:3])
    rates, first, verdict_seeds, _ = cea_ood_verdict.comparison(folder)
    assert verdict_seeds == [1338, 1339]
    cea_ood_verdict.main([str(folder), "--levels=1.8"])
    report = (folder / "cea_ood.md").read_text()
    assert "the verdict seeds 1338, 1339 (seed 1337" in report and "over 2 seeds: -0.0490 [" in (
        report)
