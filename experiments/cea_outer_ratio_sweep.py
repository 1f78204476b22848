"""
The outer-ratio sweep of the CEA paper's Figure 6 at CPU scale, at equal pre-training loss: the
vanilla GPT's last validation loss is the target; FFN-Wider with CAA at each outer ratio rho (1.0
is FFN-Wider, 0.125 is CEA) trains until it reaches it (or --max_iters: "not reached"); then each
checkpoint's contribution ratios and OOD loss (cea_contribution.py). Lu et al., NeurIPS 2024,
arXiv:2403.02436, section 6.1, appendix C.1. The same command again skips finished runs, resumes
stopped ones and reuses each analysis.json while its checkpoint is unchanged.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/cea_outer_ratio_sweep.py --ratios=1.0,0.125,0.0
"""


import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))
from shapelab.checkpoint import load_checkpoint  # noqa: E402
from shapelab.configurator import parse_overrides  # noqa: E402
from shapes import train_defaults  # noqa: E402
import cea_contribution  # noqa: E402

DEFAULT_ARGS = dict(out_root="out-cea-sweep", ratios="1.0,0.875,0.75,0.5,0.25,0.125,0.0",
                    vanilla_iters=90, target_loss=0.0, max_iters=200,
                    vanilla_config="config/cea_paper_small_vanilla.py",
                    caa_config="config/cea_paper_small_cea.py", train_args="--dtype=float32",
                    train=True, plot="docs/cea_outer_ratio_sweep.png",
                    depth_plot="docs/cea_paper_small_contribution.png", n_batches=16,
                    batch_size=16, min_count=50, ood_windows=64, mi_clusters=100)


def run_name(rho):
    return f"rho{rho:g}"


def last_val_loss(run_dir):
    path = Path(run_dir) / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    evals = [r for r in map(json.loads, lines) if "val_loss" in r]
    return evals[-1]["val_loss"] if evals else None


def finished(run_dir, max_iters, target=0.0):
    """Whether run_dir's checkpoint reached max_iters, or target."""
    path = Path(run_dir) / "ckpt.pt"
    if not path.exists():
        return False
    ckpt = load_checkpoint(path)
    return ckpt["iter_num"] >= max_iters or (target > 0 and ckpt["best_val_loss"] <= target)


def train(run_dir, config, overrides, max_iters, target=0.0):
    """Train, resume or skip one train.py run, its output in run_dir/train.log."""
    run_dir = Path(run_dir)
    if finished(run_dir, max_iters, target):
        print(f"{run_dir}: done, skipped")
        return
    resume = (run_dir / "ckpt.pt").exists()
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


ANALYSIS_KEYS = ("n_batches", "batch_size", "min_count", "ood_windows", "mi_clusters")


def analyse(run_dir, args, texts):
    """One checkpoint's contribution ratios, val loss and OOD loss, kept in run_dir/analysis.json
    and reused while its step, the settings and the texts match."""
    cache = Path(run_dir) / "analysis.json"
    ckpt = load_checkpoint(Path(run_dir) / "ckpt.pt")
    key = dict({k: args[k] for k in ANALYSIS_KEYS}, iter=ckpt["iter_num"], texts=sorted(texts))
    if cache.exists() and json.loads(cache.read_text())["key"] == key:
        return json.loads(cache.read_text())["result"]
    result = cea_contribution.analyze_checkpoint(
        run_dir, n_batches=args["n_batches"], batch_size=args["batch_size"],
        min_count=args["min_count"], mi_clusters=args["mi_clusters"])
    result.update(iters=ckpt["iter_num"], tokens=ckpt["iter_num"] * ckpt["config"]["batch_size"] *
                  ckpt["config"]["block_size"], val_loss=last_val_loss(run_dir),
                  ood=cea_contribution.ood_losses(run_dir, texts, n_windows=args["ood_windows"]))
    result["ood_loss"] = sum(result["ood"].values()) / len(result["ood"])
    cache.write_text(json.dumps(dict(key=key, result=result)))
    return result


