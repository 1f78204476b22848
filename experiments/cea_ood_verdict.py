"""
CEA's own claim, measured as its paper measures it: at EQUAL in-domain loss, does CEA (most of
FFN-Wider's width moved inside attention, outer ratio 0.125) have a lower loss out of
distribution than FFN-Wider?

Paper: Lu, Zhao, Qin, Huo, Yang, Xu, "How does Architecture Influence the Base Capabilities of
Pre-trained Language Models? A Case Study Based on FFN-Wider and MoE Transformers" (NeurIPS 2024,
arXiv:2403.02436): section 2.2 (models are compared when they "have similar levels of
pre-training performance", the loss on an in-distribution development set), section 6 (CEA
recovers the base capabilities FFN-Wider loses; among them language modelling on the Pile's parts).

    python experiments/cea_ood_verdict.py results/compare_verdict_cpu     # the committed records
    python experiments/cea_ood_verdict.py out-compare-verdict-cpu      # a comparison's folder
    python experiments/cea_ood_verdict.py results/compare_verdict_cpu_scale_gpu   # the GPU's runs

The report goes beside the runs it reads (<folder>/cea_ood.md, .csv, .png; --out=path/name to
write it elsewhere).

The runs: compare.py's (config/compare_verdict_cpu.py). With eval_ood set, train.py scores four
English texts at every evaluation (data/fortunes: the Debian package fortunes 1:1.99.1-7.3, each
text's sha256 recorded; the same windows for every run), and each run's result.json keeps the
trajectory: val_loss and ood_loss (the mean over the texts) at each evaluation. Each shape at its
chosen rate (the comparison's results.json), the verdict seeds only: the seeds its verdict is
over (every seed but the first, which chose the rates; in an interim report, those every shape has
finished).

Alignment. A run's OOD loss at in-domain loss L is read off its trajectory where it first reaches
L, linear in val loss between the two evaluations around it. The levels come from the val losses
alone, before any OOD loss is read: the lowest in-domain loss every paired run reaches (the end of
training) and --n_levels - 1 more evenly up to --span above it (or --levels=1.75,1.8,...).
At each level L, the same seed being the same data order for both shapes:

    d_s = OOD(CEA, seed s, L) - OOD(FFN-Wider, seed s, L)

m = mean of d_s over the n seeds, SE = sd / sqrt(n), 95% interval m +- t(0.975, n - 1) SE. The
answer is read at the lowest level (the trained models); the higher ones show the trend along
training. In words: "CEA lower (higher) OOD loss by |m| [lo, hi] at in-domain loss L" when the
interval excludes 0; otherwise "no difference larger than X detected at in-domain loss L", where
X = (t(0.975, n - 1) + t(0.80, n - 1)) SE is the difference these seeds detect with 80% power.

Why along each run, not one line per shape through every run: across runs, in-domain loss differs
because the learning rate differs, and the rate moves the OOD loss too (a confound); the two
shapes' lines do not share a slope either. Along one run only training moves both losses.

Writes <out>.md, <out>.csv (each seed's aligned OOD losses and their difference at each level)
and <out>.png (OOD against in-domain loss along every run; the paired differences at each level).
With fewer than 2 seeds whose runs of both shapes have a trajectory, the report says so and names
the command that trains them.
"""

import csv
import io
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# noqa: E402
from shapelab.checkpoint import write_atomic  # noqa: E402
from shapelab.configurator import (ConfigError, parse_overrides, read_config_file, usage_error)
from shapelab.pages import pages, write_blocks  # noqa: E402
from shapelab.verdict import rate_label  # noqa: E402

SHAPES = ("FFN-Wider", "CEA")
FOLDER = re.compile(r"(ffn-wider|cea)-(lr.+-)?s\d+")  # compare.py's run folders
SHAPE_OF = {"ffn-wider": "FFN-Wider", "cea": "CEA"}
MIN_SEEDS = 2  # an interval needs two paired seeds
DEFAULTS = dict(out="", n_levels=4, span=0.2, levels=())
TRAIN_MORE = "python compare.py config/compare_verdict_cpu.py"


