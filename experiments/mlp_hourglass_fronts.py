"""
The Pareto fronts of an image-MLP sweep: does the hourglass reach a better PSNR (and SSIM) than
the conventional MLP at the same parameter count? "Rethinking the Shape Convention of an MLP"
(Chen, Lee, Liao, Shiu, 2025, arXiv:2510.01796), section 4.2.2-4.2.3.

Each shape's lr is picked by its mean validation loss over the seeds (the test set never chooses).
At every conventional front point: the gap to the hourglass staircase, its seed-paired range and
how far a neighbouring rate moves it. A side is a verdict only once the grid is whole (every form
at every shape its family ran, 3+ rates with every seed) and no front shape chose an edge rate.
Writes PREFIX.md and PREFIX.png; with --out=results/NAME also the pages' NAME.* blocks.

    python experiments/mlp_hourglass_fronts.py results/mlp_fashion_denoise_fair/*/sweep.csv \\
        results/mlp_fashion_denoise_learned/*/sweep.csv \\
        --out=results/mlp_fashion_denoise_forms_fronts
"""

import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlp_hourglass import input_projection
from shapelab.checkpoint import write_atomic
from shapelab.image_tasks import TASKS
from shapelab.pages import pages, write_blocks

# a sweep row: the setting, the run (shape, input, lr, seed), then what it measured
SWEEP_FIELDS = [
    "task", "data_source", "n_train", "epochs", "max_iters", "batch_size", "flips", "noise_sigma",
    "input_proj", "dtype", "weight_decay", "eval_interval", "shape", "latent_dim", "hidden_dim",
    "n_blocks", "learning_rate", "seed", "params_total", "params_trainable", "val_loss",
    "test_psnr_batchmse", "test_psnr_per_image", "test_ssim", "test_accuracy",
    "baseline_psnr_batchmse", "steps", "train_time_s", "clamp_sr_input",
    "baseline_psnr_per_image", "baseline_ssim"]
KEY_FIELDS = SWEEP_FIELDS[:18] + ["clamp_sr_input"]  # what names a run: the rest it measured
NUMBERS = ("latent_dim", "hidden_dim", "n_blocks", "learning_rate", "seed", "params_total",
           "params_trainable", "val_loss", "test_psnr_batchmse", "test_ssim",
           "baseline_psnr_batchmse", "baseline_ssim", "train_time_s")
METRICS = {"test_psnr_batchmse": "test PSNR (dB)", "test_ssim": "test SSIM"}
# A neighbouring rate whose mean validation loss is over 1.25x the chosen one's (about 1 dB on a
# denoising loss) is where training breaks down: it bounds the grid but moves no gap.
BREAKS_DOWN = 1.25
MIN_RATES = 3  # a whole grid runs every shape at this many rates or more
FAMILIES = ("hourglass", "conventional")
INPUT_WORDS = {"frozen_random": "frozen W_in", "direct": "direct", "learned": "learned W_in",
               "zero_pad": "zero-padded"}  # in this order: each family's own input first


def canonical(value):
    """A field as rows compare it: 30 and 30.0 alike, None as ''."""
    try:
        return "" if value in (None, "") else repr(float(value))
    except ValueError:
        return str(value)


def run_key(row):
    """A run's identity: every field of its row but what it measured."""
    return tuple(canonical(row.get(k)) for k in KEY_FIELDS)


