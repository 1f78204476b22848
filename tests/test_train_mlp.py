"""train_mlp.py: the frozen W_in, a tiny denoiser that beats its noisy input, and the
run folder of train.py (lock, --overwrite, exact resume, divergence) on the image MLPs. CPU,
offline, tiny models on the digit-like images of conftest.py."""

import gc
import json
import os

import pytest
import torch
from conftest import at_step, digit_splits, write_prepared

from shapelab.checkpoint import load_checkpoint
from shapelab.image_tasks import TASKS
from shapelab.run import RunDir, read_jsonl
import train_mlp as T


class Killed(BaseException):
    """A kill -9, in this process: it stops between two lines, no handler runs."""


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    folder = tmp_path_factory.mktemp("digits") / "prepared"
    return write_prepared(folder, digit_splits(n_train=256, n_val=64, n_test=64))


def args(prepared, out, *extra):
    """12 steps, a checkpoint every 4; with 2 flips an epoch is 8 steps (a resume at step 4
    starts mid-epoch)."""
    return ["--task=mnist_sr", f"--prepared_dir={prepared}", "--latent_dim=256",
            "--hidden_dim=16", "--n_blocks=1", "--batch_size=64", "--max_iters=12",
            "--eval_interval=4", "--flips=2", "--dtype=float32", "--device=cpu",
            "--num_threads=1", f"--out_dir={out}", *extra]


def main(*argv):
    result = T.main(list(argv))
    gc.collect()  # (the run's folder and its lock go)
    return result


def stopped(capsys, *argv, code=None):
    """The one line train_mlp.py stops with (a SystemExit's message, or usage_error's)."""
    try:
        T.main(list(argv))
    except SystemExit as e:
        stop = e
    else:
        raise AssertionError(f"{argv} ran to its end")
    stop.__traceback__ = stop.__context__ = None  # (they hold the run's folder and its lock)
    gc.collect()
    text = stop.code if isinstance(stop.code, str) else capsys.readouterr().err
    assert code is None or stop.code == code, text
    assert len(text.strip().splitlines()) == 1, text
    return text.strip()


def test_a_frozen_input_projection_is_not_trained_and_a_learned_one_is(tmp_path):
    config = dict(task="mnist_denoise", latent_dim=512, hidden_dim=32, n_blocks=1,
                  batch_size=64, max_iters=8, eval_interval=4, dtype="float32", device="cpu")
    c = T.resolve(config)
    torch.manual_seed(c.seed)
    initial = T.make_model(c).lift.weight.detach().clone()
    data = digit_splits(n_train=256, n_val=64, n_test=64)
    frozen = T.train(config, data, quiet=True)["model"]
    assert torch.equal(frozen.lift.weight, initial)
    learned = T.train({**config, "input_proj": "learned"}, data, quiet=True)
    assert not torch.equal(learned["model"].lift.weight, initial)


def test_a_tiny_denoiser_beats_its_noisy_input_and_a_finished_run_resumed_tests_it_again(
        tmp_path):
    prepared = write_prepared(tmp_path / "digits", digit_splits(n_train=512, n_test=128))
    out = tmp_path / "o"
    common = ["--task=mnist_denoise", "--latent_dim=1024", "--hidden_dim=32", "--n_blocks=1",
              "--batch_size=64", "--dtype=float32", "--device=cpu", f"--out_dir={out}",
              f"--prepared_dir={prepared}", "--max_iters=60", "--eval_interval=30"]
    res = main(*common)
    assert res["test"]["psnr_batchmse"] > res["baseline"]["psnr_batchmse"] + 3.0
    assert {"ckpt.pt", "result.json", "metrics.jsonl"} <= set(os.listdir(out))
    assert main(*common, "--init_from=resume")["test"] == res["test"]


