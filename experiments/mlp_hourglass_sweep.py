"""
The paper's shape sweep: hourglass and conventional image MLPs at several learning rates and
seeds, one row per run in out_dir/sweep.csv, then its fronts (mlp_hourglass_fronts.py).
"Rethinking the Shape Convention of an MLP" (Chen, Lee, Liao, Shiu, 2025, arXiv:2510.01796),
section 4.2.

    python experiments/mlp_hourglass_sweep.py config/mlp_sweep_fashion_denoise_fair.py --seeds=0

Every train_mlp.py setting works here, plus --shapes (hourglass:1024:64:2,... or a config file's
(family, d_z, d_h, L) tuples), --learning_rates and --seeds. The same command again goes on where
it stopped, inside the run it was in; a row is appended whole and never rewritten; one CSV holds
one setting and one sweep at a time.
"""


import csv
import io
import math
import os
import shlex
import shutil
import signal
import sys
from contextlib import suppress
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repo root, for train_mlp.py and its modules
sys.path.insert(0, str(ROOT / "experiments"))  # for mlp_hourglass_fronts.py

import mlp_hourglass_fronts as fronts
from mlp_hourglass import check_shape, count_params, input_projection
from shapelab.configurator import ConfigError, parse_overrides, usage_error
from shapelab.images import load_images
from shapelab.image_tasks import get_task
from shapelab.checkpoint import write_atomic
from shapelab.run import lock_folder
from shapelab.run import Diverged, RunDir
import train_mlp

GRID = dict(shapes=(), learning_rates=(1e-3,), seeds=(0,))
# the run's setting: every row records it, the resume keys on it, one CSV holds one setting
SETTING_FIELDS = ["task", "data_source", "n_train", "epochs", "max_iters", "batch_size", "flips",
                  "noise_sigma", "dtype", "weight_decay", "eval_interval"]
SWEEP_FIELDS = fronts.SWEEP_FIELDS
SCORES = ("psnr_batchmse", "psnr_per_image", "ssim")
canonical = fronts.canonical


def sweep_setting(c, data):
    """{field: canonical text} of what changes a result besides the run; no machine paths."""
    raw = {**vars(c), "data_source": train_mlp.portable_source(data.source),
           "n_train": len(data.train), "max_iters": c.max_iters or None}
    return {k: canonical(raw[k]) for k in SETTING_FIELDS}


def check_one_setting(rows, csv_path, setting, inputs):
    """One line where the CSV's rows are of another setting or took another input."""
    diffs = []
    for k in SETTING_FIELDS:
        values = {canonical(r[k]) or "-" for r in rows} | {setting[k] or "-"}
        if len(values) > 1:
            diffs.append(f"{k}: " + " vs ".join(sorted(values)))
    for r in rows:
        given = inputs(r["shape"], int(r["latent_dim"]))
        if r["input_proj"] != given:
            diffs.append(f"input_proj: {r['shape']} rows took {r['input_proj'] or '-'}, this "
                         f"sweep gives them {given}")
            break
    if diffs:
        raise ConfigError(f"{csv_path} holds runs of another setting ({'; '.join(diffs)}); one "
                          f"sweep CSV holds one setting. Use another --out_dir for this one.")


def read_csv(path):
    """The whole rows of a sweep CSV, each run once; a torn or repeated row is dropped from the
    file, the whole rows' lines kept as they were, so the next row starts on a line of its own."""
    with open(path, newline="") as f:
        text = f.read()
    header, whole = fronts.sweep_lines(path)
    kept = header + "".join(line for line, _ in whole)
    if kept != text:
        write_atomic(path, kept)
    return [row for _, row in whole]


def append_row(path, row):
    """One line in one write (and the header with a new file): a row is whole or absent."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=SWEEP_FIELDS)
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        writer.writeheader()
    writer.writerow(row)
    with open(path, "a", newline="") as f:
        f.write(text.getvalue())
        f.flush()
        os.fsync(f.fileno())


def sweep_lock(csv_path):
    return lock_folder(csv_path.parent, f"{csv_path.name}.lock", "sweep", subject=csv_path)


def train_in_folder(settings, data, run_dir):
    """train_mlp.train in the run's own folder, from its checkpoint where there is one; Ctrl-C
    names the checkpoint kept and the command that goes on."""
    folder = RunDir(run_dir)
    init = "resume" if folder.ckpt.exists() and not settings.get("overwrite") else "scratch"
    if init == "resume":
        print(f"{run_dir}: going on from its checkpoint")
    try:
        return train_mlp.train({**settings, "out_dir": str(run_dir), "init_from": init}, data,
                               quiet=True, run=folder, results=False)
    except KeyboardInterrupt:
        saved = (f"its last checkpoint is {folder.ckpt} (step {folder.last_good_step})"
                 if folder.last_good_step is not None
                 else "it had no checkpoint yet")
        again = [a for a in sys.argv if not a.startswith("--overwrite=")]  # would start over
        raise SystemExit(f"interrupted in {run_dir}: {saved}; the same command goes on from "
                         f"there: {shlex.join(['python', *again])}") from None


def diverged_result(settings, step):
    """A diverged run's results: its parameter count (a model on the meta device), NaN metrics."""
    with torch.device("meta"):
        model = train_mlp.make_model(train_mlp.resolve(settings))
    nan = dict.fromkeys(SCORES, math.nan)
    return {"model": model, "params": count_params(model), "best_val_loss": math.nan,
            "test": nan, "baseline": nan, "steps": step, "train_time_s": math.nan}


