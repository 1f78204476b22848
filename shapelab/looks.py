"""
One comparison judged twice, on 2 CPU cores and on one H200, read as two looks at one question:
each look's Holm, Holm over both looks' tests, and the looks' differences combined by 1 / SE^2
(Satterthwaite's degrees of freedom); the verdicts in a few words, README's table and the papers'
own differences scaled to this loss. Written into the pages' generated blocks.

    python -m shapelab.looks                 # the two committed records folders
    python -m shapelab.looks results/compare_verdict_cpu out-compare-verdict-cpu-2
"""

import json
import math
import sys
from pathlib import Path

from scipy import stats

from shapelab.configurator import usage_error
from shapelab.controls import CHANGED, share_text
from shapelab.cost import machine_label
from shapelab.pages import pages, write_blocks
from shapelab.report import p_text, regime_line, tokens_per_run
from shapelab.sweep import ROOT, portable
from shapelab.verdict import ALPHA, holm, short_verdict

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
    """(mean, se, lo, hi, df) of [(mean, se, df)] weighted by 1 / se^2."""
    weights = [1 / se ** 2 for _, se, _ in diffs]
    total = sum(weights)
    mean = sum(w * d for w, (d, _, _) in zip(weights, diffs)) / total
    df = total ** 2 / sum(w ** 2 / df for w, (_, _, df) in zip(weights, diffs))
    se = 1 / math.sqrt(total)
    t = float(stats.t.ppf(1 - ALPHA / 2, df))
    return mean, se, mean - t * se, mean + t * se, df


def two_looks(looks):
    """{shape: each look's diff and Holm levels, alone and over every look's tests, and their
    combination} of the shapes every look tested."""
    shapes = [s for s in looks[0][1] if all("p" in (v.get(s, {}).get("diff") or {})
                                             for _, v in looks)]
    own = [holm({s: v[s]["diff"]["p"] for s in shapes})[1] for _, v in looks]
    every = {(i, s): v[s]["diff"]["p"] for i, (_, v) in enumerate(looks) for s in shapes}
    passed, levels = holm(every)
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


def readme_verdict_table(gpu_dir, cpu_dir, docs="docs/"):
    """README's regime line and table of verdicts on the GPU and the CPU; docs: the write-ups'
    folder as the page links it."""
    verdicts, seeds, regimes, held = {}, {}, {}, {}
    for machine, folder in (("gpu", gpu_dir), ("cpu", cpu_dir)):
        results = held[machine] = json.loads((Path(folder) / "results.json").read_text())
        verdicts[machine] = {v["shape"]: v for v in results["verdicts"]}
        seeds[machine] = max(len(v["seeds"]) for v in results["verdicts"])
        regimes[machine] = regime_line(results["settings"], results["shapes"]["GPT"],
                                       tokens_per_run(results["settings"]))
    regime = (f"Both verdicts' r{regimes['gpu'][1:]}" if regimes["gpu"] == regimes["cpu"] else
              f"The H200's r{regimes['gpu'][1:]} The CPU's r{regimes['cpu'][1:]}")
    lines = [regime, "",
             f"| mechanism | file | paper | one H200, {seeds['gpu']} verdict seeds (confirmatory) "
             f"| 2 CPU cores, {seeds['cpu']} verdict seeds (exploratory) | write-up |",
             "|---|---|---|---|---|---|"]
    for shape, mechanism, file, paper, write_up in README_ROWS:
        cells = [short_verdict(verdicts[m][shape]) if shape in verdicts[m] else "not run"
                 for m in ("gpu", "cpu")]
        lines.append(f"| {mechanism} | `{file}` | {paper} | {cells[0]} | {cells[1]} | "
                     f"[{write_up}]({docs}{write_up}) |")
    made_of = controls_line(held["cpu"], docs)
    return "\n".join(lines + (["", made_of] if made_of else [])) + "\n"


