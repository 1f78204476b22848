"""
Is a shape better than the GPT, and how small a difference could these runs have seen? The rate
chosen for each shape, every shape's difference from the baseline from one model of all the runs,
its interval, the smallest difference the runs could detect, and the tables that show them
(compare.py calls these on its finished runs).

Selection. Phase 1 trains every shape at every learning rate of the list with the first seed,
the *selection seed*; each shape's rate is the one with the lowest final validation loss
(`choose_rate`). A choice at either end of the list is flagged: a better rate may lie beyond it,
and `extended_rates` gives the list that looks there - or, with --extend_rates=N, `next_rate`
looks there for that shape alone, one rate at a time, up to N rates past the list's ends. Where
the grid is coarse around an inside choice, --refine_gain=G adds one step of x sqrt(2) on each
side of it (`refine_rates`): when the parabola through the chosen rate's loss and its two
neighbours' (against log rate) dips below the chosen loss by more than G. Both rules are fixed
before the runs they add are seen.

Verdict. Phase 2 trains the other seeds, the *verdict seeds*, at each shape's chosen rate. The
selection seed's loss at the chosen rate is the lowest over the rates - that is how it was chosen -
so it is left out of the verdict: every number below is over the verdict seeds alone. The same
seed is the same data order for every shape, so the runs form a complete block design, shapes x
seeds, analysed with the additive model

    loss[shape, seed] = mu + shape effect + seed effect + error,   error ~ N(0, sigma^2)

(the residual mean square pools sigma^2 over every shape: (k - 1)(n - 1) degrees of freedom for k
shapes and n seeds, where one shape's own paired differences have n - 1). With every shape at every
seed a random seed effect (a mixed model) gives the same estimates and standard errors, so the
fixed-effects form is the one written here. A shape's difference from the baseline is

    d = mean over seeds of (loss[shape, s] - loss[GPT, s]),   SE = sqrt(2 sigma^2 / n)

with its 95% interval d +- t(0.975, df) SE, and a verdict over the k - 1 shapes tested against one
baseline with Holm's step-down correction (the family's chance of any false "better"/"worse" stays
at 5%): "better by m [lo, hi]" or "worse by m [lo, hi]" where Holm rejects "no difference", else
"no difference larger than X detected at this scale", X the difference these runs detect with 80%
power at the family's strictest level, (t(1 - 0.05 / (2 (k - 1)), df) + t(0.80, df)) SE.
A shape that diverged at a verdict seed, or lacks one, takes no part in the model (its row says
why). docs/compare.md says more.
"""

import math
import statistics

from scipy import stats

ALPHA, POWER = 0.05, 0.80  # the verdict's level (for the family of tests) and the power it sizes
MIN_VERDICT_SEEDS = 2  # seeds besides the selection seed that a verdict needs


def rate_label(lr):
    """A learning rate as one writes it: 0.002 -> '2e-3', 0.00015 -> '1.5e-4'."""
    mantissa, exponent = f"{lr:.6e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def finite(loss):
    return loss is not None and math.isfinite(loss)


# ----------------------------------------------------------------------------------------
# Selection: the rate of each shape, on the selection seed


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


def round_rate(lr):
    """A rate as a list holds it: three significant digits (8e-3 x 2 = 1.6e-2, 1e-3 x sqrt 2 =
    1.41e-3)."""
    return float(f"{lr:.3g}")


def extended_rates(rates, edges):
    """The list that looks past every end a shape chose (`edges`: choose_rate's): one more rate at
    that end, a step of the list's own ratio there (at least x1.5, so that rounding can never give
    back a rate of the list); a list of one gets half and double."""
    rates = sorted(rates)
    if len(rates) == 1:
        return [rates[0] / 2, rates[0], rates[0] * 2]
    low, high = max(rates[1] / rates[0], 1.5), max(rates[-1] / rates[-2], 1.5)
    lower = [round_rate(rates[0] / low)] if "lowest" in edges else []
    higher = [round_rate(rates[-1] * high)] if "highest" in edges else []
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


