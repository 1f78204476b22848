"""
The paper's shape sweep: a grid of hourglass and conventional image MLPs trained at several
learning rates and seeds, one row per run in sweep.csv, then the Pareto fronts of test PSNR and
SSIM against total and trainable parameters with the seeds' spread (mlp_hourglass_fronts.py).
"Rethinking the Shape Convention of an MLP" (Chen, Lee, Liao, Shiu, 2025, arXiv:2510.01796),
section 4.2 and Figures 2-4.

    python experiments/mlp_hourglass_sweep.py --task=mnist_denoise --num_threads=1
    python experiments/mlp_hourglass_sweep.py --dataset=fashion_mnist --epochs=10 \\
        --learning_rates=5e-4,1e-3 --seeds=0,1 --hg_latent=2048 --hg_hidden=32,128 --hg_blocks=4

Every train_mlp.py setting works here (--task, --dataset, --epochs, --noise_sigma, ...), plus the
grid: --hg_latent, --hg_hidden, --hg_blocks (the hourglass d_z, d_h, L values: every combination
with d_h < d_z), --conv_latent (default d_x), --conv_hidden, --conv_blocks (conventional: d_h >
d_z), --learning_rates and --seeds (comma-separated; an empty value is no shape of that family);
each shape takes its own input (a hourglass the frozen random lift, a conventional MLP the image
itself when d_z = d_x, as the paper's baseline) unless --input_proj names one for all; or an
explicit list, `shapes = (("hourglass", 1024, 64, 2), ...)`, in a config file
(config/mlp_sweep_*.py), run in its order (on the command line:
--shapes=hourglass:1024:64:2,conventional:784:1024:1). The runs go seed by seed, so a sweep stopped
early holds every shape and lr of its first seeds.

Resumable: a row records the run's whole setting (data source without machine paths, so a CSV
resumes from any checkout; train-set size, epochs, steps, batch, flips, sigma, SR clamp, dtype,
weight decay, eval interval) beside its shape, input (W_in), lr and seed, and the test scores of
the model and of the trivial baseline (noisy input, bicubic: PSNR and SSIM); the
same command again skips the runs already in the CSV and goes on inside the run it was stopped in
(each run trains in its own folder, out_dir/runs/<run>/, checkpointed at every evaluation as
train_mlp.py's, removed once its row is written). One CSV holds one setting (another is a
one-line error: use another --out_dir) and one sweep at a time (a lock: a second one stops in one
line). Several sweeps of one setting, each with its own grid or seeds, can run one after the other
in a folder, or side by side in two folders (one process per core) whose CSVs
mlp_hourglass_fronts.py reads together. A row is appended whole or not at all; a row not written
whole (cut short, or glued to the next) is dropped with a warning and its run
runs again, and a run written twice counts once. A run that diverges (a non-finite loss) writes a
NaN row and the sweep goes on. Ctrl-C or SIGTERM: one line saying which run's checkpoint is kept
and the command that goes on. A CSV with fewer columns or machine paths is read in the sweep's
columns and words and rewritten so; --upgrade_csv=PATH (with the sweep's config)
does that to any CSV and adds the baseline's PSNR per image and SSIM it lacks, computed again
(upgrade_csv).
"""

import csv
import io
import math
import os
import shlex
import shutil
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repo root, for train_mlp.py and its modules
sys.path.insert(0, str(ROOT / "experiments"))  # for mlp_hourglass_fronts.py

import mlp_hourglass_fronts as fronts  # noqa: E402
from mlp_hourglass import check_shape, count_params, input_projection  # noqa: E402
from shapelab.configurator import ConfigError, parse_overrides, usage_error  # noqa: E402
from shapelab.dataset import load_images  # noqa: E402
from shapelab.image_tasks import choose_prototypes, get_task  # noqa: E402
from shapelab.checkpoint import write_atomic  # noqa: E402
from shapelab.lock import lock_folder  # noqa: E402
from shapelab.run import Diverged, RunDir  # noqa: E402
import train_mlp  # noqa: E402

