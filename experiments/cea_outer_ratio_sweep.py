"""
The outer-ratio sweep of the CEA paper's Figure 6 at CPU scale, at equal pre-training loss: the
vanilla GPT's last validation loss is the target; FFN-Wider with CAA at each outer ratio rho (1.0
is FFN-Wider, 0.125 is CEA) trains until it reaches it (or --max_iters: "not reached"); then each
checkpoint's contribution ratios and OOD loss (cea_contribution.py). Lu et al., NeurIPS 2024,
arXiv:2403.02436, section 6.1, appendix C.1. The same command again skips finished runs and
resumes stopped ones.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/cea_outer_ratio_sweep.py --ratios=1.0,0.125,0.0
"""


import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments")]
from shapelab.checkpoint import load_checkpoint
from shapelab.configurator import parse_overrides
from shapelab.run import read_jsonl
from shapes import train_defaults
import cea_contribution

VANILLA_CONFIG, CAA_CONFIG = "config/cea_paper_small_vanilla.py", "config/cea_paper_small_cea.py"
DEFAULT_ARGS = dict(out_root="out-cea-sweep", ratios="1.0,0.875,0.75,0.5,0.25,0.125,0.0",
                    vanilla_iters=90, max_iters=200, train_args="--dtype=float32",
                    plot="docs/cea_outer_ratio_sweep.png",
                    depth_plot="docs/cea_paper_small_contribution.png", n_batches=16,
                    batch_size=16, min_count=50, ood_windows=64, mi_clusters=100)
PRINTED = ("name", "outer_ratio", "iters", "tokens", "val_loss", "target", "reached", "ffn_ratio",
           "mi_ffn_ratio", "ood_loss", "ood")


def last_val_loss(run_dir):
    evals = [r["val_loss"] for r in read_jsonl(Path(run_dir) / "metrics.jsonl") if "val_loss" in r]
    return evals[-1] if evals else None


def train(run_dir, config, overrides, max_iters, target=0.0):
    """Train, resume or skip (at max_iters, or at target) one train.py run, its output in
    run_dir/train.log."""
    run_dir = Path(run_dir)
    resume = (run_dir / "ckpt.pt").exists()
    if resume:
        ckpt = load_checkpoint(run_dir / "ckpt.pt")
        if ckpt["iter_num"] >= max_iters or (target > 0 and ckpt["best_val_loss"] <= target):
            print(f"{run_dir}: done, skipped")
            return
    run_dir.mkdir(parents=True, exist_ok=True)
    # killed before its first checkpoint: start clean (train.py refuses to mix two runs)
    if not resume:
        (run_dir / "metrics.jsonl").unlink(missing_ok=True)
    command = [sys.executable, str(ROOT / "train.py"), str(ROOT / config), *overrides,
               f"--out_dir={run_dir}", f"--max_iters={max_iters}", f"--stop_val_loss={target}",
               f"--init_from={'resume' if resume else 'scratch'}"]
    print(f"{run_dir}: {'resuming' if resume else 'training'} (log: {run_dir / 'train.log'})")
    with open(run_dir / "train.log", "a") as log:
        if subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT).returncode != 0:
            raise SystemExit(f"{run_dir}: train.py failed, see {run_dir / 'train.log'}")


def analyse(run_dir, args, texts):
    """One checkpoint's contribution ratios, val loss and OOD loss."""
    ckpt = load_checkpoint(Path(run_dir) / "ckpt.pt")
    result = cea_contribution.analyze_checkpoint(
        run_dir, n_batches=args["n_batches"], batch_size=args["batch_size"],
        min_count=args["min_count"], mi_clusters=args["mi_clusters"])
    cfg = ckpt["config"]
    result.update(iters=ckpt["iter_num"], val_loss=last_val_loss(run_dir),
                  tokens=ckpt["iter_num"] * cfg["batch_size"] * cfg["block_size"],
                  ood=cea_contribution.ood_losses(run_dir, texts, n_windows=args["ood_windows"]))
    result["ood_loss"] = sum(result["ood"].values()) / len(result["ood"])
    return result


def plot_sweep(rows, vanilla, path):
    """Figure 6: the FFN contribution ratios and the mean OOD loss against rho."""
    from shapelab.plot import plt, save_figure
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.6, 3.8), dpi=100)
    rho = [100 * r["outer_ratio"] for r in rows]
    ax1.plot(rho, [r["ffn_ratio"] for r in rows], "-o", label="Token Prediction")
    ax1.plot(rho, [r["mi_ffn_ratio"] for r in rows], "-s", label="mutual information")
    ax1.axhline(vanilla["ffn_ratio"], color="grey", ls="--", label="vanilla GPT (TP)")
    ax1.set(xlabel="outer ratio rho (%)", ylabel="FFN contribution ratio",
            title="(a) contribution of the FFN")
    ax2.plot(rho, [r["ood_loss"] for r in rows], "-o", color="C3", label="FFN-Wider w/ CAA")
    for r, x in zip(rows, rho):
        if not r["reached"]:
            ax2.annotate("target not reached", (x, r["ood_loss"]), fontsize=7)
    ax2.axhline(vanilla["ood_loss"], color="grey", ls="--", label="vanilla GPT")
    ax2.set(xlabel="outer ratio rho (%)", ylabel="mean OOD loss (nats/char, lower is better)",
            title="(b) out-of-distribution loss")
    for ax in (ax1, ax2):
        ax.invert_xaxis()  # the paper's Figure 6 runs from 100 % to 0 %
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)


def main(argv):
    args = parse_overrides(argv, DEFAULT_ARGS)
    root = Path(args["out_root"])
    ratios = [float(r) for r in args["ratios"].split(",") if r]
    if not ratios or not all(0.0 <= r <= 1.0 for r in ratios):
        raise SystemExit(f"--ratios={args['ratios']!r}: give outer ratios in [0, 1], e.g. "
                         "--ratios=1.0,0.5,0.125,0.0")
    overrides = args["train_args"].split()
    train(root / "vanilla", VANILLA_CONFIG, overrides, args["vanilla_iters"])
    target = last_val_loss(root / "vanilla")
    print(f"target validation loss {target:.4f}")
    caa_args = parse_overrides([str(ROOT / CAA_CONFIG)], train_defaults())["model_args"]
    runs = [("vanilla", None)] + [(f"rho{rho:g}", rho) for rho in ratios]
    for name, rho in runs[1:]:
        model_args = {**caa_args, "outer_ratio": rho}
        train(root / name, CAA_CONFIG, [*overrides, f"--model_args={model_args}"],
              args["max_iters"], target)
    texts = cea_contribution.ood_texts()
    results = []
    for name, rho in runs:
        r = analyse(root / name, args, texts)
        r.update(name=name, outer_ratio=rho, target=target,
                 reached=r["val_loss"] is not None and r["val_loss"] <= target)
        print(json.dumps(cea_contribution.rounded({k: r[k] for k in PRINTED})))
        results.append(r)
    with open(root / "results.jsonl", "w") as f:
        f.writelines(json.dumps({k: v for k, v in r.items() if k != "kinds"}) + "\n"
                     for r in results)
    plot_sweep(results[1:], results[0], args["plot"])
    cea_contribution.plot_contributions(results, args["depth_plot"])
    print(f"wrote {args['plot']}, {args['depth_plot']} and {root / 'results.jsonl'}")
    return results[0], results[1:]


if __name__ == "__main__":
    main(sys.argv[1:])
