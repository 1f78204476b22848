"""Nothing lost at the edges of train_mlp.py, as at train.py's (test_edges.py): a finished run run
again, a run killed after its first checkpoint and resumed, two runs in one folder, a full disk,
--overwrite, SIGTERM, a diverged run, and one line for every bad setting. Each row failed before
train_mlp.py had a run folder. In-process where the behaviour is train_mlp's own (tiny models, the
digit-like images of conftest.py); a child process where it is the command line's (a signal)."""

import errno
import gc
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT, at_step, digit_splits, write_prepared

from shapelab import checkpoint
from shapelab.run import RunDir
import train_mlp as T


class Killed(BaseException):
    """What a kill -9 does to the process, in-process: it stops between two lines."""


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    folder = tmp_path_factory.mktemp("digits") / "prepared"
    return write_prepared(folder, digit_splits(n_train=256, n_val=64, n_test=64))


def args(prepared, out, *extra):
    """A tiny run: 12 steps, a checkpoint every 4; with 2 flips an epoch is 8 steps, so resuming
    from step 4 starts mid-epoch and from step 8 at an epoch's start. One thread in every run,
    the module-scoped ones included (conftest's one-thread fixture comes after those): sums over
    another number of threads round differently."""
    return ["--task=mnist_sr", f"--prepared_dir={prepared}", "--latent_dim=256",
            "--hidden_dim=16", "--n_blocks=1", "--batch_size=64", "--max_iters=12",
            "--eval_interval=4", "--flips=2", "--dtype=float32", "--device=cpu", "--log_interval=1",
            "--num_threads=1", f"--out_dir={out}", *extra]


def main(*argv):
    """train_mlp.py's command line, in this process."""
    T.main(list(argv))
    gc.collect()  # (the run's folder and its lock go)


def stopped(capsys, *argv, kind=SystemExit):
    """train_mlp.py's command line, in this process, ended by `kind`: (the exception, the one
    line that says why: SystemExit's message, or what usage_error printed)."""
    try:
        T.main(list(argv))
    except kind as e:
        stop = e
    else:
        raise AssertionError(f"{argv} ran to its end")
    stop.__traceback__ = stop.__context__ = None  # (they hold the run's folder and its lock)
    gc.collect()
    err = capsys.readouterr().err
    text = stop.code if isinstance(getattr(stop, "code", None), str) else err
    assert text.strip() and len(text.strip().splitlines()) == 1, text
    return stop, text.strip()


@pytest.fixture(scope="module")
def whole(prepared, tmp_path_factory):
    """The uninterrupted run: its final checkpoint and test metrics."""
    out = tmp_path_factory.mktemp("whole")
    main(*args(prepared, out))
    metrics = json.loads((out / "result.json").read_text())
    return checkpoint.load_checkpoint(out / "ckpt.pt"), metrics


def kill(model):
    raise Killed


def same_run(out, whole):
    """The run in out ended with the uninterrupted run's weights (best and last) and numbers."""
    ckpt = checkpoint.load_checkpoint(out / "ckpt.pt")
    metrics = json.loads((out / "result.json").read_text())
    for weights, uninterrupted in ((ckpt["model"], whole[0]["model"]),
                                   (ckpt["train_state"]["model"],
                                    whole[0]["train_state"]["model"])):
        assert all(torch.equal(weights[k], uninterrupted[k]) for k in uninterrupted)
    assert (ckpt["best_iter"], ckpt["best_val_loss"], ckpt["iter_num"]) == (
        whole[0]["best_iter"], whole[0]["best_val_loss"], 12)
    assert metrics["test"] == whole[1]["test"] and metrics["best_iter"] == whole[1]["best_iter"]
    assert [h["val_loss"] for h in ckpt["train_state"]["history"]] == [
        h["val_loss"] for h in whole[0]["train_state"]["history"]]


def test_a_finished_run_run_again_leaves_its_checkpoint_byte_identical(prepared, tmp_path,
                                                                       capsys):
    out = tmp_path / "o"
    main(*args(prepared, out))
    before = (out / "ckpt.pt").read_bytes()
    _, line = stopped(capsys, *args(prepared, out))  # the same command again: refused
    assert "already holds a run" in line and "--init_from=resume" in line
    main(*args(prepared, out), "--init_from=resume")  # resumed: finished, nothing to train
    assert "this run finished at step 12: nothing to train" in capsys.readouterr().out
    assert (out / "ckpt.pt").read_bytes() == before


