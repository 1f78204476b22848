"""
CEA's own claim, on the runs of a compare.py verdict: at EQUAL in-domain loss, does moving most of
FFN-Wider's width inside attention (CEA, outer ratio 0.125) lower the loss out of distribution?

Paper: Lu, Zhao, Qin, Huo, Yang, Xu, "How does Architecture Influence the Base Capabilities of
Pre-trained Language Models? A Case Study Based on FFN-Wider and MoE Transformers" (NeurIPS 2024,
arXiv:2403.02436): section 2.2 (base capabilities compared at aligned pre-training loss), section
6 (CEA recovers the out-of-distribution ability that FFN-Wider loses).

    python compare.py config/compare_verdict_cpu.py          # trains the runs (and every shape)
    python experiments/cea_ood_verdict.py out-compare-verdict-cpu    # its runs so far, scored

Every finished FFN-Wider and CEA run in the comparison's folder (each rate of phase 1, each seed
at the chosen rate) is scored on the same windows: in-domain, --windows evenly spaced windows of
the validation split; out of distribution, --windows windows of each of four texts shipped with
CPython (experiments/cea_contribution.py: ood_texts; the OOD loss is the mean over the texts).
Rows go to <out>.csv as each run is scored; a run already there is not scored again, so the CSV
can be committed and the checkpoints deleted (a later call adds the runs finished since).

Equal in-domain loss: the runs reach different in-domain losses (rate, seed), so one line per
shape with a common slope is fitted to all of them (an analysis of covariance):

    ood = a + b * in_domain + c * [run is CEA]

and c, CEA's OOD loss minus FFN-Wider's at any equal in-domain loss, is the answer: with its
standard error and 95% interval (Student's t, n - 3 degrees of freedom). "CEA better (or worse)
out of distribution by |c| +- se" when the interval excludes 0, else "not distinguishable at this
scale". Beside it, the seed-paired differences at each shape's chosen rate (raw, not aligned).
Writes <out>.csv, <out>.md and <out>.png (OOD against in-domain loss, with the fitted lines).
"""

import csv
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))
import cea_contribution  # noqa: E402
from configurator import ConfigError, parse_overrides, read_config_file, usage_error  # noqa: E402
from verdict import T_975, choose_rate, rate_label  # noqa: E402

SHAPES = ("FFN-Wider", "CEA")
FOLDER = {"FFN-Wider": "ffn-wider", "CEA": "cea"}  # compare.py's run folders: <this>-lr<rate>-s<N>
DEFAULTS = dict(out="docs/compare_verdict_cpu/cea_ood", windows=64)


def runs_of(out_dir):
    """(shape, lr, seed, run folder) of every finished FFN-Wider / CEA run in a compare out_dir."""
    found = []
    for name in SHAPES:
        for run_dir in sorted(Path(out_dir).glob(f"{FOLDER[name]}-lr*-s*")):
            if (run_dir / "result.json").exists():
                config = read_config_file(run_dir / "config.py")
                found.append((name, config["learning_rate"], config["seed"], run_dir))
    return found


def score(run_dir, texts, windows):
    """In-domain and out-of-distribution next-character losses of one run's checkpoint."""
    losses = {name: cea_contribution.char_text_loss(run_dir, text, windows)
              for name, text in texts.items()}
    ood = [v for k, v in losses.items() if k != "in_domain"]
    return dict(losses, ood=sum(ood) / len(ood))


def validation_text(run_dir):
    """The run's validation split as text (its dataset's val.bin decoded with meta.json)."""
    _, _, data_dir = cea_contribution.load_run(run_dir)
    chars = json.loads((data_dir / "meta.json").read_text())["chars"]
    ids = np.memmap(data_dir / "val.bin", dtype=np.uint16, mode="r")
    return "".join(chars[i] for i in ids)


def t_975(df):
    """Student's t(0.975, df) from verdict.T_975 (between two entries: the smaller df's)."""
    return T_975[max(k for k in T_975 if k <= df)]


