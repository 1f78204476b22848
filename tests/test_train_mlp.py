"""Tests for train_mlp.py: the frozen W_in stays out of the optimizer and bit-identical, setting
checks, a tiny denoiser that must beat the noisy input, the checkpoint round trip, generative
classification accuracy, reading prepared data (and preparing it through the data script when it
is missing: dataset.load_images), the config files, the command line (train, --eval_only), and
that every number is the run's own: eval refusing another data source, every bad setting one
line. The run's folder, resume, signals and divergence: test_edges_train_mlp.py; the sweep and the
W_in comparison: experiments/test_mlp_hourglass_sweep.py. CPU, offline, tiny models."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, digit_splits, idx_fixture, imagenet32_fixture, write_prepared

from mlp_hourglass import InputProjection, count_params
from shapelab import dataset as D
from shapelab.configurator import parse_overrides
from shapelab.hardware import auto_dtype
from shapelab.image_tasks import TASKS, get_task
from shapelab.run import RunDir
import train_mlp as T


def tiny_config(tmp_path, **overrides):
    return {**dict(task="mnist_denoise", latent_dim=1024, hidden_dim=64, n_blocks=2,
                   batch_size=64, learning_rate=1e-3, max_iters=8, eval_interval=4, dtype="float32",
                   device="cpu", out_dir=str(tmp_path)), **overrides}


def one_line(capsys, *argv, status=None):
    """train_mlp.py's command line in this process, ended by a bad setting or damaged file: the
    one line it says why in (usage_error's, or a SystemExit's message)."""
    with pytest.raises(SystemExit) as stop:
        T.main(list(argv))
    code, err = stop.value.code, capsys.readouterr().err
    text = code if isinstance(code, str) else err
    assert (status is None or code == status) and len(text.strip().splitlines()) == 1, text
    return text


# ---------------------------------------------------------------- frozen W_in

def test_frozen_input_projection_not_in_optimizer_and_unchanged(tmp_path):
    c = T.resolve(tiny_config(tmp_path))
    torch.manual_seed(c.seed)
    initial = T.make_model(c).lift.weight.detach().clone()

    model = T.make_model(c)
    optimizer = T.make_optimizer(model, c)
    in_opt = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert id(model.lift.weight) not in in_opt
    assert all(id(p) in in_opt for n, p in model.named_parameters() if not n.startswith("lift"))

    res = T.train(tiny_config(tmp_path), digit_splits(), quiet=True)
    trained = res["model"]
    assert torch.equal(trained.lift.weight, initial)  # bit-identical after 8 AdamW steps
    assert not torch.equal(trained.out_proj.weight, T.make_model(c).out_proj.weight)

    # the same run with a learned W_in does move it (so the check above can fail)
    res_learned = T.train(tiny_config(tmp_path, input_proj="learned"), digit_splits(),
                          quiet=True)
    assert not torch.equal(res_learned["model"].lift.weight, initial)


def test_a_lift_swapped_in_by_hand_is_what_the_run_reports_and_saves(tmp_path, monkeypatch,
                                                                    capsys):
    """A learner who makes the lift trainable in make_model sets no label: the run's printed line,
    result.json and the checkpoint's settings say 'learned' (read from the module), so the
    checkpoint rebuilds the model it holds (a frozen rebuild has no lift.weight to load)."""
    make_model = T.make_model

    def learned_lift(c):
        model = make_model(c)
        model.lift = InputProjection(784, c.latent_dim, seed=c.seed, trainable=True)
        return model
    monkeypatch.setattr(T, "make_model", learned_lift)
    res = T.train(tiny_config(tmp_path, max_iters=2, eval_interval=2), digit_splits(n_train=128),
                  run=RunDir(tmp_path))
    assert "W_in=learned" in capsys.readouterr().out
    assert res["config"]["input_proj"] == "learned" and res["model"].input_proj == "learned"
    assert json.loads((tmp_path / "result.json").read_text())["config"]["input_proj"] == "learned"
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["config"]["input_proj"] == "learned"
    monkeypatch.undo()  # the repo's make_model rebuilds it from the saved settings alone
    model, c, _ = T.load_trained_mlp(str(tmp_path / "ckpt.pt"))
    assert model.input_proj == c.input_proj == "learned"
    assert torch.equal(model.lift.weight, res["model"].lift.weight)


# ---------------------------------------------------------------- training end to end

def test_tiny_denoiser_beats_noisy_input_and_checkpoint_roundtrip(tmp_path):
    config = tiny_config(tmp_path, max_iters=100, eval_interval=50)
    res = T.train(config, digit_splits(), quiet=True, run=RunDir(tmp_path))
    gain = res["test"]["psnr_batchmse"] - res["baseline"]["psnr_batchmse"]
    assert res["baseline_name"] == "noisy input"
    assert gain > 3.0, (res["test"], res["baseline"])
    assert res["test"]["ssim"] > res["baseline"]["ssim"]

    model, loaded, ckpt = T.load_trained_mlp(str(tmp_path / "ckpt.pt"))
    assert loaded.latent_dim == 1024 and ckpt["best_iter"] == res["best_iter"]
    x = torch.rand(4, 784)
    model.eval()
    res["model"].eval()
    assert torch.equal(model(x), res["model"](x))
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]
    assert {"ckpt.pt", "data.json", "result.json", "history.csv", "samples.png"} <= set(
        os.listdir(tmp_path))


def test_generative_classification_reports_accuracy(tmp_path):
    config = tiny_config(tmp_path, task="mnist_classify", max_iters=120, eval_interval=30)
    res = T.train(config, digit_splits(), quiet=True)
    # ten well-separated classes
    assert res["test"]["accuracy"] > 0.9 and "ssim" in res["test"]
    assert res["test"]["psnr_batchmse"] > res["baseline"]["psnr_batchmse"]


def test_setting_checks_and_the_tasks_values():
    with pytest.raises(ValueError, match="flip augmentation"):
        T.resolve(dict(task="mnist_classify", flips=4))
    with pytest.raises(ValueError, match="d_h < d_z"):
        T.resolve(dict(task="mnist_denoise", latent_dim=512, hidden_dim=1024))
    c = T.resolve(dict(task="imagenet32_sr", device="cpu"))
    assert (c.latent_dim, c.hidden_dim, c.n_blocks, c.flips, c.batch_size) == (3546, 270, 5, 4,
                                                                                 512)
    c = T.resolve(dict(task="mnist_sr", device="cpu"))  # the task's default shape
    assert (c.latent_dim, c.hidden_dim, c.n_blocks) == (2048, 128, 4)
    with torch.device("meta"):  # the paper's (3546, 270, 5): 31.36M / 20.47M
        p = count_params(T.make_model(T.resolve(dict(task="imagenet32_denoise", device="cpu"))))
    assert (round(p["total"] / 1e6, 2), round(p["trainable"] / 1e6, 2)) == (31.36, 20.47)


def test_dtype_auto_is_float32_on_cpu():
    """float32 unless asked: the protocol files say so (the reference code trains in fp32);
    --dtype=auto is hardware.py's rule (bf16 on a CPU with AMX / AVX512-BF16)."""
    assert T.resolve(dict(device="cpu")).dtype == "float32"
    assert T.resolve(dict(device="cpu", dtype="auto")).dtype == auto_dtype("cpu")


