"""
Many train.py runs into one folder, safely: what compare.py's comparison stands on.

    lock_out_dir   one comparison per folder (its out_dir, and its record_dir): a lock on
                   compare.lock, dropped by the OS however the process ends; training_in: a
                   train.py still training in a run folder
    train_one      one run, trained, resumed from its last checkpoint (train.py's resume is exact)
                   or skipped when finished (its result.json, written whole, last); a run folder
                   that holds other settings (its config.py) is refused; a diverged run is a result
    sync_records   a sweep's finished runs kept in a folder of the repository (record_dir) as they
                   finish, and copied back into an out_dir that lacks them (a fresh checkout):
                   only the runs the command plans; a record is never rewritten
    run_all        runs `jobs` at a time, each train.py from a worker thread, follow-up runs queued
                   as runs finish (compare.py's phase 2); Ctrl-C, SIGTERM or a failed run stop
                   every train.py still running as on Ctrl-C, and none starts after

Each train.py runs in the repo with absolute paths, its output in its folder's train.log. Ctrl-C
at a terminal reaches the train.py processes too; a SIGTERM to the driver alone (`terminated`
turns it into Ctrl-C) is passed on as a SIGINT.
"""

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from shapelab.checkpoint import write_atomic
from shapelab.configurator import ConfigError, read_config_file, usage_error
from shapelab.hardware import machine_name
from shapelab.lock import held_by, lock_folder
from shapelab.plot import read_evals

ROOT = Path(__file__).resolve().parents[1]  # the repo root


def config_text(config):
    header = "# written by compare.py; run alone with: python train.py <this file>\n"
    return header + "".join(f"{k} = {v!r}\n" for k, v in config.items())


# settings that are not part of a run's identity: out_dir (the same folder, maybe reached by
# another path) and eval_ood (texts scored at each evaluation: it measures, and changes no loss)
NOT_IDENTITY = ("out_dir", "eval_ood")
# model_args a record may leave out, by model_type: a record without one holds a run of this value
# (the committed CEA records ran on cea.py's mask-free kernels without naming them)
RECORDED_MODEL_ARGS = {"cea": {"attention_impl": "causal"}}


def run_identity(config):
    """A run's settings with NOT_IDENTITY set aside: two runs are the same run when theirs are
    equal (a record that lacks one of NOT_IDENTITY is the same run as one that has it; one that
    lacks a key of RECORDED_MODEL_ARGS, the same run as one that names its value)."""
    identity = {**config, **dict.fromkeys(NOT_IDENTITY)}
    recorded = RECORDED_MODEL_ARGS.get(config.get("model_type"))
    if recorded and isinstance(config.get("model_args"), dict):
        identity["model_args"] = {**recorded, **config["model_args"]}
    return identity


def same_settings(config_path, config):
    """Whether an earlier run's config.py holds these settings (run_identity)."""
    try:
        recorded = read_config_file(config_path)
    except ConfigError:
        return False
    return run_identity(recorded) == run_identity(config)


def lock_out_dir(out_dir, option="out_dir"):
    """lock.py's lock on out_dir/compare.lock (the OS drops it when the process ends, however it
    ends), held while the returned lock is open, its file deleted when it is let go. An out_dir
    that is a file, cannot be written or is in use by another compare.py stops in one line,
    before anything in it is touched. option: the setting that names the folder (a record_dir
    is locked alike: two comparisons of other out_dirs would write one record_dir's report)."""
    try:
        return lock_folder(out_dir, "compare.lock", "compare.py", option=option,
                           removed_at_close=True)
    except ConfigError as e:
        usage_error(e)


def lock_record_dir(record_dir, out_dir):
    """record_dir's lock, taken as out_dir's: comparisons into two out_dirs with one record_dir
    would both write its records and its report. Nothing to take without a record_dir, or where
    it is out_dir (locked already)."""
    if not record_dir or Path(record_dir).resolve() == Path(out_dir).resolve():
        return contextlib.nullcontext()
    return lock_out_dir(record_dir, option="record_dir")


def training_in(run_dir):
    """The PID of a train.py that holds run_dir's lock (run.RunDir's on run.lock), or None."""
    return held_by(run_dir / "run.lock")


