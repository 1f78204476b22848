"""
Validation loss curves of training runs, from their out_dir/metrics.jsonl; and compare.py's two
figures (plot_curves, plot_verdict).

    python -m shapelab.plot out out-hourglass                       # val loss vs step -> loss.png
    python -m shapelab.plot out-a out-b --x=elapsed_s --labels=small,large --out=docs/time.png
"""

import argparse
import io
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from shapelab.checkpoint import write_atomic  # noqa: E402
from shapelab.run import read_jsonl  # noqa: E402
from shapelab.verdict import finite  # noqa: E402


def read_evals(out_dir):
    """The evaluation records of one run, one per step (a resumed run's last)."""
    path = Path(out_dir) / "metrics.jsonl"
    if not path.is_file():
        raise SystemExit(f"error: {path} not found: is {out_dir} the out_dir of a train.py run?")
    evals = {r["iter"]: r for r in read_jsonl(path) if "val_loss" in r}
    return [evals[k] for k in sorted(evals)]


def plot_runs(out_dirs, out_path, x="iter", labels=None, title="validation loss"):
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for i, out_dir in enumerate(out_dirs):
        evals = read_evals(out_dir)
        xs = [r["elapsed_s"] / 60 if x == "elapsed_s" else r[x] for r in evals]
        label = labels[i] if labels else Path(out_dir).name
        ax.plot(xs, [r["val_loss"] for r in evals], marker="o", markersize=3, label=label)
    ax.set(xlabel={"iter": "step", "tokens": "tokens", "elapsed_s": "wall-clock minutes"}[x],
           ylabel="val loss", title=title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, out_path)
    return out_path


def save_figure(fig, path, **savefig):
    """fig at path in the format its suffix names, written whole or not at all; then closed."""
    image = io.BytesIO()
    try:
        fig.savefig(image, format=Path(path).suffix[1:] or "png", **savefig)
    finally:
        plt.close(fig)
    write_atomic(path, image.getvalue())


def plot_curves(curves, path, title):
    """{name: [a curve per seed]}: val loss against tokens and against wall-clock minutes, the
    mean over seeds, the min-max band shaded. Returns the left y-limits."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), dpi=110, sharey=True)
    finals, earlies = [], []
    for i, (name, runs) in enumerate(curves.items()):
        runs = [c for c in runs if c]  # a diverged run has no curve
        if not runs:
            continue
        n = min(len(c) for c in runs)
        losses = [[c[j]["val_loss"] for c in runs] for j in range(n)]
        mean = [statistics.fmean(v) for v in losses]
        finals.append(mean[-1])
        earlies.append(mean[2] if n > 5 else max(mean))  # after the first drop
        for ax, key, scale in ((axes[0], "tokens", 1e6), (axes[1], "elapsed_s", 60)):
            xs = [statistics.fmean(c[j][key] for c in runs) / scale for j in range(n)]
            ax.plot(xs, mean, ["-", "--", "-.", ":"][i // 10 % 4], marker="o", markersize=2.5,
                    color=f"C{i % 10}", label=f"{name}: {mean[-1]:.4f}")
            ax.fill_between(xs, [min(v) for v in losses], [max(v) for v in losses],
                            color=f"C{i % 10}", alpha=0.15)
    span = (max(earlies) - min(finals)) or 0.1
    axes[0].set_ylim(min(finals) - 0.05 * span, max(earlies) + 0.03 * span)
    axes[0].set(xlabel="tokens trained on (millions)", ylabel="validation loss", title=title)
    axes[1].set(xlabel="wall-clock minutes (this machine, evaluation included)",
                title="the same, against time")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8, ncol=2, title="final val loss", title_fontsize=8)
    fig.tight_layout()
    ylim = axes[0].get_ylim()
    save_figure(fig, path)
    return ylim


def plot_verdict(rows, baseline, path, title, rate_text="{:g}".format):
    """Left: each shape's difference from the baseline (verdict.shape_rows' rows) with its 95%
    interval, each seed's own a dot, the detectable difference shaded; right: phase 1's loss
    against the rate."""
    names = list(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, max(4.5, 2.2 + 0.42 * len(names))),
                                      dpi=110, layout="constrained")
    fig.suptitle(title, fontsize=11)
    left.axvline(0, color="0.4", lw=1, ls="--", label=f"{baseline} (no difference)")
    detect = [row["diff"]["detectable_family"] for row in rows.values()
              if "detectable_family" in row.get("diff", {})]
    if detect:
        left.axvspan(-detect[0], detect[0], color="0.5", alpha=0.15, lw=0,
                     label=f"smaller than these runs detect (+-{detect[0]:.4f})")
    base = rows[baseline]["losses"]
    for i, name in enumerate(names):
        d, mine = rows[name].get("diff", {}), rows[name]["losses"]
        if "lo" in d:
            dots = [mine[s] - base[s] for s in mine if s not in rows[name]["beyond"]]
            left.plot(dots, [i] * len(dots), "o", ms=4, mfc="none", mec=f"C{i % 10}")
            left.errorbar(d["mean"], i, xerr=[[d["mean"] - d["lo"]], [d["hi"] - d["mean"]]],
                          fmt="D", ms=6, color=f"C{i % 10}", capsize=4)
    left.set_yticks(range(len(names)), [
        f"{name}  (lr {rate_text(rows[name]['lr'])})" if rows[name]["lr"] else name
        for name in names])
    left.set_ylim(len(names) - 0.5, -0.5)
    left.secondary_yaxis("right").set_yticks(
        range(len(names)), [rows[n].get("verdict", "(the baseline)") for n in names], fontsize=8)
    left.set(xlabel=f"final validation loss minus the {baseline}'s, same seed (lower is better)")
    left.grid(axis="x", alpha=0.3)
    left.legend(fontsize=8)
    rates = sorted({r for row in rows.values() for r in row["phase1"]})
    for i, (name, row) in enumerate(rows.items()):
        xs = [r for r in rates if finite(row["phase1"].get(r))]
        right.plot(xs, [row["phase1"][r] for r in xs], "-o", ms=4, color=f"C{i % 10}",
                   label=name)
        if row["lr"] is not None:
            right.plot([row["lr"]], [row["phase1"][row["lr"]]], "o", ms=11, mfc="none",
                       mec=f"C{i % 10}")
    right.set_xscale("log")
    right.set_xticks(rates, [rate_text(r) for r in rates], rotation=45, ha="right", fontsize=8)
    right.minorticks_off()
    right.set(xlabel="learning rate (log scale)", ylabel="final validation loss, first seed",
              title="phase 1: loss against the rate (ringed: chosen)")
    right.grid(alpha=0.3)
    right.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    save_figure(fig, path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dirs", nargs="+")
    parser.add_argument("--x", choices=["iter", "tokens", "elapsed_s"], default="iter")
    parser.add_argument("--labels", default="", help="comma-separated, one per out_dir")
    parser.add_argument("--title", default="validation loss")
    parser.add_argument("--out", default="loss.png")
    args = parser.parse_args()
    print(plot_runs(args.out_dirs, args.out, args.x, args.labels.split(",") if args.labels
                    else None, args.title))