def equal_loss_difference(rows):
    """c, its standard error and the degrees of freedom of ood = a + b in_domain + c [CEA]."""
    x = np.array([[1.0, r["in_domain"], float(r["shape"] == "CEA")] for r in rows])
    y = np.array([r["ood"] for r in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    df = len(rows) - 3
    residual = y - x @ coef
    covariance = residual @ residual / df * np.linalg.inv(x.T @ x)
    return coef, math.sqrt(covariance[2, 2]), df


def paired_at_chosen_rates(rows):
    """{seed: (in-domain diff, OOD diff)} of CEA - FFN-Wider at each shape's chosen rate (chosen
    by the first seed's final val loss, as compare.py chooses)."""
    first = min(r["seed"] for r in rows)
    chosen = {name: choose_rate({r["lr"]: r["val_loss"] for r in rows
                                 if r["shape"] == name and r["seed"] == first})[0]
              for name in SHAPES}
    at = {(r["shape"], r["seed"]): r for r in rows if r["lr"] == chosen[r["shape"]]}
    seeds = sorted({s for _, s in at if ("CEA", s) in at and ("FFN-Wider", s) in at})
    return chosen, {s: (at["CEA", s]["in_domain"] - at["FFN-Wider", s]["in_domain"],
                        at["CEA", s]["ood"] - at["FFN-Wider", s]["ood"]) for s in seeds}


def report(rows, command):
    fixed = ("shape", "lr", "seed", "val_loss", "in_domain", "ood")
    names = [k for k in rows[0] if k not in fixed]  # the OOD texts
    lines = ["# CEA vs FFN-Wider out of distribution, at equal in-domain loss\n",
             f"`{command}`\n",
             "| shape | lr | seed | val loss (compare) | in-domain | OOD (mean) | "
             + " | ".join(names) + " |",
             "|---|---:|---:|---:|---:|---:|" + "---:|" * len(names)]
    for r in rows:
        lines.append(f"| {r['shape']} | {rate_label(r['lr'])} | {r['seed']} | {r['val_loss']:.4f} "
                     f"| {r['in_domain']:.4f} | {r['ood']:.4f} | "
                     + " | ".join(f"{r[k]:.4f}" for k in names) + " |")
    counts = {name: sum(r["shape"] == name for r in rows) for name in SHAPES}
    if min(counts.values()) < 2 or len(rows) < 5:
        lines.append(f"\nNo verdict yet: {counts} runs (2 of each shape and 5 in all needed).")
        return "\n".join(lines) + "\n", None
    coef, se, df = equal_loss_difference(rows)
    c, half = coef[2], t_975(df) * se
    verdict = (f"CEA {'better' if c < 0 else 'worse'} out of distribution by {abs(c):.4f} +- "
               f"{se:.4f}" if abs(c) > half else "not distinguishable at this scale")
    lines += [f"\n**At equal in-domain loss, CEA's OOD loss minus FFN-Wider's: {c:+.4f} +- "
              f"{se:.4f} (95% interval {c - half:+.4f} to {c + half:+.4f}; {len(rows)} runs, {df} "
              f"degrees of freedom, common slope {coef[1]:.3f}): {verdict}.**\n"]
    chosen, pairs = paired_at_chosen_rates(rows)
    if pairs:
        lines += [f"Seed-paired, each shape at its chosen rate (FFN-Wider "
                  f"{rate_label(chosen['FFN-Wider'])}, CEA {rate_label(chosen['CEA'])}), CEA minus "
                  f"FFN-Wider, not aligned:\n", "| seed | in-domain | OOD |", "|---:|---:|---:|"]
        lines += [f"| {s} | {d_in:+.4f} | {d_ood:+.4f} |" for s, (d_in, d_ood) in pairs.items()]
    lines.append(f"\nin-domain / OOD: mean next-character loss (nats) on evenly spaced windows of "
                 f"block_size + 1 characters (the same windows for every run; an OOD window lies "
                 f"entirely in the vocabulary); val loss (compare): the comparison's own final "
                 f"estimate (bf16, random batches). OOD mean over {', '.join(names)}.")
    return "\n".join(lines) + "\n", (coef, verdict)


def plot(rows, fit, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for name, color in zip(SHAPES, ("tab:orange", "tab:green")):
        mine = [r for r in rows if r["shape"] == name]
        ax.scatter([r["in_domain"] for r in mine], [r["ood"] for r in mine], color=color,
                   label=name)
        for r in mine:
            ax.annotate(f"{rate_label(r['lr'])} s{r['seed']}", (r["in_domain"], r["ood"]),
                        fontsize=7, xytext=(3, 3), textcoords="offset points")
        if fit is not None:
            xs = np.linspace(min(r["in_domain"] for r in rows), max(r["in_domain"] for r in rows))
            coef = fit[0]
            ax.plot(xs, coef[0] + coef[1] * xs + coef[2] * (name == "CEA"), color=color, lw=1)
    ax.set_xlabel("in-domain loss (Shakespeare validation, nats)")
    ax.set_ylabel("out-of-distribution loss (mean of 4 texts, nats)")
    ax.set_title("CEA vs FFN-Wider" + (f": {fit[1]}" if fit else ""), fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv):
    out_dir = next((a for a in argv if not a.startswith("--")), None)
    try:
        args = parse_overrides([a for a in argv if a.startswith("--")], DEFAULTS)
    except ConfigError as e:
        usage_error(e)
    if out_dir is None or not Path(out_dir).is_dir():
        usage_error(f"name the folder of a compare.py run (e.g. out-compare-verdict-cpu); got "
                    f"{out_dir!r}")
    found = runs_of(out_dir)
    csv_path = Path(args["out"] + ".csv")
    rows = []
    if csv_path.exists():
        with open(csv_path) as f:
            rows = [{k: v if k == "shape" else float(v) for k, v in r.items()}
                    for r in csv.DictReader(f)]
        for r in rows:
            r["seed"] = int(r["seed"])
    done = {(r["shape"], r["lr"], r["seed"]) for r in rows}
    texts = None
    for i, (name, lr, seed, run_dir) in enumerate(found):
        if (name, lr, seed) in done:
            continue
        if not (run_dir / "ckpt.pt").exists():
            print(f"{run_dir}: finished, but its ckpt.pt is gone and it is not in {csv_path}: "
                  f"skipped")
            continue
        texts = texts or {"in_domain": validation_text(run_dir), **cea_contribution.ood_texts()}
        result = json.loads((run_dir / "result.json").read_text())
        row = dict(shape=name, lr=lr, seed=seed, val_loss=result["val_loss"],
                   **score(run_dir, texts, args["windows"]))
        print(f"[{i + 1}/{len(found)}] {name} lr {rate_label(lr)} seed {seed}: in-domain "
              f"{row['in_domain']:.4f}, OOD {row['ood']:.4f}", flush=True)
        rows.append(row)
        csv_path.parent.mkdir(parents=True, exist_ok=True)
        with open(csv_path.with_suffix(".csv.tmp"), "w", newline="") as f:  # whole, or not at all
            writer = csv.DictWriter(f, fieldnames=list(row))
            writer.writeheader()
            writer.writerows(rows)
        csv_path.with_suffix(".csv.tmp").replace(csv_path)
    if not rows:
        usage_error(f"no finished FFN-Wider or CEA run in {out_dir}: run compare.py first")
    rows.sort(key=lambda r: (SHAPES.index(r["shape"]), r["seed"], r["lr"]))
    command = "python experiments/cea_ood_verdict.py " + " ".join(argv)
    text, fit = report(rows, command)
    Path(args["out"] + ".md").write_text(text)
    plot(rows, fit, args["out"] + ".png")
    print(text)
    print(f"wrote {args['out']}.csv, .md and .png")


if __name__ == "__main__":
    main(sys.argv[1:])
