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


def changed(name, sub_blocks):
    """What control `name` changes of the hourglass, in short; sub_blocks: {shape: K}."""
    if name == "GPT wide":
        return "the reallocation alone (d and attention widened, a plain FFN)"
    return (f"the FFN swap alone (d and attention kept; it also changes K: {sub_blocks[name]} "
            f"where the hourglass has {sub_blocks['hourglass']})")


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
    """{name: row} of the controls over the verdict's seeds: once a control has them all, its
    paired differences from the baseline and the reference, and its share of the reference's."""
    used = seeds_in_verdict(rows)
    base, ref = rows[baseline]["losses"], rows.get(reference, {}).get("losses", {})
    out = {}
    for name in names:
        row = out[name] = chosen_row(losses, name, rates, seeds)
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
    """'81% [56%, 123%]', consistent with every share of its interval, and which of none or
    all of it that holds."""
    lo, hi = share["lo"], share["hi"]
    if lo is None:
        return f"{share['ratio']:.0%}, unbounded: the difference it is a share of is not clear of 0"
    held = [word for word, at in (("none", 0), ("all", 1)) if lo <= at <= hi]
    return (f"{share['ratio']:.0%} [{lo:.0%}, {hi:.0%}], consistent with any share in that "
            f"range, " + (f"{' and '.join(held)} of it included" if held else
                          "neither none nor all of it"))


def controls_reading(controls, baseline, reference, sub_blocks):
    """One line per control: what it changes, its rate, its paired differences from the baseline
    and the reference, and its share of the reference's difference."""
    lines = []
    for name, row in controls.items():
        r = row.get("reading")
        read = (f"vs {baseline} {interval(r['vs_baseline'])}, vs {reference} "
                f"{interval(r['vs_reference'])}; its share {share_text(r['share'])}" if r else
                f"no reading yet, {len(row['losses'])} verdict seeds so far")
        lines.append(f"- **{name}** (lr {lr_cell(row)}), {changed(name, sub_blocks)}: {read}.")
    return "\n".join(lines)
