"""
What keeps a training run safe (train.py, train_mlp.py): read this file when you care about a run's
folder, not about the model.

- `RunDir`: out_dir, locked for one run at a time (a lock the OS drops when the process dies);
  metrics.jsonl written a whole line or nothing; --overwrite's previous run set aside until the
  new run's first checkpoint and put back if there is none; Ctrl-C, SIGTERM and running out of
  memory each end in one line naming the last good checkpoint and the command that goes on.
- `TimePlan`: max_iters = 0 fits the run's length to max_minutes on this machine as it is, timed
  on its training steps and planned again as it runs (train.py's learning rate spans the length).
- `resume_policy`: the settings a resume goes on with, for train.py (`resume_settings`) and
  train_mlp.py alike; `restore_rng`, `all_rng_states`: init_from='resume' goes on exactly as the
  run was saved - its model, its settings, every process's RNG states.
- `RunDir.diverged`, `all_finite`: a run whose loss or weights are not finite ends in one line
  (`Diverged`), and never saves them.
- `read_jsonl`: the metrics reader (train.py's resume, plot.py), which drops a torn last line.

Saving and loading the checkpoint file itself (atomic, never unpickling code) is checkpoint.py's.
"""

import atexit
import errno
import json
import os
import re
import shlex
import shutil
import signal
import sys
import time
from pathlib import Path

import torch

from shapelab.checkpoint import (NO_ROOM, DiskFull, load_checkpoint, no_room, save_checkpoint,
                                 write_atomic)
from shapelab.configurator import ConfigError, usage_error
from shapelab.lock import lock_folder

# what a resume never takes from the checkpoint: where and how this invocation runs
NOT_RESUMED = ("init_from", "overwrite", "out_dir")


