"""
What keeps a training run safe (train.py): read this file when you care about a run's folder, not
about the model.

- `RunDir`: out_dir, locked for one run at a time (a flock the OS drops when the process dies);
  metrics.jsonl written a whole line or nothing; the one-line messages for a diverged run and a
  Ctrl-C, each naming the last good checkpoint.
- `TimeBudget`: max_iters = 0 sizes the run to max_minutes of wall time on this machine.
- `resume_settings`, `restore_rng`, `all_rng_states`: init_from='resume' goes on exactly as the
  run was saved - its model, its settings (NOT_RESUMED aside), every process's RNG states.
- `read_jsonl`: the metrics reader (train.py's resume, plot.py), which drops a torn last line.

Saving and loading the checkpoint file itself (atomic, never unpickling code) is checkpoint.py's.
"""

import errno
import fcntl
import json
import os
import sys
import time
from pathlib import Path

import torch

from checkpoint import DiskFull, load_checkpoint, save_checkpoint

# what a resume never takes from the checkpoint: where and how this invocation runs
NOT_RESUMED = ("init_from", "overwrite", "out_dir")


class RunDir:
    """out_dir of a training run: ckpt.pt, metrics.jsonl and the lock that keeps a second run out.

    The lock is an exclusive flock on out_dir/run.lock, held while the process lives: the
    operating system releases it when the process ends, however it ends (kill -9 included), so it
    never goes stale. A second run into the same folder stops in one line naming the holder."""

    def __init__(self, out_dir, lock=True):
        self.dir = Path(out_dir)
        self.ckpt, self.metrics = self.dir / "ckpt.pt", self.dir / "metrics.jsonl"
        self.last_good_step = None  # the step of ckpt.pt, once saved or resumed from
        self._lock = None
        if lock:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._lock = open(self.dir / "run.lock", "a+")
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._lock.seek(0)
                holder = self._lock.read().strip() or "unknown"
                raise SystemExit(f"error: {self.dir} is in use by another training run (PID "
                                 f"{holder}): wait for it to finish, or use another --out_dir")
            self._lock.seek(0)
            self._lock.truncate()
            self._lock.write(str(os.getpid()))
            self._lock.flush()

    def refuse_to_replace(self, init_from, overwrite):
        """A scratch run never replaces a previous run in out_dir by accident."""
        previous = [p.name for p in (self.ckpt, self.metrics) if p.exists()]
        if init_from == "scratch" and previous and not overwrite:
            raise SystemExit(f"error: {self.dir} already holds a run ({', '.join(previous)}): "
                             f"continue it with --init_from=resume, train into another --out_dir, "
                             f"or pass --overwrite=True to replace it")

    def remove_previous_run(self):
        """overwrite=True: called once the new run's settings, data and model are checked."""
        for path in (self.ckpt, self.metrics):
            path.unlink(missing_ok=True)

    def save(self, state):
        previous = f"step {self.last_good_step}" if self.last_good_step is not None else ""
        save_checkpoint(state, self.ckpt, previous)
        self.last_good_step = state["iter_num"]

    def log(self, record):
        """Append one row to metrics.jsonl, the whole line or nothing: a disk that fills up midway
        leaves the file as it was, and the run stops in one line."""
        line = (json.dumps(record) + "\n").encode()
        fd = os.open(self.metrics, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, line) != len(line):
                raise OSError(errno.ENOSPC, "short write")
        except OSError as e:
            os.ftruncate(fd, size)  # drop the part that was written
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise DiskFull(f"error: no space left on the disk of {self.dir} while logging step "
                           f"{record.get('iter')} to metrics.jsonl: {self.intact()}. Free some "
                           f"space, then continue the run with --init_from=resume") from None
        finally:
            os.close(fd)

    def intact(self):
        if self.last_good_step is None:
            return "no checkpoint was saved yet"
        return f"the last checkpoint, {self.ckpt} (step {self.last_good_step}), is intact"

    def drop_repeated_metrics(self, iter_num):
        """A resume trains the steps after its checkpoint again: drop the rows a killed run logged
        for them (a row of step iter_num stays only if it is the evaluation the checkpoint saved),
        and a torn last line (a disk that filled up under an older version), with a warning."""
        lines = self.metrics.read_text().splitlines() if self.metrics.exists() else []
        kept = [r for r in read_jsonl(self.metrics)
                if r["iter"] < iter_num or (r["iter"] == iter_num and "loss" not in r)]
        if len(kept) < len(lines):
            tmp = self.metrics.with_name(f"metrics.jsonl.tmp.{os.getpid()}")
            tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))
            os.replace(tmp, self.metrics)

    def diverged(self, step, what, config):
        """The one message that ends a diverged run: what went wrong, what to try, and the last
        good checkpoint, if there is one (only finite losses and weights are ever saved)."""
        good = (f"The last good checkpoint is {self.ckpt} (step {self.last_good_step})."
                if self.last_good_step is not None and self.ckpt.exists()
                else "No good checkpoint was saved (only finite losses and weights are saved).")
        return SystemExit(f"step {step}: {what}. Training diverged; try a lower learning_rate (now "
                          f"{config['learning_rate']}), more warmup_iters (now "
                          f"{config['warmup_iters']}), grad_clip=1.0, or dtype='bfloat16' instead "
                          f"of float16. {good}")

    def interrupted(self, signum=None, frame=None):
        """Ctrl-C (SIGINT handler): stop with one line naming the last checkpoint and the command
        that continues the run. (A save cut short leaves the previous checkpoint intact.)"""
        args = [a for a in sys.argv[1:] if not a.startswith(("--init_from=", "--overwrite="))]
        resume = " ".join(["python", sys.argv[0], *args, "--init_from=resume"])
        if self.last_good_step is None or not self.ckpt.exists():
            raise SystemExit(f"interrupted before the first checkpoint: nothing to resume; start "
                             f"again with: {' '.join(['python', *sys.argv])}")
        raise SystemExit(f"interrupted: the last checkpoint is {self.ckpt} (step "
                         f"{self.last_good_step}); continue the run with: {resume}")


