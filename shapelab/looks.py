"""
One comparison judged twice: the CPU verdict (results/compare_verdict_cpu, on 2 CPU cores) and
the same comparison on one H200 (results/compare_verdict_cpu_scale_gpu, with seeds of its own).
Each report corrects for its own tests, every shape against the GPT (Holm); read together they are
two looks at one question, twice the tests, and a difference that passes one look's correction
may not pass theirs.

    python -m shapelab.looks                 # the two committed records folders
    python -m shapelab.looks results/compare_verdict_cpu out-compare-verdict-cpu-2

It reads each folder's results.json (compare.py's report) and prints, for every shape tested
against the GPT on every look:

    each look      the difference with its 95% interval, p of the pooled model and the level of
                   its Holm step among that look's tests (compare.py's verdict)
    over both      Holm over every look's tests together: whether each look's test still
                   passes, against the level of its step there
    combined       the looks' differences weighted by 1 / SE^2 (a fixed-effect combination: one
                   true difference, measured twice): mean, SE = 1 / sqrt(sum of the weights) and
                   a 95% t interval on Satterthwaite's degrees of freedom; and whether the looks
                   agree in direction

and the verdict of every shape in a few words per look. Both tables are also written into the
pages' generated blocks that show them (shapelab/pages.py): verdicts.two_looks and
verdicts.words.
"""

import json
import math
import sys
from pathlib import Path

from scipy import stats

from shapelab.configurator import usage_error
from shapelab.cost import machine_label
from shapelab.pages import pages, write_blocks
from shapelab.report import p_text
from shapelab.sweep import ROOT
from shapelab.verdict import ALPHA, holm, holm_levels, short_verdict

FOLDERS = ("results/compare_verdict_cpu", "results/compare_verdict_cpu_scale_gpu")


def read_look(folder):
    """(label, {shape: verdict entry}) of a records folder's results.json: label names the
    machine ('CPU' where its runs ran on CPUs, else the GPU's name) and its verdict seeds."""
    path = Path(folder) / "results.json"
    try:
        held = json.loads(path.read_text())
        verdicts = {v["shape"]: v for v in held["verdicts"]}
        machines = {r["machine"] for r in held["runs"] if r.get("machine")}
    except (OSError, ValueError, KeyError, TypeError) as e:
        usage_error(f"{path} cannot be read ({type(e).__name__}: {e}): name folders of "
                    f"compare.py reports, e.g. {' '.join(FOLDERS)}")
    gpus = sorted(machine_label(m).removeprefix("NVIDIA ") for m in machines
                  if m.startswith("NVIDIA"))
    n = next((v["diff"]["n"] for v in verdicts.values() if "n" in (v["diff"] or {})), 0)
    return f"{'/'.join(gpus) or 'CPU'}, {n} seeds", verdicts


def combined(diffs):
    """The fixed-effect combination of [(mean, se, df)]: (mean, se, lo, hi, df), weights 1 /
    se^2, the interval Student's t on Satterthwaite's degrees of freedom."""
    weights = [1 / se ** 2 for _, se, _ in diffs]
    total = sum(weights)
    mean = sum(w * d for w, (d, _, _) in zip(weights, diffs)) / total
    df = total ** 2 / sum(w ** 2 / df for w, (_, _, df) in zip(weights, diffs))
    se = 1 / math.sqrt(total)
    t = float(stats.t.ppf(1 - ALPHA / 2, df))
    return mean, se, mean - t * se, mean + t * se, df


def two_looks(looks):
    """{shape: row} over [(label, {shape: verdict entry})]: each look's diff (compare.py's), the
    level of its Holm step within its look, Holm's decision and level over every look's tests
    together, and the combination. Only the shapes every look tested (a pooled p)."""
    shapes = [s for s in looks[0][1] if all("p" in (v.get(s, {}).get("diff") or {})
                                             for _, v in looks)]
    own = [holm_levels({s: v[s]["diff"]["p"] for s in shapes}) for _, v in looks]
    every = {(i, s): v[s]["diff"]["p"] for i, (_, v) in enumerate(looks) for s in shapes}
    passed, levels = holm(every), holm_levels(every)
    rows = {}
    for s in shapes:
        diffs = [v[s]["diff"] for _, v in looks]
        rows[s] = dict(
            looks=[dict(diff=d, own_level=own[i][s], own_holm=d["holm"], all_level=levels[i, s],
                        all_holm=passed[i, s]) for i, d in enumerate(diffs)],
            combined=combined([(d["mean"], d["se"], d["df"]) for d in diffs]),
            same_direction=len({d["mean"] > 0 for d in diffs}) == 1)
    return rows


