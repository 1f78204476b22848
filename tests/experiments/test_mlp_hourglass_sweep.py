"""experiments/mlp_hourglass_sweep.py and experiments/mlp_hourglass_input_proj.py on tiny grids:
the grid, a resume that skips exactly the runs of the same setting (and refuses another setting),
a sweep stopped inside a run going on inside it, two seeds run side by side whose CSVs draw one
set of fronts with error bars, diverged runs as NaN rows, rows not written whole (torn, glued) run
again, a run written twice counted once, one sweep at a time on a CSV, and the frozen-vs-learned
W_in grid over d_z (the same command again goes on). CPU, offline."""
import csv
import gc
import math
import os
import re
import sys

import pytest
from conftest import ROOT, at_step, digit_splits, write_prepared

import torch
from mlp_hourglass import param_formula
from shapelab.configurator import ConfigError, parse_overrides
from shapelab.image_tasks import get_task
import train_mlp

sys.path.insert(0, str(ROOT / "experiments"))
import mlp_hourglass_fronts as fronts  # noqa: E402
import mlp_hourglass_input_proj as input_proj  # noqa: E402
import mlp_hourglass_sweep as sweep  # noqa: E402


def prepared(tmp_path, **kw):
    return write_prepared(tmp_path / "prepared", digit_splits(n_train=256, n_val=64, n_test=64),
                          **kw)


def tiny_sweep(tmp_path, folder, *extra, out="sweep"):
    return ["--task=mnist_sr", f"--prepared_dir={folder}", "--dtype=float32", "--device=cpu",
            "--batch_size=64", "--max_iters=4", "--eval_interval=2", "--hg_latent=256",
            "--hg_hidden=16", "--hg_blocks=1", "--conv_latent=196", "--conv_hidden=256",
            "--conv_blocks=1", f"--out_dir={tmp_path / out}", *extra]


def test_the_grid_keeps_each_familys_shapes():
    assert sweep.sweep_grid([1024], [64, 2048], [2], [784], [512, 2048], [1]) == [
        ("hourglass", 1024, 64, 2), ("conventional", 784, 2048, 1)]
    lists = parse_overrides(["--learning_rates=5e-4,1e-3", "--seeds=0", "--conv_hidden=",
                             "--epochs=2.0", "--names=frozen_random,learned"],
                            {**sweep.GRID, "epochs": 1.0, "names": ("frozen_random",)})
    assert (lists["learning_rates"], lists["seeds"], lists["conv_hidden"], lists["epochs"]) == (
        (5e-4, 1e-3), (0,), (), 2.0)
    assert lists["names"] == ("frozen_random", "learned")


def test_a_sweep_writes_rows_and_fronts_and_resumes(tmp_path, capsys):
    folder = prepared(tmp_path)
    args = tiny_sweep(tmp_path, folder, "--hg_hidden=16,32")
    sweep.main(args)
    rows = sweep.read_csv(tmp_path / "sweep" / "sweep.csv")
    assert [(r["shape"], r["hidden_dim"]) for r in rows] == [
        ("hourglass", "16"), ("hourglass", "32"), ("conventional", "256")]
    assert {"fronts.md", "fronts.png"} <= {p.name for p in (tmp_path / "sweep").iterdir()}
    capsys.readouterr()
    sweep.main(args)  # resume: every run is already in the CSV
    assert "(3 already in" in capsys.readouterr().out
    assert len(sweep.read_csv(tmp_path / "sweep" / "sweep.csv")) == 3