class TimeBudget:
    """max_iters = 0: how many steps fit in a run of `minutes` of wall time on this machine. Steps
    FIRST to LAST are timed (after the first steps' warm-up, within the learning rate's warm-up),
    then the steps left are what the time left allows, evaluations (with their checkpoint, timed
    at step 0) included. Under torchrun rank 0 decides for every process."""

    FIRST, LAST = 10, 50

    def __init__(self, minutes, script_start, eval_interval, ddp, master):
        self.seconds, self.script_start = 60 * minutes, script_start
        self.eval_interval = eval_interval
        self.ddp, self.master, self.t_first = ddp, master, None

    def measure(self, step, loss, eval_s):
        """Called after every step; returns the run's max_iters at step LAST, else None."""
        if step not in (self.FIRST, self.LAST):
            return None
        loss.item()  # wait for the device: the time must be its
        if step == self.FIRST:
            self.t_first = time.time()
            return None
        step_s = (time.time() - self.t_first) / (self.LAST - self.FIRST)
        left = self.seconds - (time.time() - self.script_start)
        steps = max(1, int(left / (step_s + eval_s / self.eval_interval)))
        max_iters = step + 1 + steps
        if self.ddp:  # one decision for every process
            decided = torch.tensor([max_iters], device=loss.device)
            torch.distributed.broadcast(decided, src=0)
            max_iters = int(decided.item())
        if self.master:
            print(f"time budget {self.seconds / 60:g} min: max_iters={max_iters} (measured here: "
                  f"{1000 * step_s:.0f} ms a step, {eval_s:.1f} s an evaluation every "
                  f"{self.eval_interval} steps)")
        return max_iters


def read_jsonl(path):
    """The rows of a JSON-lines file (metrics.jsonl); a torn last line, left by a write that the
    disk cut short, is dropped with a one-line warning. [] if there is no file."""
    if not Path(path).exists():
        return []
    lines = [line for line in Path(path).read_text().splitlines() if line.strip()]
    rows = []
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i < len(lines) - 1:
                raise SystemExit(f"error: {path}, line {i + 1}, is not JSON: {line[:60]!r}")
            print(f"warning: {path} ends in a torn line (a write cut short): dropped {line[:40]!r}",
                  file=sys.stderr)
    return rows


