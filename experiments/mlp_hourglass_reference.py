"""
The reference code's own image-MLP results (github.com/mtkresearch/Hourglass_LM,
hourglass_mlp/rebuttal/2/<data set>/all.json), read the way its plot_frontier.py reads them: the
hourglass with a learned W_in against the conventional MLP behind a learned square W_in on MNIST
and ImageNet-32 denoising. "Rethinking the Shape Convention of an MLP" (Chen, Lee, Liao, Shiu,
2025, arXiv:2510.01796), section 4.2.

Its rule: each (shape, rate) is the mean of its runs; each shape keeps its best rate by the plotted
metric itself (so on the test set where test PSNR is plotted; ours picks on validation loss), and
the front is their upper envelope. The extract needs a checkout and runs once; the reading needs
only the committed extract and writes the pages' mlp_reference.* blocks:

    python experiments/mlp_hourglass_reference.py --extract=path/to/Hourglass_LM
    python experiments/mlp_hourglass_reference.py results/mlp_reference_points.csv
"""


import csv
import io
import json
import math
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shapelab.checkpoint import write_atomic
from shapelab.pages import pages, write_blocks

EXTRACT = ROOT / "results" / "mlp_reference_points.csv"
RESULTS = "hourglass_mlp/rebuttal/2/{}/all.json"  # inside the reference checkout
# (data set, its folder, the setting the paper plotted, the metric every form kept)
DATA_SETS = (("MNIST", "mnist_denoising", "bs128_ep30", "eval_psnr"),
             ("ImageNet-32", "imagenet32_denoising", "bs512_ep2_aug4", "test_psnr"))
FORMS = {  # the reference's name -> ours
    "hourglass": "hourglass, learned lift",
    "conventional_w_Win": "conventional behind a learned square W_in",
    "hourglass_w_Win_fix": "hourglass, frozen lift",
    "hourglass_w_Win": "hourglass, learned lift (rerun)",
}
HOURGLASS, CONVENTIONAL = "hourglass", "conventional_w_Win"  # the comparison the paper plots
METRICS = {"eval_psnr": "eval PSNR", "test_psnr": "test PSNR"}
TABLE_1_SHAPE = (3546, 270, 5)  # the paper's Table 1 ImageNet-32 denoising hourglass
FIELDS = ("data_set", "setting", "form", "d_z", "d_h", "L", "params", "lr", "metric", "values")

def parse_shape(latent_hidden):
    """'latent785_hidden4_4_4_4_4' -> (785, 4, 5): d_z, d_h and L (one d_h per block)."""
    d_z, *widths = map(int, re.findall(r"\d+", latent_hidden))
    assert len(set(widths)) == 1, f"blocks of different widths: {latent_hidden!r}"
    return d_z, widths[0], len(widths)


def extract_rows(results, data_set, setting):
    """One row per (form, shape, rate, metric) of one all.json at `setting`, every run's value
    (a metric kept as a curve counts its last value)."""
    rows = []
    for config, shapes in sorted(results[setting].items()):
        form, params = config.rsplit("_", 1)
        if form not in FORMS:
            continue
        for latent_hidden, rates in sorted(shapes.items()):
            d_z, d_h, L = parse_shape(latent_hidden)
            for rate, runs in sorted(rates.items(), key=lambda item: float(item[0][3:])):
                values = defaultdict(list)
                for _, run in sorted(runs.items()):
                    for metric, value in run["metrics"].items():
                        value = value[-1] if isinstance(value, list) else value
                        if metric in METRICS and value is not None and math.isfinite(value):
                            values[metric].append(float(value))
                for metric, found in sorted(values.items()):
                    rows.append(dict(data_set=data_set, setting=setting, form=form, d_z=d_z,
                                     d_h=d_h, L=L, params=int(params), lr=float(rate[3:]),
                                     metric=metric, values=";".join(map(repr, found))))
    return rows