def test_sweep_resume_keys_on_the_full_setting(tmp_path, capsys):
    """A second sweep with other steps, another W_in or other data must not count the first
    sweep's rows as its own (it would train nothing and plot the first sweep's numbers again)."""
    folder = prepared(tmp_path)
    sweep.main(tiny_sweep(tmp_path, folder))
    rows = sweep.read_csv(tmp_path / "sweep" / "sweep.csv")
    assert len(rows) == 2
    assert {r["data_source"] for r in rows} == {"synthetic bar digits"}
    # each shape's own input: the hourglass's frozen random lift, the image itself (d_z = d_x)
    assert [(r["shape"], r["input_proj"]) for r in rows] == [("hourglass", "frozen_random"),
                                                            ("conventional", "direct")]
    assert {r["params_total"] for r in rows if r["shape"] == "conventional"} == {
        str(param_formula(196, 196, 256, 1, 784)["total"])}
    assert all(float(r["baseline_ssim"]) > 0 and float(r["baseline_psnr_per_image"]) > 0
               for r in rows)  # the trivial baseline's scores, in every row
    assert {r["max_iters"] for r in rows} == {"4.0"} and {r["n_train"] for r in rows} == {"256.0"}
    capsys.readouterr()
    sweep.main(tiny_sweep(tmp_path, folder))  # the same setting: a real resume
    assert "(2 already in" in capsys.readouterr().out
    for other in (["--max_iters=6"], ["--input_proj=learned"], ["--noise_sigma=0.1"],
                  ["--flips=2"], ["--max_train_images=128"]):
        with pytest.raises(SystemExit):
            sweep.main(tiny_sweep(tmp_path, folder, *other))
        assert "holds runs of another setting" in capsys.readouterr().err
    prepared(tmp_path, source="other digits")
    with pytest.raises(SystemExit):
        sweep.main(tiny_sweep(tmp_path, folder))
    assert "data_source: other digits vs synthetic bar digits" in capsys.readouterr().err
    assert len(sweep.read_csv(tmp_path / "sweep" / "sweep.csv")) == 2  # nothing mixed in
    # the key itself: the same shape / lr / seed under another setting is another run
    row = dict(rows[0])
    assert sweep.run_key(row) != sweep.run_key(dict(row, max_iters="6"))
    assert sweep.run_key(row) != sweep.run_key(dict(row, input_proj="learned"))
    capsys.readouterr()
    with pytest.raises(SystemExit):  # the conventional rows took the image itself
        sweep.main(tiny_sweep(tmp_path, folder, "--input_proj=frozen_random"))
    assert ("input_proj: conventional rows took direct, this sweep gives them frozen_random"
            in capsys.readouterr().err)
    # one number, one key; no step cap is an empty field, as a CSV may hold it
    assert sweep.run_key(dict(row, epochs="30")) == sweep.run_key(dict(row, epochs="30.0"))
    assert fronts.canonical(None) == "" and fronts.canonical(0) == "0.0"
    # a CSV without the setting columns: a clear error, not a silent resume
    old = tmp_path / "old" / "sweep.csv"
    old.parent.mkdir()
    old.write_text("shape,latent_dim,hidden_dim,n_blocks,lr,seed\nhourglass,256,16,1,0.001,0\n")
    with pytest.raises(SystemExit):
        sweep.main(tiny_sweep(tmp_path, folder, out="old"))
    assert "has no columns for the setting of its rows" in capsys.readouterr().err