def test_a_run_killed_after_its_first_checkpoint_resumes_to_the_same_numbers(
        prepared, whole, tmp_path, monkeypatch, capsys):
    out, saved, save, make_optimizer = tmp_path / "o", [], RunDir.save, T.make_optimizer
    monkeypatch.setattr(RunDir, "save", lambda self, state: (
        saved.append((state["iter_num"], state["best_val_loss"])), save(self, state)))
    at_step(monkeypatch, 10, kill)  # killed in step 10: the last checkpoint is step 8's
    with pytest.raises(Killed):
        T.main(args(prepared, out))
    gc.collect()
    assert checkpoint.load_checkpoint(out / "ckpt.pt")["iter_num"] == 8
    monkeypatch.setattr(T, "make_optimizer", make_optimizer)  # the same command, resumed
    capsys.readouterr()
    main(*args(prepared, out), "--init_from=resume")
    assert f"resuming from {out / 'ckpt.pt'} at step 8" in capsys.readouterr().out
    same_run(out, whole)
    assert [s[0] for s in saved] == [4, 8, 12]
    best = [s[1] for s in saved]  # the best model is only ever replaced by a better one
    assert best == sorted(best, reverse=True)


def test_a_second_run_into_a_busy_out_dir_refuses_in_one_line(prepared, tmp_path, capsys):
    out = tmp_path / "o"
    holder = RunDir(out)  # a run in progress (the lock is the folder's, whoever holds it)
    stop, line = stopped(capsys, *args(prepared, out))
    assert stop.code == 2 and f"in use by another training run (PID {os.getpid()})" in line
    assert not (out / "ckpt.pt").exists()
    del holder


def test_a_full_disk_while_saving_names_the_intact_checkpoint_and_the_run_resumes(
        prepared, whole, tmp_path, monkeypatch, capsys):
    out, saves = tmp_path / "o", [0]
    save = RunDir.save

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    def second_save_fails(self, state):
        saves[0] += 1
        if saves[0] == 2:
            monkeypatch.setattr(checkpoint._RecordedWrites, "write", full)
        save(self, state)
    monkeypatch.setattr(RunDir, "save", second_save_fails)
    _, message = stopped(capsys, *args(prepared, out))
    assert "no space left" in message and "the previous ckpt.pt (step 4) is intact" in message
    assert "--init_from=resume" in message
    assert not list(out.glob("*.tmp*"))
    monkeypatch.undo()  # space is back
    main(*args(prepared, out), "--init_from=resume")
    same_run(out, whole)


def test_overwrite_replaces_a_run_only_once_the_new_one_can_start(prepared, tmp_path, capsys):
    out = tmp_path / "o"
    main(*args(prepared, out))
    before = (out / "ckpt.pt").read_bytes()
    for bad, why in (("--batch_size=100000", "less than one batch"), ("--latent_dim=8", "d_h")):
        _, line = stopped(capsys, *args(prepared, out), "--overwrite=True", bad)
        assert why in line and (out / "ckpt.pt").read_bytes() == before
    main(*args(prepared, out), "--overwrite=True", "--seed=1")
    assert checkpoint.load_checkpoint(out / "ckpt.pt")["config"]["seed"] == 1


def test_a_diverged_run_stops_in_one_line_naming_its_last_good_checkpoint(prepared, tmp_path,
                                                                         monkeypatch, capsys):
    def poison(model):
        with torch.no_grad():
            next(p for p in model.parameters() if p.requires_grad).fill_(float("nan"))
    at_step(monkeypatch, 6, poison)  # the weights are NaN from step 6 on
    out = tmp_path / "o"
    stop, line = stopped(capsys, *args(prepared, out))
    assert stop.code != 0 and line == (f"step 7: the loss is nan. Training diverged; try a lower "
                                       f"--learning_rate (now 0.001). The last good checkpoint is "
                                       f"{out / 'ckpt.pt'} (step 4).")
    saved = checkpoint.load_checkpoint(out / "ckpt.pt")
    assert saved["iter_num"] == 4 and all(bool(torch.isfinite(t).all()) for t in [
        *saved["model"].values(), *saved["train_state"]["model"].values()])


def test_resume_takes_a_new_learning_rate_with_a_note_and_refuses_another_model_or_data(
        prepared, tmp_path, capsys):
    """run.resume_policy, as train.py's resume: a setting given with another value is taken and
    named in a note; one that defines the model or the data it sees (SHAPE_KEYS) is refused."""
    out = tmp_path / "o"
    _, line = stopped(capsys, *args(prepared, out), "--init_from=resume")
    assert f"there is no {out / 'ckpt.pt'} to resume" in line and not out.exists()
    main(*args(prepared, out), "--max_iters=4")
    for setting, saved in (("--seed=1", 0), ("--batch_size=32", 64), ("--n_blocks=2", 1),
                           ("--flips=1", 2)):
        stop, line = stopped(capsys, *args(prepared, out), setting, "--init_from=resume")
        assert line == (f"error: resuming {out / 'ckpt.pt'} with a different model: "
                        f"{setting[2:]} (the checkpoint has {saved}). Drop these settings to "
                        f"resume, or train the new shape into another --out_dir"), line
    capsys.readouterr()
    main(*args(prepared, out), "--learning_rate=2e-3", "--init_from=resume")
    assert ("note: resuming with settings that differ from the run's: learning_rate=0.002 (the "
            "checkpoint's run had 0.001); max_iters=12 (the checkpoint's run had 4)"
            ) in capsys.readouterr().out
    resumed = checkpoint.load_checkpoint(out / "ckpt.pt")
    assert resumed["iter_num"] == 12 and resumed["config"]["learning_rate"] == 2e-3
    assert resumed["train_state"]["history"][-1]["lr"] == pytest.approx(2e-3 * (1 - 11 / 12))
    old = tmp_path / "old"  # a model saved for scoring only: no training state
    old.mkdir()
    ckpt = checkpoint.load_checkpoint(out / "ckpt.pt")
    torch.save({k: ckpt[k] for k in ("model", "config", "best_iter", "best_val_loss",
                                          "data")},
               old / "ckpt.pt")
    _, line = stopped(capsys, *args(prepared, old), "--init_from=resume")
    assert "holds no training state to resume" in line