class RunDir:
    """out_dir of a training run: ckpt.pt, metrics.jsonl and the lock that keeps a second run out.

    The lock is lock.py's on out_dir/run.lock, held while the process lives: the operating system
    releases it when the process ends, however it ends (kill -9 included), so it never goes stale;
    a symbolic link planted there is refused, never written through. A second run into the same
    folder, an out_dir that is a file or read-only, and a scratch run into a folder that holds a
    run stop in one line with exit status 2.

    --overwrite: `set_aside_previous_run` moves the old ckpt.pt and metrics.jsonl into
    out_dir/previous_run/; the new run's first `save` deletes them. A run that ends without a
    checkpoint of its own (an error, out of memory, Ctrl-C, SIGTERM) puts them back byte for byte
    at its exit; after a kill -9 the next run in the folder does (one line says so)."""

    SET_ASIDE = "previous_run"  # the folder --overwrite moves the previous run into

    def __init__(self, out_dir, lock=True):
        self.dir = Path(out_dir)
        self.ckpt, self.metrics = self.dir / "ckpt.pt", self.dir / "metrics.jsonl"
        self.last_good_step = None  # the step of ckpt.pt, once saved or resumed from
        self.set_aside = None  # out_dir/previous_run while this run has no checkpoint of its own
        self._saving, self._pending_signal = False, None  # a signal waits for the save to end
        self.started_metrics = None  # whether this run began metrics.jsonl (known at its first row)
        self._lock = None
        if lock:
            try:
                self._lock = lock_folder(self.dir, "run.lock", "training run")
            except ConfigError as e:
                usage_error(e)
            self._check_writable()
            self._settle_a_killed_overwrite()

    def _check_writable(self):
        """A folder that refuses new files (mode 555, run.lock writable): one line now, not at the
        first checkpoint, the steps before it lost."""
        probe = self.dir / f"write-test.tmp.{os.getpid()}"
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            probe.unlink()
        except OSError as e:
            usage_error(f"out_dir={self.dir} takes no new files ({e.strerror}), so no checkpoint "
                        f"could be saved there: make it writable (chmod u+w) or name another "
                        f"--out_dir")

    def refuse_to_replace(self, init_from, overwrite):
        """A scratch run never replaces a previous run in out_dir by accident (exit status 2)."""
        previous = [p.name for p in (self.ckpt, self.metrics) if p.exists()]
        if init_from == "scratch" and previous and not overwrite:
            usage_error(f"{self.dir} already holds a run ({', '.join(previous)}): continue it "
                        f"with --init_from=resume, train into another --out_dir, or pass "
                        f"--overwrite=True to replace it")

    def set_aside_previous_run(self):
        """overwrite=True: called once the new run's settings, data and model are checked. The
        previous run is set aside (out_dir/previous_run/), deleted by this run's first save, and
        put back at exit if this run ends without one. ckpt.pt moves first and comes back last,
        and the names moved are written down first, so a kill -9 anywhere leaves a state the next
        start settles (`_settle_a_killed_overwrite`)."""
        names = [p.name for p in (self.ckpt, self.metrics) if p.exists()]
        if not names:
            return
        aside = self.dir / self.SET_ASIDE
        aside.mkdir(exist_ok=True)
        write_atomic(aside / "names.json", json.dumps(names))
        self.set_aside = aside
        atexit.register(self._put_back_at_exit)
        for path in (self.ckpt, self.metrics):
            if path.name in names:
                os.replace(path, aside / path.name)
        print(f"--overwrite: the previous run ({', '.join(names)}) waits in {aside} until this "
              f"run saves its first checkpoint")

    def put_back_previous_run(self):
        """Put the set-aside run back now (the run is ending without a checkpoint of its own);
        returns a phrase saying so for the message that ends the run ('' if nothing was aside)."""
        if self.set_aside is None:
            return ""
        names = self._restore(self.set_aside)
        self.set_aside = None
        return f"; the previous run in {self.dir} ({', '.join(names)}) was put back as it was"

    def _restore(self, aside):
        """Move the set-aside files back over the new run's (metrics first, ckpt.pt last) and
        remove the new run's files the previous run did not have; returns the names."""
        names = json.loads((aside / "names.json").read_text())
        for path in (self.metrics, self.ckpt):
            if path.name not in names:
                path.unlink(missing_ok=True)  # the new run's: the previous run had none
            elif (aside / path.name).exists():  # (else it never moved, or is back already)
                os.replace(aside / path.name, path)
        shutil.rmtree(aside)
        return names

    def _put_back_at_exit(self):  # (atexit: an exit no message of ours explained)
        put_back = self.put_back_previous_run()
        if put_back:
            print(f"note: this run ended before its first checkpoint{put_back}", file=sys.stderr)

    def _settle_a_killed_overwrite(self):
        """A previous_run/ that a killed (kill -9) --overwrite run left: put back if that run had
        no checkpoint of its own yet (ckpt.pt moves out first and back last, so its presence
        says the new run saved one, or nothing had moved), else deleted. One line says which."""
        aside = self.dir / self.SET_ASIDE
        if not aside.is_dir():
            return
        held = sorted(p.name for p in aside.iterdir() if p.name in (self.ckpt.name,
                                                                    self.metrics.name))
        if self.ckpt.exists() or not (aside / "names.json").exists():
            shutil.rmtree(aside)
            if held:
                print(f"note: deleted {aside} ({', '.join(held)}): the --overwrite run that set "
                      f"it aside had saved its own checkpoint before it was killed")
        else:
            names = self._restore(aside)
            print(f"note: put back the previous run in {self.dir} ({', '.join(names)}): the "
                  f"--overwrite run that set it aside was killed before its first checkpoint")

    def save(self, state):
        """Write ckpt.pt atomically. The first save of an --overwrite run deletes the set-aside
        run. Ctrl-C or SIGTERM during a save wait for it to end: the run stops just after it."""
        previous = f"step {self.last_good_step}" if self.last_good_step is not None else ""
        self._saving = True
        try:
            save_checkpoint(state, self.ckpt, previous)
        except DiskFull as e:
            raise DiskFull(f"{e.code}{self.put_back_previous_run()}") from None
        finally:
            self._saving = False
        self.last_good_step = state["iter_num"]
        if self.set_aside is not None:
            shutil.rmtree(self.set_aside, ignore_errors=True)
            self.set_aside = None
            atexit.unregister(self._put_back_at_exit)
        if self._pending_signal is not None:
            self.interrupted(self._pending_signal)

    def log(self, record):
        """Append one row to metrics.jsonl, the whole line or nothing: a disk that fills up midway
        leaves the file as it was, and the run stops in one line."""
        line = (json.dumps(record) + "\n").encode()
        if self.started_metrics is None:
            self.started_metrics = not self.metrics.exists()
        fd = os.open(self.metrics, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                     | getattr(os, "O_BINARY", 0), 0o644)  # (Windows: no \r\n for \n)
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, line) != len(line):
                raise OSError(errno.ENOSPC, "short write")
        except OSError as e:
            os.ftruncate(fd, size)  # drop the part that was written
            if e.errno not in NO_ROOM:
                raise
            what, todo = no_room(e, self.dir)
            raise DiskFull(f"error: {what} while logging step {record.get('iter')} to "
                           f"metrics.jsonl: {self.intact()}. {todo}, then continue the run with "
                           f"--init_from=resume{self.put_back_previous_run()}") from None
        finally:
            os.close(fd)

    def intact(self):
        """What is safe on disk, for a message that ends the run."""
        if self.last_good_step is None:
            return "no checkpoint was saved yet"
        return f"the last checkpoint, {self.ckpt} (step {self.last_good_step}), is intact"

    def drop_repeated_metrics(self, iter_num):
        """A resume trains the steps after its checkpoint again: drop the rows a killed run logged
        for them (a row of step iter_num stays only if it is the evaluation the checkpoint saved),
        and a torn last line (a write that a full disk cut short), with a warning. The
        file is rewritten through a temporary file; a full disk leaves it as it was (one line)."""
        lines = self.metrics.read_text().splitlines() if self.metrics.exists() else []
        kept = [r for r in read_jsonl(self.metrics)
                if r["iter"] < iter_num or (r["iter"] == iter_num and "loss" not in r)]
        if len(kept) == len(lines):
            return
        text = "".join(json.dumps(r) + "\n" for r in kept)
        write_atomic(self.metrics, text, then=(
            f"run the same command again (dropping the {len(lines) - len(kept)} row(s) logged "
            f"after the checkpoint, step {iter_num}, needs at least "
            f"{len(text.encode()) // 1024 + 1} kB there)"))

    def diverged(self, step, what, to_try):
        """The Diverged that ends a diverged run (train.py's, train_mlp.py's): what went wrong,
        what to try (`to_try`: the trainer's own settings), and the last good checkpoint, if
        there is one (only finite losses and weights are ever saved)."""
        good = (f"The last good checkpoint is {self.ckpt} (step {self.last_good_step})."
                if self.last_good_step is not None and self.ckpt.exists()
                else "No good checkpoint was saved (only finite losses and weights are saved)"
                + self.put_back_previous_run() + ".")
        return Diverged(f"step {step}: {what}. Training diverged; try {to_try}. {good}", step)

    def catch_signals(self):
        """Ctrl-C (SIGINT) and SIGTERM (what Slurm, Kubernetes and torchrun send to stop a job)
        call `interrupted`; running out of memory (std::bad_alloc, CUDA's or MPS's OOM) ends in
        one line too. Under torchrun only rank 0 (the process holding the lock) speaks: the other
        ranks ignore Ctrl-C (torchrun stops them), die at once on SIGTERM (no Python handler
        waits for a collective to return), and exit quietly when a peer is gone."""
        self._hook = sys.excepthook
        sys.excepthook = self._one_line_failures
        if self._lock is None and os.environ.get("RANK", "0") != "0":  # torchrun's other ranks
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            return
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum, frame):
        if self._saving and self._pending_signal is None:
            self._pending_signal = signum  # the checkpoint being written is finished first
            return
        self.interrupted(signum)

    @staticmethod
    def _exiting():
        """The run is ending, its message said: a later signal (torchrun's SIGTERM after rank 0's
        message, a second Ctrl-C) ends the process without a second message. The same signal sent
        twice at once (to the process group, and passed on by compare.py) may already be waiting
        when the handler goes: Python then reports it as 'ignored due to race condition' with a
        traceback, which is only noise here and is dropped."""
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.unraisablehook = _drop_signal_race(sys.unraisablehook)

    def _remove_temp_files(self):
        """This process's temporary files: a save or a metrics rewrite cut short."""
        for tmp in self.dir.glob(f"*.tmp.{os.getpid()}"):
            tmp.unlink(missing_ok=True)

    def resume_command(self):
        """The command that continues this run: this one with --init_from=resume (and without
        --overwrite), under torchrun if it runs under torchrun."""
        args = [a for a in sys.argv[1:] if not a.startswith(("--init_from=", "--overwrite="))]
        return self._launcher() + shlex.join([sys.argv[0], *args, "--init_from=resume"])

    def _launcher(self):
        if "LOCAL_WORLD_SIZE" not in os.environ:
            return "python "
        if os.environ.get("WORLD_SIZE") == os.environ["LOCAL_WORLD_SIZE"]:
            return f"torchrun --standalone --nproc_per_node={os.environ['LOCAL_WORLD_SIZE']} "
        return "torchrun <the same options> "

    def _how_to_go_on(self):
        """'the last checkpoint is ...; continue the run with: ...', or how to start again (the
        previous run that --overwrite set aside put back first)."""
        if self.last_good_step is not None and self.ckpt.exists():
            return (f"the last checkpoint is {self.ckpt} (step {self.last_good_step}); continue "
                    f"the run with: {self.resume_command()}")
        return (f"nothing to resume{self.put_back_previous_run()}; start again with: "
                f"{self._launcher() + shlex.join(sys.argv)}")

    def interrupted(self, signum=signal.SIGINT, frame=None):
        """Ctrl-C or SIGTERM: stop with one line naming the last checkpoint and the command that
        continues the run; exit status 128 + the signal's number (130, 143), as a shell's. (A
        save in progress was finished first.) This process's temporary files are removed."""
        self._remove_temp_files()
        how = "interrupted" if signum == signal.SIGINT else "stopped by SIGTERM"
        if self.last_good_step is None or not self.ckpt.exists():
            how += " before the first checkpoint"
            if self.started_metrics and self.set_aside is None:  # (else put back as it was)
                self.metrics.unlink(missing_ok=True)  # so that the same command starts again
                how += " (its metrics.jsonl removed)"
        print(f"{how}: {self._how_to_go_on()}", file=sys.stderr, flush=True)
        self._exiting()
        raise SystemExit(128 + signum)

    def _one_line_failures(self, kind, error, traceback):
        """sys.excepthook: out of memory, and under torchrun a peer process gone, in one line."""
        text = str(error).strip().splitlines()[0] if str(error).strip() else kind.__name__
        lost_peer = "LOCAL_RANK" in os.environ and isinstance(error, RuntimeError) and (
            "closed by peer" in text or "reset by peer" in text
            or isinstance(error, torch.distributed.DistNetworkError))
        out_of_memory = isinstance(error, (MemoryError, torch.OutOfMemoryError)) or (
            isinstance(error, RuntimeError) and any(
                words in text for words in ("bad_alloc", "out of memory", "can't allocate memory")))
        text = re.sub(r"^\[enforce fail at [^\]]*\] err == 0\. ", "", text)  # (torch's CPU OOM)
        self._exiting()
        if lost_peer and self._lock is None:
            return  # another rank failed or was stopped: it, or rank 0, says so
        if lost_peer:
            print(f"error: another process of this torchrun run stopped (its message is above): "
                  f"{self._how_to_go_on()}", file=sys.stderr)
        elif out_of_memory:
            self._remove_temp_files()
            print(f"error: out of memory ({text[:120]}): lower batch_size (the micro-batch) or "
                  f"block_size, or train a smaller model; {self.intact()}"
                  f"{self.put_back_previous_run()}", file=sys.stderr)
        else:
            self._hook(kind, error, traceback)


