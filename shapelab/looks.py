"""
One comparison judged twice, on 2 CPU cores and on one H200, read as two looks at one question:
each look's Holm, Holm over both looks' tests, and the looks' differences combined by 1 / SE^2
(Satterthwaite's degrees of freedom); the verdicts in a few words for README and each paper's
page, the papers' own differences scaled to this loss, and what a laptop gets from `python
train.py` (results/laptop/), and each report's tables. Written into the pages' generated blocks.

    python -m shapelab.looks
"""

import json
from pathlib import Path

import numpy as np
from scipy import stats

from shapelab.controls import changed, share_text
from shapelab.pages import pages, write_blocks
from shapelab.report import interval, regime_line, report_blocks, sub_blocks, tokens_per_run
from shapelab.run import read_jsonl
from shapelab.sweep import ROOT
from shapelab.verdict import ALPHA, holm, short_verdict

FOLDERS = {"cpu": "results/compare_verdict_cpu", "gpu": "results/compare_verdict_cpu_scale_gpu"}
# shape: (mechanism, file, the paper's claim in a few words, its page in docs/)
ROWS = {
    "hourglass": ("hourglass FFN", "hourglass.py", "wide-narrow-wide FFN beats narrow-wide-narrow",
                  "hourglass"),
    "><former": ("><former", "variable_width.py", "wide-narrow-wide layer widths beat uniform",
                 "variable_width"),
    "hourglass+><former": ("hourglass + ><former", "compose.py", "the two composed (ours)",
                           "variable_width"),
    "FFN-Wider": ("FFN-Wider", "cea.py", "a wider FFN lowers base capabilities", "cea"),
    "CEA": ("CEA", "cea.py", "width moved into attention restores them", "cea"),
    "LWS vanilla": ("LWS vanilla", "lws.py", "layer widths growing with depth beat isotropic",
                    "lws"),
    "LWS framed": ("LWS framed", "lws.py", "first and last layers full", "lws"),
    "LWS reverse": ("LWS reverse", "lws.py", "shrinking with depth, framed", "lws"),
    "LWS crown": ("LWS crown", "lws.py", "small-large-small, framed", "lws"),
}


def verdict_seeds(held):
    return max(len(v["seeds"]) for v in held["verdicts"].values())


def combined(diffs):
    """(mean, se, lo, hi, df) of the diffs weighted by 1 / se^2, on Satterthwaite's df."""
    weights = np.array([d["se"] for d in diffs]) ** -2.0
    mean = np.average([d["mean"] for d in diffs], weights=weights)
    df = weights.sum() ** 2 / np.sum(weights ** 2 / [d["df"] for d in diffs])
    se = weights.sum() ** -0.5
    t = stats.t.ppf(1 - ALPHA / 2, df)
    return mean, se, mean - t * se, mean + t * se, df


def two_looks(looks):
    """{shape: each look's diff and Holm's decision over every look's tests, and their
    combination} of the shapes every look tested."""
    shapes = [s for s in looks[0][1] if all("p" in (v.get(s, {}).get("diff") or {})
                                             for _, v in looks)]
    diffs = {(i, s): v[s]["diff"] for i, (_, v) in enumerate(looks) for s in shapes}
    passed, _ = holm({key: d["p"] for key, d in diffs.items()})
    each = range(len(looks))
    return {s: dict(looks=[dict(diff=diffs[i, s], all_holm=passed[i, s]) for i in each],
                    combined=combined([diffs[i, s] for i in each])) for s in shapes}


def two_looks_table(looks):
    rows, labels = two_looks(looks), [label for label, _ in looks]
    tests = len(rows) * len(looks)
    head = " | ".join(f"{label}: vs GPT [95%], Holm of {tests}" for label in labels)
    lines = [f"| model | {head} | combined [95%] |", "|---|" + "---:|" * (len(labels) + 1)]
    for shape, row in rows.items():
        mean, se, lo, hi, _ = row["combined"]
        cells = [f"{interval(x['diff'])} {'passes' if x['all_holm'] else 'fails'}"
                 for x in row["looks"]]
        lines.append(f"| {shape} | {' | '.join(cells)} | {mean:+.4f} [{lo:+.4f}, {hi:+.4f}] |")
    return "\n".join(lines + [
        "",
        "Holm over both looks' tests as one family; combined: weighted by 1 / SE^2 "
        "(Satterthwaite's df)."])


def regimes(held):
    """The regime line of both looks, once where they agree."""
    gpu, cpu = (regime_line(r["settings"], r["shapes"]["GPT"], tokens_per_run(r["settings"]))[1:]
                for r in (held["gpu"], held["cpu"]))
    return f"Both machines' r{gpu}" if gpu == cpu else f"The H200's r{gpu} The CPU's r{cpu}"


def verdict_cells(held, shape):
    return [short_verdict(held[m]["verdicts"][shape]) if shape in held[m]["verdicts"]
            else "not run" for m in ("gpu", "cpu")]


def over_budget(held, shapes):
    """'><former +7.8%, ...': the shapes above the GPT's budget on the full count."""
    info = held["gpu"]["shapes"]
    return ", ".join(f"{s} {info[s]['budget'] / info['GPT']['budget'] - 1:+.1%}" for s in shapes
                     if info[s]["endpoint"])


def machines_head(held):
    return (f"one H200, {verdict_seeds(held['gpu'])} seeds (confirmatory) | 2 CPU cores, "
            f"{verdict_seeds(held['cpu'])} seeds (exploratory)")