def parabola_gain(rates, losses, best):
    """How far below losses[best] the parabola through best and its two neighbours in `rates`
    (against log rate) dips: 0 where it does not, or where best lacks a neighbour on a side."""
    i = rates.index(best)
    if i == 0 or i == len(rates) - 1 or not all(finite(losses[r]) for r in rates[i - 1:i + 2]):
        return 0.0
    (x0, x1, x2), (y0, y1, y2) = [math.log(r) for r in rates[i - 1:i + 2]], [
        losses[r] for r in rates[i - 1:i + 2]]
    # y = a x^2 + b x + c through the three points (Newton's divided differences)
    d01, d12 = (y1 - y0) / (x1 - x0), (y2 - y1) / (x2 - x1)
    a = (d12 - d01) / (x2 - x0)
    if a <= 0:
        return 0.0
    b = d01 - a * (x0 + x1)
    x_min = min(max(-b / (2 * a), x0), x2)
    y_min = y1 + d01 * (x_min - x1) + a * (x_min - x0) * (x_min - x1)
    return max(0.0, y1 - y_min)


def refine_rates(grid, losses, gain):
    """The rates one step of x sqrt(2) on each side of the inside choice of the `grid` (the rates
    of the list and those past its ends, never a refinement: a shape is refined once), where the
    parabola there dips by more than `gain` below the chosen loss; [] otherwise (gain 0: never).
    losses: {rate: loss} of at least the grid's rates."""
    if gain <= 0:
        return []
    grid = sorted(grid)
    best, edge = choose_rate({r: losses[r] for r in grid})
    if best is None or edge or parabola_gain(grid, losses, best) <= gain:
        return []
    return [round_rate(best / 2 ** 0.5), round_rate(best * 2 ** 0.5)]


def rates_flag(rates):
    return "--learning_rates=" + ",".join(rate_label(r) for r in rates)


# ----------------------------------------------------------------------------------------
# The verdict: one model of all the shapes' runs at the verdict seeds


def common_seeds(losses):
    """The verdict seeds of {name: {seed: loss}}: those every shape with a verdict seed has
    finished (a comparison under way: a shape without any yet is not trained)."""
    started = [set(v) for v in losses.values() if v]
    return sorted(set.intersection(*started)) if started else []


def pooled_differences(losses, baseline):
    """{name: diff} from {name: {seed: loss}} at the verdict seeds: each shape's difference from
    the baseline under the additive shapes x seeds model (module docstring), with its interval,
    the detectable differences, Holm's decision and the verdict, over the seeds that every shape
    with a verdict seed has (a comparison under way: those finished everywhere). A shape without
    any yet, or that diverged at one, gets {"verdict": "no verdict (...)"} only."""
    seeds = common_seeds(losses)
    complete = {n: v for n, v in losses.items() if v and all(finite(v[s]) for s in seeds)}
    out = {}
    for name, v in losses.items():
        if not v:
            out[name] = dict(verdict="no verdict (no verdict seed finished yet)")
        elif name not in complete:
            bad = [s for s in seeds if not finite(v[s])]
            out[name] = dict(verdict=f"no verdict (diverged at seed {bad[0]})")
    k, n = len(complete), len(seeds)
    if baseline not in complete or n < MIN_VERDICT_SEEDS or k < 2:
        why = (f"{n} verdict seed{'' if n == 1 else 's'}; {MIN_VERDICT_SEEDS} needed"
               if n < MIN_VERDICT_SEEDS else f"{baseline} has no verdict seeds")
        base = complete.get(baseline)
        for name, v in complete.items():
            if name != baseline:
                out[name] = dict(verdict=f"no verdict ({why})")
                if base and seeds:  # the raw difference, with no interval to go with it
                    out[name]["mean"] = statistics.fmean(v[s] - base[s] for s in seeds)
        return out
    grand = statistics.fmean(complete[m][s] for m in complete for s in seeds)
    shape_mean = {m: statistics.fmean(complete[m][s] for s in seeds) for m in complete}
    seed_mean = {s: statistics.fmean(complete[m][s] for m in complete) for s in seeds}
    df = (k - 1) * (n - 1)
    sigma2 = sum((complete[m][s] - shape_mean[m] - seed_mean[s] + grand) ** 2
                 for m in complete for s in seeds) / df
    se = math.sqrt(2 * sigma2 / n)
    tests = [m for m in complete if m != baseline]
    t_ci, t_power = float(stats.t.ppf(1 - ALPHA / 2, df)), float(stats.t.ppf(POWER, df))
    for name in tests:
        d = shape_mean[name] - shape_mean[baseline]
        p = float(2 * stats.t.sf(abs(d) / se, df)) if se > 0 else (0.0 if d else 1.0)
        out[name] = dict(n=n, df=df, mean=d, se=se, sigma=math.sqrt(sigma2), p=p,
                         lo=d - t_ci * se, hi=d + t_ci * se,
                         detectable=(t_ci + t_power) * se,
                         detectable_family=(float(stats.t.ppf(1 - ALPHA / (2 * len(tests)), df))
                                            + t_power) * se)
    rejected = holm({name: out[name]["p"] for name in tests})
    for name in tests:
        out[name]["holm"] = rejected[name]
        out[name]["verdict"] = verdict(out[name])
    return out