def plot_sweep(rows, vanilla, path):
    """Figure 6: the FFN contribution ratios and the mean OOD loss against rho."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.6, 3.8), dpi=100)
    rho = [100 * r["outer_ratio"] for r in rows]
    ax1.plot(rho, [r["ffn_ratio"] for r in rows], "-o", label="Token Prediction")
    ax1.plot(rho, [r["mi_ffn_ratio"] for r in rows], "-s", label="mutual information")
    if vanilla:
        ax1.axhline(vanilla["ffn_ratio"], color="grey", ls="--", label="vanilla GPT (TP)")
    ax1.set_xlabel("outer ratio rho (%)")
    ax1.set_ylabel("FFN contribution ratio")
    ax1.set_title("(a) contribution of the FFN")
    ax2.plot(rho, [r["ood_loss"] for r in rows], "-o", color="C3", label="FFN-Wider w/ CAA")
    for r, x in zip(rows, rho):
        if not r["reached"]:
            ax2.annotate("target not reached", (x, r["ood_loss"]), fontsize=7)
    if vanilla:
        ax2.axhline(vanilla["ood_loss"], color="grey", ls="--", label="vanilla GPT")
    ax2.set_xlabel("outer ratio rho (%)")
    ax2.set_ylabel("mean OOD loss (nats/char, lower is better)")
    ax2.set_title("(b) out-of-distribution loss")
    for ax in (ax1, ax2):
        ax.invert_xaxis()  # the paper's Figure 6 runs from 100 % to 0 %
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv):
    args = parse_overrides(argv, DEFAULT_ARGS)
    root = Path(args["out_root"])
    ratios = [float(r) for r in args["ratios"].split(",") if r]
    if not ratios or not all(0.0 <= r <= 1.0 for r in ratios):
        raise SystemExit(f"--ratios={args['ratios']!r}: give outer ratios in [0, 1], e.g. "
                         "--ratios=1.0,0.5,0.125,0.0")
    overrides = args["train_args"].split()
    if args["train"]:
        train(root / "vanilla", args["vanilla_config"], overrides, args["vanilla_iters"])
    target = args["target_loss"] or last_val_loss(root / "vanilla")
    if not target:
        raise SystemExit(f"no target loss: train the vanilla run ({root / 'vanilla'}) or give "
                         "--target_loss")
    print(f"target validation loss {target:.4f}")
    caa_args = parse_overrides([str(ROOT / args["caa_config"])], train_defaults())
    for rho in ratios:
        if args["train"]:
            model_args = {**caa_args["model_args"], "outer_ratio": rho}
            train(root / run_name(rho), args["caa_config"],
                  [*overrides, f"--model_args={model_args}"], args["max_iters"], target)
    texts = cea_contribution.ood_texts()
    rows, vanilla = [], None
    for name, rho in [("vanilla", None)] + [(run_name(r), r) for r in ratios]:
        if not (root / name / "ckpt.pt").exists():
            print(f"{root / name}: no checkpoint, left out")
            continue
        r = analyse(root / name, args, texts)
        r.update(name=name, outer_ratio=rho, target=target,
                 reached=r["val_loss"] is not None and r["val_loss"] <= target)
        keep = ("name", "outer_ratio", "iters", "tokens", "val_loss", "target", "reached",
                "ffn_ratio", "mi_ffn_ratio", "ood_loss")
        line = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items() if k in keep}
        line["ood"] = {k: round(v, 4) for k, v in r["ood"].items()}
        print(json.dumps(line))
        if rho is None:
            vanilla = r
        else:
            rows.append(r)
    with open(root / "results.jsonl", "w") as f:
        for r in ([vanilla] if vanilla else []) + rows:
            f.write(json.dumps({k: v for k, v in r.items() if k not in ("kinds",)}) + "\n")
    if rows:
        plot_sweep(rows, vanilla, args["plot"])
        cea_contribution.plot_contributions(([vanilla] if vanilla else []) + rows,
                                            args["depth_plot"])
        print(f"wrote {args['plot']}, {args['depth_plot']} and {root / 'results.jsonl'}")
    return vanilla, rows


if __name__ == "__main__":
    main(sys.argv[1:])
