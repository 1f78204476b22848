"""
Plot validation loss curves of training runs from their out_dir/metrics.jsonl.

    python plot.py out out-hourglass                          # val loss vs step -> loss.png
    python plot.py out-a out-b --x=elapsed_s --out=docs/loss_vs_time.png --labels=small,large

--x is `iter` (steps), `tokens` (tokens trained on) or `elapsed_s` (wall-clock seconds since
the run started, evaluation time included; shown in minutes).
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from run import read_jsonl  # noqa: E402


def read_evals(out_dir):
    """The evaluation records (iter, train_loss, val_loss, elapsed_s) of one run."""
    path = Path(out_dir) / "metrics.jsonl"
    if not path.is_file():
        raise SystemExit(f"error: {path} not found: is {out_dir} the out_dir of a train.py run?")
    evals = {}
    for r in read_jsonl(path):  # (a torn last line, left by a full disk, is dropped with a warning)
        if "val_loss" in r:
            evals[r["iter"]] = r  # a resumed run may log a step twice: keep the last
    return [evals[k] for k in sorted(evals)]


def plot_runs(out_dirs, out_path, x="iter", labels=None, title="validation loss"):
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for i, out_dir in enumerate(out_dirs):
        evals = read_evals(out_dir)
        xs = [r["elapsed_s"] / 60 if x == "elapsed_s" else r[x] for r in evals]
        label = labels[i] if labels else Path(out_dir).name
        ax.plot(xs, [r["val_loss"] for r in evals], marker="o", markersize=3, label=label)
    ax.set_xlabel({"iter": "step", "tokens": "tokens", "elapsed_s": "wall-clock minutes"}[x])
    ax.set_ylabel("val loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_path)
    plt.close(fig)
    return out_path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dirs", nargs="+")
    parser.add_argument("--x", choices=["iter", "tokens", "elapsed_s"], default="iter")
    parser.add_argument("--labels", default="", help="comma-separated, one per out_dir")
    parser.add_argument("--title", default="validation loss")
    parser.add_argument("--out", default="loss.png")
    args = parser.parse_args()
    labels = args.labels.split(",") if args.labels else None
    print(plot_runs(args.out_dirs, args.out, args.x, labels, args.title))