def comparison(folder):
    """({shape: chosen rate}, the selection seed, the verdict seeds, eval_ood) of a comparison's
    results.json. The verdict seeds are those its verdict of both shapes is over: a comparison
    under way (an interim report) leaves out the seeds not every shape has finished, and so does
    this analysis."""
    path = folder / "results.json"
    try:
        results = json.loads(path.read_text())
        verdicts = [v for v in results["verdicts"] if v["shape"] in SHAPES]
        rates = {v["shape"]: v["lr"] for v in verdicts}
        seeds = results["settings"]["seeds"]
        verdict_seeds = [s for s in seeds[1:] if all(s in v["seeds"] for v in verdicts)]
    except (OSError, ValueError, KeyError, TypeError) as e:
        usage_error(f"{path} cannot be read ({type(e).__name__}: {e}): name the folder of a "
                    f"compare.py report (its record_dir or out_dir), e.g. "
                    f"results/compare_verdict_cpu")
    if set(rates) != set(SHAPES) or None in rates.values():
        usage_error(f"{path} has no chosen rate for both FFN-Wider and CEA: run {TRAIN_MORE}")
    return rates, seeds[0], verdict_seeds, results["settings"].get("eval_ood") or "fortunes"


def runs_at(folder, rates, seeds):
    """{(shape, seed): result.json} of the runs in folder/runs/ (a record_dir) or in folder's
    run folders (an out_dir) at each shape's chosen rate and one of `seeds`."""
    base = folder / "runs" if (folder / "runs").is_dir() else folder
    found = {}
    for run_dir in sorted(base.iterdir()):
        match = FOLDER.fullmatch(run_dir.name)
        if not match or not (run_dir / "result.json").exists():
            continue
        shape, config = SHAPE_OF[match[1]], read_config_file(run_dir / "config.py")
        if math.isclose(config["learning_rate"], rates[shape]) and config["seed"] in seeds:
            found[shape, config["seed"]] = json.loads((run_dir / "result.json").read_text())
    return found


def trajectory(result):
    """[(val_loss, ood_loss)] at each evaluation of a run, or None if it scored no OOD texts."""
    curve = result.get("curve") or []
    if not curve or any(c.get("ood_loss") is None or c.get("val_loss") is None for c in curve):
        return None
    return [(c["val_loss"], c["ood_loss"]) for c in curve]


def ood_at(points, level):
    """The OOD loss where the run first reaches in-domain loss `level`, linear in val loss between
    the evaluations before and after (None if it never does)."""
    for (v0, o0), (v1, o1) in zip(points, points[1:]):
        if v1 <= level <= v0:
            return o1 if v0 == v1 else o0 + (v0 - level) / (v0 - v1) * (o1 - o0)
    return points[0][1] if points[0][0] == level else None


def choose_levels(trajectories, n_levels, span):
    """The lowest in-domain loss every run reaches, and n_levels - 1 more evenly up to `span`
    above it (never above the highest loss every run starts from)."""
    low = max(min(v for v, _ in t) for t in trajectories)
    high = min(low + span, min(max(v for v, _ in t) for t in trajectories))
    return [float(x) for x in np.linspace(low, high, n_levels)] if n_levels > 1 else [low]


def summarize(diffs):
    """Mean, 95% t-interval and 80%-power detectable difference of the paired differences."""
    n = len(diffs)
    mean, df = float(np.mean(diffs)), n - 1
    se = float(np.std(diffs, ddof=1) / math.sqrt(n))
    t975, t80 = stats.t.ppf(0.975, df), stats.t.ppf(0.80, df)
    return dict(n=n, mean=mean, se=se, lo=mean - t975 * se, hi=mean + t975 * se,
                detectable=(t975 + t80) * se)


