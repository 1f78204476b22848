"""experiments/cea_ood_verdict.py on made-up records whose answer is known: the alignment at equal
in-domain loss, the paired t interval and its words, which runs take part, the report."""

import csv
import json
import math
import sys

import pytest
from scipy import stats

from conftest import ROOT, run_here
from shapelab.sweep import config_text

sys.path.insert(0, str(ROOT / "experiments"))
import cea_ood_verdict

VAL = (4.4, 2.4, 2.1, 1.9, 1.8, 1.75, 1.72)  # a run's val loss at its seven evaluations
SEEDS = (1337, 1338, 1339, 1340, 1341)


def records(tmp_path, c, noise=(0.0,) * 5, with_ood=True, verdict_seeds=SEEDS[1:]):
    """A record_dir choosing 8e-3 for both shapes: runs whose OOD loss is 1 + 0.5 val (+ c + the
    seed's noise for CEA) at in-domain losses that differ between shapes and seeds, so only an
    alignment at equal in-domain loss finds c; the selection seed's runs and those at another
    rate are off by +1 and must take no part."""
    folder = tmp_path / "records"
    (folder / "runs").mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(dict(
        settings=dict(seeds=list(SEEDS), eval_ood="fortunes"),
        verdicts=[dict(shape=shape, lr=lr, seeds=list(verdict_seeds)) for shape, lr in (
            ("GPT", 2e-3), ("FFN-Wider", 8e-3), ("CEA", 8e-3))])))
    for lr in (8e-3, 4e-3):
        for i, seed in enumerate(SEEDS):
            for slug, shape_shift in (("ffn-wider", 0.0), ("cea", 0.03)):
                off = 1.0 if lr != 8e-3 or seed == SEEDS[0] else c + noise[i]
                extra = off if slug == "cea" else 0.0
                run = folder / "runs" / f"{slug}-lr{lr:.0e}-s{seed}".replace("e-0", "e-")
                run.mkdir()
                (run / "config.py").write_text(config_text(dict(learning_rate=lr, seed=seed)))
                vals = [v + shape_shift + 0.01 * i for v in VAL]
                points = [dict(iter=100 * j, val_loss=v) for j, v in enumerate(vals)]
                result = dict(val_loss=vals[-1], curve=points)
                if with_ood:
                    for p, v in zip(points, vals):
                        p["ood_loss"] = 1.0 + 0.5 * v + extra
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
    noise = (0.0, 0.004, -0.002, 0.001, -0.003)
    folder = records(tmp_path, -0.05, noise)
    rates, first, verdict_seeds, _ = cea_ood_verdict.comparison(folder)
    assert (rates, first, verdict_seeds) == ({"FFN-Wider": 8e-3, "CEA": 8e-3}, 1337, [*SEEDS[1:]])
    analysis = cea_ood_verdict.analyse(cea_ood_verdict.runs_at(folder, rates, verdict_seeds),
                                       verdict_seeds)
    assert analysis["seeds"] == [*SEEDS[1:]] and len(analysis["levels"]) == 4
    assert analysis["levels"][0] == pytest.approx(1.72 + 0.03 + 0.01 * 4)  # every run reaches it
    diffs = [-0.05 + n for n in noise[1:]]
    assert [r["diff"] for r in analysis["rows"]] == pytest.approx(diffs * 4)  # at every level
    s, se = analysis["summaries"][0], stats.tstd(diffs) / math.sqrt(4)
    assert s["mean"] == pytest.approx(-0.05)
    assert s["hi"] - s["mean"] == pytest.approx(stats.t.ppf(0.975, 3) * se)
    assert s["detectable"] == pytest.approx((stats.t.ppf(0.975, 3) + stats.t.ppf(0.8, 3)) * se)
    assert cea_ood_verdict.words(s, 1.8) == (
        f"CEA lower OOD loss by 0.0500 [{-s['hi']:.4f}, {-s['lo']:.4f}] at in-domain loss 1.800")
    wide = dict(s, mean=0.01, lo=-0.02, hi=0.04, detectable=0.05)
    assert cea_ood_verdict.words(wide, 1.8) == (
        "no difference larger than 0.0500 detected at in-domain loss 1.800")
    assert cea_ood_verdict.words(dict(wide, lo=0.002), 1.8).startswith("CEA higher OOD loss by")


def test_the_report_goes_beside_the_runs_it_reads_over_its_verdicts_seeds(tmp_path):
    """An interim comparison (the verdict over 1338-1339; 1340 and 1341 recorded, off by +0.5)
    is read over its verdict's seeds, not every seed with a run."""
    folder = records(tmp_path, -0.05, (0.0, 0.004, -0.002, 0.5, 0.5), verdict_seeds=SEEDS[1:3])
    done = run_here("experiments/cea_ood_verdict.py", folder)
    assert done.returncode == 0, done.stdout + done.stderr
    report = (folder / "cea_ood.md").read_text()
    assert "the verdict seeds 1338, 1339 (seed 1337 chose the rates" in report
    assert "| 2 | -0.0490 | [" in report
    assert "science `" + "ab" * 32 + "`" in report
    with open(folder / "cea_ood.csv") as f:
        assert {r["seed"] for r in csv.DictReader(f)} == {"1338", "1339"}


def test_without_trajectories_it_says_so_and_how_to_get_them(tmp_path, capsys):
    rates = {"FFN-Wider": 8e-3, "CEA": 8e-3}
    runs = cea_ood_verdict.runs_at(records(tmp_path, -0.05, with_ood=False), rates, [1338])
    one = {**runs, **cea_ood_verdict.runs_at(records(tmp_path / "ood", -0.05), rates, [1339])}
    with pytest.raises(SystemExit):
        cea_ood_verdict.analyse(one, [*SEEDS[1:]])
    error = capsys.readouterr().err
    assert "1 verdict seed(s) have OOD loss along the runs of both shapes (2 needed)" in error
    assert "`python compare.py config/compare_verdict_cpu.py`" in error
