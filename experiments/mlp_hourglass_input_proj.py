"""
Does freezing the random lift W_in cost anything? Section 4.3 of "Rethinking the Shape Convention
of an MLP" (Chen, Lee, Liao, Shiu, 2025, arXiv:2510.01796): the same hourglass trained with W_in
frozen at its random init and learned, from the same seed.

    python experiments/mlp_hourglass_input_proj.py config/mlp_mnist_denoise.py \\
        --dataset=fashion_mnist --epochs=10 --seeds=0,1 --num_threads=1 \\
        --out_dir=results/mlp_fashion_denoise_input_proj    # the committed comparison

Every train_mlp.py setting works here, plus --variants (mlp_hourglass.INPUT_PROJECTIONS) and
--seeds. Writes compare.csv, compare.json (with the validation curves) and compare_input_proj.png
to out_dir; each run trains in its own folder (under out/ for an out_dir in results/: committed
results hold no checkpoint), and the same command again goes on where it stopped.
"""

import json
import os
import shlex
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments")]

import train_mlp
from mlp_hourglass_sweep import SCORES, train_in_folder
from mlp_hourglass import input_projection
from shapelab.checkpoint import write_atomic
from shapelab.configurator import ConfigError, parse_overrides, usage_error
from shapelab.dataset import load_images
from shapelab.image_tasks import get_task

OPTIONS = dict(variants=("frozen_random", "learned"), seeds=())
# settings that say where a run lives, not what it is: left out of the committed results
WHERE = ("out_dir", "data_dir", "prepared_dir", "init_from", "overwrite", "eval_only",
         "allow_other_data", "num_threads", "log_interval", "device", "compile")


def runs_folder(out_dir):
    results = ROOT / "results"
    if Path(out_dir).resolve() == results or results in Path(out_dir).resolve().parents:
        return os.path.join("out", Path(out_dir).name)
    return out_dir


def compare(config, variants, out_dir, seeds):
    c = train_mlp.resolve(config)
    task = get_task(c.task)
    variants = [input_projection(v, c.shape, c.latent_dim, task.input_dim) for v in variants]
    data = load_images(task, c.dataset, c.data_dir, c.max_train_images, c.prepared_dir)
    source = train_mlp.portable_source(data.source)  # (no machine path in committed results)
    os.makedirs(out_dir, exist_ok=True)
    grid, history = [], {}
    for seed in seeds or (c.seed,):
        for variant in variants:
            print(f"--- W_in = {variant}, seed {seed}")
            name = variant + (f"_seed{seed}" if len(seeds) > 1 else "")
            r = train_in_folder({**config, "input_proj": variant, "seed": seed}, data,
                                os.path.join(runs_folder(out_dir), name), quiet=False,
                                results=True)
            history[f"dz{c.latent_dim}_{variant}_seed{seed}"] = r["history"]
            grid.append({"task": c.task, "data_source": source, "epochs": c.epochs,
                         "shape": c.shape, "latent_dim": c.latent_dim, "hidden_dim": c.hidden_dim,
                         "n_blocks": c.n_blocks, "input_proj": r["model"].input_proj,
                         "learning_rate": c.learning_rate, "seed": seed,
                         "params_total": r["params"]["total"],
                         "params_trainable": r["params"]["trainable"],
                         "best_val_loss": r["best_val_loss"],
                         **{f"test_{k}": r["test"][k] for k in SCORES},
                         "baseline": r["baseline_name"],
                         **{f"baseline_{k}": r["baseline"][k] for k in SCORES},
                         "steps": r["steps"], "train_time_s": round(r["train_time_s"], 1)})
    summary = {"data": source, "dataset": data.dataset, "grid": grid,
               "setting": {k: v for k, v in vars(c).items()
                           if k not in ("input_proj", "latent_dim", "seed", *WHERE)},
               "history": history}
    write_atomic(os.path.join(out_dir, "compare.json"), json.dumps(summary, indent=2))
    train_mlp.write_csv(os.path.join(out_dir, "compare.csv"), grid)
    plot(summary, c, os.path.join(out_dir, "compare_input_proj.png"))
    print("d_z    W_in          seed  params(trainable/total)   test psnr_batchmse  "
          "psnr_per_image  ssim")
    for g in grid:
        print(f"{g['latent_dim']:5d}  {g['input_proj']:13s} {g['seed']:4d} "
              f"{g['params_trainable'] / 1e6:7.2f}M / {g['params_total'] / 1e6:6.2f}M   "
              f"{g['test_psnr_batchmse']:8.3f} dB       {g['test_psnr_per_image']:6.3f} dB     "
              f"{g['test_ssim']:.4f}")
    for g in grid[::len(variants)]:
        print(f"{g['baseline']} (seed {g['seed']}): {g['baseline_psnr_batchmse']:.3f} dB, "
              f"{g['baseline_psnr_per_image']:.3f} dB per image, SSIM {g['baseline_ssim']:.4f}")
    print(f"wrote {out_dir}/compare.json, compare.csv and compare_input_proj.png")
    return summary


def plot(summary, c, path):
    from shapelab.plot import plt, save_figure

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name, h in summary["history"].items():
        ax.plot([e["epoch"] for e in h], [e["val_psnr_batchmse"] for e in h], "-o", ms=3,
                label=name.split("_", 1)[1])
    ax.set(xlabel="epoch", ylabel="val PSNR (dB, batch-MSE)")
    ax.set_title(f"{c.task} on {summary['dataset']}: {c.shape} d_z={c.latent_dim} "
                 f"d_h={c.hidden_dim} L={c.n_blocks}, {c.epochs:g} epochs, {c.dtype}", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=90)


def main(argv):
    try:
        defaults = {**{k: v for k, v in train_mlp.DEFAULTS.items()
                       if k not in ("init_from", "eval_only")}, **OPTIONS}  # (per run: ours)
        config = parse_overrides(argv, defaults, types=train_mlp.PROTOCOL_KEYS)
        variants, seeds = config.pop("variants"), config.pop("seeds")
        if not variants:
            raise ConfigError("--variants= is empty: name one or more of "
                              "frozen_random, learned, zero_pad, direct")
        return compare(config, variants,
                       config["out_dir"] or f"out/mlp_input_proj_{config['task']}", seeds)
    except ConfigError as e:
        usage_error(e)
    except KeyboardInterrupt:  # (between runs: inside one, train_in_folder says which)
        raise SystemExit(f"interrupted; the same command goes on: "
                         f"{shlex.join(['python', *sys.argv])}") from None


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM (Slurm, k8s) = Ctrl-C
    main(sys.argv[1:])