def readme_verdict_table(held):
    """README's regime line and table of verdicts on the GPU and the CPU, from {machine:
    results.json}."""
    lines = [f"Against the plain GPT (`model.py`, LLaMA-style). {regimes(held)}", "",
             f"| mechanism, file | the paper's claim | {machines_head(held)} |",
             "|---|---|---|---|"]
    for shape, (mechanism, file, claim, page) in ROWS.items():
        cells = " | ".join(verdict_cells(held, shape))
        lines.append(f"| [{mechanism}](docs/{page}.md) `{file}` | {claim} | {cells} |")
    return "\n".join(lines + [
        "", f"{over_budget(held, ROWS)} above the budget on the full count (Appendix A's rule "
        f"leaves W_end out). Validation loss in nats, the GPT's minus the shape's, 95% interval: "
        f"\"{verdict_cells(held, 'hourglass')[0]}\": lower than the GPT's; \"no difference > x\": "
        f"x: the smallest difference these runs detect; \"narrow\": below what one test detects. "
        f"[How a verdict is made](docs/compare.md)."]) + "\n"


def paper_block(held, shapes):
    """A paper's page's 'what this lab measured': its shapes' verdicts on each machine, the
    regime, and the hourglass's controls."""
    lines = [regimes(held), "", f"| shape | {machines_head(held)} |", "|---|---|---|"]
    lines += [f"| {s} | {' | '.join(verdict_cells(held, s))} |" for s in shapes]
    lines += ["", "Validation loss in nats, the GPT's minus the shape's, with its 95% interval "
              "([how to read a verdict](compare.md))."]
    if budget := over_budget(held, shapes):
        lines[-1] += (f" {budget} above the budget on the full count (Appendix A's rule leaves "
                      f"W_end out).")
    cpu = held["cpu"]
    controls = [c for c in cpu["controls"] if c["reading"]]
    if "hourglass" in shapes and controls:
        k = sub_blocks(cpu["shapes"])
        lines += ["", f"Controls (2 CPU cores, {controls[0]['reading']['vs_baseline']['n']} "
                  f"seeds), each a share of the hourglass's difference:", ""]
        lines += [f"- {c['shape']}, {changed(c['shape'], k)}: {share_text(c['reading']['share'])}."
                  for c in controls]
    return "\n".join(lines) + "\n"


# Each paper's own difference: its table and row | the baseline's val loss | the shape's
PAPER_EFFECTS = """\
hourglass, 113M, K = 2, L = 12 (Table 2) | 3.464 | 3.426
hourglass, 113M, K = 2, L = 6 (Table 2) | 3.464 | 3.428
hourglass, 113M, K = 4, L = 12 (Table 2) | 3.464 | 3.458
hourglass, 113M, K = 4, L = 6 (Table 2) | 3.464 | 3.418
hourglass, 113M (Table 4) | 3.464 | 3.426
hourglass, 403M (Table 4) | 3.087 | 3.064
hourglass, 906M (Table 4) | 2.943 | 2.934
hourglass, 1074M (Table 4) | 2.810 | 2.810
><former, 200M (Table 2) | 3.452 | 3.430
><former, 500M (Table 2) | 3.138 | 3.099
><former, 1B (Table 2) | 2.926 | 2.890
><former, 2B (Table 2) | 2.751 | 2.726
><former, 3B/1B MoE (Table 2) | 2.726 | 2.710
"""


def papers_at_this_loss(results, folder):
    """Each paper's difference as a fraction of its baseline's loss, at the GPT's loss here."""
    gpt = results["verdicts"]["GPT"]["val_loss_mean"]
    lines = [f"Scaled to the GPT's mean loss here ({gpt:.4f}, {folder}):", "",
             "| paper's result | its losses | fraction | at this loss |", "|---|---|---:|---:|"]
    for line in PAPER_EFFECTS.splitlines():
        what, base, shape = line.split(" | ")
        fraction = (float(base) - float(shape)) / float(base)
        lines.append(f"| {what} | {base} -> {shape} | {fraction:.2%} | {fraction * gpt:.4f} |")
    return "\n".join(lines) + "\n"


def laptop(folder):
    """One line per run record under `folder` (metrics.jsonl + cpu.txt): the CPU and its load,
    steps trained, final val loss, minutes."""
    lines = ["What the default `python train.py` trained, measured:", ""]
    for run in sorted(p.parent for p in Path(folder).glob("*/cpu.txt")):
        last = [r for r in read_jsonl(run / "metrics.jsonl") if "val_loss" in r][-1]
        lines.append(f"- {(run / 'cpu.txt').read_text().strip()}: {last['iter']:,} steps, final "
                     f"val loss {last['val_loss']:.4f}, {last['elapsed_s'] / 60:.1f} minutes")
    return "\n".join(lines) + "\n"


def page_blocks():
    """{block name: markdown} of the committed looks (FOLDERS), their reports' parts and
    results/laptop/."""
    held = {}
    for machine, folder in FOLDERS.items():
        held[machine] = json.loads((ROOT / folder / "results.json").read_text())
        held[machine]["verdicts"] = {v["shape"]: v for v in held[machine]["verdicts"]}
    looks = [(f"{label}, {verdict_seeds(held[m])} seeds", held[m]["verdicts"])
             for m, label in (("cpu", "CPU"), ("gpu", "H200"))]
    return {"verdicts.two_looks": two_looks_table(looks),
            **{f"paper-{page}": paper_block(held, [s for s, row in ROWS.items() if row[3] == page])
               for *_, page in ROWS.values()},
            "readme-verdicts": readme_verdict_table(held),
            "papers-at-this-loss": papers_at_this_loss(held["gpu"], FOLDERS["gpu"]),
            "laptop": laptop(ROOT / "results" / "laptop"),
            **{name: text for folder in FOLDERS.values()
               for name, text in report_blocks(ROOT / folder).items()}}


if __name__ == "__main__":
    for page in write_blocks(pages(ROOT), page_blocks()):
        print(f"wrote the generated blocks of {page.relative_to(ROOT)}")
