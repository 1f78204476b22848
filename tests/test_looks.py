"""shapelab/looks.py: two verdicts of one comparison read as two looks, on made-up
results.json whose answers are computed here another way: Holm over both looks' tests, the
inverse-variance combination."""

import json
import math

import pytest
from scipy import stats

from shapelab import looks


def look(label, diffs, n):
    """A look (its label, {shape: verdict}) of {shape: (mean, se, p, holm, df)}, each at Holm's
    step of its rank among two."""
    verdicts = [dict(shape="GPT", diff=None, verdict="baseline")]
    for level, (shape, (mean, se, p, holm, df)) in zip((0.025, 0.05), diffs.items()):
        t = stats.t.ppf(0.975, df)
        verdicts.append(dict(shape=shape, verdict="made up", diff=dict(
            n=n, df=df, mean=mean, se=se, p=p, holm=holm, holm_level=level, lo=mean - t * se,
            hi=mean + t * se, detectable=2.8 * se, detectable_family=3.5 * se)))
    return label, {v["shape"]: v for v in verdicts}


def test_two_looks_as_one_family_and_combined():
    """The H200's 'narrow' passes its own look's Holm (0.03 against 0.05 at its step) but not
    the four tests' together; the combination weights the finer look by 1 / SE^2."""
    cpu = look("CPU, 8 seeds", {
        "big": (-0.02, 0.005, 0.0005, True, 63), "narrow": (-0.005, 0.005, 0.32, False, 63)}, 8)
    gpu = look("H200, 16 seeds", {
        "big": (-0.016, 0.0025, 1e-9, True, 135), "narrow": (-0.007, 0.0025, 0.03, True, 135)},
        16)
    both = [cpu, gpu]
    rows = looks.two_looks(both)
    # four tests: 1e-9 <= .05/4, .0005 <= .05/3, .03 > .05/2: the H200's 'narrow' fails there
    assert [x["all_holm"] for x in rows["big"]["looks"]] == [True, True]
    assert [x["all_holm"] for x in rows["narrow"]["looks"]] == [False, False]
    mean, se, lo, hi, df = rows["narrow"]["combined"]
    w = [1 / 0.005 ** 2, 1 / 0.0025 ** 2]
    assert mean == pytest.approx((w[0] * -0.005 + w[1] * -0.007) / sum(w))
    assert se == pytest.approx(1 / math.sqrt(sum(w)))
    assert df == pytest.approx(sum(w) ** 2 / (w[0] ** 2 / 63 + w[1] ** 2 / 135))
    assert hi - mean == pytest.approx(stats.t.ppf(0.975, df) * se)
    table = looks.two_looks_table(both)
    assert "Holm of 4 |" in table
    narrow = next(line for line in table.splitlines() if line.startswith("| narrow |"))
    assert narrow.count("] fails |") == 2, narrow



def test_the_laptop_block_reads_each_run_record(tmp_path):
    """One line per results/laptop/<run>/: its cpu.txt, the last evaluation's step and val loss
    (a resumed run's metrics.jsonl holds it twice), its minutes."""
    run = tmp_path / "quiet"
    run.mkdir()
    (run / "cpu.txt").write_text("Some CPU, 2 cores, quiet\n")
    last = dict(iter=9, val_loss=2.5, elapsed_s=300.0)
    rows = [dict(iter=0, val_loss=4.2, elapsed_s=3.0), dict(iter=5, loss=2.0), last, last]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert looks.laptop(tmp_path).splitlines()[-1] == (
        "- Some CPU, 2 cores, quiet: 9 steps, final val loss 2.5000, 5.0 minutes")