def sweep_lines(path):
    """A sweep CSV's header line and its whole rows [(line, row of text)], each run once; a file
    whose header is not the sweep's stops in one line, untouched."""
    with open(path, newline="") as f:
        lines = f.readlines()
    if lines and next(csv.reader(lines[:1])) != SWEEP_FIELDS:
        raise SystemExit(f"error: {path} is not a sweep CSV (its first line is not the sweep's "
                         f"header): left as it is; give the sweep another --out_dir")
    whole, torn, twice = {}, 0, 0
    for line in lines[1:]:
        fields = next(csv.reader([line]), [])
        row = dict(zip(SWEEP_FIELDS, fields))
        if not line.endswith("\n") or len(fields) != len(SWEEP_FIELDS):
            torn += bool(fields)
        elif run_key(row) in whole:
            twice += 1
        else:
            whole[run_key(row)] = (line, row)
    for count, what in ((torn, "row(s) not written whole: left out (the sweep runs them again)"),
                        (twice, "run(s) written twice: each counts once")):
        if count:
            print(f"warning: {path}: {count} {what}", file=sys.stderr)
    return (lines or [""])[0], list(whole.values())


def shown(path):
    """path as the pages name it, from the repo root: the same text from any working folder."""
    try:
        return Path(path).resolve().relative_to(ROOT)
    except ValueError:
        return Path(path)


def sweep_rows(paths):
    """The finite rows of the CSVs `paths`, numbers as numbers, each run once, of one setting."""
    rows, left_out = {}, []
    for path in paths:
        for _, row in sweep_lines(path)[1]:
            row = {**row, **{k: float(row[k] or "nan") for k in NUMBERS}, "csv": str(shown(path))}
            if all(math.isfinite(row[k]) for k in ("val_loss", *METRICS)):
                rows.setdefault(run_key(row), row)
            else:
                left_out.append(f"{form_of(row['shape'], row['input_proj'])} "
                                f"{row['latent_dim']:g}/{row['hidden_dim']:g}/L{row['n_blocks']:g}"
                                f" at lr {row['learning_rate']:g}, seed {row['seed']:g}")
    where, rows = ", ".join(map(str, paths)), list(rows.values())
    if left_out:
        print(f"warning: {where}: non-finite results left out: {'; '.join(left_out)}",
              file=sys.stderr)
    if not rows:
        raise SystemExit(f"error: {where} holds no finished runs yet: run python "
                         f"experiments/mlp_hourglass_sweep.py first")
    setting = ("task", "data_source", "epochs", "batch_size", "flips", "noise_sigma",
               "clamp_sr_input")
    if len({tuple(canonical(r[k]) for k in setting) for r in rows}) > 1:
        raise SystemExit(f"error: {where} hold runs of different settings "
                         f"({', '.join(setting)}): draw each setting's fronts on its own")
    return rows


def form_of(family, input_proj):
    return f"{family} ({INPUT_WORDS.get(input_proj, input_proj or 'input not recorded')})"


def forms(entries, family=None):
    """The forms among entries, hourglass first, each family's in INPUT_WORDS' order."""
    order = list(INPUT_WORDS)
    found = {(e["family"], e["input_proj"]) for e in entries if family in (None, e["family"])}
    return [form_of(*f) for f in sorted(found, key=lambda f: (
        FAMILIES.index(f[0]), (order + [f[1]]).index(f[1]), f[1]))]


def of_form(entries, form):
    return [e for e in entries if e["form"] == form]


def mean(values):
    values = list(values)
    return sum(values) / len(values)


