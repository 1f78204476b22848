"""
What the hourglass's difference from the GPT is made of: each control (shapes.CONTROL_NAMES)
changes one of its changes, and reproduces a share of its difference,

    share = mean_s(control - GPT) / mean_s(hourglass - GPT)

with Fieller's 95% interval: every share R for which the seed-paired control - GPT - R (hourglass
- GPT) has mean 0 at 5% (Student's t, n - 1 degrees of freedom). A family of its own: never in the
verdict's model or Holm family.
"""

import math
import statistics

from scipy import stats

from shapelab.verdict import (ALPHA, MIN_VERDICT_SEEDS, add_mean, chosen_row, finite, interval,
                              lr_cell, paired_t, seeds_in_verdict)


# what each control changes of the hourglass: (in short, how)
CHANGED = {"GPT wide": ("the reallocation alone", "d and attention widened, a plain FFN"),
           "hourglass same-d": ("the FFN swap alone", "d and attention kept")}


def fieller_ratio(a, b):
    """(mean(a) / mean(b), lo, hi) with Fieller's interval; lo, hi None where it is unbounded."""
    n = len(a)
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    var_a, var_b = statistics.variance(a) / n, statistics.variance(b) / n
    cov = statistics.covariance(a, b) / n
    t2 = float(stats.t.ppf(1 - ALPHA / 2, n - 1)) ** 2
    # (mean_a - R mean_b)^2 <= t^2 (var_a - 2 R cov + R^2 var_b): a R^2 + b R + c <= 0
    qa, qc = mean_b ** 2 - t2 * var_b, mean_a ** 2 - t2 * var_a
    qb = -2 * (mean_a * mean_b - t2 * cov)
    if qa <= 0:
        return mean_a / mean_b, None, None
    root = math.sqrt(max(qb ** 2 - 4 * qa * qc, 0.0))
    return mean_a / mean_b, (-qb - root) / (2 * qa), (-qb + root) / (2 * qa)


def control_rows(losses, names, rates, seeds, rows, baseline, reference):
    """{name: row} of the controls, read against the verdict's rows over its seeds: once a
    control has them all, its paired differences from the baseline and the reference, and its
    share of the reference's difference."""
    used = seeds_in_verdict(rows)
    base, ref = rows[baseline]["losses"], rows.get(reference, {}).get("losses", {})
    out = {}
    for name in names:
        row = out[name] = chosen_row(losses, name, rates, seeds)
        row.update(seeds_used=used, so_far=len(set(used) & set(row["losses"])))
        add_mean(row, used)
        if len(used) >= MIN_VERDICT_SEEDS and all(
                finite(v.get(s)) for v in (row["losses"], base, ref) for s in used):
            vs_base = [row["losses"][s] - base[s] for s in used]
            row["reading"] = dict(
                vs_baseline=paired_t(vs_base),
                vs_reference=paired_t([row["losses"][s] - ref[s] for s in used]),
                share=dict(zip(("ratio", "lo", "hi"),
                               fieller_ratio(vs_base, [ref[s] - base[s] for s in used]))))
    return out


def share_text(share):
    if share["lo"] is None:
        return f"{share['ratio']:.0%} [unbounded]"
    return f"{share['ratio']:.0%} [{share['lo']:.0%}, {share['hi']:.0%}]"


def share_reading(share, reference):
    lo, hi = share["lo"], share["hi"]
    if lo is None:
        return (f"no share to read: the {reference}'s own difference is not clear of zero on "
                f"these seeds")
    if lo > 0 and hi < 1:
        return "part of it: more than none, less than all"
    if lo > 0:
        return "all of it, as far as these seeds can tell (the interval reaches 100%)"
    if hi < 1:
        return "none of it, as far as these seeds can tell (the interval reaches 0%)"
    return "the seeds cannot tell none of it from all of it (the interval holds 0% and 100%)"


def controls_reading(controls, reference):
    lines = [f"- **{name}**, {CHANGED[name][0]} ({CHANGED[name][1]}): {share_text(r['share'])} "
             f"of the {reference}'s difference - {share_reading(r['share'], reference)}."
             for name, row in controls.items() if (r := row.get("reading"))]
    if len(lines) > 1:
        lines.append("- The shares need not add up to 100%: the two changes can overlap or "
                     "interact, and each share has its own interval.")
    return "\n".join(lines)


def controls_table(controls, baseline, reference):
    lines = [f"| control | lr | verdict seeds | val loss (mean +- std) | vs {baseline} [95% "
             f"interval] | vs {reference} [95% interval] | share of the {reference}'s difference "
             f"[95% interval] |", "|---|---|---:|---:|---:|---:|---:|"]
    for name, row in controls.items():
        lr = lr_cell(row)
        r, n = row.get("reading"), len(row["seeds_used"])
        if r is None:
            chosen = row["lr"] is not None and not row.get("open")
            so_far = (f"{row['so_far']} of {n} verdict seeds so far" if chosen
                      else "phase 1 under way: no rate chosen yet")
            lines.append(f"| {name} | {lr} | {so_far} | - | - | - | - |")
            continue
        lines.append(f"| {name} | {lr} | {n} | {row['mean']:.4f} +- {row['std']:.4f} | "
                     f"{interval(r['vs_baseline'])} | {interval(r['vs_reference'])} | "
                     f"{share_text(r['share'])} |")
    return "\n".join(lines)


def controls_footer(baseline, reference, seeds):
    return "\n".join([
        f"- GPT wide: a plain GPT at the {reference}'s d (its attention) with a narrow SwiGLU FFN "
        f"at the same budget: the reallocation alone. hourglass same-d: the {reference}'s FFN "
        f"form at {baseline}'s d and attention (the hourglass paper's Table 1 form): the FFN swap "
        f"alone.",
        f"- each control: its own rate, chosen on the selection seed {seeds[0]} as every shape's "
        f"(phase 1: the second table), then the verdict's seeds. A family of its own: never in "
        f"the verdict's model or Holm family, so the verdict above is the same with or without "
        f"them.",
        f"- vs {baseline}, vs {reference}: the mean over the verdict seeds of the seed-paired "
        f"difference, with its 95% t interval (n - 1 degrees of freedom; no spread pooled).",
        f"- share: the control's difference from {baseline} over the {reference}'s, with the "
        f"95% interval of Fieller's theorem on the same seeds (every share R for which control - "
        f"{baseline} - R ({reference} - {baseline}) has mean 0 at 5%). 100%: the control "
        f"reproduces the whole difference; 0%: none of it."])