class Diverged(SystemExit):
    """RunDir.diverged's one line (exit status 1); a sweep records the run's `step` and goes on."""

    def __init__(self, message, step):
        super().__init__(message)
        self.step = step


def all_finite(model):
    """Whether every weight of `model` is finite: a diverged model is never saved."""
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


def _drop_signal_race(hook):
    def unraisable(info):
        if not (isinstance(info.exc_value, OSError)
                and "ignored due to race condition" in str(info.exc_value)):
            hook(info)
    return unraisable


class TimePlan:
    """max_iters = 0: the run's length fitted to `minutes` on this machine as it is, counted across
    resumes. train.py asks for the length at the top of each step (`length`) and its learning
    rate spans that length; the plan decides nothing else.

    - The speed is timed on training steps: the first plan comes from passes timed at the start
      (`first_plan`), then the plan is made again after FIRST steps, at each evaluation step and
      whenever a tenth of the time limit passed without one, from the steps of the last tenth.
      Evaluations are timed apart (`evaluated`) and budgeted: every eval_interval steps and last.
    - The clock is monotonic: a system clock set back or forward changes nothing.
    - A plan of fewer than SHORT steps says so once, with what to do instead.
    - Under torchrun every process plans at the same steps and takes rank 0's length.

    The plan is saved in each checkpoint (`state_dict`); a resume goes on with it (`load`), and
    one given another max_minutes is planned again at once from the last speed."""

    FIRST, SHORT, DDP_EVERY = 10, 300, 10
    MOST_STEPS = 10 ** 15  # (a huge time limit plans this many: an int, never infinity)

    def __init__(self, minutes, script_start, eval_interval, ddp=False, master=True,
                 device="cpu"):
        self.minutes, self.script_start, self.eval_interval = minutes, script_start, eval_interval
        self.ddp, self.master, self.device = ddp, master, device
        self.max_iters = 0  # the planned length (0: not planned yet)
        self.step_s, self.eval_s = None, 0.0  # seconds a training step; the last evaluation's
        self.elapsed_before = 0.0  # seconds of the limit spent by earlier sessions
        self.decisions = []  # [step, max_iters, seconds a step] of each plan that changed it
        self.timed_from, self.eval_since = None, 0.0  # (step, clock) the timing runs from; its
        self.planned_at = None  # evaluations' seconds since; the clock at the last plan
        self.from_start = False  # whether the plan is the start's timing (then timed on steps soon)

    def elapsed(self):
        return self.elapsed_before + time.monotonic() - self.script_start

    def state_dict(self):
        return dict(minutes=self.minutes, max_iters=self.max_iters, step_s=self.step_s,
                    eval_s=self.eval_s, elapsed_s=self.elapsed(), decisions=self.decisions)

    def load(self, state, step):
        """Go on from a checkpoint's step with its plan (a state_dict; None: none was saved)."""
        if not state:
            return
        self.max_iters, self.step_s = state["max_iters"] or 0, state["step_s"]
        self.eval_s, self.elapsed_before = state.get("eval_s", 0.0), state["elapsed_s"]
        self.decisions = list(state["decisions"])
        if state["minutes"] != self.minutes and self.step_s:
            self._decide(step, f"time limit {state['minutes']:g} -> {self.minutes:g} min: ")

    def first_plan(self, step, step_s):
        """The session's first plan, from `step_s` seconds a step timed at its start; a resume
        keeps the plan it saved."""
        if not self.max_iters:
            self.step_s, self.from_start = step_s, True
            self._decide(step, f"time limit {self.minutes:g} min: ")

    def evaluated(self, seconds):
        """An evaluation (with its checkpoint) took `seconds`: left out of the steps' timing."""
        self.eval_s, self.eval_since = seconds, self.eval_since + seconds

    def length(self, step):
        """max_iters at the top of `step`: planned again once a run has trained its first FIRST
        steps, then at each evaluation step (where a checkpoint is saved, so a resume goes on
        with the same plan) and whenever a tenth of the limit passed since the last plan."""
        now, tenth = time.monotonic(), 6 * self.minutes
        if self.timed_from is None:
            self.timed_from, self.eval_since, self.planned_at = (step, now), 0.0, now
        since, then = self.timed_from
        timed = step - since >= self.FIRST  # (a session's first steps: too few to time)
        due = timed and (step % self.eval_interval == 0 or now - self.planned_at >= tenth
                         or self.from_start)
        if self.ddp:  # rank 0 decides, at steps every process knows
            if step % self.eval_interval and step % self.DDP_EVERY:
                return self.max_iters
            decided = torch.tensor([float(due)], device=self.device)
            torch.distributed.broadcast(decided, src=0)
            due = timed and bool(decided.item())
        if due:  # timed over the steps since the window began (a tenth of the limit at most)
            self.step_s = max(now - then - self.eval_since, 0.0) / (step - since)
            if now - then >= tenth:
                self.timed_from, self.eval_since = (step, now), 0.0
            self.planned_at, self.from_start = now, False
            self._decide(step, "time limit: ")
        return self.max_iters

    def _decide(self, step, head):
        """Plan the steps that fit in the time left at self.step_s a step and self.eval_s an
        evaluation (every eval_interval steps, and one at the end)."""
        left = 60 * self.minutes - self.elapsed() - self.eval_s
        per_step = max(self.step_s + self.eval_s / self.eval_interval, 1e-9)
        planned = max(1, step + int(min(max(left, 0.0) / per_step, self.MOST_STEPS)))
        if self.ddp:  # one length for every process: rank 0's
            decided = torch.tensor([planned], dtype=torch.int64, device=self.device)
            torch.distributed.broadcast(decided, src=0)
            planned = int(decided.item())
        old, self.max_iters = self.max_iters, planned
        if planned == old:
            return
        self.decisions.append([step, planned, round(self.step_s, 6)])
        if self.master and (not old or abs(planned - old) >= 0.05 * old):  # (not jitter)
            change = f"max_iters={planned}" if not old else f"max_iters {old} -> {planned}"
            evaluations = (f", {self.eval_s:.1f} s an evaluation every {self.eval_interval} steps"
                           if self.eval_s else "")
            print(f"{head}{change} ({1000 * self.step_s:.0f} ms a step{evaluations}, "
                  f"{_minutes(left)} left; planned again every {_minutes(6 * self.minutes)})")
        if self.master and planned < self.SHORT <= (old or self.SHORT):  # (once, unless it grew)
            print(f"note: only {planned} steps fit in {self.minutes:g} min here, too few "
                  f"to learn much (a few hundred at least): give it more --max_minutes, set "
                  f"--max_iters=500 for a fixed length, or train a smaller model (--n_layer=2 "
                  f"--n_embd=64)")


