"""Tests for train_mlp.py: the frozen W_in stays out of the optimizer and bit-identical, config
checks, a tiny denoiser that must beat the noisy input, the checkpoint round trip, generative
classification accuracy, the Pareto front, reading prepared data (and preparing it through the
data script when it is missing), the command line: train, eval, sweep (with resume), pareto,
compare_input_proj, prepare; and that every number is the run's own: sweep rows keyed on their
full setting, NaN runs as NaN rows, eval refusing another data source. CPU, offline, tiny models."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import train_mlp as T  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_mlp_data import idx_fixture  # noqa: E402  (IDX files in the official format)


# -------------------------------------------------------------- synthetic data (digit-like images)


def bar_templates(seed=123, size=28):
    """Ten 'digit' templates (uint8): two or three bright bars each on a black background."""
    rng = np.random.default_rng(seed)
    tmpl = np.zeros((10, 1, size, size), dtype=np.uint8)
    for k in range(10):
        for _ in range(rng.integers(2, 4)):
            r, c = rng.integers(4, size - 8, size=2)
            if rng.random() < 0.5:
                tmpl[k, 0, r:r + 3, c:c + rng.integers(6, 14)] = 255
            else:
                tmpl[k, 0, r:r + rng.integers(6, 14), c:c + 3] = 255
    return tmpl


def digit_like(n, seed):
    """n images: the template of a random class at a random brightness in [0.6, 1]."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=n)
    scale = rng.uniform(0.6, 1.0, size=(n, 1, 1, 1))
    imgs = (bar_templates()[labels] * scale).round().astype(np.uint8)
    return torch.from_numpy(imgs), torch.from_numpy(labels).long()


def digit_splits(n_train=768, n_val=128, n_test=256):
    return T.ImageSplits("synthetic bar digits", *digit_like(n_train, 0), *digit_like(n_val, 1),
                         *digit_like(n_test, 2))


def tiny_config(tmp_path, **kw):
    base = dict(
        task="mnist_denoise",
        latent_dim=1024,
        hidden_dim=64,
        n_blocks=2,
        batch_size=64,
        lr=1e-3,
        max_steps=8,
        eval_interval=4,
        dtype="float32",
        device="cpu",
        out_dir=str(tmp_path),
        save_checkpoint=False,
        save_samples=False,
        quiet=True,
    )
    base.update(kw)
    return T.TrainConfig(**base)


# ---------------------------------------------------------------- frozen W_in

def test_frozen_input_projection_not_in_optimizer_and_unchanged(tmp_path):
    cfg = T.resolve_config(tiny_config(tmp_path))
    torch.manual_seed(cfg.seed)
    initial = T.model_from_config(cfg).lift.weight.detach().clone()

    model = T.model_from_config(cfg)
    optimizer = T.make_optimizer(model, cfg)
    in_opt = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert id(model.lift.weight) not in in_opt
    assert all(id(p) in in_opt for n, p in model.named_parameters() if not n.startswith("lift"))

    res = T.train(cfg, digit_splits())
    trained = res["model"]
    assert torch.equal(trained.lift.weight, initial)            # bit-identical after 8 AdamW steps
    assert not torch.equal(trained.out_proj.weight, T.model_from_config(cfg).out_proj.weight)

    # the same run with a learned W_in does move it (so the check above can fail)
    res_learned = T.train(tiny_config(tmp_path, input_proj="learned"), digit_splits())
    assert not torch.equal(res_learned["model"].lift.weight, initial)


# ---------------------------------------------------------------- training end to end

def test_tiny_denoiser_beats_noisy_input_and_checkpoint_roundtrip(tmp_path):
    cfg = tiny_config(tmp_path, max_steps=100, eval_interval=50, save_checkpoint=True)
    res = T.train(cfg, digit_splits())
    gain = res["test"]["psnr_batchmse"] - res["baseline"]["psnr_batchmse"]
    assert res["baseline_name"] == "noisy input"
    assert gain > 3.0, (res["test"], res["baseline"])
    assert res["test"]["ssim"] > res["baseline"]["ssim"]

    model, loaded_cfg, ckpt = T.load_checkpoint(str(tmp_path / "ckpt.pt"))
    assert loaded_cfg.latent_dim == 1024 and ckpt["step"] == res["best_step"]
    x = torch.rand(4, 784)
    model.eval()
    res["model"].eval()
    assert torch.equal(model(x), res["model"](x))
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_generative_classification_reports_accuracy(tmp_path):
    res = T.train(
        tiny_config(tmp_path, task="mnist_classify", max_steps=120, eval_interval=30),
        digit_splits(),
    )
    # ten well-separated classes
    assert res["test"]["accuracy"] > 0.9 and "ssim" in res["test"]
    assert res["test"]["psnr_batchmse"] > res["baseline"]["psnr_batchmse"]