GRID = dict(hg_latent=(1024, 2048), hg_hidden=(16, 64, 256, 512), hg_blocks=(2, 4),
            conv_latent=(), conv_hidden=(1024, 2048, 3072), conv_blocks=(1, 2),
            learning_rates=(1e-3,), seeds=(0,))  # conv_latent () = d_x: the image itself
# the run's setting: every row records it, the resume keys on it, one CSV holds one setting
SETTING_FIELDS = ["task", "data_source", "n_train", "epochs", "max_iters", "batch_size", "flips",
                  "noise_sigma", "dtype", "weight_decay", "eval_interval", "clamp_sr_input"]
# a row: the setting, then the run (its input_proj is its shape's, unless the sweep names one for
# all), then what it measured; a CSV without the columns after train_time_s reads them empty
SWEEP_FIELDS = [
    "task", "data_source", "n_train", "epochs", "max_iters", "batch_size", "flips", "noise_sigma",
    "input_proj", "dtype", "weight_decay", "eval_interval", "shape", "latent_dim", "hidden_dim",
    "n_blocks", "learning_rate", "seed", "params_total", "params_trainable", "val_loss",
    "test_psnr_batchmse", "test_psnr_per_image", "test_ssim", "test_accuracy",
    "baseline_psnr_batchmse", "steps", "train_time_s", "clamp_sr_input",
    "baseline_psnr_per_image", "baseline_ssim"]


canonical = fronts.canonical  # a setting value as the CSV compares it: 30 and 30.0 alike


def sweep_setting(c, data):
    """{field: canonical text}: everything but the shape, input, lr and seed that changes a
    result. The data source without this machine's paths (train_mlp.portable_source), so a CSV
    resumes from any checkout; the SR clamp only where there is an SR input."""
    raw = {**vars(c), "data_source": train_mlp.portable_source(data.source),
           "n_train": len(data.train), "max_iters": c.max_iters or None,  # (0 = no cap: empty)
           "clamp_sr_input": c.clamp_sr_input if get_task(c.task).degradation == "bicubic2x"
           else None}
    return {k: canonical(raw[k]) for k in SETTING_FIELDS}


def run_key(row):
    """A row's identity: the shape, its input, learning rate, seed and the full setting (the row
    as mlp_hourglass_fronts.normalized reads it: no machine path)."""
    return ((row["shape"], int(row["latent_dim"]), int(row["hidden_dim"]), int(row["n_blocks"]),
             row["input_proj"], float(row["learning_rate"]), int(row["seed"]))
            + tuple(canonical(row[k]) for k in SETTING_FIELDS))


def check_one_setting(rows, csv_path, setting, inputs=None):
    """A clear error when the rows of a CSV and the setting about to run are not one setting: a
    front must not mix them, and a resume must not count another setting's runs as done.
    inputs(shape, d_z): the input this sweep gives such a shape; a row that took another one is
    another setting's (the frozen-square conventional rows of an earlier sweep, say)."""
    if any(k not in row for row in rows for k in SETTING_FIELDS):
        raise ConfigError(f"{csv_path} has no columns for the setting of its rows "
                          f"(data, steps, batch, flips, sigma, W_in, dtype...), so its runs cannot "
                          f"be matched to this one. Use another --out_dir, or delete it to start "
                          f"over.")
    settings = {tuple(canonical(r[k]) for k in SETTING_FIELDS) for r in rows}
    settings.add(tuple(setting[k] for k in SETTING_FIELDS))
    diffs = [f"{k}: " + " vs ".join(sorted({s[i] or "-" for s in settings}))
             for i, k in enumerate(SETTING_FIELDS) if len({s[i] for s in settings}) > 1]
    for r in rows if inputs else []:
        given = inputs(r["shape"], int(r["latent_dim"]))
        if r["input_proj"] != given:
            diffs.append(f"input_proj: {r['shape']} rows took {r['input_proj'] or '-'}, this "
                         f"sweep gives them {given}")
            break
    if diffs:
        raise ConfigError(f"{csv_path} holds runs of another setting ({'; '.join(diffs)}); one "
                          f"sweep CSV holds one setting. Use another --out_dir for this one (or "
                          f"delete the CSV to start over).")


