"""experiments/mlp_hourglass_reference.py: the reference's result files read as its plotting script
reads them - a shape's runs averaged (a curve by its last value), the rate picked on the metric
itself, the best point per parameter count, the upper envelope - and its own gaps at the points of
its conventional front; the extract round-trips; the pages quote the committed extract."""

import json
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))
import mlp_hourglass_reference as reference  # noqa: E402


def run(value, metric="eval_psnr"):
    return {"metrics": {metric: value}}


ALL_JSON = {  # the reference's layout: setting -> form_params -> shape -> lr -> run -> metrics
    "bs128_ep30": {
        "hourglass_1000": {"latent785_hidden4_4": {
            "lr_0.001": {"run_1": run([20.0, 23.0])},  # a curve: its last value counts
            "lr_0.0005": {"run_1": run([22.5])}}},
        "hourglass_3000": {"latent785_hidden8_8_8": {
            "lr_0.001": {"run_1": run([23.5])}}},
        "hourglass_2000": {"latent785_hidden6_6": {  # worse than a smaller one: off the front
            "lr_0.001": {"run_1": run([22.0])}}},
        "conventional_w_Win_1500": {"latent784_hidden785": {
            "lr_0.001": {"run_1": run([22.8]), "run_2": run([22.6]),
                         "run_3": {"metrics": {"eval_psnr": [22.7], "test_psnr": 22.9}}}}},
        "conventional_w_Win_4000": {"latent784_hidden1500_1500": {
            "lr_0.001": {"run_1": run([23.6])}}},
        "conventional_wo_Win_wo_Wout_1500": {"latent784_hidden785": {  # a form not read
            "lr_0.001": {"run_1": run([30.0])}}},
    },
    "bs128_ep100": {"hourglass_1000": {"latent785_hidden4_4": {  # a setting not read
        "lr_0.001": {"run_1": run([30.0])}}}},
}


@pytest.fixture
def extract_csv(tmp_path, monkeypatch):
    """A made-up reference checkout with one data set, extracted."""
    folder = tmp_path / "Hourglass_LM" / "hourglass_mlp" / "rebuttal" / "2" / "mnist_denoising"
    folder.mkdir(parents=True)
    (folder / "all.json").write_text(json.dumps(ALL_JSON))
    monkeypatch.setattr(reference, "DATA_SETS", reference.DATA_SETS[:1])
    out = tmp_path / "points.csv"
    reference.extract(tmp_path / "Hourglass_LM", out)
    return out


def test_the_extract_keeps_every_run_of_the_plotted_setting_and_forms(extract_csv):
    rows = reference.read_points(extract_csv)
    assert extract_csv.read_text().startswith("# github.com/mtkresearch/Hourglass_LM at ")
    assert {r["form"] for r in rows} == {"hourglass", "conventional_w_Win"}
    assert {r["setting"] for r in rows} == {"bs128_ep30"}
    small = [r for r in rows if (r["d_h"], r["lr"]) == (4, 1e-3)]
    assert [(r["d_z"], r["L"], r["params"], r["values"]) for r in small] == [
        (785, 2, 1000, [23.0])]
    conventional = [r for r in rows if r["form"] == "conventional_w_Win" and r["d_h"] == 785]
    eval_, test = sorted(conventional, key=lambda r: r["metric"])
    assert eval_["runs"] == 3 and eval_["mean"] == pytest.approx(22.7)
    assert test["runs"] == 1 and test["mean"] == 22.9


def test_the_reference_rule_and_its_gaps(extract_csv):
    """Each shape at its best rate by the metric itself; the front is the upper envelope; the
    gap at each conventional front point is the hourglass staircase there minus it."""
    rows = reference.read_points(extract_csv)
    hourglass = reference.front(reference.points(rows, "MNIST", "hourglass", "eval_psnr"))
    assert [(r["params"], r["lr"], r["mean"]) for r in hourglass] == [
        (1000, 1e-3, 23.0), (3000, 1e-3, 23.5)]  # 2000 params at 22.0 is below the staircase
    gaps = reference.reference_gaps(rows, "MNIST", "eval_psnr")
    assert [(c["params"], h["params"], g) for c, h, g in gaps] == [
        (1500, 1000, pytest.approx(0.3)), (4000, 3000, pytest.approx(-0.1))]
    text = "\n".join(reference.gap_lines(rows))
    assert "ahead at 1 of 2 points, -0.100 to +0.300 dB" in text
    assert "785/4/L2 (0.00M, 23.000 dB at 0.001, its top rate, one run)" in text
    assert "784/785/L1 (0.00M, 22.700 dB at 0.001, the mean of 3 runs)" in text


def test_the_table_says_what_each_form_kept(extract_csv):
    table = reference.table_lines(reference.read_points(extract_csv))
    assert table[2].startswith("| MNIST (`bs128_ep30`) | hourglass, learned lift (`hourglass`) "
                               "| 3 | eval PSNR | 1 run per rate (eval PSNR) | 0.001 (0.0005 at 1 "
                               "shape) |")
    assert ("| 2 | eval PSNR and test PSNR (at 1 of them) | 1-3 runs per rate, 1 at 1 of 2 "
            "shape-rates (eval PSNR) |") in table[3]


def test_a_missing_checkout_is_one_clear_line(tmp_path):
    with pytest.raises(SystemExit, match="a checkout of github.com/mtkresearch/Hourglass_LM"):
        reference.extract(tmp_path, tmp_path / "points.csv")


def test_the_pages_quote_the_committed_extract():
    blocks = reference.page_blocks(reference.EXTRACT)
    assert set(blocks) == {"mlp_reference.table", "mlp_reference.ranges", "mlp_reference.gaps"}
    page = (ROOT / "docs" / "mlp_hourglass.md").read_text()
    assert all(f"<!-- generated: {name} by " in page for name in blocks)
