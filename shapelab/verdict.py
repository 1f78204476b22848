"""
Each shape's learning rate, and its verdict against the GPT (compare.py; report.py words it).

Selection: phase 1 trains every shape at every rate with the selection seed (seeds[0]); a shape's
rate is the one of its lowest final val loss. A choice at an end of the list is flagged, and
--extend_rates=N tries one more rate past it, up to N past the list; --refine_gain=G adds a step
of x sqrt(2) on each side of an inside choice where the parabola through it and its neighbours
(against log rate) dips more than G below it.

Verdict: the verdict seeds (seeds[1:]) at each shape's rate form a complete shapes x seeds design,

    loss[shape, seed] = mu + shape effect + seed effect + error,   error ~ N(0, sigma^2)   (1)
    d = mean_s(loss[shape, s] - loss[GPT, s]),   SE = sqrt(2 sigma^2 / n)                  (2)

sigma^2 pooled on (k - 1)(n - 1) degrees of freedom; 95% interval d +- t(0.975) SE; Holm's
correction over the k - 1 shapes; where it does not reject, the difference detectable with 80%
power at the family's strictest level, (t(1 - 0.05 / (2 (k - 1))) + t(0.80)) SE. Beside it, each
shape's own seed-paired t test: a verdict word needs both to reject.
"""

import math
import statistics

import numpy as np
from scipy import stats

ALPHA, POWER = 0.05, 0.80
MIN_VERDICT_SEEDS = 2  # seeds besides the selection seed that a verdict needs


def rate_label(lr):
    """A rate as one writes it: 0.002 -> '2e-3', 0.00015 -> '1.5e-4'."""
    mantissa, exponent = f"{lr:.6e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def finite(loss):
    return loss is not None and math.isfinite(loss)


def choose_rate(losses):
    """(rate of the lowest loss, its place: 'lowest', 'highest', '' inside, 'only') from {rate:
    loss}; (None, '') if every rate diverged."""
    rates = sorted(losses)
    good = [r for r in rates if finite(losses[r])]
    if not good:
        return None, ""
    best = min(good, key=losses.get)
    if len(rates) == 1:
        return best, "only"
    return best, {rates[0]: "lowest", rates[-1]: "highest"}.get(best, "")


def round_rate(lr):
    return float(f"{lr:.3g}")


def next_rate(rates, losses, listed, extend):
    """One rate past the end of `rates` the shape chose, a step of the list's own ratio there (at
    least x1.5), while fewer than `extend` of its rates lie beyond the `listed` ones; None: the
    choice stands."""
    _, edge = choose_rate(losses)
    beyond = sum(r < min(listed) or r > max(listed) for r in rates)
    if edge not in ("lowest", "highest") or beyond >= extend:
        return None
    rates = sorted(rates)
    if edge == "lowest":
        return round_rate(rates[0] / max(rates[1] / rates[0], 1.5))
    return round_rate(rates[-1] * max(rates[-1] / rates[-2], 1.5))


def refine_rates(grid, losses, gain):
    """x sqrt(2) on each side of the grid's inside choice where the parabola through it and its
    neighbours (against log rate) dips more than `gain` below it; [] otherwise."""
    grid = sorted(grid)
    best, edge = choose_rate({r: losses[r] for r in grid})
    if gain <= 0 or best is None or edge:
        return []
    three = grid[grid.index(best) - 1:grid.index(best) + 2]
    if not all(finite(losses[r]) for r in three):
        return []
    a, b, c = np.polyfit(np.log(three), [losses[r] for r in three], 2)
    # the lowest of three points is the middle one: the parabola's vertex lies between them
    if a <= 0 or losses[best] - (c - b * b / (4 * a)) <= gain:
        return []
    return [round_rate(best / 2 ** 0.5), round_rate(best * 2 ** 0.5)]


def residuals(losses, seeds):
    """(residuals [shape, seed] of model (1), their degrees of freedom) for {name: {seed: loss}}."""
    x = np.array([[v[s] for s in seeds] for v in losses.values()])
    res = x - x.mean(1, keepdims=True) - x.mean(0, keepdims=True) + x.mean()
    return res, (len(losses) - 1) * (len(seeds) - 1)


