"""train.py and sample.py from their command lines: run in this process (conftest.run_here), or
as a child process where a signal or torchrun is what is tested."""

import math
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import ROOT, run_here
from shapelab.checkpoint import load_checkpoint
from shapelab.run import RunDir, read_jsonl

TINY = ["--n_layer=2", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
        "--eval_iters=2", "--log_interval=1", "--dropout=0.1", "--dtype=float32",
        "--sample_tokens=0", "--warmup_iters=2", "--lr_decay_iters=8", "--device=cpu"]


def train(data, out, *args, check=True):
    result = run_here("train.py", *TINY, f"--data_dir={data}", f"--out_dir={out}", *args)
    assert not check or result.returncode == 0, result.stdout + result.stderr
    return result


def one_line(result, code):
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == code and len(lines) == 1, (result.returncode, result.stderr)
    return lines[0]


def losses(out):
    return {r["iter"]: r["loss"] for r in read_jsonl(out / "metrics.jsonl") if "loss" in r}


def test_a_tiny_model_overfits_on_the_schedule_of_get_lr_and_sample_prints_its_text(
        char_dataset, tmp_path):
    out = tmp_path / "o"
    train(char_dataset, out, "--max_iters=40", "--eval_interval=40", "--learning_rate=1e-2",
          "--warmup_iters=5", "--lr_decay_iters=30", "--min_lr=1e-3", "--dropout=0.0")
    rows = read_jsonl(out / "metrics.jsonl")
    evals = [r["val_loss"] for r in rows if "val_loss" in r]
    assert evals[-1] < evals[0] - 0.5

    def expected_lr(it):  # nanoGPT's warm-up, cosine decay, then min_lr
        if it < 5:
            return 1e-2 * (it + 1) / 6
        ratio = min(1.0, (it - 5) / (30 - 5))
        return 1e-3 + 0.5 * (1 + math.cos(math.pi * ratio)) * (1e-2 - 1e-3)
    lrs = [r["lr"] for r in rows if "lr" in r]
    assert lrs == pytest.approx([expected_lr(i) for i in range(40)])
    sample = run_here("sample.py", f"--out_dir={out}", "--start=All:", "--num_samples=1",
                      "--max_new_tokens=30", "--temperature=0")
    assert sample.returncode == 0 and "All:" in sample.stdout, sample.stderr


