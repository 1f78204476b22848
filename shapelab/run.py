"""
What keeps a training run safe (train.py, train_mlp.py); a learner can skip this file: one run per
out_dir (a lock), never replaced without --overwrite=True, Ctrl-C in one line, a resume that goes on
exactly, and max_iters = 0 fitted to max_minutes.
"""

import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import torch
from filelock import FileLock, Timeout

from shapelab.checkpoint import load_checkpoint, save_checkpoint, write_atomic
from shapelab.configurator import ConfigError, usage_error

NOT_RESUMED = ("init_from", "overwrite", "out_dir")  # where and how this invocation runs
RANK0 = os.environ.get("RANK", "0") == "0"  # under torchrun only rank 0 speaks and holds the lock


def lock_folder(folder, name="run.lock", what="training run", subject=None, option="out_dir",
                removed_at_close=False):
    """folder/name locked until released or the process ends; a folder in use is one line."""
    folder, pid = Path(folder), str(os.getpid()).encode()
    lock = FileLock(folder / name, timeout=0,
                    on_acquired=lambda fd: (os.ftruncate(fd, 0), os.write(fd, pid)))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except Timeout:
        raise ConfigError(f"{subject or folder} is in use by another {what} (PID "
                          f"{held_by(folder / name)}): wait for it to finish, or use another "
                          f"--{option}") from None
    except OSError as e:  # a file, or no permission
        raise ConfigError(f"{option}={folder} is not a folder you can write to "
                          f"({e.strerror or e}): name one with --{option}") from None
    if removed_at_close:  # a lock among committed results leaves no file behind
        release = lock.release

        def release_and_remove(*args, **kwargs):
            (folder / name).unlink(missing_ok=True)
            release(*args, **kwargs)
        lock.release = release_and_remove
    return lock


def held_by(path):
    """The PID of the process holding the lock file `path`, or None."""
    if not Path(path).is_file():
        return None
    try:
        with FileLock(path, timeout=0):
            return None
    except Timeout:
        return Path(path).read_text().strip() or "unknown"


class Diverged(SystemExit):
    """A diverged run's one line (exit status 1); a sweep records its `step` and goes on."""

    def __init__(self, message, step):
        super().__init__(message)
        self.step = step


class RunDir:
    """A run's out_dir: ckpt.pt, metrics.jsonl and the lock that keeps a second run out."""

    def __init__(self, out_dir, lock=True):
        self.dir = Path(out_dir)
        self.ckpt, self.metrics = self.dir / "ckpt.pt", self.dir / "metrics.jsonl"
        self.last_good_step = None  # the step of ckpt.pt once saved or resumed from
        try:
            self._lock = lock_folder(self.dir) if lock else None
        except ConfigError as e:
            usage_error(e)

    def remove_previous_run(self, *others):
        for path in (self.ckpt, self.metrics, *(self.dir / name for name in others)):
            path.unlink(missing_ok=True)

    def save(self, state):
        save_checkpoint(state, self.ckpt)
        self.last_good_step = state["iter_num"]

    def log(self, record):
        with open(self.metrics, "a") as f:
            f.write(json.dumps(record) + "\n")

    def drop_repeated_metrics(self, step):
        rows = [r for r in read_jsonl(self.metrics)
                if r["iter"] < step or (r["iter"] == step and "loss" not in r)]
        write_atomic(self.metrics, "".join(json.dumps(r) + "\n" for r in rows))

    def diverged(self, step, what, to_try):
        good = (f"The last good checkpoint is {self.ckpt} (step {self.last_good_step})."
                if self.last_good_step is not None else "No checkpoint was saved.")
        return Diverged(f"step {step}: {what}. Training diverged; try {to_try}. {good}", step)

    def catch_signals(self):
        signal.signal(signal.SIGINT, self.interrupted if RANK0 else signal.SIG_IGN)
        if RANK0:
            signal.signal(signal.SIGTERM, self.interrupted)

    def interrupted(self, signum=signal.SIGINT, frame=None):
        """One line naming the last checkpoint and the command that goes on."""
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a second signal ends it at once
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        how = "interrupted" if signum == signal.SIGINT else "stopped by SIGTERM"
        processes = os.environ.get("LOCAL_WORLD_SIZE")
        launcher = f"torchrun --standalone --nproc_per_node={processes}" if processes else "python"
        args = [a for a in sys.argv[1:] if not a.startswith(("--init_from=", "--overwrite="))]
        resume = shlex.join([sys.argv[0], *args, "--init_from=resume"])
        if self.last_good_step is None:
            how += (f" before the first checkpoint: start again with: {launcher} "
                    f"{shlex.join(sys.argv)}")
        else:
            how += (f": the last checkpoint is {self.ckpt} (step {self.last_good_step}); continue "
                    f"the run with: {launcher} {resume}")
        print(how, file=sys.stderr, flush=True)
        raise SystemExit(128 + signum)