def resume_settings(path, config, given, model_keys):
    """Load the checkpoint at `path` for init_from='resume' and return (checkpoint, config):
    the run goes on as it was. Every setting comes from the checkpoint's config (batch size,
    schedule, evaluation, data, ...) except where this invocation runs (NOT_RESUMED) and the keys
    given on the command line or in a config file, each of which is named in a note when it
    differs. The model's shape is the checkpoint's: a shape key or model_args entry given with
    another value is refused in one line (the run would train one shape and save another). A run
    that stopped at a target loss this resume also accepts says so and exits (nothing to train)."""
    rank0 = int(os.environ.get("RANK", 0)) == 0  # (torchrun: one process speaks)
    try:
        checkpoint = load_checkpoint(path)
    except FileNotFoundError as e:
        raise SystemExit(f"error: {e}") from None
    if not all(k in checkpoint for k in ("model_type", "model_args", "config", "iter_num")):
        raise SystemExit(f"error: {path} is not a checkpoint of this repo's train.py (it has "
                         f"{', '.join(sorted(checkpoint)[:8])}): resume only runs this train.py "
                         f"saved, or start a new one in another --out_dir")
    saved_args, saved_config = checkpoint["model_args"], checkpoint["config"]
    shape = {"model_type": checkpoint["model_type"],
             **{k: saved_args[k] for k in model_keys if k in saved_args}}
    model_args = config["model_args"]
    clashes = [f"{k}={config[k]!r} (the checkpoint has {shape[k]!r})" for k in shape
               if k in given and k not in model_args and config[k] != shape[k]]  # model_args wins
    if "model_args" in given:
        clashes += [f"model_args[{k!r}]={v!r} (the checkpoint has {saved_args.get(k)!r})"
                    for k, v in model_args.items() if saved_args.get(k) != v]
    if clashes:
        raise SystemExit(f"error: resuming {path} with a different model: {'; '.join(clashes)}. "
                         f"Drop these settings to resume, or train the new shape into another "
                         f"--out_dir")
    resumed = {k: v for k, v in saved_config.items()
               if k in config and k not in NOT_RESUMED and k not in given}
    notes = [f"{k}={config[k]!r} (the checkpoint's run had {saved_config[k]!r})"
             for k in sorted(given) if k in saved_config and k not in NOT_RESUMED and k not in shape
             and k != "model_args" and saved_config[k] != config[k]]
    config = {**config, **resumed, **shape, "model_args": dict(saved_config["model_args"])}
    if notes and rank0:
        print("note: resuming with settings that differ from the run's: " + "; ".join(notes))
    if checkpoint.get("reached_target") and checkpoint["best_val_loss"] <= config["stop_val_loss"]:
        if rank0:
            print(f"this run stopped at step {checkpoint['iter_num']}: its val loss "
                  f"{checkpoint['best_val_loss']:.4f} reached stop_val_loss="
                  f"{config['stop_val_loss']}. Nothing to train; pass a lower --stop_val_loss "
                  f"(0: off) to train on")
        raise SystemExit(0)
    return checkpoint, config


def restore_rng(checkpoint, rank, world_size, sampler, seed, device_type):
    """Give this process its batch sampler's and torch's RNG states back (as saved by every
    process at the checkpoint), so that the steps after a resume draw what the uninterrupted run
    drew. Returns a note when the number of processes changed (the run goes on, not exactly)."""
    saved_states = checkpoint["rng"]["ranks"]
    if rank < len(saved_states):
        own = saved_states[rank]
        sampler.set_state(own["sampler"])
        torch.set_rng_state(own["torch"])
        if device_type == "cuda" and "cuda" in own:
            torch.cuda.set_rng_state(own["cuda"])
    else:  # more processes than saved: a fresh stream of its own, not another rank's batches
        sampler.manual_seed(seed + rank + 7919 * checkpoint["iter_num"])
        torch.manual_seed(seed + rank + 7919 * checkpoint["iter_num"])
    if len(saved_states) != world_size:
        return (f"note: the checkpoint holds the RNG states of {len(saved_states)} process(es), "
                f"this run has {world_size}: it continues, but not exactly as the saved run would")
    return None


def all_rng_states(sampler_state, device_type, ddp):
    """Every process's RNG states (its batch sampler's, torch's for dropout, CUDA's), gathered for
    rank 0's checkpoint: a list indexed by rank."""
    states = {"sampler": sampler_state, "torch": torch.get_rng_state()}
    if device_type == "cuda":
        states["cuda"] = torch.cuda.get_rng_state()
    if not ddp:
        return [states]
    gathered = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, states)
    return gathered