def busy(run_dir, pid):
    return (f"{run_dir} is in use by a training run (train.py, PID {pid}): wait for it to finish, "
            f"or use another --out_dir")


TERMINATED = []  # [True] once a SIGTERM came
CHILDREN, CHILDREN_LOCK, STOP = {}, threading.Lock(), threading.Event()  # the running train.py


def terminated(signum, frame):
    """SIGTERM (what Slurm and Kubernetes send before a kill) is Ctrl-C."""
    TERMINATED.append(True)
    raise KeyboardInterrupt


def stop_children(gentle):
    """Interrupted, or a run failed: every train.py still running stops as on Ctrl-C (its log
    names its checkpoint), and none starts. A terminal's Ctrl-C reached them too (gentle): 2 s to
    stop by themselves; otherwise a SIGINT at once; after a minute (or a second interrupt) a
    kill: a checkpoint is whole either way."""
    with CHILDREN_LOCK:
        STOP.set()
        children = list(CHILDREN.values())
    try:
        for stop, seconds in ((interrupt, 2 if gentle else 0), (kill, 60)):
            end = time.time() + seconds
            for process in children:
                try:
                    process.wait(timeout=max(0.0, end - time.time()))
                except subprocess.TimeoutExpired:
                    stop(process)
    except KeyboardInterrupt:
        for process in children:
            process.kill()
    for process in children:
        process.wait()


def kill(process):
    process.kill()


def interrupt(process):
    """Ctrl-C for one train.py: a SIGINT. Windows sends no signal to another process but a kill
    (its checkpoints are whole either way; a Ctrl-C at the console reaches every train.py)."""
    if os.name == "nt":
        process.kill()
    else:
        process.send_signal(signal.SIGINT)


RESULT_KEYS = ("val_loss", "train_loss", "tokens", "elapsed_s", "tokens_per_s", "ms_per_iter",
               "mfu")


def source_commit():
    """The commit of the code that produces a result (git's HEAD, abbreviated), with '+changes'
    when a tracked Python file or config file differs from it; None outside a git checkout."""
    def git(*args):
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                              timeout=30)
    try:
        head = git("rev-parse", "--short=12", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no", "--", "*.py", "config")
    except (OSError, subprocess.TimeoutExpired):  # (no git on this machine)
        return None
    if head.returncode or changed.returncode:
        return None
    return head.stdout.strip() + ("+changes" if changed.stdout.strip() else "")


def summarize_run(run_dir, max_iters):
    """result.json's content from a finished run's metrics.jsonl, with the machine and the commit
    that produced it."""
    evals = {r["iter"]: r for r in read_evals(run_dir)}  # one record per step, even after resumes
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
               if line.strip()]
    steps = [r for r in records if "tokens_per_s" in r]
    # step 0 includes warm-up (and compilation)
    steps = [r for r in steps if r["iter"] > 0] or steps
    if max_iters not in evals:
        raise RuntimeError(f"{run_dir}: no evaluation at step {max_iters} in metrics.jsonl")
    median = lambda key: statistics.median(r[key] for r in steps) if steps else None  # noqa: E731
    mfus = [r["mfu"] for r in steps if r.get("mfu") is not None]
    texts = [r["ood_texts"] for r in records if "ood_texts" in r]  # (train.py's eval_ood)
    ood = ("ood_loss", "ood")  # an evaluation's OOD losses, when the run scored them
    return dict(machine=machine_name(), commit=source_commit(),
                val_loss=evals[max_iters]["val_loss"], train_loss=evals[max_iters]["train_loss"],
                tokens=evals[max_iters]["tokens"], elapsed_s=evals[max_iters]["elapsed_s"],
                tokens_per_s=median("tokens_per_s"), ms_per_iter=median("ms_per_iter"),
                mfu=statistics.median(mfus) if mfus else None,
                curve=[dict(iter=k, tokens=evals[k]["tokens"], val_loss=evals[k]["val_loss"],
                            elapsed_s=evals[k]["elapsed_s"],
                            **{key: evals[k][key] for key in ood if key in evals[k]})
                       for k in sorted(evals)],
                **(dict(ood_texts=texts[-1]) if texts else {}))