# the paper's protocol (arXiv:2510.01796, A.3.2): epochs, batch size, flips; sigma 0.25 for noise
PAPER_PROTOCOL = {"mnist_classify": (50, 128, 1), "mnist_denoise": (30, 128, 1),
                  "mnist_sr": (50, 128, 4), "imagenet32_denoise": (2, 512, 4),
                  "imagenet32_sr": (2, 512, 4)}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_has_a_config_file_with_its_whole_protocol(name):
    """config/mlp_<task>.py, the one place a task's protocol is written, states every setting a
    run of that task leaves at None, with the paper's numbers; --task=<task> alone runs it."""
    config = T.task_protocol(name)
    assert config["task"] == name and config["dtype"] == "float32"
    unset = [key for key in T.PROTOCOL_KEYS if config[key] is None]
    assert unset == ([] if get_task(name).degradation == "noise" else ["noise_sigma"]), unset
    assert (config["epochs"], config["batch_size"], config["flips"]) == PAPER_PROTOCOL[name]
    assert config["noise_sigma"] in (None, 0.25)
    alone, with_file = T.resolve(dict(task=name)), T.resolve(config)
    assert all(getattr(alone, k) == getattr(with_file, k) for k in T.PROTOCOL_KEYS)


@pytest.mark.parametrize("config_file", sorted(p for p in (ROOT / "config").glob("mlp_*.py")
                                                if not p.name.startswith("mlp_sweep_")),
                         ids=lambda p: p.name)  # (config/mlp_sweep_*.py: the sweep's tests)
