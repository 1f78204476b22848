"""
A comparison's report in words and tables, each a markdown part (report_sections): regime, table
(the verdict), rates (phase 1), spreads (each shape's own, the paired test), controls, cost and
words. results.md is made of them, and so are the pages' generated blocks (`page_blocks`).
"""

import json
from pathlib import Path

from shapelab.controls import control_rows, controls_footer, controls_reading, controls_table
from shapelab.cost import SPEED_BENCH, cost_footer, cost_table, from_bench
from shapelab.sweep import read_result
from shapelab.verdict import (MIN_VERDICT_SEEDS, extended_rates, finite, interval, lr_cell,
                              rate_label,
                              seeds_in_verdict, shape_rows, spread_check)


def regime_line(settings, baseline, tokens):
    """The scale of the comparison, what a paper's result at another scale is read against."""
    return (f"Regime: {baseline['budget'] / 1e6:.3f}M non-embedding parameters, "
            f"{tokens / 1e6:.3g}M training tokens a run ({tokens / baseline['budget']:.2f} per "
            f"parameter), {settings['n_layer']} layers, context {settings['block_size']}, "
            f"{settings['dataset']} tokens.")


def tokens_per_run(settings):
    return settings["max_iters"] * settings["batch_size"] * settings["block_size"] * settings[
        "gradient_accumulation_steps"]


def seed_header(settings, rows):
    """The verdict seeds planned, and those the means are over where fewer (an interim look)."""
    planned, used = settings["seeds"][1:], seeds_in_verdict(rows)
    listed = ", ".join(map(str, planned)) or "none"
    if not planned or used == sorted(planned):
        return listed
    return (f"{listed} (an interim look: its means are over {seeds_text(used) or 'none yet'}, the "
            f"{len(used)} that every shape has finished)")


def verdict_rows(settings, names, losses, unchosen, controls, controlled):
    """(rows, control rows, baseline) of {(name, lr, seed): val loss}: the shapes' verdict rows,
    and the controls' read against them, never in their model; a shape in `unchosen` (phase 1
    has rates left) has no verdict yet."""
    seeds = settings["seeds"]
    compared = [n for n in names if n not in controls]
    watched = [n for n in names if n in controls]
    baseline = "GPT" if "GPT" in compared else compared[0]
    rates = sorted({lr for (_, lr, seed) in losses if seed == seeds[0]})
    rows = shape_rows(losses, compared, rates, seeds, baseline)
    control = control_rows(losses, watched, rates, seeds, rows, baseline, controlled)
    for name in unchosen:
        not_yet = "no verdict yet (phase 1 has rates left to try)"
        if name in rows:
            rows[name].update(open=True, diff=dict(verdict=not_yet), verdict=not_yet)
        if name in control:
            control[name]["open"] = True
            control[name].pop("reading", None)
    return rows, control, baseline


def report_sections(settings, names, losses, cost, unchosen, controls, controlled):
    """{part: markdown} from the final losses and the cost readings (cost.cost_rows')."""
    rows, control, baseline = verdict_rows(settings, names, losses, unchosen, controls,
                                           controlled)
    seeds = settings["seeds"]
    used = seeds_in_verdict(rows)
    model = {n: {s: row["losses"][s] for s in used} for n, row in rows.items()
             if n == baseline or "paired" in row.get("diff", {})}
    spread = spread_check(model, used) if len(model) > 1 else {}
    reading = controls_reading(control, controlled)
    final = {n: row["mean"] for n, row in {**rows, **control}.items() if row["mean"] is not None}
    bench = (f"{settings['record_dir']}/{SPEED_BENCH}"
             if any(from_bench(m) for row in cost.values() for m in row["machines"]) else None)
    footer = cost_footer(baseline, seeds_text(used), settings["eval_interval"], bench)
    return dict(
        table=f"{verdict_table(rows, baseline)}\n\n{verdict_footer(rows, settings, baseline)}",
        rates=rates_table(rows),
        spreads=f"{spread_table(rows, baseline)}\n\n{spread_footer(rows, spread, baseline)}",
        controls=f"{controls_table(control, baseline, controlled)}\n\n"
                 + (f"What each explains:\n\n{reading}\n\n" if reading else "")
                 + f"{rates_table(control)}\n\n{controls_footer(baseline, controlled, seeds)}"
        if control else
        f"No control run recorded yet ({', '.join(controls)}): a control is trained when "
        f"--models names it, through the same protocol as every shape: `python compare.py "
        f"<this comparison's config> --models='{','.join([baseline, *controls])}'`.",
        cost=f"{cost_table(cost, baseline, final)}\n\n{footer}" if cost else
        f"Fewer than {MIN_VERDICT_SEEDS} verdict seeds that every shape has finished: no cost to "
        f"read yet.")