def read_csv(path):
    """The whole rows of a sweep CSV, each run once (mlp_hourglass_fronts.whole_rows and
    unique_runs warn about the others: those runs run again), in the sweep's words
    (fronts.normalized: no machine path in data_source). The file is
    rewritten without the others, atomically, so that the next row starts on a line of its own;
    and in SWEEP_FIELDS' columns and the sweep's words when it has others (fewer columns, machine
    paths and all)."""
    rows, torn = fronts.whole_rows(path)
    unique = fronts.unique_runs(rows, path)
    with open(path, newline="") as f:
        header = next(csv.reader(f), [])
    if torn or len(unique) < len(rows) or header != SWEEP_FIELDS:
        if unique:
            write_rows(path, unique)
        else:
            os.remove(path)
    return unique


def write_rows(path, rows):
    """rows as a sweep CSV in SWEEP_FIELDS' columns (a field a row lacks: empty), whole or not at
    all."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=SWEEP_FIELDS, restval="", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, text.getvalue())


def append_row(path, row):
    """One line in one write (and the header with a new file): a row is whole or absent."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=SWEEP_FIELDS)
    if not os.path.exists(path):
        writer.writeheader()
    writer.writerow(row)
    with open(path, "a", newline="") as f:
        f.write(text.getvalue())
        f.flush()
        os.fsync(f.fileno())


@contextmanager
def sweep_lock(csv_path):
    """One sweep at a time on a CSV: shapelab/lock.py's lock on <csv>.lock (as RunDir locks a
    run's folder), dropped by the OS when the process ends, however it ends. A second sweep on the
    same CSV stops in one line instead of training the same runs again."""
    csv_path = Path(csv_path)
    with lock_folder(csv_path.parent, f"{csv_path.name}.lock", "sweep", subject=csv_path):
        yield


def train_in_folder(settings, data, run_dir, quiet=True, results=False):
    """train_mlp.train in the run's own folder (shapelab/run.py's RunDir, locked): started there, or
    continued from its checkpoint where an earlier sweep stopped inside it (a finished run gives
    its results again without training). Ctrl-C / SIGTERM: one line naming the run's last
    checkpoint and the command that goes on: the same one (without --overwrite)."""
    folder = RunDir(run_dir)
    init = "resume" if folder.ckpt.exists() and not settings.get("overwrite") else "scratch"
    if init == "resume":
        print(f"{run_dir}: going on from its checkpoint")
    try:
        return train_mlp.train({**settings, "out_dir": str(run_dir), "init_from": init}, data,
                               quiet=quiet, run=folder, results=results)
    except KeyboardInterrupt:
        for tmp in Path(run_dir).glob("*.tmp.*"):  # a save cut short
            tmp.unlink()
        saved = (f"its last checkpoint is {folder.ckpt} (step {folder.last_good_step})"
                 if folder.last_good_step is not None
                 else f"it had no checkpoint yet{folder.put_back_previous_run()}")
        again = [a for a in sys.argv if not a.startswith("--overwrite=")]  # (would start over)
        raise SystemExit(f"interrupted in {run_dir}: {saved}; the same command goes on from "
                         f"there: {shlex.join(['python', *again])}") from None


def diverged_result(settings, step):
    """The results of a run that diverged at `step`: its model (on the meta device: no weights)
    and parameters, NaN metrics."""
    with torch.device("meta"):
        model = train_mlp.make_model(train_mlp.resolve(settings))
    nan = dict.fromkeys(("psnr_batchmse", "psnr_per_image", "ssim"), math.nan)
    return {"model": model, "params": count_params(model), "best_val_loss": math.nan,
            "test": nan, "baseline": nan, "steps": step, "train_time_s": math.nan}


def sweep_grid(hg_latent, hg_hidden, hg_blocks, conv_latent, conv_hidden, conv_blocks):
    """Every (shape, d_z, d_h, L) of the grid whose d_h fits its family (hourglass d_h < d_z)."""
    grid = []
    for shape, latents, hiddens, blocks in (("hourglass", hg_latent, hg_hidden, hg_blocks),
                                            ("conventional", conv_latent, conv_hidden,
                                             conv_blocks)):
        for d_z in latents:
            for d_h in hiddens:
                for L in blocks:
                    try:
                        check_shape(shape, d_z, d_h)
                    except ValueError:
                        continue
                    grid.append((shape, d_z, d_h, L))
    return grid


