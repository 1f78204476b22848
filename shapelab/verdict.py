"""
Is a shape better than the GPT, and how small a difference could these runs have seen? The rate
chosen for each shape, every shape's difference from the baseline from one model of all the runs,
its interval, the smallest difference the runs could detect (compare.py calls these on its
finished runs; shapelab/report.py writes the tables that show them).

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

The pooled sigma assumes every shape's runs spread alike; they need not (a shape far from the GPT's
form, at a high rate, spreads more), and then the pooled SE, and every "detectable" figure, depends
on which shapes are in the model. So beside it each shape gets the test that assumes nothing of the
others: its own seed-paired differences, d_s = loss[shape, s] - loss[GPT, s], t = mean / (sd /
sqrt(n)) on n - 1 degrees of freedom, under the same Holm family (`paired_differences`). A verdict
says "better" or "worse" only where both tests reject; where one alone does, it says which
assumption decides it. Each shape's own residual SD and a test of equal spreads (`spread_check`)
stand beside them.
"""

import math
import statistics

import numpy as np
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


def additive_residuals(complete, seeds):
    """({name: [residual per seed]}, the residual degrees of freedom) of the additive shapes x
    seeds model fitted to {name: {seed: loss}} (module docstring)."""
    grand = statistics.fmean(complete[m][s] for m in complete for s in seeds)
    shape_mean = {m: statistics.fmean(complete[m][s] for s in seeds) for m in complete}
    seed_mean = {s: statistics.fmean(complete[m][s] for m in complete) for s in seeds}
    residuals = {m: [complete[m][s] - shape_mean[m] - seed_mean[s] + grand for s in seeds]
                 for m in complete}
    return residuals, (len(complete) - 1) * (len(seeds) - 1)


def pooled_differences(losses, baseline):
    """{name: diff} from {name: {seed: loss}} at the verdict seeds: each shape's difference from
    the baseline under the additive shapes x seeds model (module docstring), with its interval,
    the detectable differences and Holm's decision (with the level of its step), over the seeds
    that every shape with a verdict seed has (a comparison under way: those finished everywhere).
    A shape without any yet, or that diverged at one, gets {"verdict": "no verdict (...)"} only.
    Its verdict is the pooled model's alone: shape_rows words it with the paired test beside."""
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
    shape_mean = {m: statistics.fmean(complete[m][s] for s in seeds) for m in complete}
    residuals, df = additive_residuals(complete, seeds)
    sigma2 = sum(e ** 2 for m in complete for e in residuals[m]) / df
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
    rejected, levels = holm({name: out[name]["p"] for name in tests}), holm_levels(
        {name: out[name]["p"] for name in tests})
    for name in tests:
        out[name].update(holm=rejected[name], holm_level=levels[name])
        out[name]["verdict"] = verdict(out[name])
    return out


def paired_t(diffs):
    """The one-sample t of seed-paired differences: mean, sd, SE, df, p, 95% interval, and the
    difference found with 80% power by one test (n - 1 degrees of freedom)."""
    n = len(diffs)
    mean, sd = statistics.fmean(diffs), statistics.stdev(diffs)
    se, df = sd / math.sqrt(n), n - 1
    t_ci, t_power = float(stats.t.ppf(1 - ALPHA / 2, df)), float(stats.t.ppf(POWER, df))
    p = float(2 * stats.t.sf(abs(mean) / se, df)) if se > 0 else (0.0 if mean else 1.0)
    return dict(n=n, df=df, mean=mean, sd=sd, se=se, p=p, lo=mean - t_ci * se,
                hi=mean + t_ci * se, detectable=(t_ci + t_power) * se)