def page_blocks(record_dir):
    """{<folder name less 'compare_'>.<part>: markdown} of a records folder's results.json."""
    folder = Path(record_dir)
    held = json.loads((folder / "results.json").read_text())
    settings = held["settings"]
    losses = {(r["shape"], r["lr"], r["seed"]): r["val_loss"] for r in held["runs"]}
    sections = report_sections(settings, list(held["shapes"]), losses, held["cost"],
                               held["rates_not_chosen"], held["control_names"], held["controlled"])
    baseline = next(v["shape"] for v in held["verdicts"] if v["diff"] is None)
    sections["regime"] = regime_line(settings, held["shapes"][baseline], tokens_per_run(settings))
    prefix = folder.name.removeprefix("compare_")
    return {f"{prefix}.{part}": text for part, text in sections.items()}


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


def report_of_the_records(record_dir, settings, results, runs):
    """Whether a report may replace record_dir's: every run it reports is a record there, and it
    covers every shape and seed its results.json holds."""
    recorded = [read_result(p) for p in sorted((Path(record_dir) / "runs").glob("*/result.json"))]
    if not all(result in recorded for result in results.values()):
        return False
    try:
        held = json.loads((Path(record_dir) / "results.json").read_text())
        shapes, seeds = {v["shape"] for v in held["verdicts"]}, set(held["settings"]["seeds"])
    except (OSError, ValueError, KeyError, TypeError):  # none yet: none to keep
        return True
    return shapes <= {run["shape"] for run in runs} and seeds <= set(settings["seeds"])


def loss_text(loss):
    return f"{loss:.4f}" if finite(loss) else "diverged"


def verdict_table(rows, baseline):
    lines = [f"| model | lr | verdict seeds | val loss (mean +- std) | vs {baseline} [95% "
             f"interval] | detectable: one test / the family | verdict |",
             "|---|---|---:|---:|---:|---:|---|"]
    for name, row in rows.items():
        beyond = len(row["beyond"])
        bad = sum(not finite(v) for s, v in row["losses"].items() if s not in row["beyond"])
        seeds = (f"{len(row['losses']) - beyond - bad}" + (f" (+{bad} diverged)" * bool(bad))
                 + (f" (+{beyond} not in the verdict yet)" * bool(beyond)))
        loss = "-" if row["mean"] is None else f"{row['mean']:.4f}" + (
            f" +- {row['std']:.4f}" if row["std"] is not None else "")
        if row["lr"] is None:
            loss = "diverged at every rate" if row["phase1"] else "no run finished yet"
        d = row.get("diff", {})
        diff = (interval(d) if "lo" in d
                else f"{d['mean']:+.4f}" if "mean" in d else "-")
        detect = f"{d['detectable']:.4f} / {d['detectable_family']:.4f}" if "lo" in d else "-"
        cells = ["(the baseline)", "", ""] if name == baseline else [diff, detect, row["verdict"]]
        lines.append(f"| {name} | {lr_cell(row)} | {seeds} | {loss} | {' | '.join(cells)} |")
    return "\n".join(lines)