def explicit_grid(shapes):
    """shapes: (shape, d_z, d_h, L) tuples, in the order they run (a config file's grid), or
    "shape:d_z:d_h:L" strings (the command line's --shapes=hourglass:1024:64:2,...)."""
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


def run_sweep(config, grid, learning_rates, seeds, out_dir, verbose=False):
    base = train_mlp.resolve(config)  # every setting checked, the task's protocol filled in
    d_x = get_task(base.task).input_dim

    def inputs(shape, d_z):  # what feeds the blocks: the one asked for, or each shape's own
        return input_projection(config.get("input_proj", ""), shape, d_z, d_x)
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, "sweep.csv")
    with sweep_lock(csv_path):  # one sweep at a time on this CSV
        data = load_images(get_task(base.task), base.dataset, base.data_dir,
                           base.max_train_images, base.prepared_dir)
        setting = sweep_setting(base, data)
        done_rows = read_csv(csv_path) if os.path.exists(csv_path) else []
        check_one_setting(done_rows, csv_path, setting, inputs)  # resume only this setting's
        done = {run_key(r) for r in done_rows}
        runs = [dict(shape=shape, latent_dim=d_z, hidden_dim=d_h, n_blocks=L, learning_rate=lr,
                     seed=seed) for seed in seeds for (shape, d_z, d_h, L) in grid
                for lr in learning_rates]
        todo = [run for run in runs if run_key(
            {**setting, **run, "input_proj": inputs(run["shape"], run["latent_dim"])}) not in done]
        for run in runs:  # the folder of a run whose row was written before a stop
            if run not in todo:
                shutil.rmtree(os.path.join(out_dir, "runs", run_name(run)), ignore_errors=True)
        print(f"sweep: {len(grid)} shapes x {len(learning_rates)} lr x {len(seeds)} seeds = "
              f"{len(runs)} "
              f"runs ({len(runs) - len(todo)} already in {csv_path})")
        t0 = time.time()
        for i, run in enumerate(todo):
            run_dir = os.path.join(out_dir, "runs", run_name(run))
            try:
                res = train_in_folder({**config, **run}, data, run_dir, quiet=not verbose)
            except Diverged as e:  # a row of NaN, and the sweep goes on
                print(f"{run_name(run)}: {e}; its row is NaN")
                res = diverged_result({**config, **run}, e.step)
            test, baseline = res["test"], res["baseline"]
            row = {**setting, **run, "input_proj": res["model"].input_proj,  # the module's W_in
                   "params_total": res["params"]["total"],
                   "params_trainable": res["params"]["trainable"],
                   "val_loss": res["best_val_loss"], "test_psnr_batchmse": test["psnr_batchmse"],
                   "test_psnr_per_image": test["psnr_per_image"], "test_ssim": test["ssim"],
                   "test_accuracy": test.get("accuracy", ""),
                   "baseline_psnr_batchmse": baseline["psnr_batchmse"],
                   "baseline_psnr_per_image": baseline["psnr_per_image"],
                   "baseline_ssim": baseline["ssim"],
                   "steps": res["steps"], "train_time_s": round(res["train_time_s"], 1)}
            append_row(csv_path, row)
            shutil.rmtree(run_dir)  # (its row holds what it measured)
            left = (time.time() - t0) / (i + 1) * (len(todo) - i - 1) / 60
            print(f"[{i + 1}/{len(todo)}] {run['shape']:12s} d_z={run['latent_dim']:5d} "
                  f"d_h={run['hidden_dim']:5d} L={run['n_blocks']:2d} lr={run['learning_rate']:g} "
                  f"seed={run['seed']} | params {row['params_total'] / 1e6:6.2f}M | test psnr "
                  f"{row['test_psnr_batchmse']:.2f} dB ssim {row['test_ssim']:.4f} | "
                  f"{row['train_time_s']:.0f}s, ~{left:.0f} min to go", flush=True)
        if os.path.isdir(os.path.join(out_dir, "runs")) and not os.listdir(
                os.path.join(out_dir, "runs")):
            os.rmdir(os.path.join(out_dir, "runs"))
        fronts.main([csv_path])  # fronts.md and fronts.png beside the CSV
        return read_csv(csv_path)


