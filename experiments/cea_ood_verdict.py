"""
CEA's own claim, measured as its paper measures it: at EQUAL in-domain loss, does CEA have a lower
loss out of distribution than FFN-Wider? Lu, Zhao, Qin, Huo, Yang, Xu, "How does Architecture
Influence the Base Capabilities of Pre-trained Language Models?" (NeurIPS 2024,
arXiv:2403.02436), sections 2.2 and 6.

    python experiments/cea_ood_verdict.py results/compare_verdict_cpu     # a compare.py report

Each verdict seed's run of each shape at its chosen rate keeps val_loss and ood_loss at every
evaluation; its OOD loss at in-domain loss L is read where it first reaches L (linear in between).
The levels come from the val losses alone. At each level, seed s the same data order for both:

    d_s = OOD(CEA, seed s, L) - OOD(FFN-Wider, seed s, L)

m = mean d_s over n seeds, 95% interval m +- t(0.975, n - 1) sd / sqrt(n); where it holds 0, the
difference these seeds detect with 80% power. Writes <folder>/cea_ood.md and .csv.
"""


import csv
import io
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shapelab.checkpoint import write_atomic
from shapelab.configurator import read_config_file, usage_error
from shapelab.pages import pages, write_blocks
from shapelab.verdict import paired_t, rate_label

SHAPES = ("FFN-Wider", "CEA")
FOLDER = re.compile(r"(ffn-wider|cea)-(lr.+-)?s\d+")  # compare.py's run folders
SHAPE_OF = {"ffn-wider": "FFN-Wider", "cea": "CEA"}
MIN_SEEDS = 2  # an interval needs two paired seeds
TRAIN_MORE = "python compare.py config/compare_verdict_cpu.py"


def comparison(folder):
    """({shape: chosen rate}, the selection seed, the verdict seeds, eval_ood) of a comparison's
    results.json: the verdict seeds are those every shape's verdict is over."""
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
    """{(shape, seed): result.json} of the runs in folder/runs/ (a record_dir) or folder (an
    out_dir) at each shape's chosen rate and one of `seeds`."""
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
    points = [(c.get("val_loss"), c.get("ood_loss")) for c in result.get("curve") or []]
    return None if not points or None in sum(points, ()) else points


def ood_at(points, level):
    """The OOD loss where the run first reaches in-domain loss `level` (None if it never does)."""
    for (v0, o0), (v1, o1) in zip(points, points[1:]):
        if v1 <= level <= v0:
            return o1 if v0 == v1 else o0 + (v0 - level) / (v0 - v1) * (o1 - o0)
    return points[0][1] if points[0][0] == level else None


def choose_levels(trajectories, n_levels, span):
    """The lowest in-domain loss every run reaches, and n_levels - 1 more up to `span` above."""
    low = max(min(v for v, _ in t) for t in trajectories)
    high = min(low + span, min(max(v for v, _ in t) for t in trajectories))
    return np.linspace(low, high, n_levels).tolist()


def words(s, level):
    at = f"at in-domain loss {level:.3f}"
    if s["hi"] < 0:
        return f"CEA lower OOD loss by {-s['mean']:.4f} [{-s['hi']:.4f}, {-s['lo']:.4f}] {at}"
    if s["lo"] > 0:
        return f"CEA higher OOD loss by {s['mean']:.4f} [{s['lo']:.4f}, {s['hi']:.4f}] {at}"
    return f"no difference larger than {s['detectable']:.4f} detected {at}"


def analyse(runs, verdict_seeds):
    """The paired seeds, the levels, each seed's aligned OOD losses and each level's summary."""
    paths = {key: trajectory(result) for key, result in runs.items()}
    seeds = [s for s in verdict_seeds if paths.get(("FFN-Wider", s)) and paths.get(("CEA", s))]
    if len(seeds) < MIN_SEEDS:
        usage_error(f"{len(seeds)} verdict seed(s) have OOD loss along the runs of both shapes "
                    f"({MIN_SEEDS} needed): `{TRAIN_MORE}` trains them with eval_ood set")
    out = dict(seeds=seeds, rows=[], summaries=[])
    out["levels"] = choose_levels([paths[shape, s] for s in seeds for shape in SHAPES], 4, 0.2)
    for level in out["levels"]:
        diffs = []
        for s in seeds:
            wider, cea = ood_at(paths["FFN-Wider", s], level), ood_at(paths["CEA", s], level)
            diffs.append(cea - wider)
            out["rows"].append(dict(level=level, seed=s, ffn_wider=wider, cea=cea, diff=diffs[-1]))
        out["summaries"].append(paired_t(diffs))
    return out


