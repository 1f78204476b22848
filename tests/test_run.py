"""Tests of run.py, what keeps a training run safe, called directly (train.py's own runs of the same
paths are in test_train.py and test_edges.py): the out_dir lock, metrics.jsonl written and read a
whole line at a time, resume settings, RNG states and the time budget. CPU, offline, fast."""

import os

import pytest
import torch

import run
from checkpoint import load_checkpoint, save_checkpoint
from run import (NOT_RESUMED, RunDir, TimeBudget, all_rng_states, read_jsonl, restore_rng,
                 resume_settings)

MODEL_KEYS = ["block_size", "n_layer", "n_embd", "n_head"]
CONFIG = dict(out_dir="out", init_from="scratch", overwrite=False, batch_size=4, block_size=16,
              n_layer=1, n_embd=32, n_head=2, model_type="gpt", model_args={}, learning_rate=1e-3,
              warmup_iters=2, stop_val_loss=0.0)


def test_a_second_run_into_a_locked_out_dir_stops_in_one_line_naming_the_holder(tmp_path):
    first = RunDir(tmp_path / "o")
    assert (tmp_path / "o" / "run.lock").read_text() == str(os.getpid())
    with pytest.raises(SystemExit) as info:
        RunDir(tmp_path / "o")  # another open file: flock refuses it even in this process
    message = str(info.value)
    assert f"in use by another training run (PID {os.getpid()})" in message and "\n" not in message
    del first
    RunDir(tmp_path / "other", lock=False)  # (torchrun: ranks other than 0 take no lock)
    assert not (tmp_path / "other").exists()


def test_a_scratch_run_refuses_to_replace_a_previous_run_unless_told(tmp_path):
    out = RunDir(tmp_path / "o")
    out.refuse_to_replace("scratch", overwrite=False)  # an empty folder: nothing to replace
    out.log({"iter": 0, "loss": 1.0})
    with pytest.raises(SystemExit, match="--overwrite=True"):
        out.refuse_to_replace("scratch", overwrite=False)
    out.refuse_to_replace("resume", overwrite=False)
    out.refuse_to_replace("scratch", overwrite=True)
    out.remove_previous_run()
    assert not out.metrics.exists()


def test_log_and_read_jsonl_round_trip_and_a_torn_last_line_is_dropped(tmp_path, capsys):
    out = RunDir(tmp_path / "o")
    rows = [{"iter": 0, "val_loss": 2.0}, {"iter": 0, "loss": 2.1}, {"iter": 1, "loss": 1.9}]
    for row in rows:
        out.log(row)
    assert read_jsonl(out.metrics) == rows
    with open(out.metrics, "a") as f:
        f.write('{"iter": 2, "lo')  # what a write cut short by a full disk leaves
    assert read_jsonl(out.metrics) == rows
    assert "torn line" in capsys.readouterr().err
    out.metrics.write_text('{"iter": 0}\nnot json\n{"iter": 1}\n')  # damage inside the file
    with pytest.raises(SystemExit, match="line 2, is not JSON"):
        read_jsonl(out.metrics)
    assert read_jsonl(tmp_path / "none.jsonl") == []


def test_a_resume_drops_the_rows_logged_after_its_checkpoint(tmp_path):
    out = RunDir(tmp_path / "o")
    for row in ({"iter": 3, "loss": 1.0}, {"iter": 4, "val_loss": 0.9}, {"iter": 4, "loss": 0.8},
                {"iter": 5, "loss": 0.7}):
        out.log(row)
    out.drop_repeated_metrics(4)  # the checkpoint is step 4: its evaluation stays, its step goes
    assert read_jsonl(out.metrics) == [{"iter": 3, "loss": 1.0}, {"iter": 4, "val_loss": 0.9}]


def test_save_intact_diverged_name_the_last_good_checkpoint(tmp_path):
    out = RunDir(tmp_path / "o")
    assert out.intact() == "no checkpoint was saved yet"
    assert "No good checkpoint was saved" in str(out.diverged(3, "the loss is nan", CONFIG))
    out.save({"iter_num": 4, "w": torch.ones(2)})
    assert out.last_good_step == 4 and "(step 4), is intact" in out.intact()
    message = str(out.diverged(5, "the loss is nan", CONFIG))
    assert message.startswith("step 5: the loss is nan. Training diverged")
    assert "learning_rate (now 0.001)" in message and f"{out.ckpt} (step 4)" in message