def verdict_footer(rows, settings, baseline):
    rates, seeds = settings["learning_rates"], settings["seeds"]
    extend, refine = settings["extend_rates"], settings["refine_gain"]
    edges = [row["edge"] for row in rows.values()]
    flag = f"`--learning_rates={','.join(map(rate_label, extended_rates(rates, edges)))}`"
    if len(rates) == 1:
        lr = f"one rate for every shape, not chosen per shape; compare rates with {flag}."
    else:
        lr = (f"each shape's own: the lowest final val loss at the selection seed {seeds[0]} "
              f"(phase 1, below) over the rates {', '.join(map(rate_label, rates))}")
        if extend:
            lr += (f" and, while a shape's best lies at an end of its rates, one more rate past "
                   f"that end (a step of the list's ratio), up to {extend} beyond the list")
        if refine:
            lr += (f"; where the parabola through an inside choice and its neighbours (against "
                   f"log rate) dips more than {refine:g} below it, one step of x sqrt(2) on each "
                   f"side too")
        lr += " (-: not tried). "
        if "lowest" in edges or "highest" in edges:
            lr += ("**A choice at an end** (lowest / highest) may have a better rate beyond it: "
                   + (f"allow more with `--extend_rates={extend + 1}`" if extend else
                      f"extend the list with {flag}, or let each shape look past the end it "
                      f"chose with `--extend_rates=2`") + " (finished runs are kept).")
        else:
            lr += "Every choice lies inside the shape's rates."
    some = next((row["diff"] for row in rows.values() if "lo" in row.get("diff", {})), None)
    model = ("" if some is None else
             f" Here: {some['n']} verdict seeds, {len(rows)} shapes, residual SD "
             f"{some['sigma']:.4f} on {some['df']} degrees of freedom, SE of a difference "
             f"{some['se']:.4f}.")
    tests = len(rows) - 1
    used = seeds_in_verdict(rows)
    listed = (', '.join(map(str, seeds[1:])) if used == sorted(seeds[1:]) else
              f"{seeds_text(used) or 'none yet'}, {len(used)} of the {len(seeds) - 1} planned "
              f"({seeds_text(seeds[1:])}): an interim look, the others not finished by every "
              f"shape yet")
    return "\n".join([
        f"- lr: {lr}",
        f"- verdict seeds: {listed} (the selection seed {seeds[0]} chose "
        f"the rate and is left out: its loss at the chosen rate is the lowest of its rates). val "
        f"loss: their mean +- standard deviation." if len(seeds) > 1 else
        f"- one seed ({seeds[0]}): each shape's loss at its rate, and no verdict (a verdict needs "
        f"the selection seed and {MIN_VERDICT_SEEDS} verdict seeds or more, e.g. "
        f"--seeds={','.join(str(seeds[0] + i) for i in range(MIN_VERDICT_SEEDS + 1))}).",
        f"- vs {baseline}: the mean over the verdict seeds of loss(shape, s) - loss({baseline}, "
        f"s), each at its own rate (the same seed is the same data order), and its 95% interval, "
        f"from one model of every run (shapes x seeds, additive; the residual variance pooled "
        f"over all shapes).{model}",
        f"- detectable: the difference found with 80% power, by one test at 5% / by Holm's "
        f"strictest step over the {tests} shapes (5% / {tests}).",
        f"- verdict: better / worse where Holm's correction over the {tests} shapes tested "
        f"against {baseline} rejects 'no difference' (the family's chance of any false verdict "
        f"5%); otherwise the size of difference these runs could have seen. 'No difference "
        f"larger than X' is not 'no effect': an effect smaller than X passes unseen. A verdict "
        f"word needs the test on the shape's own spread (its seed-paired differences, below) "
        f"to reject too; where one test alone does, the row says which."])


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


def spread_table(rows, baseline):
    lines = [f"| model | own residual SD | SD of the paired differences | vs {baseline}, paired "
             f"[95% interval] | p pooled / Holm's step | p paired / Holm's step | the two tests |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for name, row in rows.items():
        d = row.get("diff", {})
        if name == baseline:
            own = row.get("own_sd")
            lines.append(f"| {name} | {'-' if own is None else f'{own:.4f}'} | (the baseline) "
                         f"|  |  |  |  |")
            continue
        if "paired" not in d:
            lines.append(f"| {name} | - | - | - | - | - | {row['verdict']} |")
            continue
        q = d["paired"]
        if q["holm"] == d["holm"]:
            says = (f"both: {'better' if d['mean'] < 0 else 'worse'}" if d["holm"]
                    else "neither rejects")
        else:
            says = f"{'pooled' if d['holm'] else 'paired'} alone rejects"
        lines.append(f"| {name} | {d['own_sd']:.4f} | {q['sd']:.4f} | {interval(q)} | "
                     f"{p_text(d['p'])} / "
                     f"{d['holm_level']:.4f} | {p_text(q['p'])} / {q['holm_level']:.4f} | {says} |")
    return "\n".join(lines)


def spread_footer(rows, spread, baseline):
    some = next((row["diff"] for row in rows.values() if "paired" in row.get("diff", {})), None)
    if some is None:
        return "- (no verdict yet: no spreads to compare)"
    tests = [f"Bartlett p = {p_text(spread['bartlett_p'])}, Levene (median) p = "
             f"{p_text(spread['levene_p'])}" if spread["bartlett_p"] is not None
             else "no test (a shape's residuals show no spread)"]
    return "\n".join([
        f"- own residual SD: the shape's residuals of the pooled model (shapes x seeds, "
        f"additive), on its share of the degrees of freedom ({spread['df_each']:.1f} of "
        f"{some['df']}); their mean square is the pooled residual SD's, {some['sigma']:.4f}.",
        f"- equal spreads (what the pooled model assumes), tested over the {len(spread['own_sd'])} "
        f"shapes' residuals: {tests[0]} (approximate: the residuals of one model are not "
        f"independent). A small p: the shapes spread unequally, and the pooled SE is then too "
        f"wide for some shapes and too narrow for others.",
        f"- paired: the shape's own seed-paired differences from {baseline}, Student's t on "
        f"{some['paired']['df']} degrees of freedom, no spread borrowed from other shapes; Holm "
        f"over the same {len(rows) - 1} shapes. Holm's step: the level the test meets at its "
        f"rank (5% / 9 for the smallest p of 9, ...; once one test fails, the later ones fail "
        f"too)."])

