"""experiments/mlp_hourglass_reference.py: the reference's results read as its plotting script reads
them (runs averaged, the rate picked on the metric itself, the envelope) and the gaps there."""

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))
import mlp_hourglass_reference as reference

ROWS = [  # (data set, form, d_z, d_h, L, params, lr, metric, values)
    ("MNIST", "hourglass", 785, 4, 2, 1000, 1e-3, "eval_psnr", "23.0"),
    ("MNIST", "hourglass", 785, 4, 2, 1000, 5e-4, "eval_psnr", "22.5"),
    ("MNIST", "hourglass", 785, 6, 2, 2000, 1e-3, "eval_psnr", "22.0"),  # below the staircase
    ("MNIST", "hourglass", 785, 8, 3, 3000, 1e-3, "eval_psnr", "23.5"),
    ("MNIST", "conventional_w_Win", 784, 785, 1, 1500, 1e-3, "eval_psnr", "22.8;22.6;22.7"),
    ("MNIST", "conventional_w_Win", 784, 1500, 2, 4000, 1e-3, "eval_psnr", "23.6"),
    ("ImageNet-32", "hourglass", 3546, 8, 5, 2000, 5e-4, "test_psnr", "21.5"),
    ("ImageNet-32", "conventional_w_Win", 3072, 3075, 1, 3000, 5e-4, "test_psnr", "21.4"),
    ("ImageNet-32", "hourglass_w_Win", 3546, 270, 5, 5000, 5e-4, "eval_psnr", "22.0;22.2"),
    ("ImageNet-32", "hourglass_w_Win_fix", 3546, 270, 5, 5000, 5e-4, "eval_psnr", "21.8"),
]


def test_the_reference_rule_and_its_gaps(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("# the reference at a commit\ndata_set,setting,form,d_z,d_h,L,params,lr,"
                    "metric,values\n" + "".join(
        f"{row[0]},setting,{','.join(map(str, row[1:]))}\n" for row in ROWS))
    rows = reference.read_points(path)
    hourglass, shapes = reference.front(rows, "MNIST", "hourglass", "eval_psnr")
    assert shapes == 3 and [(r["params"], r["lr"], r["mean"]) for r in hourglass] == [
        (1000, 1e-3, 23.0), (3000, 1e-3, 23.5)]
    text = reference.page_blocks(path)["mlp_reference.table"]
    assert "| 3, 1 | 2, 1-3 | 1 of 2 points | -0.100 to +0.300 dB |" in text  # 23.0 - 22.7
    assert "learned 22.100 dB (2 runs), frozen 21.800 dB (1 runs), -0.300 dB." in text