def holm(p_values):
    """({name: rejected}, {name: the level of its step}) of Holm's step-down rule over {name: p}."""
    rejected, levels, still = {}, {}, True
    for i, name in enumerate(sorted(p_values, key=p_values.get)):
        levels[name] = ALPHA / (len(p_values) - i)
        still = still and p_values[name] <= levels[name]
        rejected[name] = still
    return rejected, levels


def with_holm(diffs):
    """`diffs` ({name: test}), each with Holm's decision over them all and the level of its step."""
    rejected, levels = holm({m: d["p"] for m, d in diffs.items()})
    for m, d in diffs.items():
        d.update(holm=rejected[m], holm_level=levels[m])
    return diffs


def t_test(mean, se, df):
    """The two-sided t test of a mean: p, 95% interval, and the difference one test detects."""
    t_ci, t_power = float(stats.t.ppf(1 - ALPHA / 2, df)), float(stats.t.ppf(POWER, df))
    p = 2 * stats.t.sf(abs(mean) / se, df) if se > 0 else float(mean == 0)
    return dict(p=float(p), lo=mean - t_ci * se, hi=mean + t_ci * se,
                detectable=(t_ci + t_power) * se)


def paired_t(diffs):
    """Student's t on seed-paired differences (n - 1 degrees of freedom)."""
    n, mean, sd = len(diffs), statistics.fmean(diffs), statistics.stdev(diffs)
    se = sd / math.sqrt(n)
    return dict(n=n, df=n - 1, mean=mean, sd=sd, se=se, **t_test(mean, se, n - 1))


def pooled_differences(losses, baseline):
    """{name: diff} of model (2) from complete {name: {seed: loss}}: the difference from the
    baseline, its interval, the detectable differences and Holm's decision."""
    seeds = sorted(losses[baseline])
    n = len(seeds)
    res, df = residuals(losses, seeds)
    sigma2 = float((res ** 2).sum()) / df
    se = math.sqrt(2 * sigma2 / n)
    tests = [m for m in losses if m != baseline]
    strict = stats.t.ppf(1 - ALPHA / (2 * len(tests)), df) + stats.t.ppf(POWER, df)
    means = {m: statistics.fmean(losses[m][s] - losses[baseline][s] for s in seeds) for m in tests}
    return with_holm({m: dict(n=n, df=df, mean=means[m], se=se, sigma=math.sqrt(sigma2),
                              **t_test(means[m], se, df), detectable_family=float(strict * se))
                      for m in tests})


def spread_check(losses, seeds):
    """Each shape's own residual SD under model (1), on its share of the degrees of freedom, and
    Bartlett's and Levene's tests of equal spreads (approximate: one model's residuals)."""
    res, df = residuals(losses, seeds)
    share = df / len(losses)
    with np.errstate(divide="ignore", invalid="ignore"):  # Levene's on 2 seeds: 0 / 0
        found = (stats.bartlett(*res).pvalue, stats.levene(*res, center="median").pvalue)
    return dict(own_sd={m: math.sqrt(float((r ** 2).sum()) / share) for m, r in zip(losses, res)},
                df_each=share, **{k: float(p) if math.isfinite(p) else None
                                  for k, p in zip(("bartlett_p", "levene_p"), found)})


def verdict(diff, digits=4):
    """'better by m [lo, hi]' / 'worse by ...' where Holm rejects under the pooled spread and the
    shape's own (', narrow' below what one test detects); where one alone does, which; else the
    difference these runs could detect."""
    word = "better" if diff["mean"] < 0 else "worse"
    paired, pooled = diff.get("paired"), diff["holm"]
    if paired is not None and paired["holm"] != pooled:
        return f"{word} under {'the pooled spread' if pooled else 'its own spread'} only"
    if not pooled:
        return f"no difference > {diff['detectable_family']:.{digits}f}"
    low, high = sorted((abs(diff["lo"]), abs(diff["hi"])))
    narrow = ", narrow" if abs(diff["mean"]) < diff["detectable"] else ""
    return f"{word} by {abs(diff['mean']):.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]{narrow}"