def test_pareto_front():
    pts = [(10, 20.0), (5, 18.0), (20, 19.0), (30, 25.0), (5, 17.0)]
    assert T.pareto_front(pts) == [(5, 18.0), (10, 20.0), (30, 25.0)]


def test_config_checks_and_sweep_grid():
    with pytest.raises(ValueError, match="flip augmentation"):
        T.resolve_config(T.TrainConfig(task="mnist_classify", flips=4))
    with pytest.raises(ValueError, match="d_h < d_z"):
        T.resolve_config(T.TrainConfig(task="mnist_denoise", latent_dim=512, hidden_dim=1024))
    cfg = T.resolve_config(T.TrainConfig(task="imagenet32_sr", device="cpu"))
    assert (cfg.latent_dim, cfg.hidden_dim, cfg.n_blocks, cfg.flips, cfg.batch_size) == (
        3546,
        270,
        5,
        4,
        512,
    )
    assert T.sweep_grid([1024], [64, 2048], [2], [784], [512, 2048], [1]) == [
        ("hourglass", 1024, 64, 2), ("conventional", 784, 2048, 1)]


# ---------------------------------------------------------------- prepared data

def write_prepared(folder, splits, source="synthetic bar digits", data_dir=None):
    """A prepared folder in the format of data/mnist/prepare.py: {split}.npz + meta.json."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("train", "val", "test"):
        images, labels = getattr(splits, name), getattr(splits, name + "_labels")
        np.savez(folder / f"{name}.npz", images=images.numpy(), labels=labels.numpy())
    (folder / "meta.json").write_text(
        json.dumps(
            {
                "dataset": "mnist",
                "source": source,
                "data_dir": data_dir,
                "image_shape": list(splits.train.shape[1:]),
                "splits": {
                    "train": len(splits.train),
                    "val": len(splits.val),
                    "test": len(splits.test),
                },
            }
        )
    )
    return folder


def test_load_data_reads_prepared_folder_and_checks_the_task(tmp_path):
    splits = digit_splits()
    folder = write_prepared(tmp_path / "prepared", splits)
    data = T.load_data(T.get_task("mnist_sr"), prepared_dir=str(folder), max_train_images=100)
    assert data.source == "synthetic bar digits" and len(data.train) == 100
    assert torch.equal(data.test, splits.test) and data.val_labels.dtype == torch.int64
    with pytest.raises(ValueError, match="needs --dataset=imagenet32"):
        T.load_data(T.get_task("imagenet32_denoise"), dataset="mnist", prepared_dir=str(folder))
    with pytest.raises(ValueError, match="needs --dataset=mnist"):
        T.load_data(T.get_task("mnist_denoise"), dataset="imagenet32", prepared_dir=str(folder))
    with pytest.raises(ValueError, match="needs \\(3, 32, 32\\)"):
        T.load_data(T.get_task("imagenet32_denoise"), prepared_dir=str(folder))


def test_load_data_prepares_a_missing_folder_with_the_data_script(tmp_path, capfd):
    idx_fixture(tmp_path / "raw_a", seed=0)
    idx_fixture(tmp_path / "raw_b", seed=1)
    folder = tmp_path / "prepared"
    task = T.get_task("mnist_denoise")
    a = T.load_data(task, "fashion_mnist", str(tmp_path / "raw_a"), prepared_dir=str(folder))
    assert "preparing" in capfd.readouterr().out and "local IDX files in" in a.source
    assert a.train.shape == (100, 1, 28, 28) and len(a.test) == 30
    again = T.load_data(task, "fashion_mnist", str(tmp_path / "raw_a"), prepared_dir=str(folder))
    # reused
    assert "preparing" not in capfd.readouterr().out and torch.equal(again.train, a.train)
    b = T.load_data(task, "fashion_mnist", str(tmp_path / "raw_b"), prepared_dir=str(folder))
    assert "preparing it again" in capfd.readouterr().out and not torch.equal(b.test, a.test)
    assert json.loads((folder / "meta.json").read_text())["data_dir"] == str(
        (tmp_path / "raw_b").resolve()
    )
    # where data/mnist/prepare.py writes
    assert T.PREPARED_DIRS["mnist"] == ROOT / "data" / "mnist"
    assert T.PREPARED_DIRS["fashion_mnist"] == ROOT / "data" / "mnist" / "fashion_mnist"


def test_a_failing_data_script_is_a_clear_error(tmp_path, monkeypatch):
    failing = tmp_path / "prepare.py"
    failing.write_text("import sys\nsys.exit('error: no data here')\n")
    monkeypatch.setitem(T.PREPARE_SCRIPTS, "imagenet32", failing)
    with pytest.raises(ValueError, match="preparing imagenet32 failed"):
        T.load_data(T.get_task("imagenet32_sr"), prepared_dir=str(tmp_path / "none"))
    assert not (tmp_path / "none").exists()


# ---------------------------------------------------------------- the command line

def test_cli_train_eval_sweep_resume_pareto_compare(tmp_path, capsys):
    folder = str(
        write_prepared(tmp_path / "prepared", digit_splits(n_train=256, n_val=64, n_test=64))
    )
    tiny = [
        "--task=mnist_sr",
        f"--prepared_dir={folder}",
        "--dtype=float32",
        "--device=cpu",
        "--batch_size=64",
        "--max_steps=4",
        "--eval_interval=2",
    ]
    T.main(
        [
            "train",
            *tiny,
            "--latent_dim=256",
            "--hidden_dim=16",
            "--n_blocks=2",
            f"--out_dir={tmp_path / 'run'}",
        ]
    )
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["data"] == "synthetic bar digits" and metrics["steps"] == 4
    assert {"ckpt.pt", "history.csv", "samples.png"} <= set(os.listdir(tmp_path / "run"))
    capsys.readouterr()
    T.main(["eval", f"--ckpt={tmp_path / 'run' / 'ckpt.pt'}", "--device=cpu"])
    out = capsys.readouterr().out
    # after the "data: ..." line
    evaluated = json.loads(out[out.index("{"):])
    assert evaluated["test"]["psnr_batchmse"] == pytest.approx(
        metrics["test"]["psnr_batchmse"], abs=1e-9
    )

    sweep = [
        "sweep",
        *tiny,
        "--hg_latent=256",
        "--hg_hidden=16,32",
        "--hg_blocks=1",
        "--conv_latent=196",
        "--conv_hidden=256",
        "--conv_blocks=1",
        f"--out_dir={tmp_path / 'sweep'}",
    ]
    T.main(sweep)
    rows = T.read_csv(tmp_path / "sweep" / "sweep.csv")
    assert [(r["shape"], r["hidden_dim"]) for r in rows] == [
        ("hourglass", "16"),
        ("hourglass", "32"),
        ("conventional", "256"),
    ]
    assert {"pareto.csv", "pareto.png", "pareto_trainable.png"} <= set(
        os.listdir(tmp_path / "sweep")
    )
    capsys.readouterr()
    # resume: every run is already in the CSV
    T.main(sweep)
    assert "(3 already in" in capsys.readouterr().out
    assert len(T.read_csv(tmp_path / "sweep" / "sweep.csv")) == 3
    T.main(
        [
            "pareto",
            str(tmp_path / "sweep" / "sweep.csv"),
            "--params=trainable",
            f"--out={tmp_path / 'p.png'}",
        ]
    )
    assert (tmp_path / "p.png").stat().st_size > 0

    T.main(["compare_input_proj", *tiny, "--latent_dim=256", "--hidden_dim=16", "--n_blocks=1",
            f"--out_dir={tmp_path / 'cmp'}"])
    summary = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert (
        summary["frozen"]["params"]["trainable"]
        == summary["learned"]["params"]["trainable"] - 196 * 256
    )
    assert (tmp_path / "cmp" / "compare_input_proj.png").exists()

    with pytest.raises(SystemExit, match="d_h < d_z"):
        T.main(["train", *tiny, "--latent_dim=256", "--hidden_dim=512"])


def test_cli_prepare_runs_the_data_script(tmp_path):
    idx_fixture(tmp_path / "raw")
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "train_mlp.py"),
            "prepare",
            "--dataset=fashion_mnist",
            f"--data_dir={tmp_path / 'raw'}",
            f"--prepared_dir={tmp_path / 'out'}",
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "source: fashion_mnist from local IDX files" in run.stdout
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["requested"] == "fashion_mnist"


# ---------------------------------------------------------------- every number is the run's own

def tiny_sweep(tmp_path, folder, *extra):
    return [
        "sweep",
        "--task=mnist_sr",
        f"--prepared_dir={folder}",
        "--dtype=float32",
        "--device=cpu",
        "--batch_size=64",
        "--max_steps=4",
        "--eval_interval=2",
        "--hg_latent=256",
        "--hg_hidden=16",
        "--hg_blocks=1",
        "--conv_latent=196",
        "--conv_hidden=256",
        "--conv_blocks=1",
        f"--out_dir={tmp_path / 'sweep'}",
        *extra,
    ]


def test_sweep_resume_keys_on_the_full_setting(tmp_path, capsys):
    """A second sweep with other steps, another W_in or other data must not count the first
    sweep's rows as its own (it used to train nothing and re-plot the old numbers)."""
    folder = write_prepared(tmp_path / "prepared", digit_splits(n_train=256, n_val=64, n_test=64))
    T.main(tiny_sweep(tmp_path, folder))
    rows = T.read_csv(tmp_path / "sweep" / "sweep.csv")
    assert len(rows) == 2
    assert {r["data_source"] for r in rows} == {"synthetic bar digits"} and rows[0][
        "input_proj"
    ] == "frozen"
    assert {r["max_steps"] for r in rows} == {"4.0"} and {r["n_train"] for r in rows} == {"256.0"}
    capsys.readouterr()
    T.main(tiny_sweep(tmp_path, folder))                       # the same setting: a real resume
    assert "(2 already in" in capsys.readouterr().out
    for other in (["--max_steps=6"], ["--input_proj=learned"], ["--noise_sigma=0.1"], ["--flips=2"],
                  ["--max_train_images=128"]):
        with pytest.raises(SystemExit, match="holds runs of another setting"):
            T.main(tiny_sweep(tmp_path, folder, *other))
    write_prepared(
        tmp_path / "prepared", digit_splits(n_train=256, n_val=64, n_test=64), source="other digits"
    )
    with pytest.raises(SystemExit, match="data_source: other digits vs synthetic bar digits"):
        T.main(tiny_sweep(tmp_path, folder))
    assert len(T.read_csv(tmp_path / "sweep" / "sweep.csv")) == 2    # nothing mixed in
    # the key itself: the same shape / lr / seed under another setting is another run
    row = dict(rows[0])
    assert T.run_key(row) != T.run_key(dict(row, max_steps="6"))
    assert T.run_key(row) != T.run_key(dict(row, input_proj="learned"))
    # one number, one key
    assert T.run_key(dict(row, epochs="30")) == T.run_key(dict(row, epochs="30.0"))
    # an older CSV without the setting columns: a clear error, not a silent resume
    old = tmp_path / "old" / "sweep.csv"
    old.parent.mkdir()
    old.write_text("shape,latent_dim,hidden_dim,n_blocks,lr,seed\nhourglass,256,16,1,0.001,0\n")
    with pytest.raises(SystemExit, match="before sweep rows recorded their setting"):
        T.main(tiny_sweep(tmp_path, folder)[:-1] + [f"--out_dir={old.parent}"])


