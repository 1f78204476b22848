"""
The paper's shape sweep: a grid of hourglass and conventional image MLPs trained at several
learning rates and seeds, one row per run in sweep.csv, then the Pareto fronts of test PSNR and
SSIM against total and trainable parameters with the seeds' spread (mlp_hourglass_fronts.py).
"Rethinking the Shape Convention of an MLP" (Chen, Lee, Liao, Shiu, 2025, arXiv:2510.01796),
section 4.2 and Figures 2-4.

    python experiments/mlp_hourglass_sweep.py --task=mnist_denoise --num_threads=1
    python experiments/mlp_hourglass_sweep.py --dataset=fashion_mnist --epochs=10 \\
        --lrs=5e-4,1e-3 --seeds=0,1 --hg_latent=2048 --hg_hidden=32,128 --hg_blocks=4

Every train_mlp.py setting works here (--task, --dataset, --epochs, --noise_sigma, ...), plus the
grid: --hg_latent, --hg_hidden, --hg_blocks (the hourglass d_z, d_h, L values: every combination
with d_h < d_z), --conv_latent, --conv_hidden, --conv_blocks (conventional: d_h > d_z), --lrs and
--seeds (comma-separated; an empty value is no shape of that family); or an explicit list,
`shapes = (("hourglass", 1024, 64, 2), ...)`, in a config file (config/mlp_sweep_*.py), run in its
order. The runs go seed by seed, so a sweep stopped early holds every shape and lr of its first
seeds.

Resumable: a row records the run's whole setting (data source, train-set size, epochs, steps,
batch, flips, sigma, W_in, dtype, weight decay, eval interval) beside its shape, lr and seed; a
second sweep into the same --out_dir skips the runs already there, and one CSV holds one setting
(another is a one-line error: use another --out_dir). Several sweeps of one setting, each with its
own grid or seeds, can share a folder, or run side by side in two folders (one process per core)
whose CSVs mlp_hourglass_fronts.py reads together. A row is appended whole or not at all; a torn
last row (a killed older version, a full disk) is dropped with a warning and runs again. A run
whose every validation loss is NaN writes a NaN row and the sweep goes on.
"""

import csv
import io
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repo root, for train_mlp.py and its modules
sys.path.insert(0, str(ROOT / "experiments"))  # for mlp_hourglass_fronts.py

import mlp_hourglass_fronts as fronts  # noqa: E402
import train_mlp  # noqa: E402
from configurator import ConfigError, parse_overrides, usage_error  # noqa: E402
from dataset import load_images  # noqa: E402
from image_tasks import get_task  # noqa: E402
from mlp_hourglass import check_shape  # noqa: E402

GRID = dict(hg_latent=(1024, 2048), hg_hidden=(16, 64, 256, 512), hg_blocks=(2, 4),
            conv_latent=(784,), conv_hidden=(1024, 2048, 3072), conv_blocks=(1, 2),
            lrs=(1e-3,), seeds=(0,))
# the run's setting: every row records it, the resume keys on it, one CSV holds one setting
SETTING_FIELDS = ["task", "data_source", "n_train", "epochs", "max_steps", "batch_size", "flips",
                  "noise_sigma", "input_proj", "dtype", "weight_decay", "eval_interval"]
SWEEP_FIELDS = SETTING_FIELDS + [
    "shape", "latent_dim", "hidden_dim", "n_blocks", "lr", "seed", "params_total",
    "params_trainable", "val_loss", "test_psnr_batchmse", "test_psnr_per_image", "test_ssim",
    "test_accuracy", "baseline_psnr_batchmse", "steps", "train_time_s"]


def canonical(value):
    """A setting value as the CSV compares it: 30 and 30.0 alike, None as ''."""
    try:
        return "" if value in (None, "") else repr(float(value))
    except ValueError:
        return str(value)


def sweep_setting(c, data):
    """{field: canonical text}: everything but the shape, lr and seed that changes a result."""
    raw = {**vars(c), "data_source": data.source, "n_train": len(data.train),
           "max_steps": c.max_steps or None}  # (0 = no cap, recorded as an empty field)
    return {k: canonical(raw[k]) for k in SETTING_FIELDS}


def run_key(row):
    """A row's identity: the shape, lr, seed and the full setting."""
    return ((row["shape"], int(row["latent_dim"]), int(row["hidden_dim"]), int(row["n_blocks"]),
             float(row["lr"]), int(row["seed"])) + tuple(canonical(row[k]) for k in SETTING_FIELDS))


def check_one_setting(rows, csv_path, setting):
    """A clear error when the rows of a CSV and the setting about to run are not one setting: a
    front must not mix them, and a resume must not count another setting's runs as done."""
    if any(k not in row for row in rows for k in SETTING_FIELDS):
        raise ConfigError(f"{csv_path} was written before sweep rows recorded their setting "
                          f"(data, steps, batch, flips, sigma, W_in, dtype...), so its runs cannot "
                          f"be matched to this one. Use another --out_dir, or delete it to start "
                          f"over.")
    settings = {tuple(canonical(r[k]) for k in SETTING_FIELDS) for r in rows}
    settings.add(tuple(setting[k] for k in SETTING_FIELDS))
    if len(settings) > 1:
        diffs = [f"{k}: " + " vs ".join(sorted({s[i] or "-" for s in settings}))
                 for i, k in enumerate(SETTING_FIELDS) if len({s[i] for s in settings}) > 1]
        raise ConfigError(f"{csv_path} holds runs of another setting ({'; '.join(diffs)}); one "
                          f"sweep CSV holds one setting. Use another --out_dir for this one (or "
                          f"delete the CSV to start over).")


