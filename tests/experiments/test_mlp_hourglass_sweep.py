"""experiments/mlp_hourglass_sweep.py on tiny grids: the sweep's resume, its rows never lost,
repeated or rewritten, a CSV it does not recognise left alone."""
import gc
import math
import os
import sys

import pytest
from conftest import ROOT, at_step, digit_splits, write_prepared

import torch
from mlp_hourglass import param_formula
from shapelab.configurator import ConfigError, parse_overrides
from shapelab.image_tasks import get_task
import train_mlp

sys.path.insert(0, str(ROOT / "experiments"))
import mlp_hourglass_sweep as sweep


def prepared(tmp_path, **kw):
    return write_prepared(tmp_path / "prepared", digit_splits(n_train=256, n_val=64, n_test=64),
                          **kw)


def tiny_sweep(tmp_path, folder, *extra, out="sweep"):
    return ["--task=mnist_sr", f"--prepared_dir={folder}", "--dtype=float32", "--device=cpu",
            "--batch_size=64", "--max_iters=4", "--eval_interval=2",
            "--shapes=hourglass:256:16:1,conventional:196:256:1", f"--out_dir={tmp_path / out}",
            *extra]


def test_a_sweep_resumes_only_its_setting_never_rewrites_a_row_and_goes_on_inside_a_run(
        tmp_path, monkeypatch, capsys):
    folder = prepared(tmp_path)
    whole = sweep.main(tiny_sweep(tmp_path, folder, out="whole"))
    assert [(r["shape"], r["input_proj"]) for r in whole] == [("hourglass", "frozen_random"),
                                                             ("conventional", "direct")]
    assert {"fronts.md", "fronts.png"} <= {p.name for p in (tmp_path / "whole").iterdir()}
    capsys.readouterr()
    sweep.main(tiny_sweep(tmp_path, folder, out="whole"))
    assert "(2 already in" in capsys.readouterr().out
    path = tmp_path / "whole" / "sweep.csv"
    header, first, second = path.read_text().splitlines(keepends=True)
    path.write_text(header + first.rstrip("\r\n") + second + second + second + "conventional,1")
    sweep.main(tiny_sweep(tmp_path, folder, out="whole"))  # rows glued, one twice, one cut short
    captured = capsys.readouterr()
    assert "2 row(s) not written whole" in captured.err and "(1 already in" in captured.out
    lines = path.read_text().splitlines(keepends=True)
    assert lines[:2] == [header, second] and len(lines) == 3  # a whole row as it was written
    for other in (["--max_iters=6"], ["--input_proj=learned"], ["--flips=2"]):
        with pytest.raises(SystemExit):
            sweep.main(tiny_sweep(tmp_path, folder, *other, out="whole"))
        assert "holds runs of another setting" in capsys.readouterr().err

    def interrupt(model):
        raise KeyboardInterrupt
    at_step(monkeypatch, 3, interrupt)  # after the first run's checkpoint at step 2
    with pytest.raises(SystemExit) as stop:
        sweep.main(tiny_sweep(tmp_path, folder))
    run_dir = tmp_path / "sweep" / "runs" / "hourglass_dz256_dh16_L1_lr0.001_seed0"
    assert str(stop.value).startswith(f"interrupted in {run_dir}: its last checkpoint is "
                                      f"{run_dir / 'ckpt.pt'} (step 2); the same command goes on")
    del stop
    gc.collect()  # the run folder's lock goes with the traceback
    monkeypatch.undo()
    rows = sweep.main(tiny_sweep(tmp_path, folder))
    assert f"{run_dir}: going on from its checkpoint" in capsys.readouterr().out
    measured = ("val_loss", "test_psnr_batchmse", "test_ssim", "params_total", "steps")
    assert [[r[k] for k in measured] for r in rows] == [[r[k] for k in measured] for r in whole]
    assert not (tmp_path / "sweep" / "runs").exists()  # each run's folder goes with its row


@pytest.mark.parametrize("text", [
    "\ufeff{rows}",  # a byte-order mark before the sweep's header
    "shape,latent_dim,seed\nhourglass,256,0\n"])  # another program's CSV
def test_a_csv_the_sweep_does_not_recognise_is_left_as_it_is(tmp_path, text):
    path = tmp_path / "sweep" / "sweep.csv"
    path.parent.mkdir()
    rows = (ROOT / "results" / "mlp_fashion_denoise_sweep_seed0.csv").read_text()
    path.write_text(text.replace("{rows}", rows))
    before = path.read_bytes()
    with pytest.raises(SystemExit, match="is not a sweep CSV") as stop:
        sweep.main(tiny_sweep(tmp_path, prepared(tmp_path)))
    assert "\n" not in str(stop.value) and path.read_bytes() == before


def test_a_diverged_run_writes_a_nan_row_and_the_sweep_goes_on(tmp_path, monkeypatch, capsys):
    def poison(model):
        with torch.no_grad():
            next(p for p in model.parameters() if p.requires_grad).fill_(float("nan"))
    at_step(monkeypatch, 2, poison)  # every run's weights are NaN from its step 2 on
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "sweep.csv").write_text("")  # a sweep killed before its first row
    rows = sweep.main(tiny_sweep(tmp_path, prepared(tmp_path)))
    assert [(r["shape"], r["steps"]) for r in rows] == [("hourglass", "2"), ("conventional", "2")]
    assert all(math.isnan(float(r["val_loss"])) for r in rows)
    captured = capsys.readouterr()
    assert captured.out.count("Training diverged") == 2 and "non-finite results" in captured.err


def test_a_busy_csv_or_a_bad_grid_is_one_line(tmp_path, capsys):
    path = tmp_path / "sweep" / "sweep.csv"
    path.parent.mkdir()
    with sweep.sweep_lock(path):  # a sweep in progress
        with pytest.raises(SystemExit):
            sweep.main(tiny_sweep(tmp_path, prepared(tmp_path)))
    assert capsys.readouterr().err == (
        f"error: {path} is in use by another sweep (PID {os.getpid()}): wait for it to finish, "
        f"or use another --out_dir\n")
    assert sweep.explicit_grid(("hourglass:256:16:1", ("conventional", 196, 256, 2))) == [
        ("hourglass", 256, 16, 1), ("conventional", 196, 256, 2)]
    for bad in ("hourglass:256:x:1", ("hourglass", 256, 512, 1)):
        with pytest.raises(ConfigError):
            sweep.explicit_grid((bad,))
    with pytest.raises(SystemExit):
        sweep.main(tiny_sweep(tmp_path, tmp_path, "--shapes="))
    assert "the grid is empty" in capsys.readouterr().err


@pytest.mark.parametrize("config_file", sorted((ROOT / "config").glob("mlp_sweep_*.py")),
                         ids=lambda p: p.name)
def test_every_sweep_config_spans_one_range_for_both_families(config_file):
    defaults = {**train_mlp.DEFAULTS, **sweep.GRID}
    config = parse_overrides([str(config_file)], defaults, types=train_mlp.PROTOCOL_KEYS)
    grid = sweep.explicit_grid(config["shapes"])
    task = get_task(config["task"])
    totals = {family: [param_formula(task.input_dim, d_z, d_h, L, task.output_dim,
                                     config["input_proj"] or None)["total"]
                       for f, d_z, d_h, L in grid if f == family]
              for family in ("hourglass", "conventional")}
    assert len(set(grid)) == len(grid)
    assert max(totals["hourglass"]) <= 1.15 * max(totals["conventional"])
    assert max(totals["conventional"]) <= 1.15 * max(totals["hourglass"])
    assert min(totals["hourglass"]) <= min(totals["conventional"])