def saved_run(path, **extra):
    """A checkpoint as train.py saves one, of CONFIG's run at step 4."""
    args = dict(vocab_size=50, block_size=16, n_layer=1, n_embd=32, n_head=2)
    save_checkpoint(dict(model={}, model_type="gpt", model_args=args, iter_num=4,
                         best_val_loss=1.5, config=dict(CONFIG, batch_size=8, out_dir="old"),
                         **extra), path)
    return path


def test_resume_takes_the_checkpoints_settings_but_not_where_it_runs(tmp_path, capsys):
    path = saved_run(tmp_path / "ckpt.pt")
    config = dict(CONFIG, out_dir="new", learning_rate=5e-4)
    checkpoint, resumed = resume_settings(path, config, {"out_dir", "learning_rate"}, MODEL_KEYS)
    assert checkpoint["iter_num"] == 4
    assert resumed["batch_size"] == 8  # the run's own
    assert resumed["out_dir"] == "new" and "out_dir" in NOT_RESUMED  # where this one runs
    assert resumed["learning_rate"] == 5e-4  # given: kept, with a note
    assert "learning_rate=0.0005 (the checkpoint's run had 0.001)" in capsys.readouterr().out


def test_resume_refuses_another_shape_and_a_file_that_is_not_a_run(tmp_path):
    path = saved_run(tmp_path / "ckpt.pt")
    with pytest.raises(SystemExit, match="with a different model: n_layer=2"):
        resume_settings(path, dict(CONFIG, n_layer=2), {"n_layer"}, MODEL_KEYS)
    save_checkpoint({"w": torch.ones(1)}, tmp_path / "other.pt")
    with pytest.raises(SystemExit, match="not a checkpoint of this repo's train.py"):
        resume_settings(tmp_path / "other.pt", CONFIG, set(), MODEL_KEYS)
    with pytest.raises(SystemExit, match="no checkpoint at"):
        resume_settings(tmp_path / "none.pt", CONFIG, set(), MODEL_KEYS)


def test_a_run_that_reached_its_target_has_nothing_to_resume(tmp_path, capsys):
    path = saved_run(tmp_path / "ckpt.pt", reached_target=True)
    with pytest.raises(SystemExit) as info:
        resume_settings(path, dict(CONFIG, stop_val_loss=2.0), {"stop_val_loss"}, MODEL_KEYS)
    assert info.value.code == 0 and "Nothing to train" in capsys.readouterr().out
    resume_settings(path, dict(CONFIG, stop_val_loss=1.0), {"stop_val_loss"}, MODEL_KEYS)


def test_restored_rng_states_draw_what_the_saved_run_drew(tmp_path):
    sampler = torch.Generator().manual_seed(1)
    torch.manual_seed(2)
    checkpoint = {"iter_num": 4, "rng": {"ranks": all_rng_states(sampler.get_state(), "cpu",
                                                                  ddp=False)}}
    save_checkpoint(checkpoint, tmp_path / "ckpt.pt")  # what a resume reads back: CPU tensors
    expected = torch.randint(100, (5,), generator=sampler), torch.rand(3)
    checkpoint = load_checkpoint(tmp_path / "ckpt.pt")
    other = torch.Generator().manual_seed(9)
    assert restore_rng(checkpoint, 0, 1, other, seed=9, device_type="cpu") is None
    assert torch.equal(torch.randint(100, (5,), generator=other), expected[0])
    assert torch.equal(torch.rand(3), expected[1])
    note = restore_rng(checkpoint, 1, 2, other, seed=9, device_type="cpu")  # a new second process
    assert "holds the RNG states of 1 process(es), this run has 2" in note


def test_the_time_budget_fixes_max_iters_once_from_the_timed_steps(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(run.time, "time", lambda: clock[0])
    budget = TimeBudget(minutes=1, script_start=90.0, eval_interval=10, ddp=False, master=False)
    loss = torch.tensor(1.0)
    for step in range(TimeBudget.LAST):
        assert budget.measure(step, loss, eval_s=2.0) is None
        clock[0] += 0.25  # a step takes 0.25 s
    # steps 10-50 timed at 0.25 s each; 60 - (112.5 - 90) s left; a step costs 0.25 + 2 / 10 s
    left = 60 - (clock[0] - 90.0)
    assert budget.measure(TimeBudget.LAST, loss, eval_s=2.0) == TimeBudget.LAST + 1 + int(
        left / (0.25 + 0.2))
    assert budget.measure(TimeBudget.LAST + 1, loss, eval_s=2.0) is None  # decided once