def shape_results(rows):
    """One entry per shape and input at its lr (most seeds, then the lowest mean validation loss):
    its metrics' (mean, min, max), each seed's value, each fully run rate's means (mean_at)."""
    by_shape = defaultdict(lambda: defaultdict(list))  # shape -> lr -> rows
    for r in rows:
        key = (r["shape"], int(r["latent_dim"]), int(r["hidden_dim"]), int(r["n_blocks"]),
               r["input_proj"])
        by_shape[key][r["learning_rate"]].append(r)
    results = []
    for (family, d_z, d_h, L, input_proj), by_lr in by_shape.items():
        lr, runs = min(by_lr.items(), key=lambda item: (
            -len(item[1]), mean(r["val_loss"] for r in item[1])))
        seeds_at = {rate: {int(r["seed"]) for r in at} for rate, at in by_lr.items()}
        per_seed = {m: {int(r["seed"]): r[m] for r in runs} for m in METRICS}
        own = input_projection("", family, d_z, TASKS[runs[0]["task"]].input_dim)
        results.append(dict(
            family=family, form=form_of(family, input_proj), d_z=d_z, d_h=d_h, L=L,
            dims=f"{d_z}/{d_h}/L{L}", spec=f"{family}:{d_z}:{d_h}:{L}",
            input_proj=input_proj, learning_rate=lr, seeds=len(runs), seeds_at=seeds_at,
            label=f"{family} d_z={d_z} d_h={d_h} L={L}"
                  + ("" if input_proj in ("", own) else f" W_in={input_proj}"),
            params_total=runs[0]["params_total"], params_trainable=runs[0]["params_trainable"],
            per_seed=per_seed,
            **{m: (mean(v.values()), min(v.values()), max(v.values()))
               for m, v in per_seed.items()},
            mean_at={rate: {m: mean(r[m] for r in at) for m in (*METRICS, "val_loss")}
                     for rate, at in by_lr.items() if seeds_at[lr] <= seeds_at[rate]}))
    return sorted(results, key=lambda e: (FAMILIES.index(e["family"]), e["input_proj"],
                                          e["params_total"]))


def pareto_front(entries, params_key, metric):
    front, best = [], -math.inf
    for e in sorted(entries, key=lambda e: (e[params_key], -e[metric][0])):
        if e[metric][0] > best:
            front.append(e)
            best = e[metric][0]
    return front


def gaps(entries, params_key, metric, hourglass_form, conventional_form):
    """[(conventional front point, the hourglass staircase's entry there, the gap of the means,
    the seed-paired gaps' (min, max))] where the staircase has a point."""
    hourglass = pareto_front(of_form(entries, hourglass_form), params_key, metric)
    out = []
    for e in pareto_front(of_form(entries, conventional_form), params_key, metric):
        best = max((h for h in hourglass if h[params_key] <= e[params_key]),
                   key=lambda h: h[metric][0], default=None)
        if best:
            ours, theirs = best["per_seed"][metric], e["per_seed"][metric]
            paired = [ours[s] - theirs[s] for s in sorted(ours.keys() & theirs.keys())]
            out.append((e, best, best[metric][0] - e[metric][0],
                        (min(paired), max(paired)) if paired else None))
    return out


def rates_run(entry):
    return sorted(entry["mean_at"])


def neighbouring_rates(entry):
    tried = rates_run(entry)
    i = tried.index(entry["learning_rate"])
    return [tried[j] for j in (i - 1, i + 1) if 0 <= j < len(tried)]


def breaks_down(entry, rate):
    chosen = entry["mean_at"][entry["learning_rate"]]["val_loss"]
    return entry["mean_at"][rate]["val_loss"] > BREAKS_DOWN * chosen


def rate_moves(conventional, hourglass, metric):
    """[(family, rate, that side's validation loss there, the gap's move, whether it breaks down
    there)] for each neighbouring rate of either side."""
    return [(entry["family"], rate, entry["mean_at"][rate]["val_loss"],
             sign * (entry["mean_at"][rate][metric] - entry[metric][0]), breaks_down(entry, rate))
            for entry, sign in ((hourglass, 1), (conventional, -1))
            for rate in neighbouring_rates(entry)]


def runner_up_moves(conventional, hourglass, metric):
    """The gap's moves with either side at its runner-up rate (its better neighbour by validation
    loss, where training held: what another draw could have chosen)."""
    best = {}
    for family, _, loss, move, broke in rate_moves(conventional, hourglass, metric):
        if not broke and loss < best.get(family, (math.inf,))[0]:
            best[family] = (loss, move)
    return [move for _, move in best.values()]


def flips(found, metric):
    """At how many gaps a runner-up rate flips the sign."""
    return sum(any((gap + m > 0) != (gap > 0) for m in runner_up_moves(e, best, metric))
               for e, best, gap, _ in found)