def two_looks_table(looks):
    """Markdown: one row per shape tested on every look (two_looks), and its rules."""
    rows, labels = two_looks(looks), [label for label, _ in looks]
    tests = len(rows) * len(looks)
    head = " | ".join(f"{label}: vs GPT [95% interval], p / Holm's step" for label in labels)
    lines = [f"| model | {head} | Holm over all {tests} tests | combined [95% interval] |",
             "|---|" + "---:|" * len(labels) + "---|---:|"]
    for shape, row in rows.items():
        cells = [f"{d['mean']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}], {p_text(d['p'])} / "
                 f"{look['own_level']:.4f} ({'passes' if look['own_holm'] else 'fails'})"
                 for look in row["looks"] for d in [look["diff"]]]
        over = "; ".join(
            f"{label.split(',')[0]} {'passes' if look['all_holm'] else 'fails'} "
            f"({p_text(look['diff']['p'])} "
            f"{'<=' if look['diff']['p'] <= look['all_level'] else '>'} {look['all_level']:.4f})"
            for label, look in zip(labels, row["looks"]))
        mean, se, lo, hi, _ = row["combined"]
        agree = "same direction" if row["same_direction"] else "opposite directions"
        lines.append(f"| {shape} | {' | '.join(cells)} | {over} | {mean:+.4f} +- {se:.4f} "
                     f"[{lo:+.4f}, {hi:+.4f}], {agree} |")
    notes = [
        "- each look: its own report's pooled model (compare.py): the difference from the GPT, "
        "its 95% interval, p, and the level of its Holm step among that look's tests "
        "(passes: Holm rejects 'no difference' there; its verdict word also needs the paired "
        "test, in the report).",
        f"- Holm over all {tests} tests: the looks' tests as one family, each p against the level "
        f"of its step there (5% / {tests} for the smallest; once one fails, the later ones fail).",
        "- combined: the looks' differences weighted by 1 / SE^2 (one true difference measured "
        "on each machine), mean +- SE, the 95% interval on Satterthwaite's degrees of freedom; "
        "the machines' own spreads differ, and a machine may shift a difference (bf16 on a CPU "
        "and on a GPU): the direction says whether the looks agree."]
    return "\n".join(lines) + "\n\n" + "\n".join(notes)


def words_table(looks):
    """Markdown: every shape's verdict in a few words (short_verdict), a column per look."""
    lines = ["| model | " + " | ".join(label for label, _ in looks) + " |",
             "|---|" + "---|" * len(looks)]
    for shape in looks[0][1]:
        cells = [short_verdict(v[shape]) if shape in v else "-" for _, v in looks]
        lines.append(f"| {shape} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def page_blocks(folders=FOLDERS):
    """{block name: markdown} of the looks in `folders` (records folders): verdicts.two_looks,
    verdicts.words."""
    looks = [read_look(Path(folder) if Path(folder).is_absolute() else ROOT / folder)
             for folder in folders]
    return {"verdicts.two_looks": two_looks_table(looks), "verdicts.words": words_table(looks)}


def main(argv):
    if len(argv) == 1:
        usage_error(f"name two or more records folders of compare.py reports (none: "
                    f"{' '.join(FOLDERS)})")
    blocks = page_blocks([str(Path(f).resolve()) for f in argv] if argv else FOLDERS)
    print(f"{blocks['verdicts.two_looks']}\n\n{blocks['verdicts.words']}")
    if not argv:  # (the committed looks: the pages quote them)
        for page in write_blocks(pages(ROOT), blocks):
            print(f"wrote the generated blocks of {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