def test_all_nan_validation_writes_a_nan_row_and_the_sweep_goes_on(tmp_path):
    folder = write_prepared(tmp_path / "prepared", digit_splits(n_train=256, n_val=64, n_test=64))
    res = T.train(
        tiny_config(tmp_path, noise_sigma=float("nan")),
        digit_splits(n_train=256, n_val=64, n_test=64),
    )
    assert (
        math.isnan(res["best_val_loss"])
        and math.isnan(res["test"]["psnr_batchmse"])
        and res["best_step"] == 0
    )
    # both diverge; it finishes
    T.main(tiny_sweep(tmp_path, folder, "--task=mnist_denoise", "--noise_sigma=nan"))
    rows = T.read_csv(tmp_path / "sweep" / "sweep.csv")
    assert [r["shape"] for r in rows] == ["hourglass", "conventional"]
    assert all(
        math.isnan(float(r["test_psnr_batchmse"])) and math.isnan(float(r["val_loss"]))
        for r in rows
    )
    assert (tmp_path / "sweep" / "pareto.png").exists()
    assert T.pareto_front([(1, float("nan")), (2, 20.0)]) == [(2, 20.0)]


def test_eval_refuses_a_checkpoint_on_another_data_source(tmp_path, capsys):
    folder = write_prepared(tmp_path / "prepared", digit_splits(n_train=256, n_val=64, n_test=64))
    T.main(
        [
            "train",
            "--task=mnist_denoise",
            f"--prepared_dir={folder}",
            "--dtype=float32",
            "--device=cpu",
            "--batch_size=64",
            "--max_steps=4",
            "--eval_interval=2",
            "--latent_dim=1024",
            "--hidden_dim=16",
            "--n_blocks=1",
            f"--out_dir={tmp_path / 'run'}",
        ]
    )
    ckpt_path = tmp_path / "run" / "ckpt.pt"
    ckpt = torch.load(ckpt_path, weights_only=True)
    assert ckpt["data"]["source"] == "synthetic bar digits" and ckpt["data"]["n_train"] == 256
    assert (
        json.loads((tmp_path / "run" / "data.json").read_text())["source"] == "synthetic bar digits"
    )
    capsys.readouterr()
    T.main(["eval", f"--ckpt={ckpt_path}", "--device=cpu"])         # the same source: scored
    assert '"test"' in capsys.readouterr().out

    # same name, new data
    write_prepared(folder, digit_splits(n_train=256, n_val=64, n_test=64), source="other digits")
    with pytest.raises(
        SystemExit, match="was trained on 'synthetic bar digits'.*now is 'other digits'"
    ):
        T.main(["eval", f"--ckpt={ckpt_path}", "--device=cpu"])
    T.main(["eval", f"--ckpt={ckpt_path}", "--device=cpu", "--allow_other_data"])
    assert "--allow_other_data" in capsys.readouterr().err

    # a checkpoint from before the field
    del ckpt["data"]
    torch.save(ckpt, tmp_path / "old.pt")
    T.main(["eval", f"--ckpt={tmp_path / 'old.pt'}", "--device=cpu"])
    captured = capsys.readouterr()
    assert "does not record the data it was trained on" in captured.err and '"test"' in captured.out