def flips_text(flipped, points):
    return ("no side's runner-up rate flips a sign" if not flipped else
            f"a side's runner-up rate flips the sign at {flipped} of {points} points")


def edge_lrs(entries):
    """[(entry, 'top' or 'bottom', the lr to add)] for each Pareto-optimal shape whose lr is the
    highest or lowest it ran at."""
    optimal = {id(e) for form in forms(entries) for key in ("params_total", "params_trainable")
               for metric in METRICS for e in pareto_front(of_form(entries, form), key, metric)}
    flags = []
    for e in entries:
        lr, tried = e["learning_rate"], rates_run(e)
        if id(e) in optimal and lr == tried[-1]:
            flags.append((e, "top", float(f"{lr * 1.5:.3g}")))
        if id(e) in optimal and lr == tried[0]:
            flags.append((e, "bottom", float(f"{lr / 2:.3g}")))
    return flags


def all_seeds(entries):
    return set().union(*(s for e in entries for s in e["seeds_at"].values()))


def grid_cells(entries):
    """[(form, a shape's entry of its family, {rate: its seeds})] for every form at every shape
    its family ran."""
    cells = []
    for family in FAMILIES:
        shapes = {e["dims"]: e for e in entries if e["family"] == family}
        for form in forms(entries, family):
            ran = {e["dims"]: e["seeds_at"] for e in of_form(entries, form)}
            cells += [(form, shape, ran.get(shape["dims"], {}))
                      for shape in sorted(shapes.values(), key=lambda e: e["params_total"])]
    return cells


def grid_holes(entries):
    """The cells not yet whole, with what they lack and the rates to run (0: the config's)."""
    seeds, holes = all_seeds(entries), []
    for form, shape, seeds_at in grid_cells(entries):
        whole = [r for r, s in seeds_at.items() if s == seeds]
        partial = sorted(r for r, s in seeds_at.items() if s != seeds)
        too_few = len(whole) < MIN_RATES
        lacks = (["not run"] if not seeds_at else
                 [f"{len(whole)} rate{'s' * (len(whole) != 1)} with every seed"] * too_few
                 + [f"{r:g} with seed {', '.join(map(str, sorted(seeds_at[r])))} only"
                    for r in partial])
        if lacks:
            holes.append(dict(form=form, dims=shape["dims"], spec=shape["spec"],
                              lacks=", ".join(lacks), rates=[0] * too_few + partial))
    return holes


def grid_line(entries):
    seeds, size = sorted(all_seeds(entries)), len(grid_cells(entries))
    holes, edged = grid_holes(entries), len({id(e) for e, *_ in edge_lrs(entries)})
    text = (f"(every form at every shape its family ran, each at {MIN_RATES} rates or more with "
            f"seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}): ")
    if not holes and not edged:
        return text + "whole, and no Pareto-optimal shape at an edge rate"
    return text + (f"{size - len(holes)} of {size} form-shapes whole, "
                   f"{edged} Pareto-optimal shape{'s' * (edged != 1)} at an edge rate:"
                   f" no verdict yet")


def asks(entries):
    """The sweep arguments that fill the grid and try each edge shape's next rate."""
    wanted = defaultdict(lambda: defaultdict(dict))  # form -> rate (0: the config's) -> shapes
    for hole in grid_holes(entries):
        for rate in hole["rates"]:
            wanted[hole["form"]][rate][hole["spec"]] = True
    for e, _, rate in edge_lrs(entries):
        wanted[e["form"]][rate][e["spec"]] = True
    return [f"{form}: " + "; then ".join(
        f"--shapes={','.join(shapes)}" + (f" --learning_rates={rate:g}" if rate else "")
        for rate, shapes in sorted(by_rate.items())) for form, by_rate in wanted.items()]


def h_min(seconds):
    return f"{int(seconds // 3600)} h {round(seconds % 3600 / 60):02d} min"


