"""experiments/mlp_hourglass_sweep.py and experiments/mlp_hourglass_input_proj.py on tiny grids:
the grid, a resume that skips exactly the runs of the same setting (and refuses another setting),
two seeds run side by side whose CSVs draw one set of fronts with error bars, NaN runs as NaN
rows, a torn last row run again, and the frozen-vs-learned W_in grid over d_z. CPU, offline."""
import csv
import math
import sys

import pytest
from conftest import ROOT, digit_splits, write_prepared

import train_mlp
from configurator import parse_overrides
from mlp_hourglass import param_formula

sys.path.insert(0, str(ROOT / "experiments"))
import mlp_hourglass_fronts as fronts  # noqa: E402
import mlp_hourglass_input_proj as input_proj  # noqa: E402
import mlp_hourglass_sweep as sweep  # noqa: E402


def prepared(tmp_path, **kw):
    return write_prepared(tmp_path / "prepared", digit_splits(n_train=256, n_val=64, n_test=64),
                          **kw)


def tiny_sweep(tmp_path, folder, *extra, out="sweep"):
    return ["--task=mnist_sr", f"--prepared_dir={folder}", "--dtype=float32", "--device=cpu",
            "--batch_size=64", "--max_steps=4", "--eval_interval=2", "--hg_latent=256",
            "--hg_hidden=16", "--hg_blocks=1", "--conv_latent=196", "--conv_hidden=256",
            "--conv_blocks=1", f"--out_dir={tmp_path / out}", *extra]


