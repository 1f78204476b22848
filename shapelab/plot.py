"""
Validation loss curves of training runs, from their out_dir/metrics.jsonl; and compare.py's two
figures (plot_curves, plot_verdict).

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
from shapelab.verdict import rate_label  # noqa: E402


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
        "elapsed_s": ("wall-clock minutes (this machine, evaluation included)", 60)}
STYLE = {"figure.dpi": 110, "figure.constrained_layout.use": True, "axes.grid": True,
         "grid.alpha": 0.3, "legend.fontsize": 8, "legend.title_fontsize": 8, "lines.markersize": 4}


@matplotlib.rc_context(STYLE)
def plot_curves(curves, path, title, keys=("tokens", "elapsed_s")):
    """{name: [a curve per seed]}: val loss against each of AXES' keys, the mean over seeds, the
    min-max band shaded."""
    fig, axes = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4.8), sharey=True,
                             squeeze=False)
    finals, earlies = [], []
    for i, (name, runs) in enumerate(curves.items()):
        runs = [c for c in runs if c]  # a diverged run has no curve
        if not runs:
            continue
        n = min(map(len, runs))
        points = {k: np.array([[p[k] for p in c[:n]] for c in runs]) for k in ("val_loss", *keys)}
        losses = points["val_loss"]
        mean = losses.mean(0)
        finals.append(mean[-1])
        earlies.append(mean[2] if n > 5 else mean.max())  # after the first drop
        for ax, key in zip(axes[0], keys):
            xs = points[key].mean(0) / AXES[key][1]
            ax.plot(xs, mean, "-o" if i < 10 else "--o", ms=2.5, color=f"C{i % 10}",
                    label=f"{name}: {mean[-1]:.4f}")
            ax.fill_between(xs, losses.min(0), losses.max(0), color=f"C{i % 10}", alpha=0.15)
            ax.set(xlabel=AXES[key][0])
    span = (max(earlies) - min(finals)) or 0.1
    axes[0, 0].set(ylim=(min(finals) - 0.05 * span, max(earlies) + 0.03 * span),
                   ylabel="validation loss", title=title)
    axes[0, -1].legend(ncol=2, title="final val loss")
    save_figure(fig, path)


@matplotlib.rc_context(STYLE)
def plot_verdict(rows, baseline, path, title):
    """Left: each shape's difference from the baseline (verdict.shape_rows' rows) with its 95%
    interval, each seed's own a dot, the detectable difference shaded; right: phase 1's loss
    against the rate, the chosen one ringed."""
    names = list(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 2.2 + 0.42 * max(len(names), 5.5)))
    fig.suptitle(title)
    left.axvline(0, color="0.4", ls="--", label=f"{baseline} (no difference)")
    detect = [row["diff"]["detectable_family"] for row in rows.values()
              if "detectable_family" in row.get("diff", {})]
    if detect:
        left.axvspan(-detect[0], detect[0], color="0.5", alpha=0.15,
                     label=f"smaller than these runs detect (+-{detect[0]:.4f})")
    base = rows[baseline]["losses"]
    for i, (name, row) in enumerate(rows.items()):
        color, diff = f"C{i % 10}", row.get("diff", {})
        if "lo" in diff:
            dots = [loss - base[s] for s, loss in row["losses"].items() if s not in row["beyond"]]
            left.plot(dots, [i] * len(dots), "o", mfc="none", mec=color)
            left.plot([diff["lo"], diff["mean"], diff["hi"]], [i] * 3, "-D", ms=7, markevery=[1],
                      color=color)
        xs = sorted(row["phase1"])  # a diverged run's None is a gap
        right.plot(xs, np.array([row["phase1"][r] for r in xs], dtype=float), "-o", color=color,
                   label=name)
        if row["lr"]:
            right.plot(row["lr"], row["phase1"][row["lr"]], "o", ms=11, mfc="none", mec=color)
    left.set_yticks(range(len(names)), [f"{n}  (lr {rate_label(rows[n]['lr'])})"
                                        if rows[n]["lr"] else n for n in names])
    left.set_ylim(len(names) - 0.5, -0.5)
    left.secondary_yaxis("right").set_yticks(
        range(len(names)), [rows[n].get("verdict", "(the baseline)") for n in names], fontsize=8)
    left.set(xlabel=f"final validation loss minus the {baseline}'s, same seed (lower is better)")
    left.legend()
    rates = sorted({r for row in rows.values() for r in row["phase1"]})
    right.set_xscale("log")
    right.set_xticks(rates, [rate_label(r) for r in rates], rotation=45, fontsize=8)
    right.minorticks_off()
    right.set(xlabel="learning rate (log scale)", ylabel="final validation loss, first seed",
              title="phase 1: loss against the rate (ringed: chosen)")
    right.legend()
    save_figure(fig, path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dirs", nargs="+")
    parser.add_argument("--x", choices=list(AXES), default="iter")
    parser.add_argument("--out", default="loss.png")
    args = parser.parse_args()
    plot_curves({Path(d).name: [read_evals(d)] for d in args.out_dirs}, args.out,
                "validation loss", keys=[args.x])
    print(args.out)