def summary(rows, entries, paths):
    lrs = sorted({r["learning_rate"] for r in rows})
    seeds = sorted({int(r["seed"]) for r in rows})
    steps = sorted({int(float(r["steps"])) for r in rows if r.get("steps")})
    total = sum(r["train_time_s"] for r in rows)
    per_shape = sorted({len(e["seeds_at"]) for e in entries})
    each = (f"x {len(lrs)} lrs" if per_shape == [len(lrs)] else
            f"at {per_shape[0]}-{per_shape[-1]} of {len(lrs)} lrs")
    text = (f"{len(rows)} runs: {len(entries)} shapes {each} "
            f"({', '.join(f'{lr:g}' for lr in lrs)}) x {len(seeds)} seeds "
            f"({', '.join(map(str, seeds))}); "
            + (f"{'/'.join(map(str, steps))} steps a run; " if steps else "")
            + f"training time {total:,.0f} s in all = {h_min(total)}")
    if len(paths) > 1:  # side by side: each process's runs one after the other
        names = [f"{p.parent.name}/{p.name}" for p in paths]  # or the path where two share it
        seconds = {p: sum(r["train_time_s"] for r in rows if r["csv"] == str(p)) for p in paths}
        text += " (" + "; ".join(f"{name if names.count(name) == 1 else p}: {seconds[p]:,.0f} s "
                                 f"= {h_min(seconds[p])}" for p, name in zip(paths, names)) + ")"
    lines = [text + "."]
    for form in forms(entries):
        totals = [e["params_total"] for e in of_form(entries, form)]
        lines.append(f"{form}: {len(totals)} shape{'s' * (len(totals) != 1)}, "
                     f"{min(totals) / 1e6:.2f}M-{max(totals) / 1e6:.2f}M total parameters.")
    psnr = {int(r["seed"]): r["baseline_psnr_batchmse"] for r in rows}  # the noisy input's
    ssim = {int(r["seed"]): r["baseline_ssim"] for r in rows}
    text = (f"Noisy input (the baseline every model must beat): {mean(psnr.values()):.2f} dB, "
            f"SSIM {mean(ssim.values()):.4f} (per seed: " + "; ".join(
                f"{s}: {psnr[s]:.2f} dB, SSIM {ssim[s]:.4f}" for s in sorted(psnr)) + ").")
    gains = [e["test_psnr_batchmse"][0] - mean(psnr.values()) for e in entries]
    lines.append(text + f" The shapes' mean PSNR beats it by {min(gains):.2f}-{max(gains):.2f} dB.")
    spread = {m: [e[m][2] - e[m][1] for e in entries if e["seeds"] > 1] for m in METRICS}
    if all(spread.values()):
        lines.append(f"Seeds' spread (max - min at a shape's lr, the largest over shapes): PSNR "
                     f"{max(spread['test_psnr_batchmse']):.3f} dB, SSIM "
                     f"{max(spread['test_ssim']):.4f}.")
    held, broken = [], []
    for e in entries:
        for rate in neighbouring_rates(e):
            move = e["mean_at"][rate]["test_psnr_batchmse"] - e["test_psnr_batchmse"][0]
            (broken if breaks_down(e, rate) else held).append(move)
    if held or broken:
        text = "One rate step from each shape's chosen lr"
        if held:
            text += (f": where training held ({len(held)} shape-rates), test PSNR moves "
                     f"{min(held):+.3f} to {max(held):+.3f} dB")
        if broken:
            text += (f"; where it broke down (validation loss over {BREAKS_DOWN:g}x the chosen "
                     f"lr's: {len(broken)} shape-rates), it falls {-max(broken):.3f} dB or more")
        lines.append(text + ".")
    return lines