def words(s, level):
    """What the interval says, in words a reader cannot misread."""
    at = f"at in-domain loss {level:.3f}"
    if s["hi"] < 0:
        return f"CEA lower OOD loss by {-s['mean']:.4f} [{-s['hi']:.4f}, {-s['lo']:.4f}] {at}"
    if s["lo"] > 0:
        return f"CEA higher OOD loss by {s['mean']:.4f} [{s['lo']:.4f}, {s['hi']:.4f}] {at}"
    return f"no difference larger than {s['detectable']:.4f} detected {at}"


def analyse(runs, verdict_seeds, levels=(), n_levels=4, span=0.2):
    """The paired seeds' trajectories, the levels, each seed's aligned OOD losses and the summary
    at each level (None where fewer than MIN_SEEDS seeds have both trajectories)."""
    paths = {key: trajectory(result) for key, result in runs.items()}
    seeds = [s for s in verdict_seeds if paths.get(("FFN-Wider", s)) and paths.get(("CEA", s))]
    out = dict(paths=paths, seeds=seeds, levels=[], rows=[], summaries=[])
    if len(seeds) < MIN_SEEDS:
        return out
    paired = [paths[shape, s] for s in seeds for shape in SHAPES]
    out["levels"] = list(levels) or choose_levels(paired, n_levels, span)
    out["first_level"] = ("the first of --levels" if levels
                          else "the lowest every paired run reaches")
    for level in out["levels"]:
        rows = []
        for s in seeds:
            wider, cea = ood_at(paths["FFN-Wider", s], level), ood_at(paths["CEA", s], level)
            if wider is None or cea is None:
                usage_error(f"seed {s} never reaches in-domain loss {level}: choose --levels "
                            f"inside every run's range")
            rows.append(dict(level=level, seed=s, ffn_wider=wider, cea=cea, diff=cea - wider))
        out["rows"] += rows
        out["summaries"].append(summarize([r["diff"] for r in rows]))
    return out


def texts_line(runs, eval_ood):
    """The OOD texts in words with their sha256: those the runs recorded, or where no run has
    scored them yet, those of the prepared folder."""
    recorded = [r["ood_texts"] for r in runs.values() if r.get("ood_texts")]
    if any(texts != recorded[0] for texts in recorded):
        usage_error("the runs scored different OOD texts (their result.json ood_texts differ): "
                    "compare only runs of the same texts")
    folder = ROOT / "data" / eval_ood if "/" not in eval_ood else Path(eval_ood)
    meta = (json.loads((folder / "meta.json").read_text())
            if (folder / "meta.json").exists() else None)
    prepared = meta and {name: r["sha256"] for name, r in meta["texts"].items()}
    hashes = recorded[0] if recorded else prepared
    if not hashes:
        return (f"The OOD texts: `{eval_ood}`, not prepared here (python data/fortunes/prepare.py "
                f"writes them and records their sha256).")
    source = (f"{meta['source']} (.deb sha256 `{meta['deb_sha256']}`)" if hashes == prepared
              else f"`{eval_ood}`")
    where = ("as the runs recorded them" if recorded
             else f"as {folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder}"
                  f"/meta.json records them")
    return (f"The OOD texts: {source}; their sha256, {where}: "
            + ", ".join(f"{name} `{sha}`" for name, sha in hashes.items()) + ".")