def read_csv(path):
    """The rows of a sweep CSV; a torn last row is dropped with a warning (that run runs again),
    and the file rewritten without it, atomically, so that the next row starts on its own line."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if rows and (None in rows[-1].values() or None in rows[-1]):
        print(f"warning: {path}: its last row is incomplete (a torn write); dropped, that run "
              f"will run again", file=sys.stderr)
        rows = rows[:-1]
        if rows:
            train_mlp.write_csv(path, rows)
        else:
            os.remove(path)
    return rows


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
    """shapes: (shape, d_z, d_h, L) tuples, in the order they run (a config file's grid)."""
    grid = []
    for entry in shapes:
        if not (isinstance(entry, tuple) and len(entry) == 4):
            raise ConfigError(f"shapes: {entry!r} is not a (shape, d_z, d_h, L) tuple")
        check_shape(*entry[:3])
        grid.append(entry)
    return grid


def run_sweep(config, grid, lrs, seeds, out_dir, verbose=False):
    base = train_mlp.resolve(config)  # every setting checked, the task's protocol filled in
    data = load_images(get_task(base.task), base.dataset, base.data_dir, base.max_train_images,
                       base.prepared_dir)
    setting = sweep_setting(base, data)
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, "sweep.csv")
    done_rows = read_csv(csv_path) if os.path.exists(csv_path) else []
    check_one_setting(done_rows, csv_path, setting)  # resume only runs of this very setting
    done = {run_key(r) for r in done_rows}
    runs = [dict(shape=shape, latent_dim=d_z, hidden_dim=d_h, n_blocks=L, lr=lr, seed=seed)
            for seed in seeds for (shape, d_z, d_h, L) in grid for lr in lrs]
    todo = [run for run in runs if run_key({**setting, **run}) not in done]
    print(f"sweep: {len(grid)} shapes x {len(lrs)} lr x {len(seeds)} seeds = {len(runs)} runs "
          f"({len(runs) - len(todo)} already in {csv_path})")
    t0 = time.time()
    for i, run in enumerate(todo):
        res = train_mlp.train({**config, **run}, data, quiet=not verbose, save=False)
        test = res["test"]
        row = {**setting, **run, "params_total": res["params"]["total"],
               "params_trainable": res["params"]["trainable"], "val_loss": res["best_val_loss"],
               "test_psnr_batchmse": test["psnr_batchmse"],
               "test_psnr_per_image": test["psnr_per_image"], "test_ssim": test["ssim"],
               "test_accuracy": test.get("accuracy", ""),
               "baseline_psnr_batchmse": res["baseline"]["psnr_batchmse"], "steps": res["steps"],
               "train_time_s": round(res["train_time_s"], 1)}
        append_row(csv_path, row)
        left = (time.time() - t0) / (i + 1) * (len(todo) - i - 1) / 60
        print(f"[{i + 1}/{len(todo)}] {run['shape']:12s} d_z={run['latent_dim']:5d} "
              f"d_h={run['hidden_dim']:5d} L={run['n_blocks']:2d} lr={run['lr']:g} "
              f"seed={run['seed']} | params {row['params_total'] / 1e6:6.2f}M | test psnr "
              f"{row['test_psnr_batchmse']:.2f} dB ssim {row['test_ssim']:.4f} | "
              f"{row['train_time_s']:.0f}s, ~{left:.0f} min to go", flush=True)
    fronts.main([csv_path])  # fronts.md and fronts.png beside the CSV
    return read_csv(csv_path)


def main(argv):
    try:
        defaults = {**train_mlp.DEFAULTS, **GRID, "shapes": (), "verbose": False}
        config = parse_overrides(argv, defaults, types=train_mlp.PROTOCOL_KEYS)
        grid_args = {k: config.pop(k) for k in GRID}
        shapes, verbose = config.pop("shapes"), config.pop("verbose")
        out_dir = config["out_dir"] or os.path.join("out", f"mlp_sweep_{config['task']}")
        family_grid = [grid_args[k] for k in list(GRID)[:6]]  # hg_* and conv_* values
        grid = explicit_grid(shapes) if shapes else sweep_grid(*family_grid)
        if not grid or not grid_args["lrs"] or not grid_args["seeds"]:
            raise ConfigError("the grid is empty: give each family's d_z, d_h and L values "
                              "(hourglass d_h < d_z, conventional d_h > d_z), --lrs and --seeds")
        return run_sweep(config, grid, grid_args["lrs"], grid_args["seeds"], out_dir, verbose)
    except ConfigError as e:
        usage_error(e)


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    main(sys.argv[1:])