def shape_table(entries):
    lines = ["| shape | lr | seeds | params total / trainable | test PSNR mean (min-max) | "
             "test SSIM mean (min-max) |", "|---|---:|---:|---:|---:|---:|"]
    for e in entries:
        p, s = e["test_psnr_batchmse"], e["test_ssim"]
        lines.append(f"| {e['label']} | {e['learning_rate']:g} | {e['seeds']} | "
                     f"{e['params_total'] / 1e6:.2f}M / "
                     f"{e['params_trainable'] / 1e6:.2f}M | {p[0]:.2f} ({p[1]:.2f}-{p[2]:.2f}) | "
                     f"{s[0]:.4f} ({s[1]:.4f}-{s[2]:.4f}) |")
    return lines


def pairs(entries):
    return [(h, c) for h in forms(entries, "hourglass") for c in forms(entries, "conventional")]


def side(found, metric):
    """'ahead' where every gap, seed-paired gap and gap at a runner-up rate is above zero,
    'behind' where all are below: a gap a seed or the next rate turns around is no side."""
    values = [v for e, best, gap, paired in found for v in (
        gap, *(paired or ()), *(gap + m for m in runner_up_moves(e, best, metric)))]
    return ("ahead" if all(v > 0 for v in values) else "behind" if all(v < 0 for v in values)
            else "no clear side")


def brief_lines(entries):
    """Each pair of forms' side on test PSNR against total parameters: a verdict only where their
    grid is whole and no front shape sits at an edge rate."""
    metric, lines = "test_psnr_batchmse", []
    holes, flags = grid_holes(entries), edge_lrs(entries)
    for hourglass, conventional in pairs(entries):
        found = gaps(entries, "params_total", metric, hourglass, conventional)
        if not found:
            continue
        values = [g for _, _, g, _ in found]
        sizes = [e["params_total"] / 1e6 for e, *_ in found]
        held = [abs(m) for e, best, *_ in found
                for *_, m, broke in rate_moves(e, best, metric) if not broke]
        short = sum(h["form"] in (hourglass, conventional) for h in holes)
        edged = len({id(e) for e, *_ in flags if e["form"] in (hourglass, conventional)})
        why = ([f"{short} of their form-shapes short of the grid"] * bool(short)
               + [f"{edged} Pareto-optimal shape{'s' * (edged != 1)} at an edge rate"]
               * bool(edged))
        reading = (f"**no verdict yet** ({', '.join(why)}); so far {side(found, metric)}"
                   if why else f"**{side(found, metric)}**")
        moved = (f"a neighbouring rate moves a gap by up to {max(held):.3f} dB where training "
                 f"held" if held else "no neighbouring rate held")
        lines.append(f"- {hourglass} minus {conventional}: {reading}; {min(values):+.3f} to "
                     f"{max(values):+.3f} dB test PSNR at the {len(found)} points of the "
                     f"conventional front from {min(sizes):.2f}M to {max(sizes):.2f}M total "
                     f"parameters; {moved}, and {flips_text(flips(found, metric), len(found))}")
    return lines


def gap_bullets(entries):
    """Each pair of forms on each metric and axis (trainable only where it is not the total)."""
    lines = []
    for hourglass, conventional in pairs(entries):
        both = of_form(entries, hourglass) + of_form(entries, conventional)
        keys = ["params_total"] + (["params_trainable"] if any(
            e["params_trainable"] != e["params_total"] for e in both) else [])
        lines += [gap_bullet(entries, params_key, metric, hourglass, conventional)
                  for params_key in keys for metric in METRICS]
    return lines


