"""
Plot validation loss curves of training runs from their out_dir/metrics.jsonl.

    python -m shapelab.plot out out-hourglass                       # val loss vs step -> loss.png
    python -m shapelab.plot out-a out-b --x=elapsed_s --labels=small,large --out=docs/time.png

--x is `iter` (steps), `tokens` (tokens trained on) or `elapsed_s` (wall-clock seconds since
the run started, evaluation time included; shown in minutes).

compare.py's two figures are drawn here too: `plot_curves` (every shape's curves, mean over seeds)
and `plot_verdict` (every shape's final loss with its seeds beside the GPT's, and loss against
the learning rate).
"""

import argparse
import io
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import Formatter  # noqa: E402

from shapelab.checkpoint import write_atomic  # noqa: E402
from shapelab.run import read_jsonl  # noqa: E402
from shapelab.verdict import common_seeds  # noqa: E402


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
    save_figure(fig, out_path)
    return out_path


def save_figure(fig, path, **savefig):
    """fig at path (in the format its suffix names, PNG without one; savefig: matplotlib's options,
    dpi=...), written whole or not at all (checkpoint.write_atomic); then closed."""
    image = io.BytesIO()
    try:
        fig.savefig(image, format=Path(path).suffix[1:] or "png", **savefig)
    finally:
        plt.close(fig)
    write_atomic(path, image.getvalue())


# ----------------------------------------------------------------------------------------
# compare.py's figures


# The inset (the last third of training, magnified) is drawn only when every curve has at least
# this many evaluations: its last third then holds 3 or more of them, a curve; with fewer (a short
# run, e.g. 3 evaluations) it held one segment, a near-vertical line on a scale of 1e-3.
INSET_MIN_EVALS = 7


class Decimals(Formatter):
    """Tick labels with as many decimals as the ticks shown need (2.25, 2.50: two; 1.6, 1.8: one),
    never an offset or scientific notation: each label reads as the value it marks."""

    def set_locs(self, locs):
        super().set_locs(locs)
        self.places = 0
        while self.places < 6 and any(
                abs(v * 10 ** self.places - round(v * 10 ** self.places)) > 1e-6 for v in locs):
            self.places += 1

    def __call__(self, x, pos=None):
        return f"{x:.{getattr(self, 'places', 2)}f}"