def test_every_mlp_config_file_loads_and_states_the_papers_protocol(config_file):
    """config/mlp_<task>.py: the task's protocol (the paper's epochs, batch, flips), written out."""
    config = parse_overrides([str(config_file)], T.DEFAULTS, types=T.PROTOCOL_KEYS)
    assert config_file.stem == f"mlp_{config['task']}"
    assert (config["epochs"], config["batch_size"], config["flips"]) == PAPER_PROTOCOL[
        config["task"]]
    with torch.device("meta"):
        assert T.make_model(T.resolve({**config, "device": "cpu"})) is not None


# ---------------------------------------------------------------- prepared data

def test_load_images_reads_prepared_folder_and_checks_the_task(tmp_path):
    splits = digit_splits()
    folder = write_prepared(tmp_path / "prepared", splits)
    data = D.load_images(get_task("mnist_sr"), prepared_dir=str(folder), max_train_images=100)
    assert data.source == "synthetic bar digits" and len(data.train) == 100
    assert torch.equal(data.test, splits.test) and data.val_labels.dtype == torch.int64
    with pytest.raises(ValueError, match="needs --dataset=imagenet32"):
        D.load_images(get_task("imagenet32_denoise"), dataset="mnist", prepared_dir=str(folder))
    with pytest.raises(ValueError, match="needs --dataset=mnist"):
        D.load_images(get_task("mnist_denoise"), dataset="imagenet32", prepared_dir=str(folder))
    with pytest.raises(ValueError, match="needs \\(3, 32, 32\\)"):
        D.load_images(get_task("imagenet32_denoise"), prepared_dir=str(folder))


def test_load_images_prepares_a_missing_folder_with_the_data_script(tmp_path, capfd):
    idx_fixture(tmp_path / "raw_a", seed=0)
    idx_fixture(tmp_path / "raw_b", seed=1)
    folder = tmp_path / "prepared"
    task = get_task("mnist_denoise")
    a = D.load_images(task, "fashion_mnist", str(tmp_path / "raw_a"), prepared_dir=str(folder))
    assert "preparing" in capfd.readouterr().out and "local IDX files in" in a.source
    assert a.train.shape == (100, 1, 28, 28) and len(a.test) == 30
    again = D.load_images(task, "fashion_mnist", str(tmp_path / "raw_a"), prepared_dir=str(folder))
    # reused
    assert "preparing" not in capfd.readouterr().out and torch.equal(again.train, a.train)
    b = D.load_images(task, "fashion_mnist", str(tmp_path / "raw_b"), prepared_dir=str(folder))
    assert "preparing it again" in capfd.readouterr().out and not torch.equal(b.test, a.test)
    assert json.loads((folder / "meta.json").read_text())["data_dir"] == str(
        (tmp_path / "raw_b").resolve())
    # where data/mnist/prepare.py writes
    assert D.PREPARED_DIRS["mnist"] == ROOT / "data" / "mnist"
    assert D.PREPARED_DIRS["fashion_mnist"] == ROOT / "data" / "mnist" / "fashion_mnist"


def test_a_failing_data_script_is_a_clear_error(tmp_path, monkeypatch):
    failing = tmp_path / "prepare.py"
    failing.write_text("import sys\nsys.exit('error: no data here')\n")
    monkeypatch.setitem(D.PREPARE_SCRIPTS, "imagenet32", failing)
    with pytest.raises(ValueError, match="preparing imagenet32 failed"):
        D.load_images(get_task("imagenet32_sr"), prepared_dir=str(tmp_path / "none"))
    assert not (tmp_path / "none").exists()