def _minutes(seconds):
    seconds = max(0.0, seconds)
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


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


def resume_policy(path, saved, config, given, shape_keys, not_resumed=NOT_RESUMED, refused=(),
                  speak=True):
    """The settings a resumed run goes on with: the one resume policy of train.py and
    train_mlp.py. `saved`: the settings of the run in the checkpoint at `path`; `config`: this
    invocation's; `given`: the keys its command line or config files set.

    - The checkpoint's settings win: the run goes on as it was saved.
    - `not_resumed` (where and how it runs: out_dir, init_from, ...) are this invocation's.
    - `shape_keys` define what the run trains (the model; for train_mlp.py also the data stream):
      one given with another value is refused in one line, with `refused` (the caller's own such
      clashes, already worded), since the run would train one thing and save another.
    - Any other key given with another value is taken, and named in one "note:" line (printed
      where `speak`).

    Returns `config`'s keys with the values above."""
    differ = [k for k in sorted(given) if k in saved and k in config and k not in not_resumed
              and config[k] != saved[k]]
    clashes = [f"{k}={config[k]!r} (the checkpoint has {saved[k]!r})" for k in differ
               if k in shape_keys] + list(refused)
    if clashes:
        raise SystemExit(f"error: resuming {path} with a different model: {'; '.join(clashes)}. "
                         f"Drop these settings to resume, or train the new shape into another "
                         f"--out_dir")
    notes = [f"{k}={config[k]!r} (the checkpoint's run had {saved[k]!r})" for k in differ]
    if notes and speak:
        print("note: resuming with settings that differ from the run's: " + "; ".join(notes))
    return {**config, **{k: v for k, v in saved.items()
                         if k in config and k not in not_resumed and k not in given}}