def plot_curves(curves, path, title):
    """{name: [one curve per seed]} (a curve: the evaluations, dicts of iter, tokens, val_loss,
    elapsed_s): validation loss against tokens (left) and wall-clock minutes (right); the mean over
    seeds as a line, the min-max band shaded when there are several; the legend gives each shape's
    final val loss. With INSET_MIN_EVALS evaluations or more, an inset magnifies the last third of
    training. Every curve's last point lies inside the axes. Returns the left y-limits."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), dpi=110, sharey=True)
    styles = ["-", "--", "-.", ":"]
    drawn = []  # (name, i, runs, n, mean, losses)
    for i, (name, runs) in enumerate(curves.items()):
        runs = [c for c in runs if c]  # (a diverged run has no curve)
        if runs:
            n = min(len(c) for c in runs)
            losses = [[c[j]["val_loss"] for c in runs] for j in range(n)]
            drawn.append((name, i, runs, n, [statistics.fmean(v) for v in losses], losses))
    inset = min((d[3] for d in drawn), default=0) >= INSET_MIN_EVALS
    # (inside the axes, below their top: the inset's title never meets the plot's title)
    zoom = axes[0].inset_axes([0.42, 0.36, 0.55, 0.52]) if inset else None
    finals, earlies, worst_finals = [], [], []
    for name, i, runs, n, mean, losses in drawn:
        finals.append(mean[-1])
        earlies.append(mean[2] if n > 5 else max(mean))  # a short run: every evaluation shows
        worst_finals.append(max(mean[-1], mean[max(0, 2 * n // 3)]))
        for ax, key, scale in ((axes[0], "tokens", 1e6), (axes[1], "elapsed_s", 60),
                               (zoom, "tokens", 1e6)):
            if ax is None:
                continue
            xs = [statistics.fmean(c[j][key] for c in runs) / scale for j in range(n)]
            line, = ax.plot(xs, mean, styles[i // 10 % 4], marker="o", markersize=2.5,
                            label=f"{name}: {mean[-1]:.4f}", color=f"C{i % 10}")
            if len(runs) > 1:
                ax.fill_between(xs, [min(v) for v in losses], [max(v) for v in losses],
                                color=line.get_color(), alpha=0.15)
    low, high = min(finals), max(earlies)
    span = (high - low) or 0.1
    # the interesting part, after the first drop; a margin keeps the end points' markers inside
    axes[0].set_ylim(low - 0.05 * span, high + 0.03 * span)
    for ax in axes:
        lines = ax.get_lines()
        right = max(line.get_xdata()[-1] for line in lines)
        ax.set_xlim(-0.02 * right, 1.03 * right)
    if zoom is not None:
        last_x = max(line.get_xdata()[-1] for line in zoom.get_lines())
        zoom.set_xlim(2 * last_x / 3, last_x * 1.03)
        # the better half of the models, at 2/3 of training
        top = sorted(worst_finals)[len(worst_finals) // 2]
        pad = 0.1 * ((top - low) or 0.01)
        zoom.set_ylim(low - pad, top + pad / 2)
        zoom.tick_params(labelsize=7)
        zoom.grid(alpha=0.3)
        zoom.set_title("last third, magnified", fontsize=8)
    axes[0].set(xlabel="tokens trained on (millions)", ylabel="validation loss", title=title)
    axes[1].set(xlabel="wall-clock minutes (this machine, evaluation included)",
                title="the same, against time")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8, ncol=2, title="final val loss", title_fontsize=8)
    for ax in (*axes, zoom):
        if ax is not None:
            ax.xaxis.set_major_formatter(Decimals())
            ax.yaxis.set_major_formatter(Decimals())
    fig.tight_layout()
    ylim = axes[0].get_ylim()
    save_figure(fig, path)
    return ylim


def plot_verdict(rows, baseline, path, title, rate_text="{:g}".format):
    """Left: every shape's difference from the baseline over the verdict seeds (verdict.py's
    model: the mean with its 95% interval, each seed's own difference a dot), the smallest
    difference the runs could detect shaded around 0, the verdict on the right. Right: phase 1,
    each shape's final loss against the learning rate (log axis), the chosen rate ringed.
    rows: verdict.shape_rows's {name: row}; rate_text: how a rate is written."""
    names = list(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, max(4.5, 2.2 + 0.42 * len(names))),
                                      dpi=110, layout="constrained",
                                      gridspec_kw=dict(width_ratios=(1.25, 1)))
    fig.suptitle(title, fontsize=11)
    good = lambda v: v is not None and v == v and abs(v) != float("inf")  # noqa: E731
    base = rows[baseline]["losses"]
    left.axvline(0, color="0.4", lw=1, ls="--", label=f"{baseline} (no difference)")
    detect = [row["diff"]["detectable_family"] for row in rows.values()
              if "detectable_family" in row.get("diff", {})]
    if detect:
        left.axvspan(-detect[0], detect[0], color="0.5", alpha=0.15, lw=0,
                     label=f"smaller than these runs detect (+-{detect[0]:.4f})")
    common = common_seeds({name: row["losses"] for name, row in rows.items()})
    xs = [0.0]
    for i, name in enumerate(names):
        row, color = rows[name], f"C{i % 10}"
        diffs = [row["losses"][s] - base[s] for s in common
                 if s in row["losses"] and s in base and good(row["losses"][s]) and good(base[s])]
        if name == baseline:
            continue
        jitter = [0.12 * (k - (len(diffs) - 1) / 2) / max(1, len(diffs) - 1)
                  for k in range(len(diffs))]
        left.plot(diffs, [i + j for j in jitter], "o", ms=4, mfc="none", mec=color, alpha=0.8)
        xs += diffs
        d = row.get("diff", {})
        if "lo" in d:
            left.errorbar(d["mean"], i, xerr=[[d["mean"] - d["lo"]], [d["hi"] - d["mean"]]],
                          fmt="D", ms=6, color=color, capsize=4, lw=1.5)
            xs += [d["lo"], d["hi"]]
    left.set_yticks(range(len(names)), [
        f"{name}  (lr {rate_text(rows[name]['lr'])})" if rows[name]["lr"] else name
        for name in names])
    left.set_ylim(len(names) - 0.5, -0.5)  # the first shape on top
    verdicts = left.secondary_yaxis("right")
    verdicts.set_yticks(range(len(names)), [rows[n].get("verdict", "(the baseline)")
                                            for n in names], fontsize=8)
    pad = max(0.08 * (max(xs) - min(xs)), 2e-3)  # (every point inside the frame, however few)
    left.set_xlim(min(xs + [-d for d in detect[:1]]) - pad, max(xs + detect[:1]) + pad)
    left.set(xlabel=f"final validation loss minus the {baseline}'s, same seed (lower is better)")
    left.set_title(f"each shape at its own rate: the difference over the {len(common)} verdict "
                   f"seed(s) every shape finished, with its 95% interval; dots: seeds", fontsize=9)
    left.grid(axis="x", alpha=0.3)
    left.legend(fontsize=8, loc="best")

    rates = sorted({r for row in rows.values() for r in row["phase1"]})
    values = [v for row in rows.values() for v in row["phase1"].values() if good(v)]
    ordered = sorted(values) or [0.0]
    best = ordered[0]
    # a far-off loss (a rate much too high) would flatten the rest: a loss further above the next
    # lower one than half the range below that sits on the top edge instead
    while len(ordered) > 2 and ordered[-1] - ordered[-2] > (ordered[-2] - best) / 2:
        ordered.pop()
    top = ordered[-1]
    for i, name in enumerate(names):
        row, color = rows[name], f"C{i % 10}"
        xs = [r for r in rates if good(row["phase1"].get(r))]
        ys = [min(row["phase1"][r], top) for r in xs]
        right.plot(xs, ys, "-o", ms=4, color=color, label=name)
        off = [(x, top) for x in row["phase1"] if not good(row["phase1"][x])
               or row["phase1"][x] > top]  # diverged, or above the top edge
        if off:
            right.plot(*zip(*off), "^", ms=7, color=color, clip_on=False)
        if row["lr"] is not None:
            right.plot([row["lr"]], [row["phase1"][row["lr"]]], "o", ms=11, mfc="none", mec=color)
    right.set_xscale("log")
    right.set_xticks(rates, [rate_text(r) for r in rates], rotation=45, ha="right",
                     fontsize=8)  # (x sqrt(2) steps put labels close together)
    right.minorticks_off()
    if len(rates) == 1:
        right.set_xlim(rates[0] / 1.6, rates[0] * 1.6)
    else:
        right.set_xlim(rates[0] / 1.25, rates[-1] * 1.25)
    right.set_ylim(best - 0.04 * (top - best) - 1e-3, top + 0.04 * (top - best) + 1e-3)
    right.set(xlabel="learning rate (log scale)", ylabel="final validation loss, first seed")
    right.set_title("phase 1: loss against the rate (ringed: chosen; triangles on the top edge: "
                    "off the chart or diverged)", fontsize=9)
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
    labels = args.labels.split(",") if args.labels else None
    print(plot_runs(args.out_dirs, args.out, args.x, labels, args.title))
