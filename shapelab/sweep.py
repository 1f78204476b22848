"""
Many train.py runs into one folder, safely: what compare.py stands on. One comparison per folder
(compare.lock); each run trained, resumed from its checkpoint, or skipped once its result.json
(written whole, last) is in its folder or its record; a run folder of other settings, or a result
of other data, is refused; each finished run kept in a folder of the repository (record_dir),
never rewritten; on Ctrl-C, SIGTERM or a failed run every train.py still running stops as on
Ctrl-C.
"""

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from shapelab.checkpoint import write_atomic
from shapelab.configurator import ConfigError, read_config_file, usage_error
from shapelab.hardware import machine_name
from shapelab.plot import read_evals
from shapelab.run import lock_folder, read_jsonl

ROOT = Path(__file__).resolve().parents[1]
RESULT_KEYS = ("val_loss", "train_loss", "tokens", "elapsed_s", "tokens_per_s", "ms_per_iter",
               "mfu")
# not part of a run's identity: out_dir (one folder by two paths) and eval_ood (it only measures)
NOT_IDENTITY = ("out_dir", "eval_ood")


def config_text(config):
    header = "# written by compare.py; run alone with: python train.py <this file>\n"
    return header + "".join(f"{k} = {v!r}\n" for k, v in config.items())


def same_settings(config_path, config):
    """Whether two runs are the same run: their settings less NOT_IDENTITY are equal."""
    ignored = dict.fromkeys(NOT_IDENTITY)
    try:
        return {**read_config_file(config_path), **ignored} == {**config, **ignored}
    except ConfigError:
        return False


def lock_out_dir(out_dir, option="out_dir"):
    """The lock on out_dir/compare.lock (deleted when let go), or one line saying who holds it."""
    try:
        return lock_folder(out_dir, "compare.lock", "compare.py", option=option,
                           removed_at_close=True)
    except ConfigError as e:
        usage_error(e)


TERMINATED = []  # [True] once a SIGTERM came
CHILDREN, CHILDREN_LOCK, STOP = {}, threading.Lock(), threading.Event()


def terminated(signum, frame):
    """SIGTERM (Slurm's and Kubernetes' stop) is Ctrl-C."""
    TERMINATED.append(True)
    raise KeyboardInterrupt


def stop_children():
    """Every running train.py stops as on Ctrl-C, and none starts: 2 s to stop by themselves (a
    terminal's Ctrl-C reached them too), then a SIGINT (SIGTERM on Windows)."""
    with CHILDREN_LOCK:
        STOP.set()
        children = list(CHILDREN.values())
    end = time.time() + 2
    for process in children:
        try:
            process.wait(timeout=max(0.0, end - time.time()))
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT if os.name != "nt" else signal.SIGTERM)
    for process in children:
        process.wait()


def source_commit():
    """git's HEAD, '+changes' where a tracked file differs; None without git."""
    try:
        # --exclude=*: the commit's hash, never a tag's name
        return subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--abbrev=12",
                               "--dirty=+changes", "--exclude=*"], capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def summarize_run(run_dir, max_iters):
    """result.json's content from a finished run's metrics.jsonl."""
    evals, records = read_evals(run_dir), read_jsonl(run_dir / "metrics.jsonl")
    last = evals[-1]
    if last["iter"] != max_iters:
        raise RuntimeError(f"{run_dir}: no evaluation at step {max_iters} in metrics.jsonl")
    steps = [r for r in records if "tokens_per_s" in r]
    steps = [r for r in steps if r["iter"] > 0] or steps  # step 0 includes warm-up
    timed = {k: [r[k] for r in steps if r.get(k) is not None]
             for k in ("tokens_per_s", "ms_per_iter", "mfu")}
    texts = [r["ood_texts"] for r in records if "ood_texts" in r]
    return dict(machine=machine_name(), commit=source_commit(),
                **{k: last[k] for k in ("val_loss", "train_loss", "tokens", "elapsed_s")},
                **{k: statistics.median(v) if v else None for k, v in timed.items()},
                curve=[{k: e[k] for k in ("iter", "tokens", "val_loss", "elapsed_s", "ood_loss",
                                          "ood") if k in e} for e in evals],
                **(dict(ood_texts=texts[-1]) if texts else {}))