def extract(reference, out=EXTRACT):
    reference = Path(reference)
    rows = []
    for data_set, folder, setting, _ in DATA_SETS:
        path = reference / RESULTS.format(folder)
        if not path.is_file():
            raise SystemExit(f"{path} not found: --extract takes the root of a checkout of "
                             "github.com/mtkresearch/Hourglass_LM")
        rows += extract_rows(json.loads(path.read_text()), data_set, setting)
    commit = subprocess.run(["git", "-C", str(reference), "rev-parse", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    text = io.StringIO()
    text.write(f"# github.com/mtkresearch/Hourglass_LM at {commit}: "
               f"{', '.join(RESULTS.format(folder) for _, folder, *_ in DATA_SETS)}\n")
    writer = csv.DictWriter(text, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(out, text.getvalue())
    print(f"wrote {len(rows)} rows to {out}")


def read_points(path):
    with open(path) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    for r in rows:
        r.update(d_z=int(r["d_z"]), d_h=int(r["d_h"]), L=int(r["L"]), params=int(r["params"]),
                 lr=float(r["lr"]), values=[float(v) for v in r["values"].split(";")])
        r.update(mean=sum(r["values"]) / len(r["values"]), runs=len(r["values"]))
    return rows


def points(rows, data_set, form, metric):
    return [r for r in rows if (r["data_set"], r["form"], r["metric"]) == (data_set, form, metric)]


def shape_of(r):
    return r["d_z"], r["d_h"], r["L"]


def name(r):
    return f"{r['d_z']}/{r['d_h']}/L{r['L']}"


def best_per_shape(found):
    """Each shape at its best rate by the metric itself (the reference's rule)."""
    best = {}
    for r in found:
        if shape_of(r) not in best or r["mean"] > best[shape_of(r)]["mean"]:
            best[shape_of(r)] = r
    return sorted(best.values(), key=lambda r: r["params"])


def front(found):
    """The upper envelope of each shape at its best rate."""
    out, top = [], -math.inf
    for r in sorted(best_per_shape(found), key=lambda r: (r["params"], -r["mean"])):
        if r["mean"] > top:
            out.append(r)
            top = r["mean"]
    return out


def reference_gaps(rows, data_set, metric):
    """At every point of the conventional front: (it, the hourglass staircase's point there or
    None, the gap of the means or None)."""
    hourglass = front(points(rows, data_set, HOURGLASS, metric))
    out = []
    for c in front(points(rows, data_set, CONVENTIONAL, metric)):
        h = max((r for r in hourglass if r["params"] <= c["params"]), key=lambda r: r["mean"],
                default=None)
        out.append((c, h, None if h is None else h["mean"] - c["mean"]))
    return out


def rates_tried(rows, r):
    return sorted({x["lr"] for x in points(rows, r["data_set"], r["form"], r["metric"])
                   if shape_of(x) == shape_of(r)})


def runs_text(found):
    counts = sorted(r["runs"] for r in found)
    if counts[0] == counts[-1]:
        return f"{counts[0]} run{'s' * (counts[0] > 1)} per rate"
    most = statistics.mode(counts)
    return (f"{counts[0]}-{counts[-1]} runs per rate, {most} at {counts.count(most)} of "
            f"{len(counts)} shape-rates")


def rates_text(found):
    """The rates; those tried at fewer than half the shapes with how many."""
    shapes = len({shape_of(r) for r in found})
    at = defaultdict(set)
    for r in found:
        at[r["lr"]].add(shape_of(r))
    common = [f"{lr:g}" for lr in sorted(at) if 2 * len(at[lr]) >= shapes]
    rare = [f"{lr:g} at {len(at[lr])} shape{'s' * (len(at[lr]) > 1)}" for lr in sorted(at)
            if 2 * len(at[lr]) < shapes]
    return ", ".join(common) + (f" ({'; '.join(rare)})" if rare else "")


def table_lines(rows):
    """One table row per (data set, form): shapes, metrics kept, runs behind a number, rates."""
    lines = ["| data set (setting) | form (the reference's name) | shapes | metric kept | runs "
             "behind a number | rates |", "|---|---|---:|---|---|---|"]
    for data_set, folder, setting, _ in DATA_SETS:
        first = True
        for form in FORMS:
            by_metric = {m: points(rows, data_set, form, m) for m in METRICS}
            shapes = {m: {shape_of(r) for r in found} for m, found in by_metric.items()}
            every = set().union(*shapes.values())
            if not every:
                continue
            kept = [f"{METRICS[m]}" + ("" if len(shapes[m]) == len(every) else
                                       f" (at {len(shapes[m])} of them)")
                    for m in METRICS if shapes[m]]
            main = max(METRICS, key=lambda m: len(by_metric[m]))
            lines.append(f"| {f'{data_set} (`{setting}`)' if first else ''} | {FORMS[form]} "
                         f"(`{form}`) | {len(every)} | {' and '.join(kept)} | "
                         f"{runs_text(by_metric[main])} ({METRICS[main]}) | "
                         f"{rates_text(by_metric[main])} |")
            first = False
    return lines


def range_lines(rows):
    """Each form's range, every shape at its best rate; the paper's Table 1 shape."""
    lines = []
    for data_set, *_ in DATA_SETS:
        parts = []
        for form in FORMS:
            for metric in METRICS:
                best = best_per_shape(points(rows, data_set, form, metric))
                if best:
                    means = [r["mean"] for r in best]
                    parts.append(f"{FORMS[form]} {min(means):.2f}-{max(means):.2f} dB "
                                 f"{METRICS[metric]} ({len(best)} shapes)")
        lines.append(f"- {data_set}, each shape at its best rate: " + "; ".join(parts) + ".")
    found = [r for r in rows if shape_of(r) == TABLE_1_SHAPE and r["metric"] == "test_psnr"]
    if found:
        lines.append(f"- {name(found[0])}, the paper's Table 1 ImageNet-32 shape, test PSNR: " +
                     "; ".join(f"{FORMS[r['form']]} at {r['lr']:g}: {r['mean']:.3f} dB over "
                               f"{r['runs']} run{'s' * (r['runs'] > 1)}"
                               for r in sorted(found, key=lambda r: (list(FORMS).index(
                                   r["form"]), r["lr"]))) + ".")
    return lines


def point_text(rows, r):
    edge = rates_tried(rows, r)
    at_edge = ("" if len(edge) == 1 else ", its top rate" if r["lr"] == edge[-1] else
               ", its bottom rate" if r["lr"] == edge[0] else "")
    runs = "one run" if r["runs"] == 1 else f"the mean of {r['runs']} runs"
    return (f"{name(r)} ({r['params'] / 1e6:.2f}M, {r['mean']:.3f} dB at {r['lr']:g}{at_edge}, "
            f"{runs})")


def gap_lines(rows):
    """Per data set: each form's front and the gap at every conventional front point."""
    lines = []
    for data_set, _, setting, metric in DATA_SETS:
        for form in (HOURGLASS, CONVENTIONAL):
            lines.append(f"- {data_set} (`{setting}`), {FORMS[form]} front, {METRICS[metric]}: "
                         + " -> ".join(point_text(rows, r) for r in front(points(
                             rows, data_set, form, metric))) + ".")
        found = reference_gaps(rows, data_set, metric)
        ahead = [g for _, _, g in found if g is not None]
        lines.append(f"- {data_set}, the {FORMS[HOURGLASS]} staircase minus the "
                     f"{FORMS[CONVENTIONAL]} front, {METRICS[metric]}: " + (
                         f"ahead at {sum(g > 0 for g in ahead)} of {len(found)} points, "
                         f"{min(ahead):+.3f} to {max(ahead):+.3f} dB. " if ahead else "") +
                     "; ".join(f"{c['params'] / 1e6:.2f}M ({name(c)}): " + (
                         "no hourglass with this few parameters" if h is None else
                         f"{g:+.3f} dB (the hourglass {name(h)} at {h['params'] / 1e6:.2f}M)")
                         for c, h, g in found) + ".")
    return lines


def page_blocks(path):
    rows = read_points(path)
    return {"mlp_reference.table": "\n".join(table_lines(rows)),
            "mlp_reference.ranges": "\n".join(range_lines(rows)),
            "mlp_reference.gaps": "\n".join(gap_lines(rows))}


def main(argv):
    reference = [a.split("=", 1)[1] for a in argv if a.startswith("--extract=")]
    paths = [a for a in argv if not a.startswith("--")]
    if reference and not paths:
        return extract(reference[0])
    if len(paths) != 1 or reference or not Path(paths[0]).is_file():
        raise SystemExit("usage: python experiments/mlp_hourglass_reference.py "
                         "results/mlp_reference_points.csv (the committed extract), or "
                         "--extract=path/to/Hourglass_LM (a checkout of the reference code) to "
                         "write that extract anew")
    blocks = page_blocks(paths[0])
    for text in blocks.values():
        print(text + "\n")
    if Path(paths[0]).resolve() == EXTRACT:  # the pages quote only the committed extract
        for page in write_blocks(pages(ROOT), blocks):
            print(f"wrote its blocks into {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