def train_one(run_dir, config, max_iters, tag, threads=None):
    """Train (or resume, or skip) one run; return its result dict. A run that diverges (train.py
    says "Training diverged") is a result too: its losses and counts are None, its message kept.
    threads: OMP_NUM_THREADS for its train.py (None: this process's environment)."""
    result_path = run_dir / "result.json"
    config_path = run_dir / "config.py"
    if config_path.exists() and not same_settings(config_path, config):
        raise SystemExit(f"{config_path} holds different settings from this command's. Results of "
                         f"different settings must not mix: pass a new --out_dir (or delete "
                         f"{run_dir} to retrain it).")
    if result_path.exists():
        print(f"{tag}: finished before, skipping ({result_path})")
        return read_result(result_path)
    if pid := training_in(run_dir):  # (checked at the start too; one may have started since)
        raise SystemExit(f"error: {busy(run_dir, pid)}")
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(config_path, config_text(config))
    resume = (run_dir / "ckpt.pt").exists()
    if not resume and (run_dir / "metrics.jsonl").exists():
        (run_dir / "metrics.jsonl").unlink()  # killed before its first checkpoint: start clean
    print(f"{tag}: {'resuming from ' + str(run_dir / 'ckpt.pt') if resume else 'training'} "
          f"(log: {run_dir / 'train.log'})", flush=True)
    command = [sys.executable, str(ROOT / "train.py"), str(config_path),
               f"--init_from={'resume' if resume else 'scratch'}"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads)) if threads else None
    diverged = ""
    with open(run_dir / "train.log", "a") as log:
        with CHILDREN_LOCK:  # (none starts once the comparison is stopping)
            if STOP.is_set():
                raise SystemExit(f"{tag}: not started (the comparison is stopping)")
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, cwd=ROOT, env=env)
            CHILDREN[run_dir] = process
        try:
            for line in process.stdout:  # (stopped, it still writes its last lines here)
                log.write(line)
                log.flush()  # tail -f works
                # (run.RunDir.diverged's words: the run ended on a non-finite loss)
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
    # atomic: a result.json is always a finished run's
    write_atomic(result_path, json.dumps(result, indent=1))
    return result


def read_result(path):
    """A finished run's result.json, checked (`damage`). A damaged one (a record edited by hand,
    a merge gone wrong) stops the sweep in one line naming it, exit status 1."""
    try:
        result = json.loads(Path(path).read_text())
        why = damage(result)
    except (OSError, UnicodeDecodeError, ValueError) as e:  # (JSONDecodeError is a ValueError)
        why = f"not JSON: {e}"
    if why:
        raise SystemExit(f"error: {path} is damaged ({why}): restore it (git checkout), or delete "
                         f"it to train that run again")
    return result


def damage(result):
    """What makes a read result.json unusable, or None: every RESULT_KEYS entry is a number or
    None (a diverged run's), and it has its curve."""
    if not isinstance(result, dict):
        return "not a dict of a run's results"
    missing = [k for k in (*RESULT_KEYS, "curve") if k not in result]
    if missing:
        return f"no {missing[0]}"
    bad = [k for k in RESULT_KEYS if result[k] is not None and type(result[k]) not in (int, float)]
    if bad:
        return f"{bad[0]}={result[bad[0]]!r:.40} is not a number"
    return None if isinstance(result["curve"], list) else "its curve is not a list"


def read_settings(path):
    """A run folder's (or record's) config.py; a damaged one is one line naming it (exit 1)."""
    try:
        return read_config_file(path)
    except ConfigError as e:
        raise SystemExit(f"error: a run's settings are damaged: {e}. Restore {path} (git "
                         f"checkout), or delete its folder to train that run again") from None


LEFT_ALONE = set()  # the record_dirs whose records of other settings were named once


