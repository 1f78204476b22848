"""
What a shape's loss costs: its val loss at the GPT's wall-clock time and at the GPT's training
FLOPs, read off the trajectories of its verdict runs, each seed paired with the GPT's.

    equal time    at r x the GPT's tokens/s (the median over the seeds both ran on one machine,
                  or one bench.py run's ratio for shapes of another session) a shape has used
                  the GPT's time after r x N tokens
    equal FLOPs   at q x the GPT's forward FLOPs/token, after N / q tokens

The costlier run is read part-way (a faster shape is never extrapolated: the GPT is read at the
shape's budget), at a learning rate not yet decayed as far; between evaluations the loss is linear
in log tokens.
"""

import json
import math
import statistics
from collections import Counter

from shapelab.verdict import MIN_VERDICT_SEEDS, finite, interval, paired_t


def loss_at(curve, tokens):
    """A run's val loss after `tokens` tokens from its curve (linear in tokens from step 0); None
    past its end."""
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
    def timed_on(run):
        return run.get("machine") if run.get("tokens_per_s") else None
    paired = [s for s in seeds if timed_on(shape_runs[s]) and
              timed_on(shape_runs[s]) == timed_on(base_runs[s])]
    if not paired:
        return None, {}
    ratio = (statistics.median(shape_runs[s]["tokens_per_s"] for s in paired)
             / statistics.median(base_runs[s]["tokens_per_s"] for s in paired))
    return ratio, dict(Counter(machine_label(shape_runs[s]["machine"]) for s in paired))


SPEED_BENCH = "speed_bench.json"  # bench.py's JSON in a records folder
BENCH_SOURCE = "bench.py, one run"  # a speed's label in place of machines


def from_bench(machine):
    return machine.startswith(BENCH_SOURCE)


def bench_speeds(path, names):
    """({name: tokens/s}, machine) of bench.py's JSON: its eager rows of the first dtype."""
    if not path.exists():
        return {}, None
    measured = json.loads(path.read_text())
    rows = [r for r in measured["rows"] if r["mode"] == "eager" and not r["oom"]]
    rows = [r for r in rows if r["dtype"] == rows[0]["dtype"]] if rows else []
    return ({r["model"]: r["tokens_per_s"] for r in rows if r["model"] in names},
            measured.get("machine"))


def equal_budget(shape_runs, base_runs, seeds, scale, tokens):
    """The seed-paired reading where the shape has spent the baseline's budget (after scale x
    tokens), or past its end the baseline the shape's (after tokens / scale)."""
    at_shape, at_base = (scale * tokens, tokens) if scale < 1 else (tokens, tokens / scale)
    shape = [loss_at(shape_runs[s]["curve"], at_shape) for s in seeds]
    base = [loss_at(base_runs[s]["curve"], at_base) for s in seeds]
    if any(v is None for v in shape + base):
        return None
    return dict(shape=statistics.fmean(shape) if scale <= 1 else None,
                diff=paired_t([a - b for a, b in zip(shape, base)]),
                read="shape" if scale < 1 else "baseline" if scale > 1 else "")


def verdict_runs(results, rates, seeds):
    """{name: {seed: result}} of the shapes that finished every seed at their rate."""
    return {name: {s: results[(name, lr, s)] for s in seeds} for name, lr in rates.items()
            if all((name, lr, s) in results and finite(results[(name, lr, s)]["val_loss"])
                   for s in seeds)}


