"""
The Pareto fronts of an image-MLP sweep with their seed spread: the paper's Figure 3 question -
does the hourglass family reach a better PSNR (and SSIM) than the conventional one at the same
parameter count? "Rethinking the Shape Convention of an MLP" (Chen, Lee, Liao, Shiu, 2025,
arXiv:2510.01796), section 4.2.2-4.2.3.

It reads the sweep.csv that experiments/mlp_hourglass_sweep.py writes (one row per shape x lr x
seed; several CSVs of one setting are read together), picks each shape's learning rate by its
mean validation loss over the seeds (the test set never chooses), and writes fronts.png (PSNR and
SSIM against total and against trainable parameters, every shape with its seeds' min-max as error
bars, each family's Pareto front as a line) and fronts.md (the fronts, the gap between them at
matched budgets, the shapes on each front) beside the first CSV.

    python experiments/mlp_hourglass_fronts.py out/mlp_sweep_mnist_denoise/sweep.csv
    python experiments/mlp_hourglass_fronts.py out/sweep_seed0/sweep.csv out/sweep_seed1/sweep.csv
"""

import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

METRICS = {"test_psnr_batchmse": "test PSNR (dB)", "test_ssim": "test SSIM"}


def read_rows(path):
    """The sweep's rows with numbers as numbers; a row whose run diverged keeps NaN metrics."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"error: {path} holds no runs yet: run python "
                         f"experiments/mlp_hourglass_sweep.py first")
    numeric = ("latent_dim", "hidden_dim", "n_blocks", "lr", "seed", "params_total",
               "params_trainable", "val_loss", *METRICS, "baseline_psnr_batchmse", "train_time_s")
    for r in rows:
        for k in numeric:
            r[k] = float(r[k]) if r.get(k) not in (None, "") else math.nan
    return rows


def shape_results(rows):
    """One entry per shape at its chosen lr: the metrics' mean, min and max over the seeds."""
    by_shape = defaultdict(lambda: defaultdict(list))  # shape -> lr -> rows
    for r in rows:
        key = (r["shape"], int(r["latent_dim"]), int(r["hidden_dim"]), int(r["n_blocks"]))
        by_shape[key][r["lr"]].append(r)
    results = []
    for (family, d_z, d_h, L), by_lr in by_shape.items():
        def mean_val_loss(runs):
            losses = [r["val_loss"] for r in runs]
            return math.inf if any(math.isnan(v) for v in losses) else sum(losses) / len(losses)
        # the lr with every seed done, then the lowest mean validation loss
        lr, runs = min(by_lr.items(), key=lambda item: (-len(item[1]), mean_val_loss(item[1])))
        entry = dict(family=family, d_z=d_z, d_h=d_h, L=L, lr=lr, seeds=len(runs),
                     params_total=runs[0]["params_total"],
                     params_trainable=runs[0]["params_trainable"])
        for metric in METRICS:
            values = [r[metric] for r in runs]
            entry[metric] = (sum(values) / len(values), min(values), max(values))
        results.append(entry)
    return sorted(results, key=lambda e: (e["family"], e["params_total"]))


def pareto_front(entries, params_key, metric):
    """The entries no other entry beats with fewer (or as many) parameters: sorted by params."""
    front, best = [], -math.inf
    for e in sorted(entries, key=lambda e: (e[params_key], -e[metric][0])):
        if e[metric][0] > best:
            front.append(e)
            best = e[metric][0]
    return front


def best_within(front, budget, metric, params_key):
    """The front's best mean metric with at most `budget` parameters (None if it has none)."""
    values = [e[metric][0] for e in front if e[params_key] <= budget]
    return max(values) if values else None


def gaps(entries, params_key, metric):
    """At every conventional front point: the best hourglass at no more parameters, minus it."""
    hourglass = pareto_front([e for e in entries if e["family"] == "hourglass"], params_key, metric)
    conventional = pareto_front([e for e in entries if e["family"] == "conventional"],
                                params_key, metric)
    out = []
    for e in conventional:
        best = best_within(hourglass, e[params_key], metric, params_key)
        out.append((e, None if best is None else best - e[metric][0]))
    return out


def label(e):
    return f"{e['family']} d_z={e['d_z']} d_h={e['d_h']} L={e['L']}"


