"""
A comparison's report in words and tables, from its results.json: each a markdown part
(report_parts) - the verdict, phase 1's rates, each shape's own spread, the controls and the cost.
results.md is made of them, and so are the pages' generated blocks (`report_blocks`).
"""

import json
from pathlib import Path

from shapelab.controls import control_rows, controls_reading
from shapelab.cost import SPEED_BENCH, cost_table
from shapelab.verdict import (MIN_VERDICT_SEEDS, finite, interval, lr_cell, rate_label,
                              seeds_in_verdict, shape_rows, spread_check)

METHOD = "[how a verdict is made](../../docs/compare.md)"


def regime_line(settings, baseline, tokens):
    """The scale of the comparison, what a paper's result at another scale is read against."""
    return (f"Regime: {baseline['budget'] / 1e6:.3f}M non-embedding parameters, "
            f"{tokens / 1e6:.3g}M tokens a run ({tokens / baseline['budget']:.2f} per "
            f"parameter), {settings['n_layer']} layers, context {settings['block_size']}, "
            f"{settings['dataset']}.")


def tokens_per_run(settings):
    return settings["max_iters"] * settings["batch_size"] * settings["block_size"] * settings[
        "gradient_accumulation_steps"]


def verdict_rows(settings, names, losses, unchosen, controls, controlled):
    """(rows, control rows, baseline) of {(name, lr, seed): val loss}: the shapes' verdict rows,
    and the controls' read against them, never in their model; a shape in `unchosen` (phase 1
    has rates left) has no verdict yet."""
    seeds, baseline = settings["seeds"], "GPT"  # compare.py reports nothing without it
    compared = [n for n in names if n not in controls]
    rates = sorted({lr for (_, lr, seed) in losses if seed == seeds[0]})
    rows = shape_rows(losses, compared, rates, seeds, baseline)
    control = control_rows(losses, [n for n in names if n in controls], rates, seeds, rows,
                           baseline, controlled)
    for name in unchosen:  # phase 1 has rates left: no verdict yet
        if name in rows:
            rows[name].update(diff=dict(verdict="no verdict yet (phase 1 has rates left to try)"),
                              verdict="no verdict yet (phase 1 has rates left to try)")
        control.get(name, {}).pop("reading", None)
    return rows, control, baseline


def report_parts(held):
    """{part: markdown} of a results.json's content, its verdict recomputed from its runs."""
    settings = held["settings"]
    losses = {(r["shape"], r["lr"], r["seed"]): r["val_loss"] for r in held["runs"]}
    controls, controlled = held["control_names"], held["controlled"]
    rows, control, baseline = verdict_rows(settings, list(held["shapes"]), losses,
                                           held["rates_not_chosen"], controls, controlled)
    used, cost = seeds_in_verdict(rows), held["cost"]
    model = {n: {s: row["losses"][s] for s in used} for n, row in rows.items()
             if n == baseline or "paired" in row.get("diff", {})}
    bench = any(m.startswith("bench.py") for row in cost.values() for m in row["machines"])
    seeds, rates = settings["seeds"], settings["learning_rates"]
    return dict(
        head=f"Rates {', '.join(map(rate_label, rates))} (extend_rates {settings['extend_rates']}, "
             f"refine_gain {settings['refine_gain']:g}), selection seed {seeds[0]}, verdict seeds "
             f"{seeds_text(used) or 'none yet'} of {seeds_text(seeds[1:]) or 'none'}; every "
             f"setting in results.json.\n\n"
             f"{regime_line(settings, held['shapes'][baseline], tokens_per_run(settings))}",
        table=f"{verdict_table(rows, baseline)}\n\n{verdict_footer(rows, settings, baseline)}",
        rates=rates_table(rows),
        spreads=spread_table(rows, baseline, spread_check(model, used) if len(model) > 1 else {}),
        controls=f"{controls_reading(control, baseline, controlled, sub_blocks(held['shapes']))}"
                 f"\n\n{rates_table(control)}\n\n- each control: its own rate on the selection "
                 f"seed, then the verdict seeds, seed-paired; a family of its own, never in the "
                 f"verdict's; its share of the {controlled}'s difference with Fieller's 95% "
                 f"interval." if control else
        f"No control run recorded yet: `--models='{','.join([baseline, *controls])}'` trains "
        f"them.",
        cost=cost_table(cost, baseline, seeds_text(used),
                        bench and f"{Path(settings['record_dir']).name}/{SPEED_BENCH}") if cost else
        f"Fewer than {MIN_VERDICT_SEEDS} verdict seeds that every shape has finished: no cost yet.")