def report(analysis, rates, selection_seed, verdict_seeds, texts, command):
    lines = ["# CEA vs FFN-Wider out of distribution, at equal in-domain loss\n", f"`{command}`\n",
             f"Each shape at its chosen rate (FFN-Wider {rate_label(rates['FFN-Wider'])}, CEA "
             f"{rate_label(rates['CEA'])}), the verdict seeds "
             f"{', '.join(map(str, verdict_seeds))} (seed {selection_seed} chose the rates: left "
             f"out). {texts}\n"]
    seeds, levels = analysis["seeds"], analysis["levels"]
    if len(seeds) < MIN_SEEDS:
        paths = analysis["paths"]
        have = "; ".join(
            f"{shape}: {sum(key[0] == shape for key in paths)} run(s) recorded, "
            f"{sum(key[0] == shape and bool(path) for key, path in paths.items())} with one"
            for shape in SHAPES)
        lines += [f"**No OOD trajectory yet: {len(seeds)} verdict seed(s) have OOD loss along the "
                  f"runs of both shapes ({MIN_SEEDS} needed; {have}).**\n",
                  f"A run scores the OOD texts at each evaluation when it is trained with "
                  f"`eval_ood` set, as config/compare_verdict_cpu.py sets it: `{TRAIN_MORE}` "
                  f"trains the verdict seeds that are not recorded yet, and each keeps its "
                  f"trajectory in its result.json (a run recorded without it is the same run and "
                  f"is not trained again). Then run this script again."]
        return "\n".join(lines) + "\n"
    head = analysis["summaries"][0]
    lines += [f"**At in-domain loss {levels[0]:.3f} ({analysis['first_level']}), CEA's OOD loss "
              f"minus FFN-Wider's over {head['n']} seeds: {head['mean']:+.4f} "
              f"[{head['lo']:+.4f}, {head['hi']:+.4f}] (95%): {words(head, levels[0])}.**\n",
              "| in-domain loss | seeds | CEA - FFN-Wider | 95% interval | detectable (80% power) "
              "| reading |", "|---:|---:|---:|---:|---:|---|"]
    for level, s in zip(levels, analysis["summaries"]):
        lines.append(f"| {level:.3f} | {s['n']} | {s['mean']:+.4f} | [{s['lo']:+.4f}, "
                     f"{s['hi']:+.4f}] | {s['detectable']:.4f} | {words(s, level)} |")
    lines += ["\nEach seed's difference (CEA minus FFN-Wider, the same data order) at each "
              "level:\n",
              "| seed | " + " | ".join(f"{level:.3f}" for level in levels) + " |",
              "|---:|" + "---:|" * len(levels)]
    for seed in seeds:
        diffs = [r["diff"] for r in analysis["rows"] if r["seed"] == seed]
        lines.append(f"| {seed} | " + " | ".join(f"{d:+.4f}" for d in diffs) + " |")
    lines.append(f"\nin-domain loss: each run's val loss at its evaluations (compare.py's, the "
                 f"same batches every time); OOD loss: the mean next-character loss over the "
                 f"texts' fixed windows at the same evaluations, read at each level linearly in "
                 f"val loss between the two evaluations around it. Interval: Student's t over "
                 f"the seeds' paired differences ({len(seeds) - 1} degrees of freedom); "
                 f"detectable: (t(0.975) + t(0.80)) x SE. The levels are chosen from the val "
                 f"losses alone.")
    return "\n".join(lines) + "\n"


def write_csv(analysis, path):
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(["in_domain_loss", "seed", "ffn_wider_ood", "cea_ood", "cea_minus_ffn_wider"])
    writer.writerows([r["level"], r["seed"], r["ffn_wider"], r["cea"], r["diff"]]
                     for r in analysis["rows"])
    write_atomic(path, table.getvalue())