def upgrade_csv(config, path):
    """A sweep CSV in SWEEP_FIELDS' columns and the sweep's words (read_csv: no machine path),
    with the trivial baseline's scores it lacks (PSNR per image, SSIM)
    computed again for each seed on the data and setting given here, as every run scores it. The
    baseline's batch-MSE PSNR computed again must equal the row's to the last bit, or nothing is
    written."""
    base = train_mlp.resolve(config)
    data = load_images(get_task(base.task), base.dataset, base.data_dir, base.max_train_images,
                       base.prepared_dir)
    rows = read_csv(path)
    check_one_setting(rows, path, sweep_setting(base, data))
    task = get_task(base.task)
    prototypes = (choose_prototypes(data.train, data.train_labels)
                  if task.target == "prototype" else None)
    for seed in sorted({int(r["seed"]) for r in rows}):
        c = train_mlp.resolve({**config, "seed": seed})
        scores = train_mlp.evaluate(torch.nn.Identity(), c, data.test, data.test_labels,
                                    prototypes, with_ssim=True, seed=seed + 2000, baseline=True)
        for r in (r for r in rows if int(r["seed"]) == seed):
            if float(r["baseline_psnr_batchmse"]) != scores["psnr_batchmse"]:
                raise ConfigError(f"{path}: seed {seed}'s baseline scores "
                                  f"{scores['psnr_batchmse']!r} dB here, its rows "
                                  f"{r['baseline_psnr_batchmse']} dB: not the same test inputs, "
                                  f"nothing written")
            r["baseline_psnr_per_image"] = r.get("baseline_psnr_per_image") or scores[
                "psnr_per_image"]
            r["baseline_ssim"] = r.get("baseline_ssim") or scores["ssim"]
    write_rows(path, rows)
    print(f"{path}: {len(rows)} rows in the sweep's columns, with the baseline's PSNR per image "
          f"and SSIM")
    return rows


def main(argv):
    try:
        defaults = {**{k: v for k, v in train_mlp.DEFAULTS.items()
                       if k not in ("init_from", "overwrite", "eval_only")},  # (per run: ours)
                    **GRID, "shapes": (), "verbose": False, "upgrade_csv": ""}
        config = parse_overrides(argv, defaults, types=train_mlp.PROTOCOL_KEYS)
        upgrade = config.pop("upgrade_csv")
        if upgrade:  # (the grid plays no part)
            return upgrade_csv({k: v for k, v in config.items()
                                if k not in (*GRID, "shapes", "verbose")}, upgrade)
        grid_args = {k: config.pop(k) for k in GRID}
        grid_args["conv_latent"] = grid_args["conv_latent"] or (
            get_task(config["task"]).input_dim,)  # d_x: the image itself
        shapes, verbose = config.pop("shapes"), config.pop("verbose")
        out_dir = config["out_dir"] or os.path.join("out", f"mlp_sweep_{config['task']}")
        family_grid = [grid_args[k] for k in list(GRID)[:6]]  # hg_* and conv_* values
        grid = explicit_grid(shapes) if shapes else sweep_grid(*family_grid)
        if not grid or not grid_args["learning_rates"] or not grid_args["seeds"]:
            raise ConfigError("the grid is empty: give each family's d_z, d_h and L values "
                              "(hourglass d_h < d_z, conventional d_h > d_z), --learning_rates "
                              "and --seeds")
        return run_sweep(config, grid, grid_args["learning_rates"], grid_args["seeds"], out_dir,
                         verbose)
    except ConfigError as e:
        usage_error(e)
    except KeyboardInterrupt:  # (between runs: inside one, train_in_folder says which)
        raise SystemExit(f"interrupted; the same command goes on: "
                         f"{shlex.join(['python', *sys.argv])}") from None


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM (Slurm, k8s) = Ctrl-C
    main(sys.argv[1:])
