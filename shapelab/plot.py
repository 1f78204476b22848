"""
Validation loss curves of training runs, from their out_dir/metrics.jsonl, and of compare.py's
verdict runs (plot_curves).

    python -m shapelab.plot out out-hourglass                  # val loss vs step -> loss.png
    python -m shapelab.plot out-a out-b --x=elapsed_s --out=docs/time.png
"""

import argparse
import io
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from shapelab.checkpoint import write_atomic  # noqa: E402
from shapelab.run import read_jsonl  # noqa: E402


def read_evals(out_dir):
    """The evaluation records of one run, one per step (a resumed run's last)."""
    path = Path(out_dir) / "metrics.jsonl"
    if not path.is_file():
        raise SystemExit(f"error: {path} not found: is {out_dir} the out_dir of a train.py run?")
    evals = {r["iter"]: r for r in read_jsonl(path) if "val_loss" in r}
    return [evals[k] for k in sorted(evals)]


def save_figure(fig, path, **savefig):
    """fig at path in the format its suffix names, written whole or not at all; then closed."""
    image = io.BytesIO()
    try:
        fig.savefig(image, format=Path(path).suffix[1:] or "png", **savefig)
    finally:
        plt.close(fig)
    write_atomic(path, image.getvalue())


AXES = {"iter": ("step", 1), "tokens": ("tokens trained on (millions)", 1e6),
        "elapsed_s": ("wall-clock minutes", 60)}


def plot_curves(curves, path, title, key="tokens"):
    """{name: [a curve per seed]}: the mean val loss over seeds against `key`."""
    fig, ax = plt.subplots(figsize=(7, 4.8), layout="constrained")
    for name, runs in curves.items():
        runs = [c for c in runs if c]  # a diverged run has no curve
        if runs:
            n = min(map(len, runs))
            xs = np.mean([[p[key] for p in c[:n]] for c in runs], 0) / AXES[key][1]
            mean = np.mean([[p["val_loss"] for p in c[:n]] for c in runs], 0)
            ax.plot(xs, mean, "-o", ms=2.5, label=f"{name}: {mean[-1]:.4f}")
    ax.set(xlabel=AXES[key][0], ylabel="validation loss", title=title, yscale="log")
    ax.legend(fontsize=8, title="final val loss")
    save_figure(fig, path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dirs", nargs="+")
    parser.add_argument("--x", choices=list(AXES), default="iter")
    parser.add_argument("--out", default="loss.png")
    args = parser.parse_args()
    plot_curves({Path(d).name: [read_evals(d)] for d in args.out_dirs}, args.out,
                "validation loss", key=args.x)
    print(args.out)