def paired_differences(losses, baseline, seeds):
    """{name: paired} of each shape of {name: {seed: loss}} but the baseline: the t test of its own
    seed-paired differences from the baseline over `seeds` (no pooled spread), Holm's decision
    over the same family as the pooled model's, and the level of its step."""
    tests = [m for m in losses if m != baseline]
    out = {m: paired_t([losses[m][s] - losses[baseline][s] for s in seeds]) for m in tests}
    p_values = {m: out[m]["p"] for m in tests}
    rejected, levels = holm(p_values), holm_levels(p_values)
    for m in tests:
        out[m].update(holm=rejected[m], holm_level=levels[m])
    return out


def spread_check(losses, seeds):
    """Each shape's own residual SD under the additive model (its share of the residual degrees
    of freedom, (n - 1)(k - 1) / k, so that their mean square is the pooled sigma^2) and two tests
    that the spreads are equal: Bartlett's and Levene's (median-centred) over the shapes'
    residuals (approximate: the residuals of one model are not independent). losses: {name:
    {seed: loss}} of the shapes of the pooled model; seeds: the verdict's."""
    residuals, df = additive_residuals(losses, seeds)
    share = df / len(losses)
    own = {m: math.sqrt(sum(e ** 2 for e in r) / share) for m, r in residuals.items()}
    groups = list(residuals.values())
    tests = dict(bartlett_p=None, levene_p=None)
    if all(statistics.pvariance(r) > 0 for r in groups):  # (a flat group: no test)
        with np.errstate(divide="ignore", invalid="ignore"):  # (Levene's on 2 seeds: 0 / 0)
            found = (stats.bartlett(*groups).pvalue, stats.levene(*groups, center="median").pvalue)
        tests = {k: float(p) if math.isfinite(p) else None for k, p in zip(tests, found)}
    return dict(own_sd=own, df_each=share, **tests)


def holm(p_values, alpha=ALPHA):
    """{name: rejected} by Holm's step-down rule over {name: p}: the i-th smallest p (from 0) is
    tested at alpha / (m - i), and once one is not rejected, none after it is."""
    rejected, still = {}, True
    for i, name in enumerate(sorted(p_values, key=p_values.get)):
        still = still and p_values[name] <= alpha / (len(p_values) - i)
        rejected[name] = still
    return rejected


def holm_levels(p_values, alpha=ALPHA):
    """{name: the level of its step}: alpha / (m - i) for the i-th smallest p (from 0)."""
    return {name: alpha / (len(p_values) - i)
            for i, name in enumerate(sorted(p_values, key=p_values.get))}


def verdict(diff):
    """The words a reader cannot misread: 'better by m [lo, hi]' / 'worse by ...' where Holm
    rejects 'no difference' under the pooled spread and under the shape's own (diff["paired"],
    where given), 'no difference larger than X detected at this scale' where neither does, and
    where one alone does, which assumption the verdict hangs on."""
    if diff["se"] == 0:
        return "no verdict (the runs show no spread: an interval cannot be computed)"
    word = "better" if diff["mean"] < 0 else "worse"
    paired = diff.get("paired")
    if paired is not None and paired["holm"] != diff["holm"]:
        alone, other = (("the pooled spread", paired) if diff["holm"] else
                        ("its own spread (paired by seed)", diff))
        tested = "its own spread" if diff["holm"] else "the pooled spread"
        return (f"{word} under {alone} only ({tested}: p = {other['p']:.4f} against Holm's "
                f"{other['holm_level']:.4f})")
    if diff["holm"]:
        return (f"{word} by {abs(diff['mean']):.4f} "
                f"[{abs(diff['hi' if diff['mean'] < 0 else 'lo']):.4f}, "
                f"{abs(diff['lo' if diff['mean'] < 0 else 'hi']):.4f}]")
    return f"no difference larger than {diff['detectable_family']:.4f} detected at this scale"