def gap_bullet(entries, params_key, metric, hourglass, conventional):
    axis = params_key.split("_")[1]
    d, unit = (3, " dB") if "psnr" in metric else (5, "")  # a digit more than the table shows
    found = gaps(entries, params_key, metric, hourglass, conventional)
    head = (f"- **{hourglass} minus {conventional}, {METRICS[metric]} against {axis} "
            f"parameters:** ")
    if not found:
        return head + "no hourglass with as few parameters as any conventional front point"
    ahead = sum(gap > 0 for _, _, gap, _ in found)
    where = ("ahead at every point" if ahead == len(found) else "behind at every point"
             if ahead == 0 else f"ahead at {ahead} of {len(found)} points")
    across = sum(paired is not None and paired[0] < 0 < paired[1] for *_, paired in found)
    points = []
    for e, best, gap, paired in found:
        moves = rate_moves(e, best, metric)
        detail = [f"seed-paired {paired[0]:+.{d}f} to {paired[1]:+.{d}f}"] if paired else []
        detail.append("neighbouring rates: " + "; ".join(
            f"the {family} " + ", ".join(f"{rate:g} " + ("breaks down" if broke else f"{m:+.{d}f}")
                                         for f_, rate, _, m, broke in moves if f_ == family)
            for family in FAMILIES if any(f_ == family for f_, *_ in moves))
            if moves else "no neighbouring rate run")
        points.append(f"{e[params_key] / 1e6:.2f}M {gap:+.{d}f}{unit} ({'; '.join(detail)})")
    sure = ("every seed-paired range on the side of its mean" if not across else
            f"{across} seed-paired range{'s' * (across > 1)} across zero")
    rates = flips_text(flips(found, metric), len(found))
    return head + f"{where}; {sure}; {rates}. " + "; ".join(points) + "."


def front_bullets(entries):
    metric = "test_psnr_batchmse"
    lines = [f"- {form} front: " + " -> ".join(
        f"{e['dims']} ({e['params_total'] / 1e6:.2f}M, {e[metric][0]:.2f} dB)"
        for e in pareto_front(of_form(entries, form), "params_total", metric))
        for form in forms(entries)]
    flags = edge_lrs(entries)
    lines.append("- rates at an edge (Pareto-optimal shapes, any front): " + ("none" if not flags
                 else "; ".join(f"{e['label']} at {e['learning_rate']:g}, the {edge} of "
                                f"{', '.join(f'{x:g}' for x in rates_run(e))}"
                                for e, edge, _ in flags)))
    holes = grid_holes(entries)
    lines.append(f"- the grid {grid_line(entries)}" + ("" if not holes else "; short: " + "; ".join(
        f"{h['form']} {h['dims']} ({h['lacks']})"
        for h in holes)))
    return lines


def lift_bullet(entries):
    """Each hourglass shape's test PSNR frozen -> learned ('' where none ran with both)."""
    frozen = {e["dims"]: e for e in of_form(entries, "hourglass (frozen W_in)")}
    both = [(frozen[e["dims"]], e) for e in of_form(entries, "hourglass (learned W_in)")
            if e["dims"] in frozen]
    return "- hourglass test PSNR, frozen -> learned W_in (each at its own lr): " + "; ".join(
        f"{f['dims']} ({f['params_total'] / 1e6:.2f}M) {f['test_psnr_batchmse'][0]:.2f} -> "
        f"{e['test_psnr_batchmse'][0]:.2f} dB" for f, e in both) + "." if both else ""


def page_blocks(paths, name, rows=None):
    """The pages' blocks NAME.runs, .shapes, .gaps, .fronts, .brief, .grid (and .lift)."""
    rows = rows or sweep_rows(paths)
    entries = shape_results(rows)
    paths = [shown(p) for p in paths]
    blocks = {f"{name}.runs": "\n".join(f"- {line}" for line in summary(rows, entries, paths)),
              f"{name}.shapes": "\n".join(shape_table(entries)),
              f"{name}.gaps": "\n".join(gap_bullets(entries)),
              f"{name}.fronts": "\n".join(front_bullets(entries)),
              f"{name}.brief": "\n".join(brief_lines(entries)),
              f"{name}.grid": f"- the grid {grid_line(entries)}"}
    if lift_bullet(entries):
        blocks[f"{name}.lift"] = lift_bullet(entries)
    return blocks