def short_verdict(row):
    """A row's verdict in a few words ('better by 0.017 [0.008, 0.027]', 'no difference > 0.019',
    'baseline')."""
    d = row.get("diff")
    if d is None:
        return "baseline"
    return verdict(d, digits=3) if "lo" in d else row["verdict"]


def chosen_row(losses, name, rates, seeds):
    """A shape's phase 1 {rate: loss}, its rate and edge, and {seed: loss} there."""
    phase1 = {lr: losses[(name, lr, seeds[0])] for lr in rates if (name, lr, seeds[0]) in losses}
    lr, edge = choose_rate(phase1)
    at_lr = {s: losses[(name, lr, s)] for s in seeds[1:] or seeds if (name, lr, s) in losses}
    return dict(name=name, lr=lr, edge=edge, phase1=phase1, losses=at_lr)


def add_mean(row, seeds):
    """The row with the mean and std of its finite losses at `seeds`."""
    good = [v for s, v in row["losses"].items() if s in seeds and finite(v)]
    row.update(mean=statistics.fmean(good) if good else None,
               std=statistics.stdev(good) if len(good) > 1 else None)


def interval(d):
    """'+0.0123 [+0.0045, +0.0201]': a difference and its 95% interval."""
    return f"{d['mean']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]"


def lr_cell(row):
    """A row's rate, flagged where it is an end of its rates."""
    lr = "-" if row["lr"] is None else rate_label(row["lr"])
    return lr + (f" ({row['edge']}: extend)" if row["edge"] in ("lowest", "highest") else "")


def seeds_in_verdict(rows):
    """The seeds every row with any verdict seed has finished."""
    started = [set(row["losses"]) for row in rows.values() if row["losses"]]
    return sorted(set.intersection(*started)) if started else []


def why_not(row, common):
    """Why a shape's row has no verdict."""
    bad = [s for s in common if not finite(row["losses"].get(s))]
    if row["lr"] is None:
        return "diverged at every rate" if row["phase1"] else "no run finished yet"
    if bad or not row["losses"]:
        return f"diverged at seed {bad[0]}" if bad else "no verdict seed finished yet"
    return f"{len(common)} verdict seed{'s' * (len(common) != 1)}; {MIN_VERDICT_SEEDS} needed"


def shape_rows(losses, names, rates, seeds, baseline):
    """{name: row} from {(name, rate, seed): final val loss or None}: chosen_row's, the mean and
    std over the verdict's seeds, the pooled difference with the paired test, and the verdict."""
    rows = {name: chosen_row(losses, name, rates, seeds) for name in names}
    common = seeds_in_verdict(rows)
    for row in rows.values():
        add_mean(row, common)
        row["beyond"] = sorted(set(row["losses"]) - set(common))
    complete = {n: {s: r["losses"][s] for s in common} for n, r in rows.items()
                if r["losses"] and all(finite(r["losses"].get(s)) for s in common)}
    tested = [n for n in complete if n != baseline]
    diffs = {}
    if baseline in complete and len(common) >= MIN_VERDICT_SEEDS and tested:
        diffs = pooled_differences(complete, baseline)
        base = complete[baseline]
        paired = with_holm({n: paired_t([complete[n][s] - base[s] for s in common])
                            for n in tested})
        own = spread_check(complete, common)["own_sd"]
        rows[baseline]["own_sd"] = own[baseline]
        for name in tested:
            diffs[name].update(verdict=None, paired=paired[name], own_sd=own[name])
            diffs[name]["verdict"] = verdict(diffs[name])
    for name, row in rows.items():
        if name != baseline:
            # one seed: no verdict, but its difference
            one = len(common) == 1 and name in complete and baseline in complete
            mean = {"mean": row["mean"] - rows[baseline]["mean"]} if one else {}
            row["diff"] = diffs.get(name) or dict(
                verdict=f"no verdict ({why_not(row, common)})", **mean)
            row["verdict"] = row["diff"]["verdict"]
    return rows
