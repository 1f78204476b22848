"""experiments/mlp_hourglass_reference.py: the reference's results read as its plotting script reads
them (runs averaged, a curve's last value, the rate picked on the metric itself, the envelope)."""

import json
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))
import mlp_hourglass_reference as reference


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


def test_the_extract_the_reference_rule_and_its_gaps(tmp_path, monkeypatch):
    folder = tmp_path / "Hourglass_LM" / "hourglass_mlp" / "rebuttal" / "2" / "mnist_denoising"
    folder.mkdir(parents=True)
    (folder / "all.json").write_text(json.dumps(ALL_JSON))
    monkeypatch.setattr(reference, "DATA_SETS", reference.DATA_SETS[:1])
    reference.extract(tmp_path / "Hourglass_LM", tmp_path / "points.csv")
    rows = reference.read_points(tmp_path / "points.csv")
    assert {(r["form"], r["setting"]) for r in rows} == {("hourglass", "bs128_ep30"),
                                                          ("conventional_w_Win", "bs128_ep30")}
    conventional = [r for r in rows if r["form"] == "conventional_w_Win" and r["d_h"] == 785]
    eval_, test = sorted(conventional, key=lambda r: r["metric"])
    assert (eval_["runs"], eval_["mean"], test["runs"]) == (3, pytest.approx(22.7), 1)
    hourglass = reference.front(reference.points(rows, "MNIST", "hourglass", "eval_psnr"))
    assert [(r["params"], r["lr"], r["mean"]) for r in hourglass] == [
        (1000, 1e-3, 23.0), (3000, 1e-3, 23.5)]  # 2000 params at 22.0 is below the staircase
    gaps = reference.reference_gaps(rows, "MNIST", "eval_psnr")
    assert [(c["params"], h["params"], g) for c, h, g in gaps] == [
        (1500, 1000, pytest.approx(0.3)), (4000, 3000, pytest.approx(-0.1))]
    text = "\n".join(reference.gap_lines(rows))
    assert "ahead at 1 of 2 points, -0.100 to +0.300 dB" in text
    assert "785/4/L2 (0.00M, 23.000 dB at 0.001, its top rate, one run)" in text
    assert ("| 2 | eval PSNR and test PSNR (at 1 of them) | 1-3 runs per rate, 1 at 1 of 2 "
            "shape-rates (eval PSNR) |") in reference.table_lines(rows)[3]
    with pytest.raises(SystemExit, match="a checkout of github.com/mtkresearch/Hourglass_LM"):
        reference.extract(tmp_path / "nothing", tmp_path / "points.csv")