def results_md(held):
    """results.md of a results.json's content."""
    settings, parts, baseline = held["settings"], report_parts(held), "GPT"
    return (f"# Shape comparison: {settings['dataset']}, {tokens_per_run(settings) / 1e6:.3g}M "
            f"tokens per run, matched budget ({settings['preset']} preset)\n\n{parts['head']}\n\n"
            f"## Every shape at its own learning rate, against {baseline}\n\n{parts['table']}\n\n"
            f"## Phase 1: final val loss at every rate (seed {settings['seeds'][0]}; bold: "
            f"chosen)\n\n{parts['rates']}\n\n## Each shape's own spread\n\n{parts['spreads']}\n\n"
            f"## The controls: what the {held['controlled']}'s difference is made of\n\n"
            f"{parts['controls']}\n\n"
            f"## The cost: each shape at {baseline}'s time and FLOPs\n\n{parts['cost']}\n")


def report_blocks(record_dir):
    """{<folder name less 'compare_'>.<part>: markdown} of a records folder's results.json."""
    folder = Path(record_dir)
    parts = report_parts(json.loads((folder / "results.json").read_text()))
    return {f"{folder.name.removeprefix('compare_')}.{part}": text for part, text in parts.items()}


def sub_blocks(shapes):
    """{shape: K, its hourglass sub-blocks} of results.json's shapes."""
    return {n: s["model_args"].get("n_sub_blocks") for n, s in shapes.items()}


def row_json(name, row, **more):
    return dict(shape=name, lr=row["lr"], lr_edge=row["edge"],
                seeds=sorted(set(row["losses"]) - set(row.get("beyond", ()))), **more,
                val_loss_mean=row["mean"], val_loss_std=row["std"],
                phase1={rate_label(lr): v for lr, v in row["phase1"].items()})


def verdicts_json(rows):
    return [dict(row_json(n, row, seeds_not_in_verdict_yet=row["beyond"]), diff=row.get("diff"),
                 verdict=row.get("verdict", "baseline")) for n, row in rows.items()]


def controls_json(controls):
    return [dict(row_json(n, row), reading=row.get("reading")) for n, row in controls.items()]


def report_of_the_records(record_dir, settings, runs):
    """Whether a report of record_dir's runs may replace its report: it covers every shape and
    seed that one holds."""
    try:
        held = json.loads((Path(record_dir) / "results.json").read_text())
    except OSError:  # none yet: none to keep
        return True
    return ({v["shape"] for v in held["verdicts"]} <= {run["shape"] for run in runs}
            and set(held["settings"]["seeds"]) <= set(settings["seeds"]))


def loss_text(loss):
    return f"{loss:.4f}" if finite(loss) else "diverged"