def test_ssim_pareto_and_the_frozen_vs_learned_grid_from_the_command_line(tmp_path):
    folder = write_prepared(tmp_path / "prepared", digit_splits(n_train=256, n_val=64, n_test=64))
    T.main(tiny_sweep(tmp_path, folder))
    assert (tmp_path / "sweep" / "pareto_ssim.png").exists()
    T.main(["pareto", str(tmp_path / "sweep" / "sweep.csv"), "--metric=test_ssim"])
    assert (tmp_path / "sweep" / "pareto_ssim.png").stat().st_size > 0
    with pytest.raises(SystemExit, match="no test_accuracy"):
        T.main(["pareto", str(tmp_path / "sweep" / "sweep.csv"), "--metric=test_accuracy"])

    T.main(
        [
            "compare_input_proj",
            "--task=mnist_sr",
            f"--prepared_dir={folder}",
            "--dtype=float32",
            "--device=cpu",
            "--batch_size=64",
            "--max_steps=4",
            "--eval_interval=2",
            "--latent_dims=256,320",
            "--hidden_dim=16",
            "--n_blocks=1",
            f"--out_dir={tmp_path / 'cmp'}",
        ]
    )
    grid = T.read_csv(tmp_path / "cmp" / "compare.csv")
    assert [(g["latent_dim"], g["input_proj"]) for g in grid] == [
        ("256", "frozen"),
        ("256", "learned"),
        ("320", "frozen"),
        ("320", "learned"),
    ]
    for g in grid:       # W_in counts in the total either way, and is trainable only when learned
        w_in = 196 * int(g["latent_dim"])
        assert int(g["params_total"]) - int(g["params_trainable"]) == (
            w_in if g["input_proj"] == "frozen" else 0
        )
    assert (tmp_path / "cmp" / "compare_input_proj.png").exists()