def test_a_run_killed_after_a_checkpoint_resumes_to_the_same_numbers(prepared, tmp_path,
                                                                     monkeypatch, capsys):
    whole, part = tmp_path / "whole", tmp_path / "part"
    main(*args(prepared, whole))
    at_step(monkeypatch, 6, lambda model: (_ for _ in ()).throw(Killed()))
    with pytest.raises(Killed):
        T.main(args(prepared, part))
    gc.collect()
    monkeypatch.undo()
    assert load_checkpoint(part / "ckpt.pt")["iter_num"] == 4
    main(*args(prepared, part), "--init_from=resume")
    a, b = load_checkpoint(whole / "ckpt.pt"), load_checkpoint(part / "ckpt.pt")
    for key in ("model", "optimizer", "best"):
        assert str(a[key]) == str(b[key])
    assert [{**row, "elapsed_s": 0} for row in read_jsonl(whole / "metrics.jsonl")] == [
        {**row, "elapsed_s": 0} for row in read_jsonl(part / "metrics.jsonl")]
    assert json.loads((whole / "result.json").read_text())["test"] == json.loads(
        (part / "result.json").read_text())["test"]


def test_resume_refuses_another_model_or_data_and_takes_another_learning_rate_with_a_note(
        prepared, tmp_path, capsys):
    out = tmp_path / "o"
    main(*args(prepared, out), "--max_iters=4")
    line = stopped(capsys, *args(prepared, out), "--n_blocks=2", "--init_from=resume")
    assert "n_blocks=2 (the checkpoint has 1)" in line
    other = write_prepared(tmp_path / "other", digit_splits(n_train=256, n_val=64, n_test=64),
                           source="another source")
    line = stopped(capsys, *args(other, out), "--init_from=resume", code=2)
    assert "was trained on" in line and "another source" in line
    capsys.readouterr()
    main(*args(prepared, out), "--learning_rate=2e-3", "--init_from=resume")
    assert "note: resuming with learning_rate=0.002; max_iters=12" in capsys.readouterr().out
    assert load_checkpoint(out / "ckpt.pt")["config"]["learning_rate"] == 2e-3


def test_a_run_never_replaces_another_without_overwrite_and_never_shares_its_folder(
        prepared, tmp_path, capsys):
    out = tmp_path / "o"
    main(*args(prepared, out))
    before = (out / "ckpt.pt").read_bytes()
    assert "already holds a run" in stopped(capsys, *args(prepared, out), code=2)
    line = stopped(capsys, *args(prepared, out), "--overwrite=True", "--latent_dim=8", code=2)
    assert "d_h" in line and (out / "ckpt.pt").read_bytes() == before
    holder = RunDir(out)
    line = stopped(capsys, *args(prepared, out), "--overwrite=True", code=2)
    assert f"in use by another training run (PID {os.getpid()})" in line
    holder._lock.release()
    main(*args(prepared, out), "--overwrite=True", "--seed=1")
    assert load_checkpoint(out / "ckpt.pt")["config"]["seed"] == 1


def test_a_diverged_run_ends_in_one_line_naming_its_last_good_checkpoint(prepared, tmp_path,
                                                                        monkeypatch, capsys):
    def poison(model):
        with torch.no_grad():
            next(p for p in model.parameters() if p.requires_grad).fill_(float("nan"))
    at_step(monkeypatch, 6, poison)
    out = tmp_path / "o"
    line = stopped(capsys, *args(prepared, out))
    assert line == (f"step 8: the losses are nan, nan (val). Training diverged; try a lower "
                    f"--learning_rate (now 0.001). The last good checkpoint is {out / 'ckpt.pt'} "
                    f"(step 4).")
    saved = load_checkpoint(out / "ckpt.pt")
    assert all(t.isfinite().all() for t in saved["model"].values())


@pytest.mark.parametrize("setting", ["--device=cpuu", "--learning_rate=nan", "--epochs=0",
                                     "--noise_sigma=-0.5", "--init_from=resum", "--flips=3",
                                     "--task=mnist_sr", "--shape=conventional"])
def test_every_bad_setting_is_one_line_before_anything_is_written(setting, tmp_path, capsys):
    extra = ["--latent_dim=64", "--hidden_dim=32"] if setting == "--shape=conventional" else []
    stopped(capsys, "--device=cpu", setting, *extra, f"--out_dir={tmp_path / 'o'}",
            "--init_from=resume" if setting == "--task=mnist_sr" else "--seed=0", code=2)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_has_its_whole_protocol_in_its_config_file(name):
    config = T.task_protocol(name)
    unset = [key for key in T.PROTOCOL_KEYS if config[key] is None]
    assert config["task"] == name and unset == ([] if "denoise" in name else ["noise_sigma"])
