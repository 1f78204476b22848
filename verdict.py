"""
Is a shape better than the GPT? The rate chosen for each shape, the seed-paired difference from the
baseline, its verdict, and the tables that show them (compare.py calls these on its finished runs).

Phase 1 trains every shape at every learning rate of the list with the first seed; each shape's
rate is the one with the lowest final validation loss (`choose_rate`). A choice at either end of
the list is flagged: a better rate may lie beyond it, and `extended_rates` gives the list that
looks there - or, with --extend_rates=N, `next_rate` looks there for that shape alone, one rate at
a time, up to N rates past the list's ends. Phase 2 trains the other seeds at each shape's
chosen rate. The same seed is the same data order for every shape, so the difference is paired by
seed:

    diff_s = loss(shape, seed s, its rate) - loss(GPT, seed s, the GPT's rate)

and most of what a seed changes (which batches came when) cancels in it. The verdict, over the
n seeds: "better by m +- se" (or "worse by") when the paired t-test rejects "no difference" at
5%, two-sided - |mean diff| > t(0.975, n - 1) x SE, SE = std(diff) / sqrt(n), which is 4.30 SE
with 3 seeds, 2.78 with 5 - and there are at least 3 seeds; "within noise" otherwise; fewer than
3 seeds: no verdict. Each shape is tested against the GPT on its own (no correction for the nine
tests: if no shape differed from the GPT, about one table in three would still show a verdict).

The first seed's loss at the chosen rate is the lowest over the rates (that is how it was chosen),
so it is a little optimistic; the mean includes it all the same (three seeds at the chosen rate
need it, at 3 rates + 2 seeds = 5 runs per shape), and the bias is the same kind for every shape,
the GPT included. docs/compare.md says more.
"""

import math
import statistics

MIN_SEEDS = 3  # a verdict needs at least this many seeds at the chosen rate
# t(0.975, df): Student's t, two-sided 5%; a df between two entries takes the smaller (stricter)
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def rate_label(lr):
    """A learning rate as one writes it: 0.002 -> '2e-3', 0.00015 -> '1.5e-4'."""
    mantissa, exponent = f"{lr:.6e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def finite(loss):
    return loss is not None and math.isfinite(loss)


def choose_rate(losses):
    """(rate, edge) from {rate: final val loss, None for a diverged run}: the rate of the lowest
    loss, and where it lies in the list: 'lowest' or 'highest' (an end: a better rate may lie
    beyond it), '' (inside), 'only' (a list of one: nothing was chosen). (None, '') if every rate
    diverged."""
    rates = sorted(losses)
    good = [r for r in rates if finite(losses[r])]
    if not good:
        return None, ""
    best = min(good, key=lambda r: losses[r])
    if len(rates) == 1:
        return best, "only"
    return best, "lowest" if best == rates[0] else "highest" if best == rates[-1] else ""


def extended_rates(rates, edges):
    """The list that looks past every end a shape chose (`edges`: choose_rate's): one more rate at
    that end, a step of the list's own ratio there; a list of one gets half and double."""
    rates = sorted(rates)
    if len(rates) == 1:
        return [rates[0] / 2, rates[0], rates[0] * 2]
    lower = [float(f"{rates[0] ** 2 / rates[1]:.3g}")] if "lowest" in edges else []
    higher = [float(f"{rates[-1] ** 2 / rates[-2]:.3g}")] if "highest" in edges else []
    return lower + rates + higher


def next_rate(rates, losses, listed, extend):
    """The rate a shape tries next in phase 1, or None when its choice stands: past the end of
    `rates` it chose (choose_rate over `losses`, {rate: loss}), one more rate a step of the list's
    ratio there, while fewer than `extend` of its rates lie beyond the ends of the `listed` rates
    (the --learning_rates the comparison started from)."""
    _, edge = choose_rate(losses)
    beyond = sum(r < min(listed) or r > max(listed) for r in rates)
    if edge not in ("lowest", "highest") or beyond >= extend:
        return None
    return extended_rates(rates, [edge])[0 if edge == "lowest" else -1]


def rates_flag(rates):
    return "--learning_rates=" + ",".join(rate_label(r) for r in rates)


def paired(losses, base):
    """(n, mean, se) of losses[s] - base[s] over the seeds where both are finite; se: the standard
    error std / sqrt(n) (None below 2 seeds; mean None without any)."""
    diffs = [losses[s] - base[s] for s in losses if s in base and finite(losses[s])
             and finite(base[s])]
    n = len(diffs)
    mean = statistics.fmean(diffs) if diffs else None
    return n, mean, statistics.stdev(diffs) / math.sqrt(n) if n > 1 else None


def verdict(n, mean, se):
    """'better by 0.0310 +- 0.0080', 'worse by ...', 'within noise', or none (the rule above)."""
    if n < MIN_SEEDS:
        return f"no verdict ({n} seed{'' if n == 1 else 's'}; {MIN_SEEDS} needed)"
    if abs(mean) > T_975[max(k for k in T_975 if k <= n - 1)] * se:
        return f"{'better' if mean < 0 else 'worse'} by {abs(mean):.4f} +- {se:.4f}"
    return "within noise"