def test_resuming_into_a_language_models_out_dir_suggests_a_new_one(prepared, tmp_path, capsys):
    """The image MLP's resume into train.py's out_dir: its one line suggested --overwrite=True,
    which would replace the language model's run; it names a new --out_dir instead."""
    gpt = tmp_path / "out"
    gpt.mkdir()
    lm = {"model": {}, "model_type": "gpt", "model_args": {}, "iter_num": 5, "config": {},
          "meta": {"tokenizer": "char"}, "optimizer": {}, "best_val_loss": 2.0}
    checkpoint.save_checkpoint(lm, gpt / "ckpt.pt")
    before = (gpt / "ckpt.pt").read_bytes()
    _, line = stopped(capsys, *args(prepared, gpt), "--init_from=resume")
    assert "language model" in line and "new --out_dir" in line and "overwrite" not in line
    assert (gpt / "ckpt.pt").read_bytes() == before


@pytest.mark.parametrize("setting,message", [
    ("--device=cpuu", "device='cpuu': use auto, cpu, cuda, cuda:<index> or mps"),
    ("--device=cuda:x", "device='cuda:x': use auto, cpu, cuda, cuda:<index> or mps"),
    ("--learning_rate=nan", "--learning_rate=nan: it must be a finite number"),
    ("--learning_rate=1e999", "--learning_rate=inf: it must be a finite number"),
    ("--epochs=inf", "--epochs=inf: it must be a finite number"),
    ("--noise_sigma=nan", "--noise_sigma=nan: it must be a finite number"),
    ("--noise_sigma=-0.5", "--noise_sigma=-0.5: it must be 0 or more"),
    ("--init_from=resum", "--init_from=resum: use scratch or resume"),
])
def test_every_bad_setting_is_one_line_with_exit_status_2(setting, message, tmp_path, capsys):
    stop, line = stopped(capsys, "--device=cpu", setting, f"--out_dir={tmp_path / 'o'}")
    assert stop.code == 2 and line == f"error: {message}", line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("case", ["a file", "read-only"])
def test_an_out_dir_that_cannot_hold_a_run_is_one_line(case, prepared, tmp_path, capsys):
    out = tmp_path / "o"
    if case == "a file":
        out.write_text("not a folder")
    else:
        out.mkdir()
        out.chmod(0o500)
        if os.access(out, os.W_OK):  # (root writes anyway)
            pytest.skip("this user can write into a read-only folder")
    stop, line = stopped(capsys, *args(prepared, out))
    assert stop.code == 2 and str(out) in line, line


def test_sigterm_is_ctrl_c_one_line_with_the_command_that_resumes(prepared, tmp_path):
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, str(ROOT / "train_mlp.py"), *args(
        prepared, out, "--max_iters=1000000", "--log_interval=1000")], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + 60
    while not (out / "ckpt.pt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode not in (0, -signal.SIGTERM) and "Traceback" not in err, err
    step = checkpoint.load_checkpoint(out / "ckpt.pt")["iter_num"]
    assert len(err.strip().splitlines()) == 1, err
    assert f"the last checkpoint is {out / 'ckpt.pt'} (step {step})" in err
    assert err.strip().endswith("--log_interval=1000 --init_from=resume"), err
    assert not list(out.glob("*.tmp*"))


@pytest.mark.parametrize("held,message", [
    ([1, 2], "holds a list, not the dict a checkpoint is"),
    (torch.zeros(2), "holds a Tensor, not the dict a checkpoint is"),
    ({"config": [1]}, "is not a checkpoint of train_mlp.py")])
def test_eval_only_on_a_checkpoint_that_is_not_a_dict_is_one_line(tmp_path, capsys, held,
                                                                  message):
    """--eval_only=True on a ckpt.pt holding a list (.get on a list), a tensor, or a dict that is
    not train_mlp.py's: checkpoint.load_checkpoint's line, or train_mlp.py's (exit status 2)."""
    (tmp_path / "o").mkdir()
    torch.save(held, tmp_path / "o" / "ckpt.pt")
    stop, line = stopped(capsys, "--eval_only=True", f"--out_dir={tmp_path / 'o'}",
                         "--device=cpu")
    assert stop.code != 0 and message in line, line
    assert stop.code == 2 or "corrupt or truncated" in line