def test_the_grid_keeps_each_familys_shapes():
    assert sweep.sweep_grid([1024], [64, 2048], [2], [784], [512, 2048], [1]) == [
        ("hourglass", 1024, 64, 2), ("conventional", 784, 2048, 1)]
    lists = parse_overrides(["--lrs=5e-4,1e-3", "--seeds=0", "--conv_hidden=", "--epochs=2.0",
                             "--names=frozen,learned"],
                            {**sweep.GRID, "epochs": 1.0, "names": ("frozen",)})
    assert (lists["lrs"], lists["seeds"], lists["conv_hidden"], lists["epochs"]) == (
        (5e-4, 1e-3), (0,), (), 2.0)
    assert lists["names"] == ("frozen", "learned")


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
    sweep's rows as its own (it used to train nothing and re-plot the old numbers)."""
    folder = prepared(tmp_path)
    sweep.main(tiny_sweep(tmp_path, folder))
    rows = sweep.read_csv(tmp_path / "sweep" / "sweep.csv")
    assert len(rows) == 2
    assert {r["data_source"] for r in rows} == {"synthetic bar digits"}
    assert rows[0]["input_proj"] == "frozen"
    assert {r["max_steps"] for r in rows} == {"4.0"} and {r["n_train"] for r in rows} == {"256.0"}
    capsys.readouterr()
    sweep.main(tiny_sweep(tmp_path, folder))  # the same setting: a real resume
    assert "(2 already in" in capsys.readouterr().out
    for other in (["--max_steps=6"], ["--input_proj=learned"], ["--noise_sigma=0.1"],
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
    assert sweep.run_key(row) != sweep.run_key(dict(row, max_steps="6"))
    assert sweep.run_key(row) != sweep.run_key(dict(row, input_proj="learned"))
    # one number, one key; no step cap is an empty field, as train_mlp.py's old sweep wrote it
    assert sweep.run_key(dict(row, epochs="30")) == sweep.run_key(dict(row, epochs="30.0"))
    assert sweep.canonical(None) == "" and sweep.canonical(0) == "0.0"
    # an older CSV without the setting columns: a clear error, not a silent resume
    old = tmp_path / "old" / "sweep.csv"
    old.parent.mkdir()
    old.write_text("shape,latent_dim,hidden_dim,n_blocks,lr,seed\nhourglass,256,16,1,0.001,0\n")
    with pytest.raises(SystemExit):
        sweep.main(tiny_sweep(tmp_path, folder, out="old"))
    assert "before sweep rows recorded their setting" in capsys.readouterr().err


def test_two_seeds_side_by_side_draw_one_set_of_fronts_with_error_bars(tmp_path):
    folder = prepared(tmp_path)
    sweep.main(tiny_sweep(tmp_path, folder, "--seeds=0", "--lrs=1e-3,2e-3", out="seed0"))
    sweep.main(tiny_sweep(tmp_path, folder, "--seeds=1", "--lrs=1e-3,2e-3", out="seed1"))
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
    sweep.main(tiny_sweep(tmp_path, folder, "--epochs=2", "--max_steps=0", out="other"))
    with pytest.raises(SystemExit, match="different settings"):
        fronts.main([str(paths[0]), str(tmp_path / "other" / "sweep.csv")])


def test_all_nan_validation_writes_a_nan_row_and_the_sweep_goes_on(tmp_path):
    folder = prepared(tmp_path)
    nan_noise = tmp_path / "nan_noise.py"  # (a config file: --key=nan parses only where the
    nan_noise.write_text("noise_sigma = float('nan')\n")  # default is a float, not None)
    # both diverge; it finishes
    sweep.main([str(nan_noise), *tiny_sweep(tmp_path, folder, "--task=mnist_denoise")])
    rows = sweep.read_csv(tmp_path / "sweep" / "sweep.csv")
    assert [r["shape"] for r in rows] == ["hourglass", "conventional"]
    assert all(math.isnan(float(r["test_psnr_batchmse"])) and math.isnan(float(r["val_loss"]))
               for r in rows)
    assert (tmp_path / "sweep" / "fronts.png").exists()


def test_a_torn_last_sweep_row_is_dropped_and_that_run_runs_again(tmp_path, capsys):
    """A half-written last row (a run killed mid-write by an older version, or a full disk) is
    not 'runs of another setting': it is dropped with a warning and its run trains again."""
    folder = prepared(tmp_path)
    sweep.main(tiny_sweep(tmp_path, folder))
    path = tmp_path / "sweep" / "sweep.csv"
    text = path.read_text()
    path.write_text(text[:text.rindex("\n", 0, len(text) - 1) + 1] + "conventional,196,256")
    capsys.readouterr()
    sweep.main(tiny_sweep(tmp_path, folder))
    captured = capsys.readouterr()
    assert "its last row is incomplete" in captured.err and "(1 already in" in captured.out
    assert len(sweep.read_csv(path)) == 2 and not list(path.parent.glob("*.tmp.*"))
    with open(path) as f:  # every row whole: as many fields as the header
        assert all(None not in r.values() for r in csv.DictReader(f))


def test_an_empty_grid_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        sweep.main(tiny_sweep(tmp_path, prepared(tmp_path), "--hg_hidden=", "--conv_hidden="))
    assert "the grid is empty" in capsys.readouterr().err


def test_frozen_vs_learned_w_in_for_one_and_several_latent_widths(tmp_path):
    folder = prepared(tmp_path)
    common = ["--task=mnist_sr", f"--prepared_dir={folder}", "--dtype=float32", "--device=cpu",
              "--batch_size=64", "--max_steps=4", "--eval_interval=2", "--hidden_dim=16",
              "--n_blocks=1"]
    summary = input_proj.main([*common, "--latent_dim=256", f"--out_dir={tmp_path / 'cmp'}"])
    assert summary["frozen"]["params"]["trainable"] == (
        summary["learned"]["params"]["trainable"] - 196 * 256)
    assert (tmp_path / "cmp" / "compare_input_proj.png").exists()

    input_proj.main([*common, "--latent_dims=256,320", f"--out_dir={tmp_path / 'grid'}"])
    with open(tmp_path / "grid" / "compare.csv") as f:
        grid = list(csv.DictReader(f))
    assert [(g["latent_dim"], g["input_proj"]) for g in grid] == [
        ("256", "frozen"), ("256", "learned"), ("320", "frozen"), ("320", "learned")]
    for g in grid:  # W_in counts in the total either way, and is trainable only when learned
        w_in = 196 * int(g["latent_dim"])
        assert int(g["params_total"]) - int(g["params_trainable"]) == (
            w_in if g["input_proj"] == "frozen" else 0)
    assert (tmp_path / "grid" / "compare_input_proj.png").exists()


def test_an_explicit_grid_from_a_config_file_runs_in_its_order(tmp_path, capsys):
    folder = prepared(tmp_path)
    config = tmp_path / "grid.py"
    config.write_text('shapes = (("conventional", 196, 256, 1), ("hourglass", 256, 16, 1))\n'
                      'lrs = (1e-3,)\n')
    sweep.main([str(config), *tiny_sweep(tmp_path, folder)])
    rows = sweep.read_csv(tmp_path / "sweep" / "sweep.csv")
    assert [(r["shape"], r["latent_dim"]) for r in rows] == [("conventional", "196"),
                                                             ("hourglass", "256")]
    config.write_text('shapes = (("hourglass", 256, 512, 1),)\n')  # d_h > d_z: not a hourglass
    with pytest.raises(SystemExit):
        sweep.main([str(config), *tiny_sweep(tmp_path, folder)])
    assert "d_h < d_z" in capsys.readouterr().err


@pytest.mark.parametrize("config_file", sorted((ROOT / "config").glob("mlp_sweep_*.py")),
                         ids=lambda p: p.name)
def test_every_sweep_config_file_loads_and_spans_one_range_for_both_families(config_file):
    defaults = {**train_mlp.DEFAULTS, **sweep.GRID, "shapes": (), "verbose": False}
    config = parse_overrides([str(config_file), "--seeds=0"], defaults,
                             types=train_mlp.PROTOCOL_KEYS)
    grid = sweep.explicit_grid(config["shapes"])
    assert len(set(grid)) == len(grid) and config["seeds"] == (0,)
    d_x = 784  # the 28x28 tasks
    totals = {family: [param_formula(d_x, d_z, d_h, L, d_x)["total"]
                       for f, d_z, d_h, L in grid if f == family]
              for family in ("hourglass", "conventional")}
    # the same range: neither family's largest shape is more than 10% beyond the other's
    assert max(totals["hourglass"]) <= 1.1 * max(totals["conventional"])
    assert max(totals["conventional"]) <= 1.1 * max(totals["hourglass"])
    assert min(totals["hourglass"]) <= min(totals["conventional"])