def test_resume_continues_exactly_and_refuses_another_shape(char_dataset, tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    train(char_dataset, whole, "--max_iters=8", "--eval_interval=4")
    train(char_dataset, part, "--max_iters=4", "--eval_interval=4")
    refused = train(char_dataset, part, "--max_iters=8", "--eval_interval=4", "--n_layer=3",
                    "--init_from=resume", check=False)
    assert "n_layer=3 (the checkpoint has 2)" in one_line(refused, 1)
    train(char_dataset, part, "--max_iters=8", "--eval_interval=4", "--init_from=resume")
    assert losses(part) == losses(whole) and sorted(losses(part)) == list(range(8))
    a, b = load_checkpoint(whole / "ckpt.pt"), load_checkpoint(part / "ckpt.pt")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["optimizer"]["state"][0]["exp_avg"].equal(b["optimizer"]["state"][0]["exp_avg"])


def test_a_run_never_replaces_another_or_deletes_a_users_file_without_overwrite(char_dataset,
                                                                                 tmp_path):
    out = tmp_path / "o"
    (out / "previous_run").mkdir(parents=True)
    (out / "previous_run" / "results.csv").write_text("data")  # a user's file, not a run's
    (out / "metrics.jsonl").write_text('{"iter": 5, "loss": 1.0}\n')  # no checkpoint: no run
    train(char_dataset, out, "--max_iters=2", "--eval_interval=2")
    assert sorted(losses(out)) == [0, 1]
    first = (out / "ckpt.pt").read_bytes()
    again = train(char_dataset, out, "--max_iters=3", "--eval_interval=3", check=False)
    assert "already holds a run" in one_line(again, 2)
    bad = train(char_dataset, out, "--overwrite=True", "--n_embd=33", check=False)
    assert "n_embd" in one_line(bad, 2) and (out / "ckpt.pt").read_bytes() == first
    train(char_dataset, out, "--max_iters=3", "--eval_interval=3", "--overwrite=True")
    assert load_checkpoint(out / "ckpt.pt")["iter_num"] == 3 and min(losses(out)) == 0
    assert [r["iter"] for r in read_jsonl(out / "metrics.jsonl") if "val_loss" in r] == [0, 3]
    assert (out / "previous_run" / "results.csv").read_text() == "data"
    assert "deletes the run already in out_dir" in run_here("train.py", "--help").stdout


def test_a_diverged_run_ends_in_one_line_and_never_saves_its_weights(char_dataset, tmp_path):
    out = tmp_path / "o"
    result = train(char_dataset, out, "--max_iters=50", "--eval_interval=1", "--grad_clip=0.0",
                   "--learning_rate=1e8", "--warmup_iters=0", check=False)
    message = one_line(result, 1)
    step = load_checkpoint(out / "ckpt.pt")["iter_num"]
    assert "Training diverged" in message and f"checkpoint is {out / 'ckpt.pt'} (step {step})" \
        in message
    assert all(v.isfinite().all() for v in load_checkpoint(out / "ckpt.pt")["model"].values())


def test_max_minutes_ends_on_time_on_a_machine_that_gets_busy(char_dataset, tmp_path,
                                                              monkeypatch):
    clock = [0.0, 0.002]  # now, and the seconds that pass between two readings

    def slower_and_slower():  # other programs take more and more of the cores
        clock[0], clock[1] = clock[0] + clock[1], clock[1] * 1.01
        return clock[0]
    monkeypatch.setattr(time, "monotonic", slower_and_slower)
    result = train(char_dataset, tmp_path / "o", "--max_iters=0", "--max_minutes=0.05",
                   "--eval_interval=20")
    monkeypatch.undo()
    saved = load_checkpoint(tmp_path / "o" / "ckpt.pt")
    plan = saved["time_plan"]
    assert 2.5 < saved["elapsed_s"] < 3.1 and plan["max_iters"] > 20, (saved["elapsed_s"], plan)
    assert "time limit 0.05 min: max_iters=" in result.stdout and " min to go" in result.stdout
    resumed = train(char_dataset, tmp_path / "o", "--max_iters=0", "--max_minutes=0.05",
                    "--init_from=resume")  # its plan and its clock: nothing left to train
    assert f"done: {plan['max_iters']} steps" in resumed.stdout and "iter " not in resumed.stdout


def stop(command, line, signum):
    """Start command, send signum once stdout shows `line`, and return what it printed."""
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    for text in proc.stdout:
        if line in text:
            proc.send_signal(signum)
            break
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_in_one_line_naming_the_checkpoint_and_the_command_that_goes_on(
        char_dataset, tmp_path, signum):
    """Ctrl-C after a checkpoint: the command that resumes; SIGTERM before the first one: the
    command that starts again."""
    out = tmp_path / "o"
    interval = 3 if signum == signal.SIGINT else 100000
    command = [sys.executable, str(ROOT / "train.py"), *TINY, f"--data_dir={char_dataset}",
               f"--out_dir={out}", f"--eval_interval={interval}", "--max_iters=100000"]
    message = one_line(stop(command, "saved checkpoint" if interval == 3 else "iter 2/", signum),
                       128 + signum)
    if signum == signal.SIGTERM:
        assert message.startswith("stopped by SIGTERM before the first checkpoint: start again "
                                  "with: python ")
        assert shlex.split(message.split("start again with: python ")[1]) == command[1:]
        return
    step = load_checkpoint(out / "ckpt.pt")["iter_num"]
    assert message.startswith(f"interrupted: the last checkpoint is {out / 'ckpt.pt'} (step "
                              f"{step}); continue the run with: python ")
    goes_on = shlex.split(message.split("continue the run with: python ")[1])
    assert goes_on[0] == str(ROOT / "train.py") and goes_on[-1] == "--init_from=resume"
    resumed = run_here("train.py", *goes_on[1:], "--max_iters=20")
    assert resumed.returncode == 0 and f"at step {step}" in resumed.stdout, resumed.stderr


SNAPSHOT = """
import os, runpy, shutil, sys
sys.path.insert(0, os.getcwd())
from shapelab.run import RunDir
save, copy = RunDir.save, sys.argv[1]
def save_and_copy(self, state):  # the folder as a run stopped after its step-4 checkpoint left it
    save(self, state)
    if state["iter_num"] == 4:
        shutil.copytree(self.dir, copy, ignore=shutil.ignore_patterns("run.lock"))
RunDir.save = save_and_copy
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_ddp_resume_continues_exactly(char_dataset, tmp_path):
    """Two gloo processes: each rank's batch sampler and dropout RNG are saved and given back."""
    whole, part = tmp_path / "whole", tmp_path / "part"
    (tmp_path / "snapshot.py").write_text(SNAPSHOT)
    for out, first in ((whole, [str(tmp_path / "snapshot.py"), str(part)]), (part, [])):
        result = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
             *first, str(ROOT / "train.py"), *TINY, f"--data_dir={char_dataset}",
             f"--out_dir={out}", "--eval_interval=4", "--gradient_accumulation_steps=2",
             "--max_iters=8", *([] if first else ["--init_from=resume"])],
            cwd=ROOT, capture_output=True, text=True, timeout=180,
            env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert result.returncode == 0 and "terminate called" not in result.stderr, result.stderr
    assert losses(part) == losses(whole) and sorted(losses(part)) == list(range(8))