def test_dtype_auto_is_float32_on_cpu():
    assert T.resolve_config(T.TrainConfig(device="cpu")).dtype == "float32"


def test_a_torn_last_sweep_row_is_dropped_and_that_run_runs_again(tmp_path, capsys):
    """A half-written last row (a run killed mid-write by an older version, or a full disk) is
    not 'runs of another setting': it is dropped with a warning and its run trains again."""
    folder = write_prepared(tmp_path / "prepared", digit_splits(n_train=256, n_val=64, n_test=64))
    T.main(tiny_sweep(tmp_path, folder))
    path = tmp_path / "sweep" / "sweep.csv"
    text = path.read_text()
    path.write_text(text[:text.rindex("\n", 0, len(text) - 1) + 1] + "conventional,196,256")
    capsys.readouterr()
    T.main(tiny_sweep(tmp_path, folder))
    captured = capsys.readouterr()
    assert "its last row is incomplete" in captured.err and "(1 already in" in captured.out
    assert len(T.read_csv(path)) == 2 and not list(path.parent.glob("*.tmp.*"))


@pytest.mark.parametrize("setting,message", [
    ("--n_blocks=0", "--n_blocks=0: it must be 1 or more"),
    ("--hidden_dim=0", "--hidden_dim=0: it must be 1 or more"),
    ("--epochs=0", "--epochs=0.0: it must be more than 0"),
    ("--epochs=-1", "--epochs=-1.0: it must be more than 0"),
    ("--batch_size=-5", "--batch_size=-5: it must be 1 or more"),
    ("--batch_size=0", "--batch_size=0: it must be 1 or more"),
    ("--log_interval=0", "--log_interval=0: it must be 1 or more"),
    ("--lr=-1", "lr must be > 0"),
    ("--num_threads=-2", "--num_threads=-2"),
    ("--data_dir=/no/such/folder", "--data_dir=/no/such/folder: no such folder"),
])
def test_every_bad_setting_is_one_line_and_nothing_trains(setting, message, tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "train_mlp.py"), "train", setting,
                          f"--out_dir={tmp_path / 'run'}"], capture_output=True, text=True)
    assert run.returncode != 0 and message in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_a_damaged_checkpoint_or_data_set_is_one_line(tmp_path):
    folder = write_prepared(tmp_path / "prepared", digit_splits(n_train=64, n_val=16, n_test=16))
    bad_ckpt = tmp_path / "cut.pt"
    bad_ckpt.write_bytes(b"PK\x03\x04 not all of a checkpoint")
    lm = tmp_path / "lm.pt"
    torch.save({"model": {}, "config": {"eval_iters": 1}, "model_type": "gpt"}, lm)
    (tmp_path / "cut").mkdir()
    for split in ("train", "val", "test"):
        (tmp_path / "cut" / f"{split}.npz").write_bytes(
            (folder / f"{split}.npz").read_bytes()[:200]
        )
    (tmp_path / "cut" / "meta.json").write_text((folder / "meta.json").read_text())
    (tmp_path / "badmeta").mkdir()
    (tmp_path / "badmeta" / "meta.json").write_text("{not json")
    cases = [(["eval", f"--ckpt={bad_ckpt}"], "is not a readable checkpoint"),
             (["eval", f"--ckpt={lm}"], "is not a checkpoint of train_mlp.py"),
             (["train", f"--prepared_dir={tmp_path / 'cut'}"], "train.npz is damaged or truncated"),
             (["train", f"--prepared_dir={tmp_path / 'badmeta'}"], "is not a prepared data set's")]
    for args, message in cases:
        run = subprocess.run([sys.executable, str(ROOT / "train_mlp.py"), *args, "--device=cpu"],
                             capture_output=True, text=True)
        assert run.returncode != 0 and message in run.stderr and "Traceback" not in run.stderr, (
            args, run.stderr)