def resume_settings(path, config, given, model_keys):
    """Load the checkpoint at `path` for init_from='resume' and return (checkpoint, config), by
    resume_policy: the run goes on as it was. Its shape keys are model_type, the model keys and
    model_args (an entry given in --model_args with another value is refused; a shape key it
    holds is its to set). A run that stopped at a target loss this resume also accepts, or that
    trained its whole length (max_iters, or its time plan's), says so and exits (nothing
    to train)."""
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
    model_args = config["model_args"] if "model_args" in given else {}
    refused = [f"model_args[{k!r}]={v!r} (the checkpoint has {saved_args.get(k)!r})"
               for k, v in model_args.items() if saved_args.get(k) != v]
    config = resume_policy(path, {**saved_config, **shape}, config,
                           set(given) - (set(model_args) & set(shape)) - {"model_args"}, set(shape),
                           refused=refused, speak=rank0)  # (model_args: the checkpoint's)
    if checkpoint.get("reached_target") and checkpoint["best_val_loss"] <= config["stop_val_loss"]:
        if rank0:
            print(f"this run stopped at step {checkpoint['iter_num']}: its val loss "
                  f"{checkpoint['best_val_loss']:.4f} reached stop_val_loss="
                  f"{config['stop_val_loss']}. Nothing to train; pass a lower --stop_val_loss "
                  f"(0: off) to train on")
        raise SystemExit(0)
    plan = checkpoint.get("time_plan") or {}  # (a plan: max_iters = 0, a time limit)
    same_limit = plan.get("minutes") == config.get("max_minutes")
    length = config.get("max_iters") or (same_limit and plan.get("max_iters"))
    if length and checkpoint["iter_num"] >= length:
        if rank0:
            what = (f"max_iters={length}" if config.get("max_iters") else
                    f"its time limit, max_minutes={config['max_minutes']:g}")
            print(f"this run finished at step {checkpoint['iter_num']} ({what}): val loss "
                  f"{checkpoint.get('val_loss', checkpoint['best_val_loss']):.4f} (best "
                  f"{checkpoint['best_val_loss']:.4f}). Nothing to train; pass a larger "
                  f"--{'max_iters' if config.get('max_iters') else 'max_minutes'} to train on")
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
