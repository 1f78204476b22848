"""
Does freezing the random lift W_in cost anything? Section 4.3 of "Rethinking the Shape Convention
of an MLP" (Chen, Lee, Liao, Shiu, 2025, arXiv:2510.01796): the same hourglass trained with W_in
frozen at its random init and with W_in learned, from the same seed (so the same initial W_in and
blocks), optionally at several d_z.

    python experiments/mlp_hourglass_input_proj.py --task=mnist_denoise --num_threads=1
    python experiments/mlp_hourglass_input_proj.py --latent_dims=1024,2048,4096 --epochs=10

Every train_mlp.py setting works here, plus --variants (default frozen,learned; also identity or
none) and --latent_dims (default: --latent_dim alone). Writes out_dir/ (default
out/mlp_compare_input_proj_<task>/): compare.json, compare.csv, compare_input_proj.png (the
validation PSNR per epoch for one d_z; test PSNR against d_z for several), and each run's own
folder as train_mlp.py writes it.
"""

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repo root, for train_mlp.py and its modules

import train_mlp  # noqa: E402
from configurator import ConfigError, parse_overrides, usage_error  # noqa: E402
from dataset import load_images  # noqa: E402
from image_tasks import get_task  # noqa: E402
from mlp_hourglass import check_shape  # noqa: E402

OPTIONS = dict(variants=("frozen", "learned"), latent_dims=())


def compare(config, variants, latent_dims, out_dir):
    base = train_mlp.resolve(config)
    latent_dims = latent_dims or (base.latent_dim,)
    for d_z in latent_dims:
        check_shape(base.shape, d_z, base.hidden_dim)
    data = load_images(get_task(base.task), base.dataset, base.data_dir, base.max_train_images,
                       base.prepared_dir)
    results, grid = {}, []
    for d_z in latent_dims:
        for variant in variants:
            print(f"--- d_z = {d_z}, W_in = {variant}")
            run_dir = variant if len(latent_dims) == 1 else f"dz{d_z}_{variant}"
            run = {**config, "latent_dim": d_z, "input_proj": variant,
                   "out_dir": os.path.join(out_dir, run_dir)}
            r = results[(d_z, variant)] = train_mlp.train(run, data)
            grid.append({"latent_dim": d_z, "hidden_dim": base.hidden_dim,
                         "n_blocks": base.n_blocks, "input_proj": variant,
                         "params_total": r["params"]["total"],
                         "params_trainable": r["params"]["trainable"],
                         "best_val_loss": r["best_val_loss"],
                         "test_psnr_batchmse": r["test"]["psnr_batchmse"],
                         "test_psnr_per_image": r["test"]["psnr_per_image"],
                         "test_ssim": r["test"]["ssim"], "steps": r["steps"],
                         "train_time_s": round(r["train_time_s"], 1)})
    summary = {"data": data.source, "dataset": data.dataset, "grid": grid,
               "setting": {k: v for k, v in vars(base).items()
                           if k not in ("input_proj", "latent_dim", "out_dir")}}
    if len(latent_dims) == 1:  # one d_z: the variants by name
        summary.update({v: {"params": r["params"], "test": r["test"],
                            "best_val_loss": r["best_val_loss"],
                            "train_time_s": r["train_time_s"]} for (_, v), r in results.items()})
    with open(os.path.join(out_dir, "compare.json"), "w") as f:
        json.dump(summary, f, indent=2)
    train_mlp.write_csv(os.path.join(out_dir, "compare.csv"), grid)
    plot(results, grid, variants, latent_dims, base, data.source,
         os.path.join(out_dir, "compare_input_proj.png"))
    print("d_z    W_in     params(trainable/total)   test psnr_batchmse  psnr_per_image  ssim")
    for g in grid:
        print(f"{g['latent_dim']:5d}  {g['input_proj']:8s} {g['params_trainable'] / 1e6:7.2f}M / "
              f"{g['params_total'] / 1e6:6.2f}M   {g['test_psnr_batchmse']:8.2f} dB       "
              f"{g['test_psnr_per_image']:6.2f} dB     {g['test_ssim']:.4f}")
    print(f"wrote {out_dir}/compare.json, compare.csv and compare_input_proj.png")
    return summary


def plot(results, grid, variants, latent_dims, c, source, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    if len(latent_dims) == 1:  # the variants' validation curves
        for (_, v), r in results.items():
            h = r["history"]
            ax.plot([e["epoch"] for e in h], [e["val_psnr_batchmse"] for e in h], "-o", ms=3,
                    label=f"W_in {v}: {r['params']['trainable'] / 1e6:.2f}M trainable / "
                          f"{r['params']['total'] / 1e6:.2f}M")
        ax.set_xlabel("epoch")
        ax.set_ylabel("val PSNR (dB, batch-MSE)")
    else:  # test PSNR against d_z, a line per variant
        for v in variants:
            points = [g for g in grid if g["input_proj"] == v]
            ax.plot([g["latent_dim"] for g in points], [g["test_psnr_batchmse"] for g in points],
                    "-o", ms=4, label=f"W_in {v}")
        ax.set_xlabel("d_z (latent width)")
        ax.set_ylabel("test PSNR (dB, batch-MSE)")
    ax.set_title(f"{c.task} {c.shape} d_h={c.hidden_dim} L={c.n_blocks}, {c.dtype}\n{source}",
                 fontsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv):
    try:
        defaults = {**train_mlp.DEFAULTS, **OPTIONS}
        config = parse_overrides(argv, defaults, types=train_mlp.PROTOCOL_KEYS)
        variants, latent_dims = config.pop("variants"), config.pop("latent_dims")
        out_dir = config["out_dir"] or os.path.join("out", f"mlp_compare_input_proj_"
                                                           f"{config['task']}")
        unknown = set(variants) - {"frozen", "learned", "identity", "none"}
        if unknown or not variants:
            raise ConfigError(f"--variants={','.join(variants)}: use frozen, learned, identity "
                              f"or none")
        return compare(config, variants, latent_dims, out_dir)
    except ConfigError as e:
        usage_error(e)


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    main(sys.argv[1:])