def plot(analysis, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from shapelab.plot import save_figure
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    levels, colors = analysis["levels"], {"FFN-Wider": "tab:orange", "CEA": "tab:green"}
    if not levels:
        for ax in (left, right):
            ax.axis("off")
        left.text(0, 0.5, "No OOD trajectory yet: train runs with eval_ood set\n"
                  f"({TRAIN_MORE}), then run this script again", fontsize=11)
    else:
        top = levels[-1] + 0.3  # the end of training; the first evaluations are far above
        shown = [(v, o) for s in analysis["seeds"] for shape in SHAPES
                 for v, o in analysis["paths"][shape, s] if v <= top]
        for s in analysis["seeds"]:
            for shape in SHAPES:
                v, o = zip(*analysis["paths"][shape, s])
                left.plot(v, o, "o-", ms=3, lw=1, color=colors[shape], alpha=0.7,
                          label=shape if s == analysis["seeds"][0] else None)
        for level in levels:
            left.axvline(level, color="grey", lw=0.6, ls=":")
        left.set_xlim(min(v for v, _ in shown) - 0.02, top)
        left.set_ylim(min(o for _, o in shown) - 0.02, max(o for _, o in shown) + 0.02)
        left.invert_xaxis()  # training goes left to right
        left.set_xlabel("in-domain loss (val, nats)")
        left.set_ylabel("OOD loss (mean over the texts, nats)")
        left.set_title("each run's trajectory (dotted: the levels)", fontsize=9)
        left.legend()
        for i, (level, s) in enumerate(zip(levels, analysis["summaries"])):
            diffs = [r["diff"] for r in analysis["rows"] if r["level"] == level]
            right.scatter([i] * len(diffs), diffs, color="grey", s=12)
            right.errorbar(i + 0.15, s["mean"], yerr=[[s["mean"] - s["lo"]], [s["hi"] - s["mean"]]],
                           fmt="o", color="black", capsize=4)
        right.axhline(0, color="black", lw=0.6)
        right.set_xticks(range(len(levels)), [f"{level:.3f}" for level in levels])
        right.set_xlabel("in-domain loss level")
        right.set_ylabel("CEA minus FFN-Wider OOD loss (nats)")
        right.set_title("paired by seed: each seed, mean and 95% interval", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def page_blocks(folder):
    """The reading the pages quote, as a generated block (shapelab/pages.py) named
    cea_ood.<the folder's name without 'compare_'>: the difference at the lowest in-domain level
    the runs share, with its seeds."""
    folder = Path(folder)
    rates, _, verdict_seeds, _ = comparison(folder)
    analysis = analyse(runs_at(folder, rates, verdict_seeds), verdict_seeds)
    head, seeds = analysis["summaries"][0], analysis["seeds"]
    return {f"cea_ood.{folder.resolve().name.removeprefix('compare_')}":
            f"{words(head, analysis['levels'][0])} ({head['n']} paired seeds, "
            f"{seeds[0]}-{seeds[-1]})\n"}


def main(argv):
    folder = next((a for a in argv if not a.startswith("--")), None)
    try:
        args = parse_overrides([a for a in argv if a.startswith("--")], DEFAULTS)
    except ConfigError as e:
        usage_error(e)
    if folder is None or not Path(folder).is_dir():
        usage_error(f"name the folder of a compare.py report: its record_dir (e.g. "
                    f"results/compare_verdict_cpu) or its out_dir; got {folder!r}")
    if args["n_levels"] < 1 or args["span"] < 0:
        usage_error(f"n_levels={args['n_levels']}, span={args['span']}: give n_levels >= 1 and "
                    f"span >= 0")
    folder = Path(folder)
    rates, selection_seed, verdict_seeds, eval_ood = comparison(folder)
    runs = runs_at(folder, rates, verdict_seeds)
    analysis = analyse(runs, verdict_seeds, args["levels"], args["n_levels"], args["span"])
    command = "python experiments/cea_ood_verdict.py " + " ".join(argv)
    text = report(analysis, rates, selection_seed, verdict_seeds, texts_line(runs, eval_ood),
                  command)
    out = args["out"] or str(folder / "cea_ood")  # beside the report it reads
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out + ".md", text)
    write_csv(analysis, out + ".csv")
    plot(analysis, out + ".png")
    print(text)
    print(f"wrote {out}.md, .csv and .png")
    if folder.resolve().parent == ROOT / "results" and not any(a.startswith("--") for a in argv):
        for page in write_blocks(pages(ROOT), page_blocks(folder)):  # the committed reading
            print(f"wrote its block into {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