def all_finite(model):
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


def read_jsonl(path):
    """The rows of metrics.jsonl; a torn last line (a write cut short) is dropped."""
    text = Path(path).read_text() if Path(path).exists() else ""
    return [json.loads(line) for line in text.split("\n")[:-1]]


class TimePlan:
    """max_iters = 0: the steps that fit in `minutes` from `start`, planned again about every 5 s
    from the step time; saved in each checkpoint, so a resume keeps the plan and the clock."""

    def __init__(self, minutes, start, saved=None, device="cpu"):
        self.minutes, self.start, self.device = minutes, start, device
        self.max_iters = saved["max_iters"] if saved and saved["minutes"] == minutes else 0
        self.next_plan = 0  # the step to plan again at

    def state_dict(self):
        return dict(minutes=self.minutes, max_iters=self.max_iters)

    def plan(self, step, step_s, eval_s, eval_interval):
        """After `step`: the steps that fit in the time left (rank 0's plan under torchrun)."""
        left = max(60 * self.minutes - (time.monotonic() - self.start) - eval_s, 0.0)
        steps = left / (step_s + eval_s / eval_interval + 1e-9)
        next_plan = step + 1 + int(5 / (step_s + 1e-9))
        planned = torch.tensor([step + 1 + int(min(steps, 1e15)), next_plan], device=self.device)
        if torch.distributed.is_initialized():
            torch.distributed.broadcast(planned, src=0)
        old, (self.max_iters, self.next_plan) = self.max_iters, planned.tolist()
        if RANK0 and abs(self.max_iters - old) > 0.05 * old:
            print(f"time limit {self.minutes:g} min: max_iters={self.max_iters} "
                  f"({1000 * step_s:.0f} ms a step, {left / 60:.1f} min left)")


def start_run(config, given, model_keys, run=None, trainer="train.py",
              marks=("model_type", "model_args"), not_resumed=NOT_RESUMED):
    """(the locked RunDir, the checkpoint or None, the settings): a resume takes the saved
    settings but those `given`; a given shape setting other than the saved one is one line."""
    if run is None:
        run = RunDir(config["out_dir"], lock=RANK0)
        run.catch_signals()
    if config["init_from"] == "scratch":
        if run.ckpt.exists() and not config["overwrite"]:
            usage_error(f"{run.dir} already holds a run ({run.ckpt.name}): continue it with "
                        f"--init_from=resume, use another --out_dir, or pass --overwrite=True to "
                        f"delete it")
        return run, None, config
    try:
        checkpoint = load_checkpoint(run.ckpt, trainer=trainer)
    except FileNotFoundError as e:
        raise SystemExit(f"error: {e}") from None
    if not {"config", "iter_num", *marks} <= set(checkpoint):
        raise SystemExit(f"error: {run.ckpt} is not a checkpoint of {trainer}: train into "
                         f"another --out_dir")
    args = checkpoint.get("model_args", checkpoint["config"])
    shape = {"model_type": checkpoint.get("model_type"),
             **{k: args[k] for k in model_keys if k in args}}
    saved = {**checkpoint["config"], **shape}
    differ = [k for k in sorted(given) if k in saved and k in config and k not in not_resumed
              and config[k] != saved[k]]
    clashes = [f"{k}={config[k]!r} (the checkpoint has {saved[k]!r})" for k in differ
               if k in {*shape, "model_args"}]
    if clashes:
        raise SystemExit(f"error: resuming {run.ckpt} with a different model or data: "
                         f"{'; '.join(clashes)}. Drop these settings, or train into another "
                         f"--out_dir")
    if differ and RANK0:
        print("note: resuming with " + "; ".join(f"{k}={config[k]!r}" for k in differ))
    run.last_good_step = checkpoint["iter_num"]
    return run, checkpoint, {**config, **{k: v for k, v in saved.items()
                                          if k in config and k not in (*not_resumed, *given)}}
