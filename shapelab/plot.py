"""Figures written whole (save_figure), and the validation loss curves of compare.py's verdict
runs (plot_curves), read from their out_dir/metrics.jsonl."""

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


def plot_curves(curves, path, title):
    """{name: [a curve per seed]}: the mean val loss over seeds against tokens."""
    fig, ax = plt.subplots(figsize=(7, 4.8), layout="constrained")
    for name, runs in curves.items():
        runs = [c for c in runs if c]  # a diverged run has no curve
        if runs:
            n = min(map(len, runs))
            tokens = np.mean([[p["tokens"] for p in c[:n]] for c in runs], 0) / 1e6
            mean = np.mean([[p["val_loss"] for p in c[:n]] for c in runs], 0)
            ax.plot(tokens, mean, "-o", ms=2.5, label=f"{name}: {mean[-1]:.4f}")
    ax.set(xlabel="tokens trained on (millions)", ylabel="validation loss", title=title,
           yscale="log")
    ax.legend(fontsize=8, title="final val loss")
    save_figure(fig, path)