def texts_line(runs, eval_ood):
    """The OOD texts with the sha256 the runs recorded: one set for every run."""
    recorded = [r["ood_texts"] for r in runs.values() if r.get("ood_texts")]
    if any(texts != recorded[0] for texts in recorded):
        usage_error("the runs scored different OOD texts (their result.json ood_texts differ): "
                    "compare only runs of the same texts")
    return (f"The OOD texts: `{eval_ood}`; their sha256, as the runs recorded them: "
            + ", ".join(f"{name} `{sha}`" for name, sha in recorded[0].items()) + ".")


def report(analysis, rates, selection_seed, verdict_seeds, texts, command):
    lines = ["# CEA vs FFN-Wider out of distribution, at equal in-domain loss\n", f"`{command}`\n",
             f"Each shape at its chosen rate (FFN-Wider {rate_label(rates['FFN-Wider'])}, CEA "
             f"{rate_label(rates['CEA'])}), the verdict seeds "
             f"{', '.join(map(str, verdict_seeds))} (seed {selection_seed} chose the rates: left "
             f"out). {texts}\n"]
    seeds, levels = analysis["seeds"], analysis["levels"]
    lines += ["| in-domain loss | seeds | CEA - FFN-Wider | 95% interval | detectable (80% power) "
              "| reading |", "|---:|---:|---:|---:|---:|---|"]
    for level, s in zip(levels, analysis["summaries"]):
        lines.append(f"| {level:.3f} | {s['n']} | {s['mean']:+.4f} | [{s['lo']:+.4f}, "
                     f"{s['hi']:+.4f}] | {s['detectable']:.4f} | {words(s, level)} |")
    lines.append(f"\nInterval: Student's t over the seeds' paired differences ({len(seeds) - 1} "
                 f"degrees of freedom); detectable: (t(0.975) + t(0.80)) x SE; each seed's "
                 f"difference is in cea_ood.csv.")
    return "\n".join(lines) + "\n"


def write_csv(analysis, path):
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(["in_domain_loss", "seed", "ffn_wider_ood", "cea_ood", "cea_minus_ffn_wider"])
    writer.writerows([r["level"], r["seed"], r["ffn_wider"], r["cea"], r["diff"]]
                     for r in analysis["rows"])
    write_atomic(path, table.getvalue())


def page_blocks(folder):
    """The pages' block cea_ood.<the folder's name without 'compare_'>: the reading at the lowest
    level, with its seeds."""
    folder = Path(folder)
    rates, _, verdict_seeds, _ = comparison(folder)
    analysis = analyse(runs_at(folder, rates, verdict_seeds), verdict_seeds)
    head, seeds = analysis["summaries"][0], analysis["seeds"]
    return {f"cea_ood.{folder.resolve().name.removeprefix('compare_')}":
            f"{words(head, analysis['levels'][0])} ({head['n']} paired seeds, "
            f"{seeds[0]}-{seeds[-1]})\n"}


def main(argv):
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        usage_error(f"name the folder of a compare.py report: its record_dir (e.g. "
                    f"results/compare_verdict_cpu) or its out_dir; got {' '.join(argv)!r}")
    folder = Path(argv[0])
    rates, selection_seed, verdict_seeds, eval_ood = comparison(folder)
    runs = runs_at(folder, rates, verdict_seeds)
    analysis = analyse(runs, verdict_seeds)
    text = report(analysis, rates, selection_seed, verdict_seeds, texts_line(runs, eval_ood),
                  f"python experiments/cea_ood_verdict.py {argv[0]}")
    write_atomic(folder / "cea_ood.md", text)
    write_csv(analysis, folder / "cea_ood.csv")
    print(text + f"wrote {folder}/cea_ood.md and .csv")
    if folder.resolve().parent == ROOT / "results":  # the pages quote only the committed reading
        for page in write_blocks(pages(ROOT), page_blocks(folder)):
            print(f"wrote its block into {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