def report(entries, baseline, title):
    lines = [f"# {title}", ""]
    if baseline is not None:
        lines += [f"Noisy input (the baseline every model must beat): {baseline:.2f} dB.", ""]
    lines += ["| shape | lr | seeds | params total / trainable | test PSNR mean (min-max) | "
              "test SSIM mean (min-max) |", "|---|---:|---:|---:|---:|---:|"]
    for e in entries:
        p, s = e["test_psnr_batchmse"], e["test_ssim"]
        lines.append(f"| {label(e)} | {e['lr']:g} | {e['seeds']} | "
                     f"{e['params_total'] / 1e6:.2f}M / "
                     f"{e['params_trainable'] / 1e6:.2f}M | {p[0]:.2f} ({p[1]:.2f}-{p[2]:.2f}) | "
                     f"{s[0]:.4f} ({s[1]:.4f}-{s[2]:.4f}) |")
    for params_key in ("params_total", "params_trainable"):
        for metric, name in METRICS.items():
            lines += ["", f"**{name} against {params_key.split('_')[1]} parameters.** Fronts:"]
            for family in ("hourglass", "conventional"):
                front = pareto_front([e for e in entries if e["family"] == family], params_key,
                                     metric)
                lines.append(f"- {family}: " + "; ".join(
                    f"{label(e).split(' ', 1)[1]} ({e[params_key] / 1e6:.2f}M, "
                    f"{e[metric][0]:.{2 if 'psnr' in metric else 4}f})" for e in front))
            diffs = [(e, d) for e, d in gaps(entries, params_key, metric) if d is not None]
            digits = 2 if "psnr" in metric else 4
            lines.append("- hourglass front minus conventional front at the conventional points: "
                         + "; ".join(f"{e[params_key] / 1e6:.2f}M: {d:+.{digits}f}"
                                     for e, d in diffs))
    return "\n".join(lines) + "\n"


def plot(entries, baseline, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    colors = {"hourglass": "tab:orange", "conventional": "tab:blue"}
    for col, params_key in enumerate(("params_total", "params_trainable")):
        for row, (metric, name) in enumerate(METRICS.items()):
            ax = axes[row, col]
            for family, color in colors.items():
                family_entries = [e for e in entries if e["family"] == family]
                x = [e[params_key] / 1e6 for e in family_entries]
                y = [e[metric][0] for e in family_entries]
                err = [[e[metric][0] - e[metric][1] for e in family_entries],
                       [e[metric][2] - e[metric][0] for e in family_entries]]
                ax.errorbar(x, y, yerr=err, fmt="o", color=color, alpha=0.45, capsize=3)
                front = pareto_front(family_entries, params_key, metric)
                ax.plot([e[params_key] / 1e6 for e in front], [e[metric][0] for e in front],
                        "-", color=color, lw=2, label=f"{family} front")
            values = [v for e in entries for v in e[metric][1:] if not math.isnan(v)]
            if values:  # the models' range: a baseline far below would flatten the fronts
                low, high = min(values), max(values)
                ax.set_ylim(low - 0.08 * (high - low or 1), high + 0.08 * (high - low or 1))
            if baseline is not None and metric == "test_psnr_batchmse":
                shown = not values or baseline >= ax.get_ylim()[0]
                ax.axhline(baseline if shown else ax.get_ylim()[0], color="0.5", ls=":",
                           label=f"noisy input: {baseline:.2f} dB" + ("" if shown else " (below)"))
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}M"))
            ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}M" if str(v)[0] in
                                                       "2357" else ""))
            ax.set_xlabel(f"{params_key.split('_')[1]} parameters (M)")
            ax.set_ylabel(name)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8, loc="best")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv):
    """Fronts of one sweep: its CSV, or several CSVs of one setting (seeds run side by side)."""
    paths = [Path(a) for a in argv]
    if not paths or not all(p.is_file() for p in paths):
        raise SystemExit("usage: python experiments/mlp_hourglass_fronts.py <sweep.csv> "
                         "[<sweep.csv> ...] (written by experiments/mlp_hourglass_sweep.py)")
    rows = [r for p in paths for r in read_rows(p)]
    setting = ("task", "data_source", "epochs", "batch_size")
    if len({tuple(str(r[k]) for k in setting) for r in rows}) > 1:
        raise SystemExit(f"error: {', '.join(map(str, paths))} hold runs of different settings "
                         f"({', '.join(setting)}): draw each setting's fronts on its own")
    entries = shape_results(rows)
    baselines = [r["baseline_psnr_batchmse"] for r in rows
                 if not math.isnan(r["baseline_psnr_batchmse"])]
    baseline = baselines[0] if baselines else None
    r0 = rows[0]
    title = (f"{r0['task']} on {r0['data_source'].split(' (')[0]}: {len(rows)} runs, "
             f"{float(r0['epochs']):g} epochs, batch {float(r0['batch_size']):g}; "
             f"error bars: seeds' min-max")
    out = paths[0].parent
    (out / "fronts.md").write_text(report(entries, baseline, title))
    plot(entries, baseline, out / "fronts.png", title)
    print(report(entries, baseline, title))
    print(f"wrote {out / 'fronts.md'} and {out / 'fronts.png'}")


if __name__ == "__main__":
    main(sys.argv[1:])
