"""
One comparison judged twice, on 2 CPU cores and on one H200, read as two looks at one question:
each look's Holm, Holm over both looks' tests, and the looks' differences combined by 1 / SE^2
(Satterthwaite's degrees of freedom); the verdicts in a few words, README's table and the papers'
own differences scaled to this loss. Written into the pages' generated blocks.

    python -m shapelab.looks                 # the two committed records folders
    python -m shapelab.looks results/compare_verdict_cpu out-compare-verdict-cpu-2
"""

import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from shapelab.configurator import usage_error
from shapelab.controls import CHANGED, share_text
from shapelab.cost import machine_label
from shapelab.pages import pages, write_blocks
from shapelab.report import p_text, regime_line, tokens_per_run
from shapelab.sweep import ROOT
from shapelab.verdict import ALPHA, holm, interval, short_verdict

FOLDERS = ("results/compare_verdict_cpu", "results/compare_verdict_cpu_scale_gpu")


def read_look(folder):
    """('<GPU or CPU>, <n> seeds', {shape: verdict entry}) of a records folder's results.json."""
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
    passed, levels = holm({key: d["p"] for key, d in diffs.items()})
    each = range(len(looks))
    return {s: dict(looks=[dict(diff=diffs[i, s], all_level=levels[i, s], all_holm=passed[i, s])
                           for i in each],
                    combined=combined([diffs[i, s] for i in each])) for s in shapes}


def two_looks_table(looks):
    rows, labels = two_looks(looks), [label for label, _ in looks]
    tests = len(rows) * len(looks)
    head = " | ".join(f"{label}: vs GPT [95% interval], p / Holm's step" for label in labels)
    lines = [f"| model | {head} | Holm over all {tests} tests | combined [95% interval] |",
             "|---|" + "---:|" * len(labels) + "---|---:|"]
    for shape, row in rows.items():
        cells = [f"{interval(d)}, {p_text(d['p'])} / "
                 f"{d['holm_level']:.4f} ({'passes' if d['holm'] else 'fails'})"
                 for look in row["looks"] for d in [look["diff"]]]
        over = "; ".join(
            f"{label.split(',')[0]} {'passes' if look['all_holm'] else 'fails'} "
            f"({p_text(look['diff']['p'])} "
            f"{'<=' if look['diff']['p'] <= look['all_level'] else '>'} {look['all_level']:.4f})"
            for label, look in zip(labels, row["looks"]))
        mean, se, lo, hi, _ = row["combined"]
        same = len({look["diff"]["mean"] > 0 for look in row["looks"]}) == 1
        lines.append(f"| {shape} | {' | '.join(cells)} | {over} | {mean:+.4f} +- {se:.4f} "
                     f"[{lo:+.4f}, {hi:+.4f}], {'same' if same else 'opposite'} "
                     f"direction{'' if same else 's'} |")
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


README_ROWS = [  # (shape, mechanism, file, paper, write-up in docs/)
    ("GPT", "plain GPT", "model.py", "LLaMA-style: RMSNorm, RoPE, SwiGLU, no biases",
     "compare.md"),
    ("hourglass", "hourglass FFN", "hourglass.py", "Liao, Chen, Yi, Shiu 2026, *Revisiting the "
     "Shape Convention of Transformer Language Models*", "hourglass.md"),
    ("><former", "><former", "variable_width.py", "Wu, Sieberling, Tan, Panda, Polyanskiy, Kim "
     "2026, *Variable-Width Transformers*", "variable_width.md"),
    ("hourglass+><former", "hourglass + ><former", "compose.py", "the two above",
     "compare.md"),
    ("FFN-Wider", "FFN-Wider", "cea.py", "Lu, Zhao, Qin, Huo, Yang, Xu 2024, *How does "
     "Architecture Influence the Base Capabilities of Pre-trained Language Models?*",
     "cea.md"),
    ("CEA", "CEA", "cea.py", "", "cea.md"),
    ("LWS vanilla", "LWS vanilla", "lws.py", "Baroian, Notebomer 2025, *Crown, Frame, Reverse: "
     "Layer-Wise Scaling Variants for LLM Pre-Training*", "lws.md"),
    ("LWS framed", "LWS framed", "lws.py", "", "lws.md"),
    ("LWS reverse", "LWS reverse", "lws.py", "", "lws.md"),
    ("LWS crown", "LWS crown", "lws.py", "", "lws.md"),
]