def record_run(run_dir, record_dir, root):
    """Keep a finished run's config.py and result.json in record_dir/runs/<its folder's name>/ (a
    folder in the repository, committed as runs finish): its out_dir written `portable`. A record
    is never rewritten: one of these settings is this run (its loss is the same, resumed or
    not); one of other settings is left alone, and said once (the run stays in out_dir only)."""
    folder = Path(record_dir) / "runs" / run_dir.name
    config = read_settings(run_dir / "config.py")
    if (folder / "config.py").exists() or (folder / "result.json").exists():
        if not (folder / "config.py").exists() or not same_settings(folder / "config.py", config):
            if str(record_dir) not in LEFT_ALONE:
                LEFT_ALONE.add(str(record_dir))
                print(f"note: {folder} is the record of a run of other settings: left alone "
                      f"({run_dir} is kept in {run_dir.parent} only, and so are others like it)",
                      flush=True)
            return
        if (folder / "result.json").exists():
            return
    folder.mkdir(parents=True, exist_ok=True)
    config["out_dir"] = portable(config["out_dir"], root)
    if not (folder / "config.py").exists():
        write_atomic(folder / "config.py", config_text(config))
    result = (run_dir / "result.json").read_text()
    write_atomic(folder / "result.json", result)


def portable(path, root):
    """A path as a record keeps it: relative to `root` (the repository) when it lies inside,
    else its last two parts (out_dir/run): never a path of this machine."""
    path = Path(path).resolve()
    return str(path.relative_to(root) if path.is_relative_to(root) else Path(*path.parts[-2:]))


def sync_records(out_dir, record_dir, root, wanted):
    """Before a sweep starts, for the runs this command may train - wanted(folder name, settings)
    with out_dir/<folder> as the settings' out_dir - and no others: every one finished in out_dir
    recorded (record_run: a record is never rewritten), and every record of one that out_dir lacks
    copied into it (config.py, then result.json), where it counts as finished: a fresh checkout
    goes on from the committed records without retraining them. A record of other settings is
    data this command does not read: left alone. A run folder that holds other settings than its
    record is left alone too (train_one refuses it if it is asked for). A damaged record is one
    line naming it. Returns (the number of runs copied in, [(folder name, settings)] of the
    records left alone)."""
    runs = Path(record_dir) / "runs"
    for run_dir in sorted(d for d in out_dir.iterdir() if (d / "result.json").exists()):
        if wanted(run_dir.name, read_settings(run_dir / "config.py")):
            record_run(run_dir, record_dir, root)
    copied, other = 0, []
    for record in sorted(d for d in runs.glob("*") if (d / "result.json").exists()):
        run_dir = out_dir / record.name
        config = {**read_settings(record / "config.py"), "out_dir": str(run_dir)}
        if not wanted(record.name, config):
            other.append((record.name, config))
            continue
        read_result(record / "result.json")  # (a damaged record: one line, nothing copied)
        ours = not (run_dir / "config.py").exists() or same_settings(run_dir / "config.py", config)
        if (run_dir / "result.json").exists() or not ours:
            continue
        run_dir.mkdir(exist_ok=True)
        write_atomic(run_dir / "config.py", config_text(config))
        result = (record / "result.json").read_text()
        write_atomic(run_dir / "result.json", result)
        copied += 1
    if other:  # (said here once: record_run says nothing more of them)
        LEFT_ALONE.add(str(record_dir))
    return copied, other


def run_all(first, after, train, jobs, state, deadline=None):
    """Train every run, `jobs` at a time, and return {run.key: result}: the runs `first`, and the
    ones after(run, results) returns as each run finishes, in the order of run.order.
    train(run, k): the k-th run started. state.running / state.finished: the runs in progress
    and done (an interruption names them); state.started counts them. deadline (time.time()):
    no run starts training after it (a finished one is still read); those running finish, and
    state.left holds the runs not started."""
    results, queue, running = {}, list(first), {}
    STOP.clear()
    pool = ThreadPoolExecutor(jobs)
    state.left = []
    try:
        while queue or running:
            if deadline and time.time() > deadline:
                state.left += [r for r in queue if not (r.dir / "result.json").exists()]
                queue = [r for r in queue if (r.dir / "result.json").exists()]
            while queue and len(running) < jobs:
                run = queue.pop(0)
                state.started += 1
                running[pool.submit(train, run, state.started)] = run
                state.running = list(running.values())
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                run = running.pop(future)
                results[run.key] = future.result()
                state.finished.append(run)
                queue = sorted(queue + after(run, results), key=lambda r: r.order)
            state.running = list(running.values())
    except BaseException as error:  # Ctrl-C, SIGTERM, a failed run: the others stop too
        stop_children(gentle=isinstance(error, KeyboardInterrupt) and not TERMINATED)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results