def shape_rows(losses, names, rates, seeds, baseline):
    """{name: row} from {(name, rate, seed): final val loss or None}: phase1 {rate: loss} at the
    first seed, the chosen lr and its edge, losses {seed: loss} at that rate, their mean and std
    (over the finite ones), and beside the baseline's: the paired diff (n, mean, se) and the
    verdict."""
    rows = {}
    for name in names:  # (a shape's phase 1: the rates it was tried at, not every rate)
        phase1 = {lr: losses[(name, lr, seeds[0])] for lr in rates
                  if (name, lr, seeds[0]) in losses}
        lr, edge = choose_rate(phase1)
        at_lr = {} if lr is None else {s: losses[(name, lr, s)] for s in seeds}
        good = [v for v in at_lr.values() if finite(v)]
        rows[name] = dict(name=name, lr=lr, edge=edge, phase1=phase1, losses=at_lr,
                          mean=statistics.fmean(good) if good else None,
                          std=statistics.stdev(good) if len(good) > 1 else None)
    for name, row in rows.items():
        if name != baseline:
            n, mean, se = paired(row["losses"], rows[baseline]["losses"])
            row.update(diff=(n, mean, se), verdict=verdict(n, mean, se))
    return rows


# ----------------------------------------------------------------------------------------
# The tables (markdown)


def loss_text(loss):
    return f"{loss:.4f}" if finite(loss) else "diverged"


def verdict_table(rows, baseline):
    """One row per shape: its rate (and edge), seeds, val loss mean +- std, the paired
    difference from the baseline (mean +- SE) and the verdict; the rules below it."""
    lines = [f"| model | lr | seeds | val loss (mean +- std) | vs {baseline}, paired by seed "
             f"(mean +- SE) | verdict |", "|---|---|---:|---:|---:|---|"]
    for name, row in rows.items():
        lr = "-" if row["lr"] is None else rate_label(row["lr"])
        lr += f" ({row['edge']}: extend)" if row["edge"] in ("lowest", "highest") else ""
        bad = sum(not finite(v) for v in row["losses"].values())
        seeds = f"{len(row['losses']) - bad}" + (f" (+{bad} diverged)" if bad else "")
        loss = "diverged at every rate" if row["mean"] is None else f"{row['mean']:.4f}" + (
            f" +- {row['std']:.4f}" if row["std"] is not None else "")
        if name == baseline:
            diff, says = "(the baseline)", ""
        else:
            n, mean, se = row["diff"]
            diff = "-" if mean is None else f"{mean:+.4f}" + ("" if se is None else f" +- {se:.4f}")
            says = row["verdict"]
        lines.append(f"| {name} | {lr} | {seeds} | {loss} | {diff} | {says} |")
    return "\n".join(lines)


def verdict_footer(rows, rates, seeds, baseline, extend=0):
    """The rules of verdict_table, in words (markdown bullets), with the flag that extends the
    rates where a shape chose an end of its list. rates: the --learning_rates the comparison
    started from; extend: how many rates past their ends a shape may try (--extend_rates)."""
    edges = [row["edge"] for row in rows.values()]
    at_end = "lowest" in edges or "highest" in edges
    flag = f"`{rates_flag(extended_rates(rates, edges))}`"
    if len(rates) == 1:
        lr = f"one rate for every shape, not chosen per shape; compare rates with {flag}."
    elif extend:
        lr = (f"each shape's own: the lowest final val loss at seed {seeds[0]} (phase 1, below) "
              f"over the rates {', '.join(map(rate_label, rates))} and, while a shape's best lies "
              f"at an end of its rates, one more rate past that end (a step of the list's ratio), "
              f"up to {extend} beyond the list (-: not tried). ")
        lr += (f"**A choice still at an end** (lowest / highest) used up the {extend}: a better "
               f"rate may lie beyond it; allow more with `--extend_rates={extend + 1}` (finished "
               f"runs are kept)." if at_end else "Every choice lies inside the shape's rates.")
    else:
        lr = (f"each shape's own: the lowest final val loss of {len(rates)} rates at seed "
              f"{seeds[0]} (phase 1, below). ")
        lr += (f"**A choice at an end of the list** (lowest / highest) may have a better rate "
               f"beyond it: extend the list with {flag}, or let each shape look past the end it "
               f"chose with `--extend_rates=2` (finished runs are kept)."
               if at_end else "Every choice lies inside the list.")
    return "\n".join([
        f"- lr: {lr}",
        "- val loss: the mean over the seeds at that rate +- their standard deviation (n - 1). "
        "The first seed's loss is the lowest over the rates (that is how the rate was chosen): "
        "the mean is a little optimistic, for every shape alike.",
        f"- vs {baseline}: diff_s = loss(shape, s) - loss({baseline}, s), each at its own rate; "
        f"the same seed is the same data order. Mean +- its standard error (std / sqrt(n)).",
        f"- verdict: better / worse when the paired t-test over the seeds rejects 'no difference' "
        f"at 5%, two-sided (|mean| > t(0.975, n - 1) x SE: 4.30 SE with 3 seeds), with at least "
        f"{MIN_SEEDS} seeds; otherwise within noise. Each shape is tested against {baseline} on "
        f"its own: were none different, about one table in three would still show a verdict."])


def rates_table(rows, rates):
    """Phase 1: every shape's final val loss at every rate it tried (the first seed; -: not
    tried); the chosen in bold."""
    lines = ["| model | " + " | ".join(f"lr {rate_label(r)}" for r in rates) + " |",
             "|---|" + "---:|" * len(rates)]
    for name, row in rows.items():
        cells = ["-" if r not in row["phase1"] else f"**{loss_text(row['phase1'][r])}**"
                 if r == row["lr"] else loss_text(row["phase1"][r]) for r in rates]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