def test_a_csv_resumes_from_another_checkout_and_reads_in_the_sweeps_words(tmp_path, capsys):
    """data_source holds no machine path: a sweep whose data was prepared under one checkout's
    path resumes under another's. A CSV with fewer columns, this machine's absolute cache path
    and no clamp_sr_input (an SR input clamped) is read in the sweep's words, resumed, and
    rewritten in the sweep's columns."""
    folder = prepared(tmp_path, source="digits (/machine_a/repo/data/mnist/cache/digits)")
    args = tiny_sweep(tmp_path, folder, "--conv_hidden=", "--input_proj=frozen_random")
    [row] = sweep.main(args)
    assert row["data_source"] == "digits (data/mnist/cache/digits)"
    prepared(tmp_path, source="digits (/machine_b/elsewhere/data/mnist/cache/digits)")
    capsys.readouterr()
    sweep.main(args)
    assert "(1 already in" in capsys.readouterr().out
    path = tmp_path / "sweep" / "sweep.csv"
    old_fields = [f for f in sweep.SWEEP_FIELDS if f not in (
        "clamp_sr_input", "baseline_psnr_per_image", "baseline_ssim")]
    with open(path, "w", newline="") as f:  # as the first full-size sweep wrote its rows
        writer = csv.DictWriter(f, fieldnames=old_fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerow(dict(row, data_source=(
            "digits (/machine_a/repo/data/mnist/cache/digits)")))
    with pytest.raises(SystemExit):  # an SR row of that time had its input clamped
        sweep.main(args)
    assert "clamp_sr_input: 0.0 vs 1.0" in capsys.readouterr().err
    sweep.main([*args, "--clamp_sr_input=True"])
    assert "(1 already in" in capsys.readouterr().out
    with open(path) as f:
        assert next(csv.reader(f)) == sweep.SWEEP_FIELDS
    [again] = sweep.read_csv(path)
    assert (again["input_proj"], again["data_source"]) == ("frozen_random",
                                                          "digits (data/mnist/cache/digits)")


def test_no_committed_csv_holds_a_machine_path():
    """The committed results say what data they are without this machine's paths."""
    csvs = sorted((ROOT / "results").rglob("*.csv"))
    assert csvs
    for path in csvs:
        with open(path, newline="") as f:
            for row in csv.reader(f):
                for cell in row:
                    assert train_mlp.portable_source(cell) == cell, (path, cell)
                    assert not re.search(r"(^|[\s(])(/|[A-Za-z]:\\)", cell), (path, cell)


def test_two_seeds_side_by_side_draw_one_set_of_fronts_with_error_bars(tmp_path):
    folder = prepared(tmp_path)
    sweep.main(tiny_sweep(tmp_path, folder, "--seeds=0", "--learning_rates=1e-3,2e-3", out="seed0"))
    sweep.main(tiny_sweep(tmp_path, folder, "--seeds=1", "--learning_rates=1e-3,2e-3", out="seed1"))
    paths = [tmp_path / "seed0" / "sweep.csv", tmp_path / "seed1" / "sweep.csv"]
    fronts.main([str(p) for p in paths])
    rows = [r for p in paths for r in fronts.read_rows(p)]
    entries = fronts.shape_results(rows)
    assert len(entries) == 2 and all(e["seeds"] == 2 for e in entries)  # both seeds, one lr each
    for e in entries:  # min <= mean <= max over the two seeds
        low, mean, high = e["test_psnr_batchmse"][1], e["test_psnr_batchmse"][0], \
            e["test_psnr_batchmse"][2]
        assert low <= mean <= high and low < high
    assert "(min-max)" in (tmp_path / "seed0" / "fronts.md").read_text()
    # another setting's CSV is not drawn into the same fronts
    sweep.main(tiny_sweep(tmp_path, folder, "--epochs=2", "--max_iters=0", out="other"))
    with pytest.raises(SystemExit, match="different settings"):
        fronts.main([str(paths[0]), str(tmp_path / "other" / "sweep.csv")])


def test_a_sweep_stopped_inside_a_run_goes_on_inside_it(tmp_path, monkeypatch, capsys):
    """Ctrl-C or SIGTERM (the command line makes it Ctrl-C) in the first run's step 3, after its
    checkpoint at step 2: one line; the same command again goes on from that checkpoint and ends
    with the rows of a sweep never stopped."""
    folder = prepared(tmp_path)
    whole = sweep.main(tiny_sweep(tmp_path, folder, out="whole"))

    def interrupt(model):
        raise KeyboardInterrupt
    at_step(monkeypatch, 3, interrupt)
    with pytest.raises(SystemExit) as stop:
        sweep.main(tiny_sweep(tmp_path, folder))
    run_dir = tmp_path / "sweep" / "runs" / "hourglass_dz256_dh16_L1_lr0.001_seed0"
    assert str(stop.value).startswith(f"interrupted in {run_dir}: its last checkpoint is "
                                      f"{run_dir / 'ckpt.pt'} (step 2); the same command goes on")
    assert not list(run_dir.glob("*.tmp*")) and not (tmp_path / "sweep" / "sweep.csv").exists()
    del stop
    gc.collect()  # (the run folder's lock goes with the traceback)
    monkeypatch.undo()
    capsys.readouterr()
    rows = sweep.main(tiny_sweep(tmp_path, folder))
    assert f"{run_dir}: going on from its checkpoint" in capsys.readouterr().out
    measured = ("val_loss", "test_psnr_batchmse", "test_ssim", "params_total", "steps")
    assert [[r[k] for k in measured] for r in rows] == [[r[k] for k in measured] for r in whole]
    assert not (tmp_path / "sweep" / "runs").exists()  # each run's folder goes with its row


def test_a_diverged_run_writes_a_nan_row_and_the_sweep_goes_on(tmp_path, monkeypatch, capsys):
    folder = prepared(tmp_path)

    def poison(model):
        with torch.no_grad():
            next(p for p in model.parameters() if p.requires_grad).fill_(float("nan"))
    at_step(monkeypatch, 2, poison)  # every run's weights are NaN from its step 2 on
    sweep.main(tiny_sweep(tmp_path, folder))
    rows = sweep.read_csv(tmp_path / "sweep" / "sweep.csv")
    assert [(r["shape"], r["steps"]) for r in rows] == [("hourglass", "2"), ("conventional", "2")]
    assert all(math.isnan(float(r["test_psnr_batchmse"])) and math.isnan(float(r["val_loss"]))
               for r in rows)
    assert capsys.readouterr().out.count("Training diverged") == 2
    assert (tmp_path / "sweep" / "fronts.png").exists()


def test_rows_not_written_whole_run_again_and_a_run_written_twice_counts_once(tmp_path, capsys):
    """A row torn exactly at its end had the next row glued onto it (`...,0.7mnist_sr,...`), and
    a last row cut short: both dropped with a warning, their runs run again (the fronts drawn
    meanwhile never crash); a row two sweeps both wrote counts once."""
    folder = prepared(tmp_path)
    args = tiny_sweep(tmp_path, folder, "--hg_hidden=16,32")
    sweep.main(args)
    path = tmp_path / "sweep" / "sweep.csv"
    header, first, second, third = path.read_text().splitlines(keepends=True)
    path.write_text(header + first.rstrip("\n") + second + third)  # glued: 1 and 2
    capsys.readouterr()
    fronts.main([str(path)])  # drawn from the one whole row
    assert "1 row(s) not written whole" in capsys.readouterr().err
    sweep.main(args)
    captured = capsys.readouterr()
    assert "1 row(s) not written whole" in captured.err and "(1 already in" in captured.out
    text = path.read_text()
    path.write_text(text[:text.rindex("\n", 0, len(text) - 1) + 1] + "conventional,196,256")
    sweep.main(args)  # a last row cut short
    captured = capsys.readouterr()
    assert "1 row(s) not written whole" in captured.err and "(2 already in" in captured.out
    rows = sweep.read_csv(path)
    assert sorted((r["shape"], r["hidden_dim"]) for r in rows) == [
        ("conventional", "256"), ("hourglass", "16"), ("hourglass", "32")]
    with open(path) as f:  # every row whole: as many fields as the header
        assert all(None not in r.values() and None not in r for r in csv.DictReader(f))
    with open(path, "a") as f:  # the row of a run two identical sweeps both trained
        f.write(path.read_text().splitlines(keepends=True)[1])
    assert len(fronts.read_rows(path)) == 3 and "repeat a run" in capsys.readouterr().err
    sweep.main(args)
    captured = capsys.readouterr()
    assert "(3 already in" in captured.out and "repeat a run" in captured.err
    assert len(path.read_text().splitlines()) == 4 and not list(path.parent.glob("*.tmp.*"))


def test_two_sweeps_on_one_csv_the_second_refuses_in_one_line(tmp_path, capsys):
    folder = prepared(tmp_path)
    path = tmp_path / "sweep" / "sweep.csv"
    path.parent.mkdir()
    with sweep.sweep_lock(str(path)):  # a sweep in progress
        with pytest.raises(SystemExit):
            sweep.main(tiny_sweep(tmp_path, folder))
    err = capsys.readouterr().err
    assert err == (f"error: {path} is in use by another sweep (PID {os.getpid()}): wait for it to "
                   f"finish, or use another --out_dir\n")
    assert not path.exists()


def test_an_empty_grid_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        sweep.main(tiny_sweep(tmp_path, prepared(tmp_path), "--hg_hidden=", "--conv_hidden="))
    assert "the grid is empty" in capsys.readouterr().err


def test_frozen_vs_learned_w_in_for_one_and_several_latent_widths(tmp_path, capsys):
    folder = prepared(tmp_path)
    common = ["--task=mnist_sr", f"--prepared_dir={folder}", "--dtype=float32", "--device=cpu",
              "--batch_size=64", "--max_iters=4", "--eval_interval=2", "--hidden_dim=16",
              "--n_blocks=1"]
    summary = input_proj.main([*common, "--latent_dim=256", f"--out_dir={tmp_path / 'cmp'}"])
    assert summary["frozen_random"]["params"]["trainable"] == (
        summary["learned"]["params"]["trainable"] - 196 * 256)
    assert (tmp_path / "cmp" / "compare_input_proj.png").exists()
    again = input_proj.main([*common, "--latent_dim=256", f"--out_dir={tmp_path / 'cmp'}"])
    assert again["frozen_random"]["test"] == summary["frozen_random"]["test"]  # (no training)
    assert "nothing to train" in capsys.readouterr().out

    input_proj.main([*common, "--latent_dims=256,320", "--seeds=0,1",
                     "--variants=frozen_random,learned",
                     f"--out_dir={tmp_path / 'grid'}"])
    with open(tmp_path / "grid" / "compare.csv") as f:
        grid = list(csv.DictReader(f))
    assert [(g["latent_dim"], g["input_proj"], g["seed"]) for g in grid] == [
        (d_z, v, seed) for seed in "01" for d_z in ("256", "320")
        for v in ("frozen_random", "learned")]
    for g in grid:  # W_in counts in the total either way, and is trainable only when learned
        w_in = 196 * int(g["latent_dim"])
        assert int(g["params_total"]) - int(g["params_trainable"]) == (
            w_in if g["input_proj"] == "frozen_random" else 0)
        assert g["baseline"] == "bicubic upsampling" and 0 < float(g["baseline_ssim"]) < 1
    assert (tmp_path / "grid" / "compare_input_proj.png").exists()
    # results written into results/ keep their runs (checkpoints) out of it
    assert input_proj.runs_folder(str(ROOT / "results" / "mlp_x"), "") == os.path.join("out",
                                                                                    "mlp_x")
    assert input_proj.runs_folder(str(tmp_path), "") == str(tmp_path)


def test_an_explicit_grid_from_a_config_file_runs_in_its_order(tmp_path, capsys):
    folder = prepared(tmp_path)
    config = tmp_path / "grid.py"
    config.write_text('shapes = (("conventional", 196, 256, 1), ("hourglass", 256, 16, 1))\n'
                      'learning_rates = (1e-3,)\n')
    sweep.main([str(config), *tiny_sweep(tmp_path, folder)])
    rows = sweep.read_csv(tmp_path / "sweep" / "sweep.csv")
    assert [(r["shape"], r["latent_dim"]) for r in rows] == [("conventional", "196"),
                                                             ("hourglass", "256")]
    config.write_text('shapes = (("hourglass", 256, 512, 1),)\n')  # d_h > d_z: not a hourglass
    with pytest.raises(SystemExit):
        sweep.main([str(config), *tiny_sweep(tmp_path, folder)])
    assert "d_h < d_z" in capsys.readouterr().err
    # the command line's form (what mlp_hourglass_fronts.py prints for the lrs at an edge)
    assert sweep.explicit_grid(("hourglass:256:16:1", "conventional:196:256:2")) == [
        ("hourglass", 256, 16, 1), ("conventional", 196, 256, 2)]
    for bad in ("hourglass:256:x:1", "hourglass:256:16"):
        with pytest.raises(ConfigError, match="shapes: .*hourglass:1024:64:2|whole numbers"):
            sweep.explicit_grid((bad,))


@pytest.mark.parametrize("config_file", sorted((ROOT / "config").glob("mlp_sweep_*.py")),
                         ids=lambda p: p.name)
def test_every_sweep_config_file_loads_and_spans_one_range_for_both_families(config_file):
    defaults = {**train_mlp.DEFAULTS, **sweep.GRID, "shapes": (), "verbose": False}
    config = parse_overrides([str(config_file), "--seeds=0"], defaults,
                             types=train_mlp.PROTOCOL_KEYS)
    grid = sweep.explicit_grid(config["shapes"])
    assert len(set(grid)) == len(grid) and config["seeds"] == (0,)
    task = get_task(config["task"])
    d_x, d_out = task.input_dim, task.output_dim
    totals = {family: [param_formula(d_x, d_z, d_h, L, d_out, config["input_proj"] or None)[
                       "total"] for f, d_z, d_h, L in grid if f == family]
              for family in ("hourglass", "conventional")}
    # the same range: neither family's largest shape is more than 15% beyond the other's (the
    # conventional shapes without a W_in are 0.61M smaller than with the square one)
    assert max(totals["hourglass"]) <= 1.15 * max(totals["conventional"])
    assert max(totals["conventional"]) <= 1.15 * max(totals["hourglass"])
    assert min(totals["hourglass"]) <= min(totals["conventional"])
    if task.dataset_kind == "28x28":  # (ImageNet-32's: the paper's grid, 1e-4 to 7e-4)
        # (the first one: frozen_random)
        assert 2e-3 in config["learning_rates"] or config["input_proj"] == "frozen_random"