def finished_result(run_dir, config, record_dir, data):
    """The result of the run recorded in record_dir, or finished in run_dir (then recorded);
    None if neither holds it."""
    record = record_dir and Path(record_dir) / "runs" / run_dir.name
    if record and (record / "result.json").exists():
        if not same_settings(record / "config.py", config):
            raise SystemExit(f"error: {record} holds a run of other settings: records of different "
                             f"settings must not mix: pass a new --record_dir")
        return read_result(record / "result.json", data)
    if (run_dir / "result.json").exists() and same_settings(run_dir / "config.py", config):
        result = read_result(run_dir / "result.json", data)
        if record:
            record_run(run_dir, config, record)
        return result
    return None


def train_one(run_dir, config, max_iters, tag, threads, record_dir, data):
    """Train, resume or skip one run; its result (a diverged run's losses None), kept in
    record_dir. data: the splits' sha256 it trains on, kept in its result."""
    config_path = run_dir / "config.py"
    if (result := finished_result(run_dir, config, record_dir, data)) is not None:
        print(f"{tag}: finished before, skipping")
        return result
    if config_path.exists() and not same_settings(config_path, config):
        raise SystemExit(f"{config_path} holds different settings from this command's. Results of "
                         f"different settings must not mix: pass a new --out_dir (or delete "
                         f"{run_dir} to retrain it).")
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(config_path, config_text(config))
    resume = (run_dir / "ckpt.pt").exists()
    print(f"{tag}: {'resuming from ' + str(run_dir / 'ckpt.pt') if resume else 'training'} "
          f"(log: {run_dir / 'train.log'})", flush=True)
    command = [sys.executable, str(ROOT / "train.py"), str(config_path),
               f"--init_from={'resume' if resume else 'scratch'}"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads)) if threads else None
    diverged = ""
    with open(run_dir / "train.log", "a") as log:
        with CHILDREN_LOCK:
            if STOP.is_set():
                raise SystemExit(f"{tag}: not started (the comparison is stopping)")
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, cwd=ROOT, env=env)
            CHILDREN[run_dir] = process
        try:
            for line in process.stdout:
                log.write(line)
                log.flush()
                diverged = diverged or ("Training diverged" in line and line.strip())
                if line.startswith(("step ", "error", "Traceback")) or "Error" in line:
                    print(f"  {tag} {line.rstrip()}", flush=True)
            process.wait()
        finally:
            CHILDREN.pop(run_dir, None)
    if process.returncode != 0 and not (diverged and not STOP.is_set()):
        raise SystemExit(f"{tag}: train.py failed (exit {process.returncode}); "
                         f"see {run_dir / 'train.log'}")
    result = (dict(dict.fromkeys(RESULT_KEYS), machine=machine_name(), commit=source_commit(),
                   diverged=diverged, curve=[]) if diverged else summarize_run(run_dir, max_iters))
    result["data"] = data
    write_atomic(run_dir / "result.json", json.dumps(result, indent=1))
    print(f"{tag} val loss {'diverged' if diverged else format(result['val_loss'], '.4f')}",
          flush=True)
    return finished_result(run_dir, config, record_dir, data)


def read_result(path, data=None):
    """A finished run's result.json; a damaged one, or one trained on other data than `data` (a
    record without a data field is accepted), is one line naming it."""
    try:
        result = json.loads(Path(path).read_text())
        why = [f"no {k}" for k in (*RESULT_KEYS, "curve") if k not in result]
    except (OSError, ValueError, TypeError) as e:
        why = [f"not JSON: {e}"]
    if why:
        raise SystemExit(f"error: {path} is damaged ({why[0]}): restore it (git checkout), or "
                         f"delete it to train that run again")
    if data and result.get("data", data) != data:
        raise SystemExit(f"error: {path} was trained on other data (its splits' sha256 differ "
                         f"from the prepared data's now): prepare the data it was trained on, or "
                         f"use a new --out_dir (or delete its folder to train it again)")
    return result


def record_run(run_dir, config, record):
    """A finished run's config.py and result.json kept in `record` (which holds no result: a
    record is never rewritten)."""
    record.mkdir(parents=True, exist_ok=True)
    write_atomic(record / "config.py",
                 config_text({**config, "out_dir": portable(config["out_dir"], ROOT)}))
    write_atomic(record / "result.json", (run_dir / "result.json").read_text())


def portable(path, root):
    """A path as a record keeps it: relative to root inside it, else its last two parts."""
    path = Path(path).resolve()
    return str(path.relative_to(root) if path.is_relative_to(root) else Path(*path.parts[-2:]))