def explicit_grid(shapes):
    """(shape, d_z, d_h, L) tuples or "shape:d_z:d_h:L" strings, in the order they run."""
    grid = []
    for entry in shapes:
        if isinstance(entry, str) and entry.count(":") == 3:
            family, *dims = entry.split(":")
            if not all(d.isdigit() for d in dims):
                raise ConfigError(f"shapes: {entry!r}: d_z, d_h and L are whole numbers")
            entry = (family, *map(int, dims))
        if not (isinstance(entry, tuple) and len(entry) == 4):
            raise ConfigError(f"shapes: {entry!r} is not a (shape, d_z, d_h, L) tuple (on the "
                              f"command line: --shapes=hourglass:1024:64:2,conventional:"
                              f"784:1024:1)")
        check_shape(*entry[:3])
        grid.append(entry)
    return grid


def run_name(run):
    return (f"{run['shape']}_dz{run['latent_dim']}_dh{run['hidden_dim']}_L{run['n_blocks']}_"
            f"lr{run['learning_rate']:g}_seed{run['seed']}")


def run_sweep(config, grid, learning_rates, seeds, out_dir):
    base = train_mlp.resolve(config)  # every setting checked, the task's protocol filled in
    d_x = get_task(base.task).input_dim

    def inputs(shape, d_z):  # what feeds the blocks: the one asked for, or each shape's own
        return input_projection(config.get("input_proj", ""), shape, d_z, d_x)
    os.makedirs(out_dir, exist_ok=True)
    csv_path = Path(out_dir) / "sweep.csv"
    with sweep_lock(csv_path):  # one sweep at a time on this CSV
        data = load_images(get_task(base.task), base.dataset, base.data_dir,
                           base.max_train_images, base.prepared_dir)
        setting = sweep_setting(base, data)
        done_rows = read_csv(csv_path) if os.path.exists(csv_path) else []
        check_one_setting(done_rows, csv_path, setting, inputs)  # resume only this setting's
        done = {fronts.run_key(r) for r in done_rows}
        runs = [dict(shape=shape, latent_dim=d_z, hidden_dim=d_h, n_blocks=L, learning_rate=lr,
                     seed=seed) for seed in seeds for (shape, d_z, d_h, L) in grid
                for lr in learning_rates]
        todo = [run for run in runs if fronts.run_key(
            {**setting, **run, "input_proj": inputs(run["shape"], run["latent_dim"])}) not in done]
        for run in runs:  # the folder of a run whose row was written before a stop
            if run not in todo:
                shutil.rmtree(os.path.join(out_dir, "runs", run_name(run)), ignore_errors=True)
        print(f"sweep: {len(grid)} shapes x {len(learning_rates)} lr x {len(seeds)} seeds = "
              f"{len(runs)} runs ({len(runs) - len(todo)} already in {csv_path})")
        for i, run in enumerate(todo):
            run_dir = os.path.join(out_dir, "runs", run_name(run))
            try:
                res = train_in_folder({**config, **run}, data, run_dir)
            except Diverged as e:  # a row of NaN, and the sweep goes on
                print(f"{run_name(run)}: {e}; its row is NaN")
                res = diverged_result({**config, **run}, e.step)
            row = {**setting, **run, "input_proj": res["model"].input_proj,  # the module's W_in
                   "params_total": res["params"]["total"],
                   "params_trainable": res["params"]["trainable"], "val_loss": res["best_val_loss"],
                   **{f"test_{k}": res["test"][k] for k in SCORES},
                   **{f"baseline_{k}": res["baseline"][k] for k in SCORES},
                   "test_accuracy": res["test"].get("accuracy", ""), "steps": res["steps"],
                   "train_time_s": round(res["train_time_s"], 1)}
            append_row(csv_path, row)
            shutil.rmtree(run_dir)  # its row holds what it measured
            print(f"[{i + 1}/{len(todo)}] {run_name(run)} | params {row['params_total'] / 1e6:.2f}M"
                  f" | test psnr {row['test_psnr_batchmse']:.2f} dB ssim {row['test_ssim']:.4f}",
                  flush=True)
        with suppress(OSError):  # the runs' folder, once empty
            os.rmdir(os.path.join(out_dir, "runs"))
        try:
            fronts.main([str(csv_path)])  # fronts.md and fronts.png beside the CSV
        except SystemExit as e:  # every run diverged: no fronts to draw
            print(e)
        return read_csv(csv_path)


def main(argv):
    try:
        defaults = {**{k: v for k, v in train_mlp.DEFAULTS.items()
                       if k not in ("init_from", "overwrite")}, **GRID}  # (per run)
        config = parse_overrides(argv, defaults, types=train_mlp.PROTOCOL_KEYS)
        grid, learning_rates, seeds = (config.pop(k) for k in GRID)
        if not grid or not learning_rates or not seeds:
            raise ConfigError("the grid is empty: give --shapes=hourglass:1024:64:2,conventional:"
                              "784:1024:1 (or a config file's shapes), --learning_rates and "
                              "--seeds")
        out_dir = config["out_dir"] or os.path.join("out", f"mlp_sweep_{config['task']}")
        return run_sweep(config, explicit_grid(grid), learning_rates, seeds, out_dir)
    except ConfigError as e:
        usage_error(e)


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM (Slurm, k8s) = Ctrl-C
    main(sys.argv[1:])