def short_verdict(row):
    """A row's verdict in a few words, for a table of verdicts: 'better by 0.017 [0.008, 0.027]'
    (', narrow' where the difference is below what one test detects: its size is likely
    overstated), 'no difference > 0.019', 'better under the pooled spread only', 'baseline'."""
    d = row.get("diff")
    if d is None:
        return "baseline"
    if "lo" not in d or d["se"] == 0:
        return row["verdict"]
    paired = d.get("paired")
    if paired is not None and paired["holm"] != d["holm"]:
        word = "better" if d["mean"] < 0 else "worse"
        return f"{word} under {'the pooled' if d['holm'] else 'its own'} spread only"
    if not d["holm"]:
        return f"no difference > {d['detectable_family']:.3f}"
    low, high = sorted((abs(d["lo"]), abs(d["hi"])))
    narrow = ", narrow" if abs(d["mean"]) < d["detectable"] else ""
    return (f"{'better' if d['mean'] < 0 else 'worse'} by {abs(d['mean']):.3f} "
            f"[{low:.3f}, {high:.3f}]{narrow}")


def chosen_row(losses, name, rates, seeds):
    """One shape's phase 1 {rate: loss} at the selection seed, its chosen lr and edge, and its
    losses {seed: loss} at that rate over the verdict seeds that finished (shape_rows' start)."""
    phase1 = {lr: losses[(name, lr, seeds[0])] for lr in rates if (name, lr, seeds[0]) in losses}
    lr, edge = choose_rate(phase1)
    verdict_seeds = seeds[1:] or seeds  # (one seed: its loss is shown, with no verdict)
    at_lr = {} if lr is None else {s: losses[(name, lr, s)] for s in verdict_seeds
                                   if (name, lr, s) in losses}
    return dict(name=name, lr=lr, edge=edge, phase1=phase1, losses=at_lr)


def seeds_in_verdict(rows):
    """The seeds the verdict's means are over: those of every shape with a chosen rate."""
    return common_seeds({n: row["losses"] for n, row in rows.items() if row["lr"] is not None})


def shape_rows(losses, names, rates, seeds, baseline):
    """{name: row} from {(name, rate, seed): final val loss or None}: phase1 {rate: loss} at the
    selection seed (seeds[0]), the chosen lr and its edge, losses {seed: loss} at that rate over
    the verdict seeds (seeds[1:]; a comparison of one seed: that one) that finished, their mean and
    std over the seeds of the verdict (common_seeds: a comparison under way leaves out a shape's
    seeds that others have not reached, `beyond`), and beside the baseline's: the pooled
    difference (pooled_differences) with the paired test beside it (paired_differences), each
    shape's own residual SD, and the verdict."""
    # (a shape's phase 1: the rates it was tried at, not every rate)
    rows = {name: chosen_row(losses, name, rates, seeds) for name in names}
    chosen = {n: r["losses"] for n, r in rows.items() if r["lr"] is not None}
    common = common_seeds(chosen)
    for row in rows.values():
        good = [v for s, v in row["losses"].items() if s in common and finite(v)]
        row.update(mean=statistics.fmean(good) if good else None,
                   std=statistics.stdev(good) if len(good) > 1 else None,
                   beyond=sorted(set(row["losses"]) - set(common)))
    diffs = pooled_differences(chosen, baseline)
    tested = {n: {s: chosen[n][s] for s in common} for n, d in diffs.items() if "lo" in d}
    if tested:  # (the pooled model was fitted: every shape in it has every common seed)
        model = {baseline: {s: chosen[baseline][s] for s in common}, **tested}
        paired = paired_differences(model, baseline, common)
        spread = spread_check(model, common)
        rows[baseline]["own_sd"] = spread["own_sd"][baseline]
        for name in tested:
            diffs[name].update(paired=paired[name], own_sd=spread["own_sd"][name])
            diffs[name]["verdict"] = verdict(diffs[name])
    for name, row in rows.items():
        if name != baseline:
            none = "diverged at every rate" if row["phase1"] else "no run finished yet"
            row["diff"] = diffs.get(name, dict(verdict=f"no verdict ({none})"))
            row["verdict"] = row["diff"]["verdict"]
    return rows
