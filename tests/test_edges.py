"""Nothing lost at the edges: a full disk, two runs in one folder, --overwrite, a resume's settings,
a run that reached its target or its end, Ctrl-C and SIGTERM, a time limit on a busy machine, and
one line for every bad setting. Each row reproduces what a user hit, from the command line a user
types: in a child process where a signal, a second process or a launcher is what is tested, else
in this process (conftest.run_here: the same exit status, stdout and stderr)."""

import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import ROOT, run_here
from shapelab.checkpoint import load_checkpoint
from shapelab.configurator import ConfigError, check_train_settings
from shapelab.run import read_jsonl
from shapes import check_model_settings, train_defaults

TINY = ["--n_layer=2", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
        "--eval_iters=2", "--log_interval=1", "--dtype=float32", "--sample_tokens=0",
        "--warmup_iters=2", "--lr_decay_iters=12", "--device=cpu"]

# Runs a script whose writes to metrics.jsonl fill the disk after $FULL_AFTER rows: the next row
# is written halfway, then ENOSPC (what a full disk does), without needing a real full disk.
FULL_DISK = r'''
import errno, os, runpy, sys
rows_left = [int(os.environ["FULL_AFTER"])]
real_write = os.write
def write(fd, data):
    if os.readlink(f"/proc/self/fd/{fd}").endswith("metrics.jsonl"):
        if rows_left[0] == 0:
            real_write(fd, data[:len(data) // 2])  # what fits, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        rows_left[0] -= 1
    return real_write(fd, data)
os.write = write
sys.path.insert(0, sys.argv[1])
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def train(*args, check=True, env=None, launcher=None, timeout=180):
    """train.py's command line: in this process (conftest.run_here) unless it runs under a
    launcher, in a child process of its own (the runs stopped by a signal start theirs)."""
    if launcher is None and env is None:
        result = run_here("train.py", *args)
    else:
        result = subprocess.run([sys.executable, str(launcher), str(ROOT), str(ROOT / "train.py"),
                                 *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                                timeout=timeout,
                                env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def one_line(result, code=None):
    assert result.returncode != 0 and (code is None or result.returncode == code), result
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def losses(out_dir):
    return {r["iter"]: r["loss"] for r in read_jsonl(out_dir / "metrics.jsonl") if "loss" in r}


def test_a_full_disk_while_logging_stops_in_one_line_and_resumes_exactly(char_dataset, tmp_path):
    args = [*TINY, f"--data_dir={char_dataset}", "--eval_interval=4", "--max_iters=12"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    train(*args, f"--out_dir={whole}")
    launcher = tmp_path / "full_disk.py"
    launcher.write_text(FULL_DISK)
    # rows: eval 0, steps 0-3, eval 4, steps 4-7, eval 8 (11 rows), then step 8's row is cut
    result = train(*args, f"--out_dir={cut}", check=False, launcher=launcher,
                   env={"FULL_AFTER": "11"})
    message = one_line(result)
    assert "no space left" in message and "metrics.jsonl" in message
    assert f"{cut / 'ckpt.pt'} (step 8), is intact" in message and "--init_from=resume" in message
    text = (cut / "metrics.jsonl").read_text()
    assert text.endswith("\n") and all(json.loads(row) for row in text.splitlines())  # none torn
    train(*args, f"--out_dir={cut}", "--init_from=resume")  # space is back
    assert losses(cut) == losses(whole)


def test_a_torn_metrics_line_is_dropped_with_a_warning_by_resume_and_plot(char_dataset, tmp_path):
    out = tmp_path / "o"
    args = [*TINY, f"--data_dir={char_dataset}", f"--out_dir={out}", "--eval_interval=4"]
    train(*args, "--max_iters=8")
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"iter": 150, "loss": 2.1')  # a line a full disk cut short
    resumed = train(*args, "--max_iters=12", "--init_from=resume")
    assert "torn line" in resumed.stderr
    assert sorted(losses(out)) == list(range(12))
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"iter": 150, "loss": 2.1')
    plotted = run_here("shapelab/plot.py", out, f"--out={tmp_path / 'p.png'}")
    assert plotted.returncode == 0 and "torn line" in plotted.stderr, plotted.stderr
    assert (tmp_path / "p.png").stat().st_size > 0


def test_a_full_disk_while_saving_keeps_the_previous_checkpoint_and_names_it(tmp_path):
    """The real thing where the machine lets us mount a small tmpfs: the save fails for lack of
    space, the one line says so, and the previous checkpoint is intact."""
    from shapelab.checkpoint import DiskFull, save_checkpoint

    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        save_checkpoint({"w": torch.zeros(10_000)}, mount / "ckpt.pt")  # 40 kB: fits
        before = (mount / "ckpt.pt").read_bytes()
        with pytest.raises(DiskFull) as info:
            save_checkpoint({"w": torch.zeros(100_000)}, mount / "ckpt.pt", "step 4")  # 400 kB
        message = str(info.value)
        assert "no space left" in message and "(step 4) is intact" in message
        assert (mount / "ckpt.pt").read_bytes() == before
        assert [p.name for p in mount.iterdir()] == ["ckpt.pt"]  # no temp file left behind
    finally:
        subprocess.run(["umount", str(mount)])


def test_two_runs_into_one_out_dir_one_trains_the_other_refuses(char_dataset, tmp_path):
    out = tmp_path / "o"
    args = [*TINY, f"--data_dir={char_dataset}", f"--out_dir={out}", "--eval_interval=5"]
    first = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args, "--seed=1",
                              "--max_iters=1000000"], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.time() + 60
        while not (out / "ckpt.pt").exists() and time.time() < deadline:
            time.sleep(0.2)
        second = train(*args, "--seed=2", "--overwrite=True", "--max_iters=10", check=False)
        message = one_line(second, code=2)
        assert "in use by another training run" in message and f"PID {first.pid}" in message
    finally:
        first.kill()  # kill -9: the lock must not outlive it
        first.wait()
    steps = [r["iter"] for r in read_jsonl(out / "metrics.jsonl") if "loss" in r]
    assert steps == list(range(len(steps))) and len(steps) >= 5  # one run's rows, each step once
    assert load_checkpoint(out / "ckpt.pt")["config"]["seed"] == 1
    train(*args, "--max_iters=4", "--overwrite=True")  # the OS released the lock


@pytest.mark.parametrize("bad", [["--n_embd=33", "--n_head=2"], ["--dataset=tinystories"]])
def test_overwrite_keeps_the_old_run_when_the_new_one_cannot_start(char_dataset, tmp_path, bad):
    out = tmp_path / "o"
    train(*TINY, f"--data_dir={char_dataset}", f"--out_dir={out}", "--max_iters=4",
          "--eval_interval=4")
    before = (out / "ckpt.pt").read_bytes(), (out / "metrics.jsonl").read_text()
    data = [] if "--dataset" in bad[0] else [f"--data_dir={char_dataset}"]
    result = train(*TINY, *data, f"--out_dir={out}", "--overwrite=True", *bad, check=False)
    assert "error:" in one_line(result)
    assert ((out / "ckpt.pt").read_bytes(), (out / "metrics.jsonl").read_text()) == before


def test_a_resume_continues_the_run_it_resumes(char_dataset, tmp_path):
    out = tmp_path / "o"
    own = ["--batch_size=8", "--eval_interval=5", "--learning_rate=3e-3", "--max_iters=10",
           "--lr_decay_iters=10", "--min_lr=1e-4"]
    train(*TINY, *own, f"--data_dir={char_dataset}", f"--out_dir={out}", "--max_iters=5")
    resumed = train(f"--out_dir={out}", "--init_from=resume", "--max_iters=10", "--sample_tokens=0",
                    "--device=cpu")
    assert "max_iters=10 (the checkpoint's run had 5)" in resumed.stdout
    whole = tmp_path / "whole"
    train(*TINY, *own, f"--data_dir={char_dataset}", f"--out_dir={whole}")
    assert losses(out) == losses(whole)
    ckpt = load_checkpoint(out / "ckpt.pt")
    assert ckpt["config"]["batch_size"] == 8 and ckpt["config"]["eval_interval"] == 5
    evals = [r for r in read_jsonl(out / "metrics.jsonl") if "val_loss" in r]
    assert evals[-1]["tokens"] == 10 * 8 * 16 == ckpt["tokens"]


def test_a_run_that_stopped_at_its_target_says_so_on_resume(char_dataset, tmp_path):
    out = tmp_path / "o"
    args = [*TINY, f"--data_dir={char_dataset}", f"--out_dir={out}", "--eval_interval=2",
            "--max_iters=200", "--learning_rate=1e-2", "--stop_val_loss=3.0"]
    first = train(*args)
    assert "reached stop_val_loss=3.0" in first.stdout
    before = (out / "ckpt.pt").read_bytes(), (out / "metrics.jsonl").read_text()
    again = train(*args, "--init_from=resume")
    assert "Nothing to train" in again.stdout and "step" not in again.stdout.split("Nothing")[1]
    assert ((out / "ckpt.pt").read_bytes(), (out / "metrics.jsonl").read_text()) == before


def test_ctrl_c_names_the_last_checkpoint_and_the_command_that_resumes(char_dataset, tmp_path):
    out = tmp_path / "o"
    args = [*TINY, f"--data_dir={char_dataset}", f"--out_dir={out}", "--eval_interval=3",
            "--max_iters=100000"]
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + 60
    while not (out / "ckpt.pt").exists() and time.time() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    step = load_checkpoint(out / "ckpt.pt")["iter_num"]
    assert f"the last checkpoint is {out / 'ckpt.pt'} (step {step})" in err
    assert "--init_from=resume" in err and len(err.strip().splitlines()) == 1, err


def test_a_foreign_checkpoint_is_one_line_on_resume(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    nanogpt = {"model": {}, "model_args": {"n_layer": 2}, "iter_num": 5, "config": {}}
    torch.save(nanogpt, out / "ckpt.pt")
    message = one_line(train(f"--out_dir={out}", "--init_from=resume", check=False))
    assert "not a checkpoint of this repo's train.py" in message


@pytest.mark.parametrize("args,expected", [
    (["--n_embd=33", "--n_head=2"], "n_embd=33 is not divisible by n_head=2"),
    (["--n_head=4", "--n_kv_head=3"], "must be a multiple of n_kv_head=3"),
    (["--qk_norm=yes"], "qk_norm='yes'"),
    (["--head_dim=7"], "head_dim=7 must be even"),
    (["--n_head=0"], "n_head=0 must be >= 1"),
    (["--n_layer=0"], "n_layer=0 must be >= 1"),
    (["--n_layer=-2"], "n_layer=-2 must be >= 1"),
    (["--n_embd=0"], "n_embd=0 must be >= 1"),
    (["--n_kv_head=0"], "n_kv_head=0 must be >= 1"),
    (["--ffn_hidden=0"], "ffn_hidden=0 must be >= 1"),
    (["--dropout=2.0"], "dropout=2.0: it must be in [0, 1)"),
    (["--learning_rate=-1e-3"], "learning_rate=-0.001: it must be > 0"),
    (["--beta2=1.5"], "beta2=1.5: it must be in [0, 1)"),
    (["--weight_decay=-1"], "weight_decay=-1.0: it must be 0 or more"),
    (["--device=cpuu"], "device='cpuu': use auto, cpu, cuda"),
    (["--out_dir="], "out_dir='': name a folder"),
    (["--model_type=hourglass", "--model_args={'n_sub_blocks': 0}"], "n_sub_blocks"),
    (["--model_type=variable_width", "--model_args={'layer_widths': [64]}"], "layer_widths"),
    (["--model_type=variable_width", "--model_args={'expansion': 'foo'}"], "expansion='foo'"),
    (["--model_type=variable_width", "--model_args={'width_multiple': 0}"], "width_multiple"),
    (["--model_type=cea", "--model_args={'outer_ratio': 1.5}"], "outer_ratio=1.5"),
    (["--model_type=lws", "--model_args={'ffn_scalars': [1.0, 4.0]}"], "qkv_scalars"),
    (["--model_type=composed", "--model_args={'width_schedule': 'x', 'ffn_scalars': [1.0, 2.0],"
      " 'qkv_scalars': [1.0, 1.0]}"], "pick one"),
    (["--model_type=gpt", "--model_args={'n_sub_blocks': 2}"], "has no setting n_sub_blocks"),
])
def test_every_bad_model_setting_is_one_line_with_exit_status_2(char_dataset, tmp_path, args,
                                                                 expected):
    result = train(*TINY, f"--data_dir={char_dataset}", f"--out_dir={tmp_path / 'o'}", *args,
                   check=False)
    message = one_line(result, code=2)
    assert message.startswith("error: ") and expected in message, message
    assert not (tmp_path / "o" / "ckpt.pt").exists()


def test_model_py_prints_a_bad_shape_in_one_line():
    result = run_here("model.py", "--n_embd=130", "--n_head=4")
    assert "n_embd=130 is not divisible by n_head=4" in one_line(result, code=2)


def stop_at(command, line, signum):
    """Run a command until it prints a line starting with `line`, then send it `signum` (os.kill,
    as Slurm, Kubernetes or a Ctrl-C would); returns the completed process."""
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    stdout = []
    for text in proc.stdout:
        stdout.append(text)
        if text.startswith(line):
            os.kill(proc.pid, signum)
            break
    rest, stderr = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(command, proc.returncode, "".join(stdout) + rest, stderr)


def resume_command(result, step):
    """The command the one line names to continue from the checkpoint of `step`."""
    message = one_line(result)
    assert f"(step {step}); continue the run with: python " in message, message
    command = shlex.split(message.split("continue the run with: ")[1])
    return [sys.executable, *command[1:]]


def test_a_budgeted_run_stopped_twice_resumes_exactly(char_dataset, tmp_path):
    """max_iters=0, max_minutes=10: planned at the start from timed passes, again after 10 steps
    and at each evaluation (every 5 steps). SIGTERM at step 13: one line, exit status 143, with
    the command that goes on; that command goes on, a Ctrl-C stops it at step 33, and the command
    it prints goes on again. The steps a resume trains again give the losses they gave before the
    stop: the plan and the RNG come back exactly. (That a time limit ends on its minutes, whatever
    the machine, is tests/test_run.py's and tests/test_train.py's, on a clock moved by hand.)"""
    out = tmp_path / "o"
    first = [sys.executable, str(ROOT / "train.py"), *TINY, f"--data_dir={char_dataset}",
             f"--out_dir={out}", "--eval_interval=5", "--lr_decay_iters=0", "--max_iters=0",
             "--max_minutes=10"]
    stopped = stop_at(first, "iter 13/", signal.SIGTERM)  # (steps 10-12 are logged)
    assert stopped.returncode == 143 and "time limit 10 min: max_iters=" in stopped.stdout
    before_stop = {s: loss for s, loss in losses(out).items() if s >= 10}
    stopped = stop_at(resume_command(stopped, 10), "iter 33/", signal.SIGINT)  # (30-32 logged)
    assert stopped.returncode == 130 and "interrupted: " in stopped.stderr
    after_plans = {s: loss for s, loss in losses(out).items() if 30 <= s < 35}
    stopped = stop_at(resume_command(stopped, 30), "iter 36/", signal.SIGINT)
    plan = load_checkpoint(out / "ckpt.pt")["time_plan"]
    assert plan["decisions"][0][0] == 0 and plan["minutes"] == 10
    final = losses(out)
    assert sorted(final)[:36] == list(range(36))  # (and the step it stopped in)
    assert {s: final[s] for s in before_stop} == before_stop and len(before_stop) >= 3
    assert {s: final[s] for s in after_plans} == after_plans and len(after_plans) >= 3


def test_a_failed_overwrite_keeps_the_old_run_byte_identical(char_dataset, tmp_path):
    """--overwrite with a batch no memory holds (here 10^12 windows: the allocation fails at once;
    10^8 is the std::bad_alloc a user met, the same path): one line, the old run as it was; then a
    resume of that finished run says so with its last val loss (it printed "val loss nan")."""
    out = tmp_path / "o"
    args = [*TINY, f"--data_dir={char_dataset}", f"--out_dir={out}", "--max_iters=4",
            "--eval_interval=4"]
    train(*args)
    before = (out / "ckpt.pt").read_bytes(), (out / "metrics.jsonl").read_bytes()
    failed = train(*args, "--overwrite=True", "--batch_size=1000000000000", check=False)
    message = one_line(failed, code=1)
    assert message.startswith("error: out of memory") and "lower batch_size" in message
    assert f"the previous run in {out} (ckpt.pt, metrics.jsonl) was put back" in message
    assert ((out / "ckpt.pt").read_bytes(), (out / "metrics.jsonl").read_bytes()) == before
    assert sorted(p.name for p in out.iterdir()) == ["ckpt.pt", "metrics.jsonl", "run.lock"]
    again = train(*args, "--init_from=resume")
    val_loss = load_checkpoint(out / "ckpt.pt")["val_loss"]
    assert (f"this run finished at step 4 (max_iters=4): val loss {val_loss:.4f}" in again.stdout
            and "Nothing to train" in again.stdout and "nan" not in again.stdout)


def test_an_out_dir_that_is_a_file_or_holds_a_run_is_one_line_with_exit_status_2(char_dataset,
                                                                                   tmp_path):
    (tmp_path / "file").write_text("not a folder")
    message = one_line(train(*TINY, f"--data_dir={char_dataset}", f"--out_dir={tmp_path / 'file'}",
                             "--max_iters=2", check=False), code=2)
    assert f"cannot be a folder: {tmp_path / 'file'} is a file" in message
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "ckpt.pt").write_bytes(b"a run")
    message = one_line(train(*TINY, f"--data_dir={char_dataset}", f"--out_dir={tmp_path / 'o'}",
                             "--max_iters=2", check=False), code=2)
    assert "already holds a run (ckpt.pt)" in message


@pytest.mark.parametrize("key,value,expected", [
    ("learning_rate", math.inf, "learning_rate=inf: it must be a finite number"),
    ("learning_rate", math.nan, "learning_rate=nan: it must be a finite number"),
    ("max_minutes", math.inf, "max_minutes=inf: it must be a finite number"),
    ("max_minutes", math.nan, "max_minutes=nan: it must be a finite number"),
    ("max_minutes", -1.0, "max_minutes=-1.0: it must be 0 or more"),
    ("max_minutes", 0.0, "max_iters=0 and max_minutes=0: give the run a length"),
])
def test_an_infinite_nan_or_negative_setting_is_refused(key, value, expected):
    """inf passed every check (max_minutes=inf was an OverflowError when the time was planned);
    the command line's one line and exit status 2 for it: the next row."""
    with pytest.raises(ConfigError, match=re.escape(expected)):
        check_train_settings(dict(train_defaults(), max_iters=0, **{key: value}))


def test_max_minutes_inf_is_one_line_on_the_command_line(tmp_path):
    message = one_line(train(f"--out_dir={tmp_path / 'o'}", "--max_minutes=inf", check=False),
                       code=2)
    assert message == "error: max_minutes=inf: it must be a finite number"


@pytest.mark.parametrize("args,expected", [
    (["--start=€"], "character '€' is not in this char vocabulary"),
    (["--start=FILE:/nonexistent/prompt.txt"], "no such file"),
    (["--start=FILE:{tmp}"], "is a folder"),
    (["--start=FILE:{tmp}/latin1.txt"], "is not UTF-8 text"),
    (["--dtype=fp16"], "dtype='fp16': use one of auto, float32, bfloat16, float16"),
    (["--device=cpuu"], "device='cpuu'"),
    (["--device=cuda"], "no CUDA GPU"),
    (["--temperature=nan"], "temperature=nan: use 0 (greedy) or more, a finite number"),
])
def test_every_bad_sample_setting_is_one_line(char_dataset, tmp_path, args, expected):
    if expected == "no CUDA GPU" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "o"
    train(*TINY, f"--data_dir={char_dataset}", f"--out_dir={out}", "--max_iters=2",
          "--eval_interval=2")
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    result = run_here("sample.py", f"--out_dir={out}", "--max_new_tokens=3",
                      *[a.format(tmp=tmp_path) for a in args])
    assert expected in one_line(result, code=2)


@pytest.mark.parametrize("text,expected", [
    ("max_iters = 10**4400\n", "max_iters=a number of 14617 bits: it must be below 2**63"),
    ("seed = 18446744073709551616\n", "seed=18446744073709551616: it must be below 2**63"),
    ("seed = -1\n", "seed=-1: it must be in [0, 2**63)"),
    ("x = " + "-" * 100_000 + "1\n", "nested too deeply"),
    ("x = '%1500000000d' % 0\n", "a value too large to compute"),
    ("x = '%.*f' % (1000000000, 1.0)\n", "a value too large to compute"),
])
def test_a_config_value_no_machine_can_hold_is_one_line(tmp_path, text, expected):
    """Each was a traceback: 10**4400's message was built (its digits cannot be printed) even
    where the check passed, 100,000 minus signs took the parser's memory, a format string's width
    made a 1.5 GB string, a seed past 2**64 overflowed torch's after out_dir was locked."""
    from shapelab.configurator import parse_overrides
    config = tmp_path / "c.py"
    config.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(expected)):
        settings = parse_overrides([str(config)], {**train_defaults(), "x": ""})
        check_train_settings({k: v for k, v in settings.items() if k != "x"})


def test_a_seed_past_int64_is_one_line_before_out_dir_exists(tmp_path):
    out = tmp_path / "o"
    message = one_line(train(f"--out_dir={out}", "--seed=18446744073709551616", check=False),
                       code=2)
    assert "seed=18446744073709551616: it must be below 2**63" in message and not out.exists()


def test_a_preset_that_is_not_a_name_is_one_line(tmp_path):
    from shapes import preset_settings
    config = tmp_path / "c.py"
    config.write_text("preset = [1]\n")
    with pytest.raises(ConfigError, match=re.escape("--preset=[1]: choose one of cpu, gpu")):
        preset_settings([str(config)])


@pytest.mark.parametrize("model_args,expected", [
    ({"layers": [1, 2]}, "layers=[1, 2]: give each layer as a dict of LayerSpec's fields"),
    ({"model_type": "variable_width", "bottleneck_layer_ratio": 2.0},
     "bottleneck_layer_ratio=2.0: the narrowest layer sits at round(r_l L), inside the stack"),
    ({"model_type": "composed", "width_schedule": "x", "bottleneck_layer_ratio": 0.0},
     "bottleneck_layer_ratio=0.0"),
])
def test_model_args_no_model_can_take_are_one_line(model_args, expected):
    """An AttributeError (layers of ints) and a bottleneck silently on layer 7 of 8."""
    model_args = dict(model_args)
    model_type = model_args.pop("model_type", "gpt")
    with pytest.raises(ConfigError, match=re.escape(expected)):
        check_model_settings(dict(train_defaults(), model_type=model_type, model_args=model_args))


def test_the_former_rounds_its_widths_for_its_heads_by_itself():
    """12 layers, d = 384, 6 heads: the paper's rounding to 32 gave a width 544, no multiple of
    2 * 6; the default rounding takes the heads in (96 here), as the paper's 32 does at 16."""
    from shapes import build_model
    from variable_width import solve_widths
    with torch.device("meta"):
        model = build_model("variable_width", vocab_size=65, n_layer=12, n_embd=384, n_head=6)
        paper = build_model("variable_width", vocab_size=65, n_layer=16, n_embd=640, n_head=16)
    assert all(w % 96 == 0 for w in model.config.layer_widths)
    assert paper.config.layer_widths == solve_widths("x", 16, 640, width_multiple=32)[0]


def test_the_file_size_limit_while_saving_is_the_full_disk_line(tmp_path, monkeypatch):
    """ulimit -f reached in a save (EFBIG): the line of a full disk, the previous checkpoint
    intact, instead of a traceback."""
    import errno

    from shapelab import checkpoint
    from shapelab.checkpoint import DiskFull, save_checkpoint
    save_checkpoint({"w": torch.zeros(4)}, tmp_path / "ckpt.pt")
    before = (tmp_path / "ckpt.pt").read_bytes()

    def too_big(self, data):
        raise OSError(errno.EFBIG, "File too large")
    monkeypatch.setattr(checkpoint._RecordedWrites, "write", too_big)
    with pytest.raises(DiskFull) as info:
        save_checkpoint({"w": torch.zeros(4)}, tmp_path / "ckpt.pt", "step 4")
    assert str(info.value).startswith("error: the file size limit (ulimit -f) was reached in ")
    assert "(step 4) is intact. Raise it" in str(info.value)
    assert (tmp_path / "ckpt.pt").read_bytes() == before


def test_a_tiny_temperature_samples_the_best_token():
    """temperature=1e-39: logits / t overflowed to inf, and softmax gave nan ("probability tensor
    contains either inf, nan"); it is greedy in the limit, and samples so."""
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_embd=16, n_head=2)).eval()
    start = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        greedy = model.generate(start, 6, temperature=0)
        tiny = model.generate(start, 6, temperature=1e-39, generator=torch.Generator())
    assert torch.equal(tiny, greedy)


@pytest.mark.parametrize("change,expected", [
    (dict(meta={"tokenizer": "char", "vocab_size": 11}), "its tokenizer's meta"),
    (dict(model_type="os"), "model_type='os' is unknown"),
    (dict(model_args={"vocab_size": 11, "n_layers": 2}), "has no setting n_layers"),
])
def test_a_checkpoint_no_model_or_tokenizer_comes_from_is_one_line_in_sample(tmp_path, change,
                                                                              expected):
    """sample.py on a checkpoint written by another program: a KeyError, or a ConfigError's
    traceback; now one line naming the file, exit status 1."""
    from model import GPT, GPTConfig
    args = dict(vocab_size=11, block_size=8, n_layer=1, n_embd=16, n_head=2)
    state = dict(model=GPT(GPTConfig(**args)).state_dict(), model_type="gpt", model_args=args,
                 meta={"tokenizer": "char", "vocab_size": 11, "chars": "abcdefghijk"},
                 config={"dataset": "x"}, iter_num=1, best_val_loss=2.0)
    (tmp_path / "o").mkdir()
    torch.save({**state, **change}, tmp_path / "o" / "ckpt.pt")
    result = run_here("sample.py", f"--out_dir={tmp_path / 'o'}", "--start=a",
                      "--max_new_tokens=2", "--device=cpu")
    message = one_line(result, code=1)
    assert expected in message and f"{tmp_path / 'o'}/ckpt.pt" in message, message


def test_ctrl_c_before_the_first_checkpoint_prints_a_command_that_starts_again(char_dataset,
                                                                               tmp_path):
    """On a slow CPU the first checkpoint comes minutes in: a Ctrl-C before it said "start again
    with: python train.py ...", and that command refused the folder ("already holds a run
    (metrics.jsonl)"). The rows of steps no checkpoint holds go: the command starts again."""
    out = tmp_path / "o"
    command = [sys.executable, str(ROOT / "train.py"), *TINY, f"--data_dir={char_dataset}",
               f"--out_dir={out}", "--eval_interval=100000", "--max_iters=100000"]
    for _ in range(2):
        stopped = stop_at(command, "iter 2/", signal.SIGINT)
        message = one_line(stopped, code=130)
        assert message.startswith("interrupted before the first checkpoint (its metrics.jsonl "
                                  "removed): nothing to resume; start again with: python "), message
        assert not (out / "metrics.jsonl").exists() and not (out / "ckpt.pt").exists()
        command = [sys.executable, *shlex.split(message.split("start again with: ")[1])[1:]]


# ----------------------------------------------------------------------------------------
# Every kind of start-up mistake: one input each, stopped in one line with its exit status


def tiny_run(data, out):
    return ["--n_layer=2", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
            "--eval_iters=2", "--dtype=float32", "--sample_tokens=0", "--max_iters=2",
            f"--data_dir={data}", f"--out_dir={out}"]


def mistake_input(kind, data, tmp):
    """(script, arguments) of one input of a kind of mistake; tmp: a folder for what it needs."""
    out = tmp / "o"
    if kind == "unknown key":
        return "train.py", ["--n_layr=2"]
    if kind == "wrong type":
        return "train.py", ["--n_kv_head=two"]
    if kind == "value out of range":
        return "train.py", [*tiny_run(data, out), "--beta2=1.5"]
    if kind == "unknown dtype":
        return "train.py", [*tiny_run(data, out), "--dtype=fp32"]
    if kind == "impossible shape":
        return "train.py", [*tiny_run(data, out), "--n_embd=33", "--n_head=2"]
    if kind == "broken data":
        (data / "meta.json").write_text("{not json")
        return "train.py", tiny_run(data, out)
    if kind == "out_dir holds a run":
        out.mkdir()
        (out / "ckpt.pt").write_bytes(b"a run")
        return "train.py", tiny_run(data, out)
    if kind == "out_dir is a file":
        (tmp / "file").write_text("not a folder")
        return "train.py", tiny_run(data, tmp / "file")
    if kind == "out_dir in use":
        from shapelab.run import RunDir
        mistake_input.holder = RunDir(out)  # this process holds the lock until the next input
        return "train.py", tiny_run(data, out)
    if kind == "foreign checkpoint on resume":
        out.mkdir()
        torch.save({"model": {}, "hello": 1}, out / "ckpt.pt")  # not written by train.py
        return "train.py", [f"--out_dir={out}", "--init_from=resume"]
    if kind == "empty checkpoint":
        out.mkdir()
        (out / "ckpt.pt").write_bytes(b"")
        return "sample.py", [f"--out_dir={out}"]
    if kind == "damaged compare record":
        record = tmp / "records" / "runs" / "gpt-s1337"
        record.mkdir(parents=True)
        (record / "config.py").write_text("import os\nmax_iters = 1\n")
        (record / "result.json").write_text("{}")
        return "compare.py", [f"--record_dir={tmp / 'records'}", f"--out_dir={out}",
                              f"--data_dir={data}", "--models=GPT"]  # (one shape to match)
    if kind == "bad sample setting":
        return "sample.py", [f"--out_dir={out}", "--temperature=-1"]
    if kind == "bad bench setting":
        return "bench.py", ["--modes=compild"]
    if kind == "config file with an import":
        (tmp / "my.py").write_text("import os\nmax_iters = 1\n")
        return "train.py", [str(tmp / "my.py")]
    assert kind == "compare out_dir is a file", kind
    (tmp / "file").write_text("not a folder")
    return "compare.py", [f"--out_dir={tmp / 'file'}", f"--data_dir={data}", "--models=GPT"]


MISTAKES = {  # a kind of mistake -> its exit status: 2 a setting, out_dir or config file; 1 data
    "unknown key": 2, "wrong type": 2, "value out of range": 2, "unknown dtype": 2,
    "impossible shape": 2, "broken data": 1, "out_dir holds a run": 2, "out_dir is a file": 2,
    "out_dir in use": 2, "foreign checkpoint on resume": 1, "empty checkpoint": 1,
    "damaged compare record": 1, "bad sample setting": 2, "bad bench setting": 2,
    "config file with an import": 2, "compare out_dir is a file": 2}


@pytest.mark.parametrize("kind, status", MISTAKES.items(), ids=list(MISTAKES))
def test_each_kind_of_mistake_stops_in_one_line_with_its_exit_status(kind, status, char_dataset,
                                                                      tmp_path):
    """Each input in this process (conftest.run_here), the first as a process of its own too:
    what a new interpreter prints before the script runs is part of the one line."""
    script, args = mistake_input(kind, char_dataset, tmp_path)
    if kind == next(iter(MISTAKES)):
        result = subprocess.run([sys.executable, str(ROOT / script), *args], cwd=tmp_path,
                                capture_output=True, text=True, timeout=120,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
    else:
        result = run_here(script, *args)
    mistake_input.holder = None
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == status, (kind, result.returncode, result.stderr)
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