def verdict_table(rows, baseline):
    lines = [f"| model | lr | verdict seeds | val loss (mean +- std) | vs {baseline} [95% "
             f"interval] | detectable: one test / the family | verdict |",
             "|---|---|---:|---:|---:|---:|---|"]
    for name, row in rows.items():
        beyond = len(row["beyond"])
        seeds = f"{len(row['losses']) - beyond}" + f" (+{beyond} not in the verdict yet)" * (
            beyond > 0)
        loss = "-" if row["mean"] is None else f"{row['mean']:.4f}" + (
            f" +- {row['std']:.4f}" if row["std"] is not None else "")
        d = row.get("diff", {})
        diff = interval(d) if "lo" in d else f"{d['mean']:+.4f}" if "mean" in d else "-"
        detect = f"{d['detectable']:.4f} / {d['detectable_family']:.4f}" if "lo" in d else "-"
        cells = ["(the baseline)", "", ""] if name == baseline else [diff, detect, row["verdict"]]
        lines.append(f"| {name} | {lr_cell(row)} | {seeds} | {loss} | {' | '.join(cells)} |")
    return "\n".join(lines)


def verdict_footer(rows, settings, baseline):
    seeds, tests = settings["seeds"], len(rows) - 1
    edges = {row["edge"] for row in rows.values()} & {"lowest", "highest"}
    some = next((row["diff"] for row in rows.values() if "lo" in row.get("diff", {})), None)
    model = some and (f" Residual SD {some['sigma']:.4f} on {some['df']} degrees of freedom, SE "
                      f"of a difference {some['se']:.4f}.")
    return "\n".join([
        f"- lr: the lowest final val loss at the selection seed {seeds[0]} (phase 1), left out of "
        f"the verdict." + (" **A choice at an end**: allow more with --extend_rates (finished "
                           "runs are kept)." if edges else ""),
        f"- vs {baseline}: the mean seed-paired difference over the verdict seeds and its 95% "
        f"interval from one additive model of every run (shapes x seeds).{model or ''}",
        f"- verdict: better / worse where Holm over the {tests} shapes rejects 'no difference' "
        f"and so does the shape's own paired test (spreads, below); otherwise the difference "
        f"detectable with 80% power at Holm's strictest step. {METHOD}."])


def seeds_text(seeds):
    """'1338-1353, 1355'."""
    runs = []
    for seed in sorted(seeds):
        if runs and seed == runs[-1][1] + 1:
            runs[-1][1] = seed
        else:
            runs.append([seed, seed])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def rates_table(rows):
    rates = sorted({lr for row in rows.values() for lr in row["phase1"]})
    lines = ["| model | " + " | ".join(f"lr {rate_label(r)}" for r in rates) + " |",
             "|---|" + "---:|" * len(rates)]
    for name, row in rows.items():
        cells = ["-" if r not in row["phase1"] else f"**{loss_text(row['phase1'][r])}**"
                 if r == row["lr"] else loss_text(row["phase1"][r]) for r in rates]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def p_text(p):
    return "-" if p is None else f"{p:.4f}" if p >= 1e-4 else f"{p:.0e}"


def spread_table(rows, baseline, spread):
    lines = [f"| model | own residual SD | vs {baseline}, paired [95% interval] | p pooled / "
             f"Holm's step | p paired / Holm's step |", "|---|---:|---:|---:|---:|"]
    for name, row in rows.items():
        d = row.get("diff", {})
        if "paired" in d:
            q = d["paired"]
            lines.append(f"| {name} | {d['own_sd']:.4f} | {interval(q)} | {p_text(d['p'])} / "
                         f"{d['holm_level']:.4f} | {p_text(q['p'])} / {q['holm_level']:.4f} |")
        elif name == baseline and "own_sd" in row:
            lines.append(f"| {name} | {row['own_sd']:.4f} | (the baseline) | | |")
    if not spread:
        return "No verdict yet: no spreads to compare."
    return "\n".join(lines + [
        "",
        f"- own residual SD: the shape's residuals of the pooled model on its share of the "
        f"degrees of freedom ({spread['df_each']:.1f}). Equal spreads, as the pooled model "
        f"assumes: Bartlett p = {p_text(spread['bartlett_p'])}, Levene (median) p = "
        f"{p_text(spread['levene_p'])} (approximate: one model's residuals); a small p: the "
        f"pooled SE is too wide for some shapes, too narrow for others, and the paired test "
        f"(no spread borrowed, Holm over the same shapes) decides beside it."])