def controls_line(results, docs="docs/"):
    """Each control's share of the controlled shape's difference, once every one has a reading."""
    controls = results.get("controls", [])
    if not controls or any(c["reading"] is None for c in controls):
        return ""
    seeds = controls[0]["reading"]["vs_baseline"]["n"]
    shares = [f"{CHANGED[c['shape']][0]} ({c['shape']}) {'reproduces ' * (i == 0)}"
              f"{share_text(c['reading']['share'])}{' of it' * (i == 0)}"
              for i, c in enumerate(controls)]
    return (f"What the {results['controlled']}'s difference is made of (2 CPU cores, "
            f"{seeds} verdict seeds, {len(controls)} controls): {', '.join(shares)} - "
            f"[hourglass.md]({docs}hourglass.md#what-the-gain-is-made-of-the-controls).")


# Each paper's own difference: (its table and row, the baseline's val loss, the shape's)
PAPER_EFFECTS = [
    ("hourglass, 113M, K = 2, L = 12 (Table 2)", 3.464, 3.426),
    ("hourglass, 113M, K = 2, L = 6 (Table 2)", 3.464, 3.428),
    ("hourglass, 113M, K = 4, L = 12 (Table 2)", 3.464, 3.458),
    ("hourglass, 113M, K = 4, L = 6 (Table 2)", 3.464, 3.418),
    ("hourglass, 113M (Table 4)", 3.464, 3.426),
    ("hourglass, 403M (Table 4)", 3.087, 3.064),
    ("hourglass, 906M (Table 4)", 2.943, 2.934),
    ("hourglass, 1074M (Table 4)", 2.810, 2.810),
    ("><former, 200M (Table 2)", 3.452, 3.430),
    ("><former, 500M (Table 2)", 3.138, 3.099),
    ("><former, 1B (Table 2)", 2.926, 2.890),
    ("><former, 2B (Table 2)", 2.751, 2.726),
    ("><former, 3B/1B MoE (Table 2)", 2.726, 2.710),
]


def papers_at_this_loss(record_dir):
    """Each paper's difference as a fraction of its baseline's loss, at the GPT's loss here."""
    results = json.loads((Path(record_dir) / "results.json").read_text())
    gpt = next(v["val_loss_mean"] for v in results["verdicts"] if v["shape"] == "GPT")
    lines = [f"Scaled to the GPT's mean loss here ({gpt:.4f}, "
             f"{portable(record_dir, ROOT)}):", "",
             "| paper's result | its losses | fraction | at this loss |", "|---|---|---:|---:|"]
    lines += [f"| {what} | {base:.3f} -> {shape:.3f} | {(base - shape) / base:.2%} | "
              f"{(base - shape) / base * gpt:.4f} |" for what, base, shape in PAPER_EFFECTS]
    return "\n".join(lines) + "\n"


def page_blocks(folders=FOLDERS):
    """{block name: markdown} of the looks in `folders`; of the committed ones, README's too."""
    looks = [read_look(Path(folder) if Path(folder).is_absolute() else ROOT / folder)
             for folder in folders]
    blocks = {"verdicts.two_looks": two_looks_table(looks)}
    if tuple(folders) == FOLDERS:
        cpu, gpu = (ROOT / folder for folder in FOLDERS)
        blocks.update({"readme-verdicts": readme_verdict_table(gpu, cpu),
                       "docs-verdicts": readme_verdict_table(gpu, cpu, docs=""),
                       "papers-at-this-loss": papers_at_this_loss(gpu)})
    return blocks


def main(argv):
    if len(argv) == 1:
        usage_error(f"name two or more records folders of compare.py reports (none: "
                    f"{' '.join(FOLDERS)})")
    blocks = page_blocks([str(Path(f).resolve()) for f in argv] if argv else FOLDERS)
    print(blocks["verdicts.two_looks"])
    if not argv:
        for page in write_blocks(pages(ROOT), blocks):
            print(f"wrote the generated blocks of {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