def holm(p_values, alpha=ALPHA):
    """{name: rejected} by Holm's step-down rule over {name: p}: the i-th smallest p (from 0) is
    tested at alpha / (m - i), and once one is not rejected, none after it is."""
    rejected, still = {}, True
    for i, name in enumerate(sorted(p_values, key=p_values.get)):
        still = still and p_values[name] <= alpha / (len(p_values) - i)
        rejected[name] = still
    return rejected


def verdict(diff):
    """The words a reader cannot misread: 'better by m [lo, hi]' / 'worse by ...' where Holm
    rejects 'no difference', else 'no difference larger than X detected at this scale'."""
    if diff["se"] == 0:
        return "no verdict (the runs show no spread: an interval cannot be computed)"
    if diff["holm"]:
        return (f"{'better' if diff['mean'] < 0 else 'worse'} by {abs(diff['mean']):.4f} "
                f"[{abs(diff['hi' if diff['mean'] < 0 else 'lo']):.4f}, "
                f"{abs(diff['lo' if diff['mean'] < 0 else 'hi']):.4f}]")
    return f"no difference larger than {diff['detectable_family']:.4f} detected at this scale"


def shape_rows(losses, names, rates, seeds, baseline):
    """{name: row} from {(name, rate, seed): final val loss or None}: phase1 {rate: loss} at the
    selection seed (seeds[0]), the chosen lr and its edge, losses {seed: loss} at that rate over
    the verdict seeds (seeds[1:]; a comparison of one seed: that one) that finished, their mean and
    std over the seeds of the verdict (common_seeds: a comparison under way leaves out a shape's
    seeds that others have not reached, `beyond`), and beside the baseline's: the pooled
    difference (pooled_differences) and the verdict."""
    rows = {}
    for name in names:  # (a shape's phase 1: the rates it was tried at, not every rate)
        phase1 = {lr: losses[(name, lr, seeds[0])] for lr in rates
                  if (name, lr, seeds[0]) in losses}
        lr, edge = choose_rate(phase1)
        verdict_seeds = seeds[1:] or seeds  # (one seed: its loss is shown, with no verdict)
        at_lr = {} if lr is None else {s: losses[(name, lr, s)] for s in verdict_seeds
                                       if (name, lr, s) in losses}
        rows[name] = dict(name=name, lr=lr, edge=edge, phase1=phase1, losses=at_lr)
    chosen = {n: r["losses"] for n, r in rows.items() if r["lr"] is not None}
    common = common_seeds(chosen)
    for row in rows.values():
        good = [v for s, v in row["losses"].items() if s in common and finite(v)]
        row.update(mean=statistics.fmean(good) if good else None,
                   std=statistics.stdev(good) if len(good) > 1 else None,
                   beyond=sorted(set(row["losses"]) - set(common)))
    diffs = pooled_differences(chosen, baseline)
    for name, row in rows.items():
        if name != baseline:
            none = "diverged at every rate" if row["phase1"] else "no run finished yet"
            row["diff"] = diffs.get(name, dict(verdict=f"no verdict ({none})"))
            row["verdict"] = row["diff"]["verdict"]
    return rows