def cost_rows(runs, flops, seeds, baseline, tokens, bench=({}, None)):
    """{name: speed ratio, machines, FLOPs ratio and the readings at equal time and FLOPs} of
    {name: {seed: result}}; bench (bench_speeds') sets the speed of the shapes it names."""
    if len(seeds) < MIN_VERDICT_SEEDS or baseline not in runs:
        return {}
    base = runs[baseline]
    measured, machine = bench
    out = {}
    for name, shape in runs.items():
        speed, machines = speed_ratio(shape, base, seeds)
        if name != baseline and name in measured and baseline in measured:
            speed = measured[name] / measured[baseline]
            machines = {f"{BENCH_SOURCE} on {machine_label(machine or 'its machine')}": 1}
        ratio = flops[name] / flops[baseline]
        out[name] = dict(speed=speed, machines=machines, flops=ratio,
                         time=speed and equal_budget(shape, base, seeds, speed, tokens),
                         flops_reading=equal_budget(shape, base, seeds, 1 / ratio, tokens))
    return out


def reading_cells(reading, baseline, cheaper):
    if reading is None:
        return ["-", "-"]
    d = reading["diff"]
    diff = interval(d)
    if reading["read"] == "baseline":
        return [f"- ({cheaper}: not extrapolated)", f"{diff} ({baseline} read part-way)"]
    return ["-" if reading["shape"] is None else f"{reading['shape']:.4f}", diff]


def cost_table(cost, baseline, final_loss):
    lines = [f"| model | tokens/s vs {baseline} (seeds on a machine) | loss at {baseline}'s time | "
             f"vs {baseline} at equal time [95% interval] | FLOPs/token vs {baseline} | loss at "
             f"{baseline}'s FLOPs | vs {baseline} at equal FLOPs [95% interval] |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, row in cost.items():
        machines = ", ".join(m if from_bench(m) else f"{n} on {m}"
                             for m, n in row["machines"].items())
        speed = "-" if row["speed"] is None else f"{row['speed']:.2f}x ({machines})"
        if name == baseline:
            lines.append(f"| {name} | {speed} | {final_loss[name]:.4f} | (the baseline) | "
                         f"{row['flops']:.2f}x | {final_loss[name]:.4f} | (the baseline) |")
            continue
        time = reading_cells(row["time"], baseline, "faster") if row["speed"] is not None else [
            "- (no seed on the same machine)", "-"]
        flops = reading_cells(row["flops_reading"], baseline, "cheaper")
        lines.append(f"| {name} | {speed} | {' | '.join(time)} | {row['flops']:.2f}x | "
                     f"{' | '.join(flops)} |")
    return "\n".join(lines)


def cost_footer(baseline, seeds, interval, bench_file):
    bench = ([f"- '{BENCH_SOURCE}': the shape's tokens/s over {baseline}'s, both measured in "
              f"one run of bench.py on that machine ({bench_file}; the models alternate, so a "
              f"machine that gets busier slows them alike). For shapes trained in a later "
              f"session than {baseline}'s runs: a machine's name does not make two sessions' "
              f"loads alike."] if bench_file else [])
    return "\n".join([
        f"- time: a run's training time is its tokens / its tokens/s (the run's median speed; "
        f"evaluations left out). tokens/s vs {baseline}: the shape's median over the verdict seeds "
        f"that it and {baseline} ran on the same machine, over {baseline}'s median at those seeds "
        f"(a measurement of a machine shared with other work; the seeds counted by machine). A "
        f"shape at r x {baseline}'s speed has used {baseline}'s whole training time after r x "
        f"the tokens: read there.",
        f"- FLOPs: tokens x forward FLOPs/token x 3 (the shapes' table). A shape of q x "
        f"{baseline}'s FLOPs/token has used {baseline}'s whole budget after 1 / q of the tokens: "
        f"read there.",
        f"- a faster or cheaper shape is never read past its end: there {baseline} is read "
        f"part-way, at the shape's whole budget ('{baseline} read part-way'). A run read "
        f"part-way has not decayed its learning rate as a run of that length would: the reading "
        f"disadvantages it by an amount these records do not measure.",
        f"- the loss between two evaluations (every {interval} steps): linear in log tokens. vs "
        f"{baseline}: the mean over the verdict seeds {seeds} of the seed-paired difference at "
        f"the equal budget, with its 95% t interval."] + bench)