BAD = {  # arguments -> (exit status, words of its one line)
    ("--n_layr=2",): (2, "Did you mean n_layer"),
    ("--n_kv_head=two",): (2, "n_kv_head='two' is a str, but n_kv_head must be a int or None"),
    ("--beta2=1.5",): (2, "beta2=1.5: it must be in [0, 1)"),
    ("--dtype=fp32",): (2, "dtype='fp32'"),
    ("--n_embd=33",): (2, "n_embd"),
    ("--max_minutes=1e999",): (2, "max_minutes=inf: not finite"),
    ("--device=cuda:x",): (2, "device='cuda:x'"),
}


@pytest.mark.parametrize("args", BAD, ids=lambda args: args[0][:20])
def test_a_bad_setting_is_one_line_before_anything_is_built(args, char_dataset, tmp_path):
    code, words = BAD[args]
    result = train(char_dataset, tmp_path / "o", "--max_iters=2", *args, check=False)
    assert words in one_line(result, code) and not (tmp_path / "o").exists()


@pytest.mark.parametrize("config", ["import os\nos.mkdir('ran')\n", "x = __import__('os')\n",
                                    "out_dir = [[0] * 999999] * 999999\n", "a = 'x' * 10**9\n",
                                    "n_layer = 2 ** 10 ** 10\n", "n_layer = (" * 500 + ")" * 500])
def test_a_config_file_is_data_never_run(config, char_dataset, tmp_path):
    (tmp_path / "my.py").write_text(config)
    start = time.monotonic()
    result = run_here("train.py", str(tmp_path / "my.py"), cwd=tmp_path)
    assert len(one_line(result, 2)) < 200 and time.monotonic() - start < 5
    assert not (tmp_path / "ran").exists()


def test_a_second_run_into_a_locked_out_dir_is_one_line(char_dataset, tmp_path):
    holder = RunDir(tmp_path / "o")  # a run of this process holds out_dir
    result = train(char_dataset, tmp_path / "o", "--max_iters=2", check=False)
    assert f"is in use by another training run (PID {os.getpid()})" in one_line(result, 2)
    holder._lock.release()
    (tmp_path / "file").write_text("not a folder")
    result = train(char_dataset, tmp_path / "file", "--max_iters=2", check=False)
    assert "out_dir=" in one_line(result, 2)


def test_a_checkpoint_no_train_py_wrote_is_one_line_in_resume_and_sample(tmp_path):
    (tmp_path / "o").mkdir()
    torch.save({"model": {}, "hello": 1}, tmp_path / "o" / "ckpt.pt")
    result = run_here("train.py", f"--out_dir={tmp_path / 'o'}", "--init_from=resume")
    assert "not a checkpoint of train.py" in one_line(result, 1)
    (tmp_path / "o" / "ckpt.pt").write_bytes(b"")
    assert "damaged" in one_line(run_here("sample.py", f"--out_dir={tmp_path / 'o'}"), 1)
