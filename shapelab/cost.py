"""
What a shape's loss costs: its val loss at the GPT's wall-clock time and at the GPT's training
FLOPs, read off the trajectories of its verdict runs, each seed paired with the GPT's.

    equal time    at r x the GPT's tokens/s (the median over the seeds both ran on one machine,
                  or one bench.py run's ratio for shapes of another session) a shape has used
                  the GPT's time after r x N tokens
    equal FLOPs   at q x the GPT's forward FLOPs/token, after N / q tokens

The costlier run is read part-way (a faster shape is never extrapolated: the GPT is read at the
shape's budget); between evaluations the loss is linear in log tokens.
"""

import json
import math
import statistics
from collections import Counter

from shapelab.verdict import MIN_VERDICT_SEEDS, finite, interval, paired_t

SPEED_BENCH = "speed_bench.json"  # bench.py's JSON in a records folder
BENCH_SOURCE = "bench.py, one run"  # a speed's label in place of machines


def loss_at(curve, tokens):
    """A run's val loss after `tokens` tokens (linear in log tokens, from step 0 in tokens);
    None past its end."""
    points = [(c["tokens"], c["val_loss"]) for c in curve if finite(c.get("val_loss"))]
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t0 <= tokens <= t1 and t0 > 0:
            return v0 + (v1 - v0) * math.log(tokens / t0) / math.log(t1 / t0)
        if t0 <= tokens <= t1:
            return v0 + (v1 - v0) * (tokens - t0) / (t1 - t0)
    return None


def machine_label(machine):
    """'Intel(R) Xeon(R) Processor (AMX, AVX512-BF16)' -> 'Intel Xeon'."""
    return machine.split(" (")[0].replace("(R)", "").removesuffix(" Processor").strip()


def speed_ratio(shape_runs, base_runs, seeds):
    """(median tokens/s ratio, {machine: seeds}) over the seeds both ran on one machine."""
    paired = [s for s in seeds if shape_runs[s]["tokens_per_s"] and base_runs[s]["tokens_per_s"]
              and shape_runs[s]["machine"] == base_runs[s]["machine"]]
    if not paired:
        return None, {}
    ratio = (statistics.median(shape_runs[s]["tokens_per_s"] for s in paired)
             / statistics.median(base_runs[s]["tokens_per_s"] for s in paired))
    return ratio, Counter(machine_label(shape_runs[s]["machine"]) for s in paired)


def bench_speeds(path, names):
    """({name: tokens/s}, machine) of bench.py's JSON for `names`: its eager rows of the first
    dtype."""
    if not path.exists():
        return {}, None
    measured = json.loads(path.read_text())
    rows = [r for r in measured["rows"] if r["mode"] == "eager" and not r["oom"]]
    return ({r["model"]: r["tokens_per_s"] for r in rows
             if r["dtype"] == rows[0]["dtype"] and r["model"] in names},
            measured["machine"])


def equal_budget(shape_runs, base_runs, seeds, scale, tokens):
    """The seed-paired reading where the shape has spent the baseline's budget (after scale x
    tokens), or past its end the baseline the shape's (after tokens / scale)."""
    at_shape, at_base = (scale * tokens, tokens) if scale < 1 else (tokens, tokens / scale)
    shape = [loss_at(shape_runs[s]["curve"], at_shape) for s in seeds]
    base = [loss_at(base_runs[s]["curve"], at_base) for s in seeds]
    if None in shape + base:
        return None
    return dict(shape=statistics.fmean(shape) if scale <= 1 else None,
                diff=paired_t([a - b for a, b in zip(shape, base)]),
                read="shape" if scale < 1 else "baseline" if scale > 1 else "")


def verdict_runs(results, rates, seeds):
    """{name: {seed: result}} of the shapes that finished every seed at their rate."""
    return {name: {s: results[(name, lr, s)] for s in seeds} for name, lr in rates.items()
            if all(finite(results.get((name, lr, s), {}).get("val_loss")) for s in seeds)}


def cost_rows(runs, flops, seeds, baseline, tokens, bench=({}, None)):
    """{name: speed ratio, machines, FLOPs ratio and the readings at equal time and FLOPs} of
    {name: {seed: result}}; bench (bench_speeds') sets the speed of the shapes it names, besides
    the baseline."""
    if len(seeds) < MIN_VERDICT_SEEDS or baseline not in runs:
        return {}
    measured, machine = bench
    out = {}
    for name, shape in runs.items():
        speed, machines = speed_ratio(shape, runs[baseline], seeds)
        if name != baseline and name in measured and baseline in measured:
            speed = measured[name] / measured[baseline]
            machines = {f"{BENCH_SOURCE} on {machine_label(machine)}": 1}
        ratio = flops[name] / flops[baseline]
        out[name] = dict(speed=speed, machines=machines, flops=ratio,
                         time=speed and equal_budget(shape, runs[baseline], seeds, speed, tokens),
                         flops_reading=equal_budget(shape, runs[baseline], seeds, 1 / ratio,
                                                    tokens))
    return out


def reading_cell(reading, ratio=None, mark=""):
    """'+0.0164 [+0.0079, +0.0248] at 0.81x'; '*' where the baseline is read part-way."""
    if reading is None:
        return "-"
    return (interval(reading["diff"]) + "*" * (reading["read"] == "baseline")
            + (f" at {ratio:.2f}x{mark}" if ratio else ""))


def cost_table(cost, baseline, seeds, bench_file=None):
    """The cost as a markdown table and its notes; seeds: the verdict seeds as the report writes
    them."""
    lines = [f"| model | vs {baseline} at its time [95%], speed ratio | FLOPs/token | "
             f"vs {baseline} at its FLOPs [95%] |", "|---|---:|---:|---:|"]
    machines = {m for row in cost.values() for m in row["machines"] if BENCH_SOURCE not in m}
    for name, row in cost.items():
        bench = "b" * any(BENCH_SOURCE in m for m in row["machines"])
        if name != baseline:
            lines.append(f"| {name} | {reading_cell(row['time'], row['speed'], bench)} | "
                         f"{row['flops']:.2f}x | {reading_cell(row['flops_reading'])} |")
    bench = f"; b: one bench.py run, {bench_file}" if bench_file else ""
    return "\n".join(lines + [
        "",
        f"Seed-paired, verdict seeds {seeds}. Time: a point reading at the speed ratio named "
        f"(median tokens/s over {baseline}'s, seeds paired on one machine: "
        f"{', '.join(sorted(machines))}{bench}); a rerun moves both. *: {baseline} read "
        f"part-way, at the shape's budget."])