def test_the_data_script_prepares_fashion_mnist_from_idx_files(tmp_path):
    idx_fixture(tmp_path / "raw")
    run = subprocess.run([sys.executable, str(ROOT / "data" / "mnist" / "prepare.py"),
                          "--dataset=fashion_mnist", f"--data_dir={tmp_path / 'raw'}",
                          f"--out_dir={tmp_path / 'out'}"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "source: fashion_mnist from local IDX files" in run.stdout
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["requested"] == "fashion_mnist"


def test_train_mlp_runs_on_imagenet32_in_the_official_npz_layout(tmp_path, capsys):
    """The paper's headline data as a user downloads it: train_mlp.py prepares the npz files
    (data/imagenet32/prepare.py, with --max_train_images passed on), trains an imagenet32_denoise
    hourglass a few steps in fp32, scores the test half, and its checkpoint scores the same."""
    imagenet32_fixture(tmp_path / "raw")
    prepared, out = tmp_path / "prepared", tmp_path / "run"
    T.main(["--task=imagenet32_denoise", f"--data_dir={tmp_path / 'raw'}",
            f"--prepared_dir={prepared}", "--max_train_images=8", "--dtype=float32",
            "--device=cpu", "--num_threads=1", "--batch_size=4", "--flips=1", "--max_iters=3",
            "--eval_interval=2", "--latent_dim=3104", "--hidden_dim=16", "--n_blocks=1",
            f"--out_dir={out}"])
    meta = json.loads((prepared / "meta.json").read_text())
    assert meta["max_train_images"] == 8 and meta["splits"] == {"train": 8, "val": 5, "test": 5}
    metrics = json.loads((out / "result.json").read_text())
    assert metrics["dataset"] == "imagenet32"  # (the source without this machine's paths)
    assert metrics["data"].startswith("imagenet32 from npz files in .../raw (8 train images;")
    assert metrics["steps"] == 3 and metrics["baseline_name"] == "noisy input"
    assert metrics["params"]["input_proj"] == 3072 * 3104 and "W_in=frozen_random" in (
        capsys.readouterr().out)
    assert (out / "samples.png").exists()
    T.main(["--eval_only=True", f"--out_dir={out}", "--device=cpu", f"--prepared_dir={prepared}"])
    printed = capsys.readouterr().out
    scored = json.loads(printed[printed.index("{"):])
    assert scored["test"]["psnr_batchmse"] == pytest.approx(metrics["test"]["psnr_batchmse"],
                                                            abs=1e-9)


# ---------------------------------------------------------------- the command line

TINY = ["--task=mnist_sr", "--dtype=float32", "--device=cpu", "--batch_size=64", "--max_iters=4",
        "--eval_interval=2"]


def test_cli_train_then_eval_only_scores_the_checkpoint(tmp_path, capsys):
    folder = write_prepared(tmp_path / "prepared", digit_splits(n_train=256, n_val=64, n_test=64))
    run = [*TINY, f"--prepared_dir={folder}", f"--out_dir={tmp_path / 'run'}"]
    T.main([*run, "--latent_dim=256", "--hidden_dim=16", "--n_blocks=2"])
    metrics = json.loads((tmp_path / "run" / "result.json").read_text())
    assert metrics["data"] == "synthetic bar digits" and metrics["steps"] == 4
    assert {"ckpt.pt", "history.csv", "samples.png"} <= set(os.listdir(tmp_path / "run"))
    capsys.readouterr()
    T.main(["--eval_only=True", f"--out_dir={tmp_path / 'run'}", "--device=cpu"])
    out = capsys.readouterr().out
    evaluated = json.loads(out[out.index("{"):])  # after the "data: ..." line
    assert evaluated["test"]["psnr_batchmse"] == pytest.approx(metrics["test"]["psnr_batchmse"],
                                                               abs=1e-9)
    with pytest.raises(SystemExit):
        T.main([*run, "--latent_dim=256", "--hidden_dim=512"])
    assert "d_h < d_z" in capsys.readouterr().err


def test_eval_refuses_a_checkpoint_on_another_data_source(tmp_path, capsys):
    folder = write_prepared(tmp_path / "prepared", digit_splits(n_train=256, n_val=64, n_test=64))
    T.main(["--task=mnist_denoise", f"--prepared_dir={folder}", "--dtype=float32",
            "--device=cpu", "--batch_size=64", "--max_iters=4", "--eval_interval=2",
            "--latent_dim=1024", "--hidden_dim=16", "--n_blocks=1",
            f"--out_dir={tmp_path / 'run'}"])
    ckpt_path = tmp_path / "run" / "ckpt.pt"
    ckpt = torch.load(ckpt_path, weights_only=True)
    assert ckpt["data"]["source"] == "synthetic bar digits" and ckpt["data"]["n_train"] == 256
    assert json.loads((tmp_path / "run" / "data.json").read_text())["source"] == (
        "synthetic bar digits")
    evaluate = ["--eval_only=True", f"--out_dir={tmp_path / 'run'}", "--device=cpu"]
    capsys.readouterr()
    T.main(evaluate)  # the same source: scored
    assert '"test"' in capsys.readouterr().out

    # same name, new data
    write_prepared(folder, digit_splits(n_train=256, n_val=64, n_test=64), source="other digits")
    with pytest.raises(SystemExit):
        T.main(evaluate)
    assert re.search("was trained on 'synthetic bar digits'.*now is 'other digits'",
                     capsys.readouterr().err)
    T.main([*evaluate, "--allow_other_data=True"])
    assert "--allow_other_data" in capsys.readouterr().err


def test_a_conventional_run_takes_the_image_itself_and_x2_flips_are_none_and_both(
        tmp_path, monkeypatch):
    """shape=conventional at d_z = d_x: no W_in, every parameter trainable (the paper's baseline);
    --flips=2 enlarges the set with each image flipped both ways (the reference's x2)."""
    seen, make_batch = set(), T.make_batch

    def spy(task, images, labels, protos, g, sigma, flip_codes=None, clamp_sr_input=False):
        if flip_codes is not None:
            seen.update(flip_codes.tolist())
        return make_batch(task, images, labels, protos, g, sigma, flip_codes, clamp_sr_input)
    monkeypatch.setattr(T, "make_batch", spy)
    config = tiny_config(tmp_path, shape="conventional", latent_dim=784, hidden_dim=1024,
                         n_blocks=1, flips=2, max_iters=8)  # 128 x 2 images: two epochs
    res = T.train(config, digit_splits(n_train=128), quiet=True)
    assert res["config"]["input_proj"] == "direct" and res["model"].lift is None
    assert res["params"]["total"] == res["params"]["trainable"] == 2 * 784 * 1024 + 784 * 784
    assert seen == {0, 3}


def test_a_run_resumes_and_scores_from_another_checkout(tmp_path, capsys):
    """The data source as saved holds no machine path (portable_source), so the same data prepared
    in another checkout is the same source; a checkpoint with no clamp_sr_input and an absolute
    path in its source loads, scores and resumes, except with x2 flips of none and horizontal (no
    clamp_sr_input and flips=2), which it cannot go on with."""
    splits = digit_splits(n_train=256, n_val=64, n_test=64)
    folder = write_prepared(tmp_path / "prepared", splits,
                            source="digits (/machine_a/repo/data/mnist/cache/digits)")
    run = [*TINY, f"--prepared_dir={folder}", f"--out_dir={tmp_path / 'run'}",
           "--latent_dim=256", "--hidden_dim=16", "--n_blocks=1"]
    T.main(run)
    path = tmp_path / "run" / "ckpt.pt"
    ckpt = torch.load(path, weights_only=True)
    assert ckpt["data"]["source"] == "digits (data/mnist/cache/digits)"
    assert json.loads((tmp_path / "run" / "result.json").read_text())["data"] == (
        "digits (data/mnist/cache/digits)")
    write_prepared(folder, splits, source="digits (/machine_b/elsewhere/data/mnist/cache/digits)")
    evaluate = ["--eval_only=True", f"--out_dir={tmp_path / 'run'}", "--device=cpu"]
    T.main(evaluate)  # the same source from another checkout: scored, no --allow_other_data
    T.main([*run, "--init_from=resume"])
    assert "nothing to train" in capsys.readouterr().out
    del ckpt["config"]["clamp_sr_input"]
    ckpt["data"]["source"] = "digits (/machine_a/repo/data/mnist/cache/digits)"
    torch.save(ckpt, path)
    assert T.load_trained_mlp(str(path))[1].input_proj == "frozen_random"
    T.main(evaluate)
    T.main([*run, "--init_from=resume"])
    assert "nothing to train" in capsys.readouterr().out
    ckpt["config"]["flips"] = 2
    torch.save(ckpt, path)
    line = one_line(capsys, *run, "--init_from=resume", "--flips=2", status=2)
    assert "x2 flips of none and horizontal" in line


@pytest.mark.parametrize("setting,message", [
    ("--n_blocks=0", "--n_blocks=0: it must be 1 or more"),
    ("--hidden_dim=0", "--hidden_dim=0: it must be 1 or more"),
    ("--epochs=0", "--epochs=0.0: it must be more than 0"),
    ("--epochs=-1", "--epochs=-1.0: it must be more than 0"),
    ("--batch_size=-5", "--batch_size=-5: it must be 1 or more"),
    ("--batch_size=0", "--batch_size=0: it must be 1 or more"),
    ("--log_interval=0", "--log_interval=0: it must be 1 or more"),
    ("--learning_rate=-1", "learning_rate must be > 0"),
    ("--num_threads=-2", "--num_threads=-2"),
    ("--data_dir=/no/such/folder", "--data_dir=/no/such/folder: no such folder"),
    ("--latent_dims=3", "unknown config key 'latent_dims'"),
    ("--epochs=ten", "epochs='ten' is a str"),
])
def test_every_bad_setting_is_one_line_and_nothing_trains(setting, message, tmp_path, capsys):
    line = one_line(capsys, setting, f"--out_dir={tmp_path / 'run'}", status=2)
    assert message in line and not (tmp_path / "run").exists(), line


def test_a_damaged_checkpoint_or_data_set_is_one_line(tmp_path, capsys):
    folder = write_prepared(tmp_path / "prepared", digit_splits(n_train=64, n_val=16, n_test=16))
    (tmp_path / "cut_run").mkdir()
    (tmp_path / "cut_run" / "ckpt.pt").write_bytes(b"PK\x03\x04 not all of a checkpoint")
    (tmp_path / "lm_run").mkdir()
    torch.save({"model": {}, "config": {"eval_iters": 1}, "model_type": "gpt"},
               tmp_path / "lm_run" / "ckpt.pt")
    (tmp_path / "cut").mkdir()
    for split in ("train", "val", "test"):
        (tmp_path / "cut" / f"{split}.npz").write_bytes(
            (folder / f"{split}.npz").read_bytes()[:200])
    (tmp_path / "cut" / "meta.json").write_text((folder / "meta.json").read_text())
    (tmp_path / "badmeta").mkdir()
    (tmp_path / "badmeta" / "meta.json").write_text("{not json")
    evaluate = "--eval_only=True"
    cases = [([evaluate, f"--out_dir={tmp_path / 'cut_run'}"], "is corrupt or truncated"),
             ([evaluate, f"--out_dir={tmp_path / 'lm_run'}"], "is not a checkpoint of train_mlp"),
             ([evaluate, f"--out_dir={tmp_path / 'none'}"], "train one first (python train_mlp"),
             ([f"--prepared_dir={tmp_path / 'cut'}", f"--out_dir={tmp_path / 'run1'}"],
              "train.npz is damaged or truncated"),
             ([f"--prepared_dir={tmp_path / 'badmeta'}", f"--out_dir={tmp_path / 'run2'}"],
              "is not a prepared data set's")]
    for args, message in cases:
        assert message in one_line(capsys, *args, "--device=cpu"), args