def readme_verdict_table(held, docs):
    """README's regime line and table of verdicts on the GPU and the CPU, from {machine:
    results.json}; docs: the write-ups' folder as the page links it."""
    verdicts = {m: {v["shape"]: v for v in r["verdicts"]} for m, r in held.items()}
    seeds = {m: max(len(v["seeds"]) for v in r["verdicts"]) for m, r in held.items()}
    gpu, cpu = (regime_line(r["settings"], r["shapes"]["GPT"], tokens_per_run(r["settings"]))[1:]
                for r in (held["gpu"], held["cpu"]))
    lines = [f"Both verdicts' r{gpu}" if gpu == cpu else f"The H200's r{gpu} The CPU's r{cpu}", "",
             f"| mechanism | file | paper | one H200, {seeds['gpu']} verdict seeds (confirmatory) "
             f"| 2 CPU cores, {seeds['cpu']} verdict seeds (exploratory) | write-up |",
             "|---|---|---|---|---|---|"]
    for shape, mechanism, file, paper, write_up in README_ROWS:
        cells = [short_verdict(verdicts[m][shape]) if shape in verdicts[m] else "not run"
                 for m in ("gpu", "cpu")]
        lines.append(f"| {mechanism} | `{file}` | {paper} | {cells[0]} | {cells[1]} | "
                     f"[{write_up}]({docs}{write_up}) |")
    controls = held["cpu"]["controls"]
    if controls and all(c["reading"] for c in controls):
        shares = [f"{CHANGED[c['shape']][0]} ({c['shape']}) {'reproduces ' * (i == 0)}"
                  f"{share_text(c['reading']['share'])}{' of it' * (i == 0)}"
                  for i, c in enumerate(controls)]
        lines += ["", f"What the {held['cpu']['controlled']}'s difference is made of (2 CPU cores, "
                  f"{controls[0]['reading']['vs_baseline']['n']} verdict seeds, {len(controls)} "
                  f"controls): {', '.join(shares)} - "
                  f"[hourglass.md]({docs}hourglass.md#what-the-gain-is-made-of-the-controls)."]
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
    gpt = next(v["val_loss_mean"] for v in results["verdicts"] if v["shape"] == "GPT")
    lines = [f"Scaled to the GPT's mean loss here ({gpt:.4f}, {folder}):", "",
             "| paper's result | its losses | fraction | at this loss |", "|---|---|---:|---:|"]
    for line in PAPER_EFFECTS.splitlines():
        what, base, shape = line.split(" | ")
        fraction = (float(base) - float(shape)) / float(base)
        lines.append(f"| {what} | {base} -> {shape} | {fraction:.2%} | {fraction * gpt:.4f} |")
    return "\n".join(lines) + "\n"


def page_blocks(folders=FOLDERS):
    """{block name: markdown} of the looks in `folders`; of the committed ones, README's too."""
    blocks = {"verdicts.two_looks": two_looks_table([read_look(ROOT / f) for f in folders])}
    if tuple(folders) == FOLDERS:
        held = {m: json.loads((ROOT / f / "results.json").read_text())
                for m, f in zip(("cpu", "gpu"), FOLDERS)}
        blocks.update({"readme-verdicts": readme_verdict_table(held, "docs/"),
                       "docs-verdicts": readme_verdict_table(held, ""),
                       "papers-at-this-loss": papers_at_this_loss(held["gpu"], FOLDERS[1])})
    return blocks


def main(argv):
    if len(argv) == 1:
        usage_error(f"name two or more records folders of compare.py reports (none: "
                    f"{' '.join(FOLDERS)})")
    blocks = page_blocks([Path(f).resolve() for f in argv] if argv else FOLDERS)
    print(blocks["verdicts.two_looks"])
    if not argv:
        for page in write_blocks(pages(ROOT), blocks):
            print(f"wrote the generated blocks of {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