def title(rows):
    r0 = rows[0]
    return (f"{r0['task']} on {r0['data_source'].split(' (')[0]}: {len(rows)} runs, "
            f"{float(r0['epochs']):g} epochs, batch {float(r0['batch_size']):g}; error bars: "
            f"seeds' min-max")


def report(paths, rows):
    wanted = asks(shape_results(rows))
    runs = ["- the runs they ask for (each form's sweep config, each seed's --out_dir): "
            + "; ".join(wanted)] if wanted else []
    blocks = page_blocks(paths, "fronts", rows)
    del blocks["fronts.grid"]  # the last line of fronts.fronts
    return "\n\n".join([f"# {title(rows)}", *blocks.values(), *runs]) + "\n"


def plot(rows, path):
    from matplotlib.ticker import FuncFormatter

    from shapelab.plot import plt, save_figure

    entries = shape_results(rows)
    baseline = mean(r["baseline_psnr_batchmse"] for r in rows)
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    styles = {  # the hourglass warm, the conventional cool; a learned W_in square
        "hourglass (frozen W_in)": ("tab:orange", "o"),
        "hourglass (learned W_in)": ("tab:red", "s"),
        "conventional (direct)": ("tab:blue", "o"),
        "conventional (learned W_in)": ("tab:green", "s")}
    for col, params_key in enumerate(("params_total", "params_trainable")):
        right = max(e[params_key] for e in entries) / 1e6
        for row, (metric, name) in enumerate(METRICS.items()):
            ax = axes[row, col]
            for i, form in enumerate(forms(entries)):
                color, marker = styles.get(form, (f"C{i + 4}", "^"))
                ours = of_form(entries, form)
                means, lows, highs = np.array([e[metric] for e in ours]).T
                ax.errorbar([e[params_key] / 1e6 for e in ours], means,
                            yerr=[means - lows, highs - means], fmt=marker, color=color,
                            alpha=0.45, capsize=3)
                front = pareto_front(ours, params_key, metric)
                y = [e[metric][0] for e in front]
                ax.step([e[params_key] / 1e6 for e in front] + [right], y + [y[-1]], where="post",
                        color=color, lw=2, label=f"{form} front")
            values = [v for e in entries for v in e[metric][1:]]
            low, high = min(values), max(values)  # a baseline far below would flatten the fronts
            pad = 0.08 * (high - low or 1)
            ax.set_ylim(low - pad, high + pad)
            if metric == "test_psnr_batchmse":
                ax.axhline(max(baseline, low - pad), color="0.5", ls=":",
                           label=f"noisy input: {baseline:.2f} dB"
                           + ("" if baseline >= low - pad else " (below)"))
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}M"))
            ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}M" if str(v)[0] in
                                                       "2357" else ""))
            ax.set_xlabel(f"{params_key.split('_')[1]} parameters (M)")
            ax.set_ylabel(name)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8, loc="best")
    fig.suptitle(title(rows), fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def main(argv):
    """--out=PREFIX writes PREFIX.md and PREFIX.png (default: fronts.* beside the first CSV)."""
    out = [a.split("=", 1)[1] for a in argv if a.startswith("--out=")]
    paths = [Path(a) for a in argv if not a.startswith("--out=")]
    if not paths or not all(p.is_file() for p in paths) or len(out) > 1:
        raise SystemExit("usage: python experiments/mlp_hourglass_fronts.py <sweep.csv> "
                         "[<sweep.csv> ...] [--out=PREFIX]")
    prefix = Path(out[0]) if out else paths[0].parent / "fronts"
    rows = sweep_rows(paths)
    text = report(paths, rows)
    write_atomic(f"{prefix}.md", text)
    plot(rows, f"{prefix}.png")
    print(text)
    print(f"wrote {prefix}.md and {prefix}.png")
    if prefix.resolve().parent == ROOT / "results":  # the pages quote only committed outputs
        for page in write_blocks(pages(ROOT), page_blocks(paths, prefix.name, rows)):
            print(f"wrote its blocks into {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