# ----------------------------------------------------------------------------------------
# The tables (markdown)


def loss_text(loss):
    return f"{loss:.4f}" if finite(loss) else "diverged"


def verdict_table(rows, baseline):
    """One row per shape: its rate (and edge), verdict seeds, val loss mean +- std, the difference
    from the baseline with its 95% interval, the detectable differences and the verdict."""
    lines = [f"| model | lr | verdict seeds | val loss (mean +- std) | vs {baseline} [95% "
             f"interval] | detectable: one test / the family | verdict |",
             "|---|---|---:|---:|---:|---:|---|"]
    for name, row in rows.items():
        lr = "-" if row["lr"] is None else rate_label(row["lr"])
        lr += f" ({row['edge']}: extend)" if row["edge"] in ("lowest", "highest") else ""
        lr += " (so far)" if row.get("open") else ""
        bad = sum(not finite(v) for s, v in row["losses"].items() if s not in row["beyond"])
        seeds = f"{len(row['losses']) - len(row['beyond']) - bad}" + (
            f" (+{bad} diverged)" if bad else "") + (
            f" (+{len(row['beyond'])} not in the verdict yet)" if row["beyond"] else "")
        loss = "-" if row["mean"] is None else f"{row['mean']:.4f}" + (
            f" +- {row['std']:.4f}" if row["std"] is not None else "")
        if row["lr"] is None:
            loss = "diverged at every rate" if row["phase1"] else "no run finished yet"
        diff, detect, says = "(the baseline)", "", ""
        if name != baseline:
            d = row["diff"]
            diff = (f"{d['mean']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]" if "lo" in d
                    else f"{d['mean']:+.4f}" if "mean" in d else "-")
            detect = f"{d['detectable']:.4f} / {d['detectable_family']:.4f}" if "lo" in d else "-"
            says = row["verdict"]
        lines.append(f"| {name} | {lr} | {seeds} | {loss} | {diff} | {detect} | {says} |")
    return "\n".join(lines)


def verdict_footer(rows, rates, seeds, baseline, extend=0, refine=0.0):
    """The rules of verdict_table, in words (markdown bullets). rates: the --learning_rates the
    comparison started from; extend: how many rates past their ends a shape may try
    (--extend_rates); refine: --refine_gain."""
    edges = [row["edge"] for row in rows.values()]
    at_end = "lowest" in edges or "highest" in edges
    flag = f"`{rates_flag(extended_rates(rates, edges))}`"
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
        if at_end:
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
    return "\n".join([
        f"- lr: {lr}",
        f"- verdict seeds: {', '.join(map(str, seeds[1:]))} (the selection seed {seeds[0]} chose "
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
        f"larger than X' is not 'no effect': an effect smaller than X passes unseen."])


def rates_table(rows, rates):
    """Phase 1: every shape's final val loss at every rate it tried (the selection seed; -: not
    tried); the chosen in bold."""
    lines = ["| model | " + " | ".join(f"lr {rate_label(r)}" for r in rates) + " |",
             "|---|" + "---:|" * len(rates)]
    for name, row in rows.items():
        cells = ["-" if r not in row["phase1"] else f"**{loss_text(row['phase1'][r])}**"
                 if r == row["lr"] else loss_text(row["phase1"][r]) for r in rates]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
