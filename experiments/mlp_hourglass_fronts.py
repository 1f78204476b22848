"""
The Pareto fronts of an image-MLP sweep with their seed spread: the paper's Figure 3 question -
does the hourglass family reach a better PSNR (and SSIM) than the conventional one at the same
parameter count? "Rethinking the Shape Convention of an MLP" (Chen, Lee, Liao, Shiu, 2025,
arXiv:2510.01796), section 4.2.2-4.2.3.

It reads the sweep.csv that experiments/mlp_hourglass_sweep.py writes (one row per shape x lr x
seed; several CSVs of one setting are read together), picks each shape's learning rate by its mean
validation loss over the seeds (the test set never chooses), and writes fronts.png (PSNR and SSIM
against total and against trainable parameters, every shape with its seeds' min-max as error bars,
each family's Pareto front as a staircase: the best mean reached with at most that many parameters)
and fronts.md (what it prints) beside the first CSV. What it prints is what a write-up may quote:
the runs and their training time, the noisy input's PSNR and SSIM, each shape at its lr, the
fronts, and at every conventional front point the gap to the hourglass staircase (total and
trainable parameters, PSNR and SSIM): the gap of the means, the seed-paired gaps' range, and how
far the gap moves when either side takes its neighbouring rate (one step below or above its chosen
one among the rates it was tried at, where run) - a gap smaller than those moves is the rate
grid's as much as the shapes'. Rows of several forms read together (a hourglass with its W_in
frozen or learned, a conventional MLP on the image itself or behind a learned square W_in: the
CSVs of two sweeps) give each form its front and the gaps of every hourglass form against every
conventional form. Then the grid: whether every form ran every shape its family ran, each at
three rates or more with every seed, and each Pareto-optimal shape whose lr is at an edge of the
lrs it ran at with every seed, with the lr to try next (above the top: 1.5x it, so 2e-3 -> 3e-3;
below the bottom: half it) and the sweep's --shapes and --learning_rates that train just those
runs. Until the grid is whole and no such shape is left, a gap's side is not called a verdict.

Where the output is one of the repo's (--out=results/NAME), the same command writes the numbers
the pages quote about it into their generated blocks NAME.runs, NAME.shapes, NAME.gaps,
NAME.fronts, NAME.brief, NAME.grid and NAME.lift (page_blocks; shapelab/pages.py). A row not
written whole (cut short, or glued to the next) is left out and a run written twice counts once,
each with a warning; a row with a machine path or no clamp_sr_input is read in the sweep's words
(normalized).

    python experiments/mlp_hourglass_fronts.py out/mlp_sweep_mnist_denoise/sweep.csv
    python experiments/mlp_hourglass_fronts.py out/sweep_seed0/sweep.csv out/sweep_seed1/sweep.csv
    python experiments/mlp_hourglass_fronts.py results/mlp_fashion_denoise_fair/*/sweep.csv \
        results/mlp_fashion_denoise_learned/*/sweep.csv \
        --out=results/mlp_fashion_denoise_forms_fronts
"""

import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlp_hourglass import input_projection  # noqa: E402
from shapelab.checkpoint import write_atomic  # noqa: E402
from shapelab.pages import pages, write_blocks  # noqa: E402
from shapelab.image_tasks import TASKS  # noqa: E402
from train_mlp import portable_source  # noqa: E402

METRICS = {"test_psnr_batchmse": "test PSNR (dB)", "test_ssim": "test SSIM"}
DIGITS = {"test_psnr_batchmse": 2, "test_ssim": 4}  # as the table shows them; gaps: one more
# A neighbouring rate at which a shape's mean validation loss is over 1.25x its chosen rate's
# (about 1 dB of PSNR on a denoising loss) is one where its training breaks down: it bounds the
# rate grid, but says nothing about how finely the gap depends on the rate. The report prints the
# largest move where training held and the smallest where it broke down: the line between them.
BREAKS_DOWN = 1.25
# A grid is whole when every form ran every shape its family ran in any form, each at MIN_RATES
# rates or more with every seed: only then does a side (side()) become a verdict.
MIN_RATES = 3
NUMBERS = ("latent_dim", "hidden_dim", "n_blocks", "learning_rate", "seed", "params_total",
           "params_trainable", "val_loss", *METRICS, "baseline_psnr_batchmse", "baseline_ssim",
           "train_time_s")
# what a run measured; every other field of a row says which run it is (setting, shape, lr, seed)
RESULTS = ("params_total", "params_trainable", "val_loss", "test_psnr_batchmse",
           "test_psnr_per_image", "test_ssim", "test_accuracy", "baseline_psnr_batchmse",
           "baseline_psnr_per_image", "baseline_ssim", "steps", "train_time_s")


def canonical(value):
    """A field as rows compare it: 30 and 30.0 alike, None as ''."""
    try:
        return "" if value in (None, "") else repr(float(value))
    except ValueError:
        return str(value)


def whole_rows(path):
    """The rows of a sweep CSV written whole (dicts of text), and how many were not. A row is whole
    with its line end, the header's number of fields, numbers where numbers belong and a known
    shape: a row cut short (a kill, a full disk) or glued to the next one (a row torn exactly at
    its end, then the next appended to it) is left out with a warning."""
    with open(path, newline="") as f:
        lines = list(f)  # each with its line end, where it has one
    reader = csv.reader(lines)
    header = next(reader, None)
    ended = header and lines[reader.line_num - 1].endswith(("\n", "\r"))
    rows, torn = [], 0 if ended else len(lines)  # (no whole header: nothing in it is a run)
    for fields in reader if ended else []:
        row = dict(zip(header, fields))
        if (lines[reader.line_num - 1].endswith(("\n", "\r")) and len(fields) == len(header)
                and row.get("shape") in ("hourglass", "conventional")
                and all(is_number(row[k]) for k in NUMBERS if k in row)):
            rows.append(normalized(row))
        elif fields:  # (a blank line is no row)
            torn += 1
    if torn:
        print(f"warning: {path}: {torn} row(s) not written whole (cut short, or glued to the next "
              f"row): left out (the sweep runs them again)", file=sys.stderr)
    return rows, torn


def normalized(row):
    """A row in the words a sweep writes: data_source without machine paths
    (train_mlp.portable_source: a row that recorded this machine's absolute cache path is matched
    from any checkout); a row with no clamp_sr_input clamped its SR input, and its x2 flips were
    {none, horizontal}, not the {none, both} of flips=2 (so such a row is not resumed as an x2 run
    of flips=2)."""
    row = dict(row)
    row["data_source"] = portable_source(row.get("data_source", ""))
    if "clamp_sr_input" not in row:
        row["clamp_sr_input"] = "1.0" if row.get("task", "").endswith("_sr") else ""
        if canonical(row.get("flips")) == "2.0":
            row["flips"] = "2 (none, horizontal: before x2 was none, both)"
    return row


def is_number(text):
    """A number field: a float, or empty (no accuracy for denoising, no step cap)."""
    try:
        float(text or "nan")
        return True
    except ValueError:
        return False


def unique_runs(rows, where):
    """Each run once: a row repeating one already read (the same setting, shape, lr and seed:
    two sweeps that ran the same runs) is left out, with a warning."""
    seen, unique = set(), []
    for r in rows:
        key = tuple((k, canonical(v)) for k, v in sorted(r.items())
                    if k not in RESULTS and k != "csv")
        if key not in seen:
            seen.add(key)
            unique.append(r)
    if len(unique) < len(rows):
        print(f"warning: {where}: {len(rows) - len(unique)} row(s) repeat a run already read "
              f"(the same setting, shape, lr and seed): each run counts once", file=sys.stderr)
    return unique


def read_rows(path):
    """The sweep's whole rows, each run once, numbers as numbers; a diverged run keeps NaN."""
    rows = unique_runs(whole_rows(path)[0], path)
    if not rows:
        raise SystemExit(f"error: {path} holds no runs yet: run python "
                         f"experiments/mlp_hourglass_sweep.py first")
    for r in rows:
        for k in NUMBERS:
            r[k] = float(r[k]) if r.get(k) not in (None, "") else math.nan
    return rows


# The four forms of the paper's question: the hourglass with its W_in frozen (section 3's lift)
# or learned (the reference code's default), the conventional MLP on the image itself or behind a
# learned square W_in (the reference's `conventional_w_Win`, the baseline of the paper's figures)
INPUT_WORDS = {"frozen_random": "frozen W_in", "direct": "direct", "learned": "learned W_in",
               "zero_pad": "zero-padded"}  # (in this order: each family's own input first)
FAMILIES = ("hourglass", "conventional")


def form_of(family, input_proj):
    """A family with its input, as the fronts name it: 'hourglass (frozen W_in)'."""
    return f"{family} ({INPUT_WORDS.get(input_proj, input_proj or 'input not recorded')})"


def forms(entries, family=None):
    """The forms among entries (of one family, or every one), hourglass first, in the order of
    INPUT_WORDS."""
    order = list(INPUT_WORDS)
    found = {(e["family"], e["input_proj"]) for e in entries
             if family is None or e["family"] == family}
    return [form_of(*f) for f in sorted(found, key=lambda f: (
        FAMILIES.index(f[0]), order.index(f[1]) if f[1] in order else len(order), f[1]))]


def of_form(entries, form):
    return [e for e in entries if e["form"] == form]


def shape_results(rows):
    """One entry per shape (and input) at its chosen lr: the metrics' mean, min and max over the
    seeds, each seed's value (for seed-paired gaps) and the lrs the shape was tried at."""
    by_shape = defaultdict(lambda: defaultdict(list))  # shape -> lr -> rows
    for r in rows:
        key = (r["shape"], int(r["latent_dim"]), int(r["hidden_dim"]), int(r["n_blocks"]),
               r.get("input_proj", ""))
        by_shape[key][r["learning_rate"]].append(r)
    results = []
    for (family, d_z, d_h, L, input_proj), by_lr in by_shape.items():
        def mean_val_loss(runs):
            losses = [r["val_loss"] for r in runs]
            return math.inf if any(math.isnan(v) for v in losses) else sum(losses) / len(losses)
        # the lr with every seed done, then the lowest mean validation loss
        lr, runs = min(by_lr.items(), key=lambda item: (-len(item[1]), mean_val_loss(item[1])))
        task = TASKS.get(runs[0].get("task"))
        seeds = {int(r["seed"]) for r in runs}
        entry = dict(family=family, form=form_of(family, input_proj), d_z=d_z, d_h=d_h, L=L,
                     input_proj=input_proj, learning_rate=lr,
                     d_x=task.input_dim if task else None,
                     seeds=len(runs), learning_rates_tried=tuple(sorted(by_lr)),
                     seeds_at={rate: frozenset(int(r["seed"]) for r in at)
                               for rate, at in by_lr.items()},
                     params_total=runs[0]["params_total"],
                     params_trainable=runs[0]["params_trainable"], per_seed={},
                     # each rate run with the chosen rate's seeds: its metrics' means (a
                     # neighbouring rate's, for a gap's sensitivity)
                     mean_at={rate: {m: mean(r[m] for r in at) for m in (*METRICS, "val_loss")}
                              for rate, at in by_lr.items()
                              if seeds <= {int(r["seed"]) for r in at}})
        for metric in METRICS:
            values = [r[metric] for r in runs]
            entry[metric] = (sum(values) / len(values), min(values), max(values))
            entry["per_seed"][metric] = {int(r["seed"]): r[metric] for r in runs}
        results.append(entry)
    return sorted(results, key=lambda e: (FAMILIES.index(e["family"]), e["input_proj"],
                                          e["params_total"]))


def pareto_front(entries, params_key, metric):
    """The entries no other entry beats with fewer (or as many) parameters: sorted by params."""
    front, best = [], -math.inf
    for e in sorted(entries, key=lambda e: (e[params_key], -e[metric][0])):
        if e[metric][0] > best:
            front.append(e)
            best = e[metric][0]
    return front


def best_within(front, budget, metric, params_key):
    """The front's best entry with at most `budget` parameters (None if it has none): the value
    of its staircase at that budget."""
    within = [e for e in front if e[params_key] <= budget]
    return max(within, key=lambda e: e[metric][0]) if within else None


def gaps(entries, params_key, metric, hourglass_form, conventional_form):
    """At every point of the conventional form's front: the hourglass form's staircase there (its
    best entry with no more parameters) minus it, as (conventional entry, hourglass entry or None,
    gap of the means or None, (lowest, highest) seed-paired gap or None)."""
    hourglass = pareto_front(of_form(entries, hourglass_form), params_key, metric)
    conventional = pareto_front(of_form(entries, conventional_form), params_key, metric)
    out = []
    for e in conventional:
        best = best_within(hourglass, e[params_key], metric, params_key)
        if best is None:
            out.append((e, None, None, None))
            continue
        ours, theirs = best["per_seed"][metric], e["per_seed"][metric]
        paired = [ours[s] - theirs[s] for s in sorted(set(ours) & set(theirs))]
        out.append((e, best, best[metric][0] - e[metric][0],
                    (min(paired), max(paired)) if paired else None))
    return out


def neighbouring_rates(entry):
    """The rates one step below and above the entry's chosen one among those its shape ran at
    with every seed (rates_run)."""
    tried = rates_run(entry)
    i = tried.index(entry["learning_rate"])
    return [tried[j] for j in (i - 1, i + 1) if 0 <= j < len(tried)]


def breaks_down(entry, rate):
    """Whether the entry's shape breaks down at `rate` (diverged, or a mean validation loss over
    BREAKS_DOWN times its chosen rate's): a rate no slightly different draw would have chosen."""
    loss, chosen = entry["mean_at"][rate]["val_loss"], entry["mean_at"][entry["learning_rate"]]
    return math.isnan(loss) or loss > BREAKS_DOWN * chosen["val_loss"]


def rate_moves(conventional, hourglass, metric):
    """How far the gap (hourglass minus conventional, each at its chosen rate) moves when one side
    takes a neighbouring rate and the other keeps its own: [(the side's family, that rate, the
    side's mean there, the move, whether that side breaks down there)], NaN where the runs at that
    rate diverged. A gap whose moves (where training held) are as large as itself says more about
    the rates than about the shapes; a rate where a side breaks down only bounds the grid."""
    moves = []
    for entry, sign in ((hourglass, 1), (conventional, -1)):
        for rate in neighbouring_rates(entry):
            there = entry["mean_at"][rate][metric]
            moves.append((entry["family"], rate, there, sign * (there - entry[metric][0]),
                          breaks_down(entry, rate)))
    return moves


def runner_up_moves(conventional, hourglass, metric):
    """The gap's moves when one side takes its runner-up rate - of its neighbouring rates where it
    does not break down, the one with the lower mean validation loss (the rate a slightly
    different draw could have chosen) - and the other keeps its own: [move]."""
    moves = []
    for entry, sign in ((hourglass, 1), (conventional, -1)):
        near = [r for r in neighbouring_rates(entry) if not breaks_down(entry, r)]
        if near:
            rate = min(near, key=lambda r: entry["mean_at"][r]["val_loss"])
            moves.append(sign * (entry["mean_at"][rate][metric] - entry[metric][0]))
    return moves


def runner_up_flips(conventional, hourglass, gap, metric):
    """Whether either side's runner-up rate (runner_up_moves) turns the gap's sign around."""
    return any((gap + m > 0) != (gap > 0) for m in runner_up_moves(conventional, hourglass, metric))


def rates_run(entry):
    """The rates the entry's shape ran at with every seed of its chosen rate: a rate only some
    seeds ran at is not yet tried."""
    return sorted(entry["mean_at"])


def edge_lrs(entries):
    """The Pareto-optimal shapes (on any front of any form) whose chosen lr is the highest or the
    lowest they ran at with every seed (rates_run): [(entry, 'top' or 'bottom', lr to add)].
    Above the top: 1.5x it (2e-3 -> 3e-3); below the bottom: half it. A shape run at one lr is at
    both edges."""
    optimal = {}
    for form in forms(entries):
        for params_key in ("params_total", "params_trainable"):
            for metric in METRICS:
                for e in pareto_front(of_form(entries, form), params_key, metric):
                    optimal[id(e)] = e
    flags = []
    for e in sorted(optimal.values(), key=lambda e: (FAMILIES.index(e["family"]),
                                                     e["input_proj"], e["params_total"])):
        lr, tried = e["learning_rate"], rates_run(e)
        if lr == max(tried):
            flags.append((e, "top", float(f"{lr * 1.5:.3g}")))
        if lr == min(tried):
            flags.append((e, "bottom", float(f"{lr / 2:.3g}")))
    return flags


def all_seeds(entries):
    """Every seed any run of `entries` used: the seeds a whole grid runs each rate with."""
    return frozenset().union(*(s for e in entries for s in e["seeds_at"].values()))


def grid_cells(entries):
    """The grid: every form of a family at every shape that family ran in any form, smallest
    first - [(form, (family, d_z, d_h, L), {rate: the seeds that ran it})], {} where not run."""
    cells = []
    for family in FAMILIES:
        shapes = {(e["d_z"], e["d_h"], e["L"]): e["params_total"] for e in entries
                  if e["family"] == family}
        for form in forms(entries, family):
            ran = {(e["d_z"], e["d_h"], e["L"]): e["seeds_at"] for e in of_form(entries, form)}
            cells += [(form, (family, *shape), ran.get(shape, {}))
                      for shape in sorted(shapes, key=shapes.get)]
    return cells


def grid_holes(entries):
    """Where the grid (grid_cells) is not yet whole (MIN_RATES): a dict for every form that has
    not run a shape its family ran in another form, ran it at fewer than MIN_RATES rates with
    every seed, or ran a rate with only some seeds - its form, shape (family, d_z, d_h, L), what
    it lacks in words, whether it wants the sweep config's rates (too_few) and the rates only some
    seeds ran (partial)."""
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
            holes.append(dict(form=form, shape=shape, lacks=", ".join(lacks), too_few=too_few,
                              partial=partial))
    return holes


def grid_asks(holes):
    """The sweep arguments that fill grid_holes' holes, per form: [(form, '--shapes=...; then
    --shapes=... --learning_rates=...')] - the config's rates where a shape is not run or run at
    too few rates, the one rate where only some seeds ran it."""
    asks = defaultdict(lambda: defaultdict(list))  # form -> rate (0: the config's) -> shapes
    for hole in holes:
        for rate in [0] * hole["too_few"] + hole["partial"]:
            asks[hole["form"]][rate].append(":".join(map(str, hole["shape"])))
    return [(form, "; then ".join(
        f"--shapes={','.join(shapes)}" + (f" --learning_rates={rate:g}" if rate else "")
        for rate, shapes in sorted(by_rate.items()))) for form, by_rate in asks.items()]


def label_shape(shape):
    """(family, d_z, d_h, L) as the fronts write a shape: 'd_z/d_h/L<L>'."""
    _, d_z, d_h, L = shape
    return f"{d_z}/{d_h}/L{L}"


def grid_line(entries):
    """Whether the grid is whole and no Pareto-optimal shape sits at an edge rate: the condition
    under which a side (side()) is a verdict, in one line."""
    seeds, size = sorted(all_seeds(entries)), len(grid_cells(entries))
    holes, edged = grid_holes(entries), len({id(e) for e, *_ in edge_lrs(entries)})
    text = (f"(every form at every shape its family ran, each at {MIN_RATES} rates or more with "
            f"seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}): ")
    if not holes and not edged:
        return text + "whole, and no Pareto-optimal shape at an edge rate"
    return text + (f"{size - len(holes)} of {size} form-shapes whole, "
                   f"{edged} Pareto-optimal shape{'s' * (edged != 1)} at an edge rate:"
                   f" no verdict yet")


def label(e):
    """A shape, with its input when it is not the shape's own (mlp_hourglass.input_projection)."""
    own = input_projection("", e["family"], e["d_z"], e["d_x"]) if e["d_x"] else e["input_proj"]
    shown = "" if e["input_proj"] in ("", own) else f" W_in={e['input_proj']}"
    return f"{e['family']} d_z={e['d_z']} d_h={e['d_h']} L={e['L']}{shown}"


def mean(values):
    values = list(values)
    return sum(values) / len(values)


def h_min(seconds):
    return f"{int(seconds // 3600)} h {round(seconds % 3600 / 60):02d} min"


def where(path, paths):
    """A CSV as the summary names it: its folder and name, or the path as given where two CSVs
    share those."""
    short = lambda p: f"{p.parent.name}/{p.name}"  # noqa: E731
    return short(path) if [short(p) for p in paths].count(short(path)) == 1 else str(path)


def summary(rows, entries, paths):
    """What the sweep is and what it cost, the noisy input, the spread of the seeds."""
    lrs = sorted({r["learning_rate"] for r in rows})
    seeds = sorted({int(r["seed"]) for r in rows})
    steps = sorted({int(float(r["steps"])) for r in rows if r.get("steps") not in (None, "")})

    def seconds(runs):
        return sum(r["train_time_s"] for r in runs if not math.isnan(r["train_time_s"]))
    per_shape = sorted({len(e["learning_rates_tried"]) for e in entries})
    each = (f"x {len(lrs)} lrs" if per_shape == [len(lrs)] else  # or each shape at some of them
            f"at {per_shape[0]}-{per_shape[-1]} of {len(lrs)} lrs")
    text = (f"{len(rows)} runs: {len(entries)} shapes {each} "
            f"({', '.join(f'{lr:g}' for lr in lrs)}) x {len(seeds)} seeds "
            f"({', '.join(map(str, seeds))}); "
            + (f"{'/'.join(map(str, steps))} steps a run; " if steps else "")
            + f"training time {seconds(rows):,.0f} s in all = {h_min(seconds(rows))}")
    if len(paths) > 1:  # side by side: each process's runs one after the other
        text += " (" + "; ".join(
            f"{where(p, paths)}: {seconds([r for r in rows if r['csv'] == str(p)]):,.0f} "
            f"s = {h_min(seconds([r for r in rows if r['csv'] == str(p)]))}" for p in paths) + ")"
    lines = [text + "."]
    for form in forms(entries):
        totals = [e["params_total"] for e in of_form(entries, form)]
        lines.append(f"{form}: {len(totals)} shape{'s' * (len(totals) != 1)}, "
                     f"{min(totals) / 1e6:.2f}M-"
                     f"{max(totals) / 1e6:.2f}M total parameters.")
    baseline = defaultdict(dict)  # metric -> seed -> the noisy input's score (one per seed)
    for r in rows:
        for k in ("baseline_psnr_batchmse", "baseline_ssim"):
            if not math.isnan(r.get(k, math.nan)):
                baseline[k][int(r["seed"])] = r[k]
    psnr, ssim = baseline["baseline_psnr_batchmse"], baseline["baseline_ssim"]
    if psnr:
        text = f"Noisy input (the baseline every model must beat): {mean(psnr.values()):.2f} dB"
        text += f", SSIM {mean(ssim.values()):.4f}" if ssim else ""
        text += " (per seed: " + "; ".join(
            f"{s}: {psnr[s]:.2f} dB" + (f", SSIM {ssim[s]:.4f}" if s in ssim else "")
            for s in sorted(psnr)) + ")."
        gains = [e["test_psnr_batchmse"][0] - mean(psnr.values()) for e in entries
                 if not math.isnan(e["test_psnr_batchmse"][0])]
        if gains:
            text += f" The shapes' mean PSNR beats it by {min(gains):.2f}-{max(gains):.2f} dB."
        lines.append(text)
    spread = {m: [e[m][2] - e[m][1] for e in entries if e["seeds"] > 1 and not math.isnan(
        e[m][0])] for m in METRICS}
    if all(spread.values()):
        lines.append(f"Seeds' spread (max - min at a shape's lr, the largest over shapes): PSNR "
                     f"{max(spread['test_psnr_batchmse']):.3f} dB, SSIM "
                     f"{max(spread['test_ssim']):.4f}.")
    line = breakdown_line(entries)
    if line:
        lines.append(line)
    return lines


def breakdown_line(entries):
    """How far each shape's test PSNR moves one rate step from its chosen one, split where its
    training held and where it broke down (BREAKS_DOWN): the line the gaps' sensitivity draws."""
    metric, held, broken = "test_psnr_batchmse", [], []
    for e in entries:
        for rate in neighbouring_rates(e):
            move = e["mean_at"][rate][metric] - e[metric][0]
            (broken if breaks_down(e, rate) else held).append(move)
    if not held and not broken:
        return ""
    text = "One rate step from each shape's chosen lr"
    if held:
        text += (f": where training held ({len(held)} shape-rates), test PSNR moves "
                 f"{min(held):+.3f} to {max(held):+.3f} dB")
    finite = [m for m in broken if not math.isnan(m)]
    if broken:
        text += (f"; where it broke down (validation loss over {BREAKS_DOWN:g}x the chosen lr's: "
                 f"{len(broken)} shape-rates" + (f", {len(broken) - len(finite)} diverged"
                                                 if len(finite) < len(broken) else "") + ")"
                 + (f", it falls {-max(finite):.3f} dB or more" if finite else ""))
    return text + "."


def shape_table(entries):
    """Each shape at its lr, mean and min-max over the seeds: a markdown table's lines."""
    lines = ["| shape | lr | seeds | params total / trainable | test PSNR mean (min-max) | "
             "test SSIM mean (min-max) |", "|---|---:|---:|---:|---:|---:|"]
    for e in entries:
        p, s = e["test_psnr_batchmse"], e["test_ssim"]
        lines.append(f"| {label(e)} | {e['learning_rate']:g} | {e['seeds']} | "
                     f"{e['params_total'] / 1e6:.2f}M / "
                     f"{e['params_trainable'] / 1e6:.2f}M | {p[0]:.2f} ({p[1]:.2f}-{p[2]:.2f}) | "
                     f"{s[0]:.4f} ({s[1]:.4f}-{s[2]:.4f}) |")
    return lines


def report(entries, rows, paths, title):
    lines = [f"# {title}", "", *summary(rows, entries, paths), "", *shape_table(entries)]
    for params_key in ("params_total", "params_trainable"):
        axis = params_key.split("_")[1]
        for metric, name in METRICS.items():
            d = DIGITS[metric]
            lines += ["", f"**{name} against {axis} parameters.** Fronts (staircases):"]
            for form in forms(entries):
                front = pareto_front(of_form(entries, form), params_key, metric)
                lines.append(f"- {form}: " + "; ".join(
                    f"{label(e).split(' ', 1)[1]} ({e[params_key] / 1e6:.2f}M, "
                    f"{e[metric][0]:.{d}f})" for e in front))
            for hourglass in forms(entries, "hourglass"):
                for conventional in forms(entries, "conventional"):
                    lines.append(f"- at each point of the {conventional} front, the {hourglass} "
                                 f"staircase there minus it (gap of the means; seed-paired gaps' "
                                 f"range):")
                    lines += gap_lines(entries, params_key, metric, hourglass, conventional)
    lines += ["", f"**The grid** {grid_line(entries)}."]
    holes = grid_holes(entries)
    lines += [f"- {h['form']} {label_shape(h['shape'])}: {h['lacks']}" for h in holes]
    if holes:
        lines.append("- the runs they ask for, each form's with the sweep that runs that form "
                     "(its config, each seed's --out_dir; it skips the runs its CSV holds): "
                     + "; ".join(f"{form} {runs}" for form, runs in grid_asks(holes)))
    flags = edge_lrs(entries)
    lines += ["", "**Learning rates at an edge** (Pareto-optimal shapes whose chosen lr is the "
              "highest or lowest they ran at with every seed: the list must grow):"]
    if not flags:
        lines.append("- none: every Pareto-optimal shape chose an lr inside the list")
    asked = defaultdict(list)  # lr to add -> the shapes that ask for it
    for e, edge, lr in flags:
        lines.append(f"- {label(e)}: lr {e['learning_rate']:g}, the {edge} of "
                     f"{', '.join(f'{x:g}' for x in rates_run(e))}: add {lr:g}")
        asked[lr].append(f"{e['family']}:{e['d_z']}:{e['d_h']}:{e['L']}")
    if flags:
        lines.append("- the runs they ask for: the sweep's command (its config, each seed's "
                     "--out_dir) with " + "; then with ".join(
                         f"--shapes={','.join(shapes)} --learning_rates={lr:g}"
                         for lr, shapes in sorted(asked.items())))
    return "\n".join(lines) + "\n"


def gap_lines(entries, params_key, metric, hourglass, conventional):
    d, axis = DIGITS[metric], params_key.split("_")[1]
    lines = []
    for e, best, gap, paired in gaps(entries, params_key, metric, hourglass, conventional):
        unit = " dB" if "psnr" in metric else ""
        where = f"  - {e[params_key] / 1e6:.2f}M {axis} ({label(e)}, {e[metric][0]:.{d + 1}f}): "
        if best is None:
            lines.append(where + "no hourglass with this few parameters")
            continue
        lines.append(where + f"{gap:+.{d + 1}f}{unit}" + (
            f" (seed-paired {paired[0]:+.{d + 1}f} to {paired[1]:+.{d + 1}f})"
            if paired else "") + f"; {moves_text(rate_moves(e, best, metric), d + 1)}"
            f"; the hourglass: {label(best)} at "
            f"{best[params_key] / 1e6:.2f}M, {best[metric][0]:.{d + 1}f}")
    return lines


def moves_text(moves, digits):
    """A gap's rate sensitivity in words: 'a neighbouring rate moves it -0.120 to +0.034 (the
    hourglass at 0.003, 21.050: -0.120; the conventional at 0.002, 21.380: +0.034); a side breaks
    down at a neighbouring rate (the conventional at 0.0045, 14.528)'."""
    if not moves:
        return "no neighbouring rate run"
    held = [(side, rate, there, m) for side, rate, there, m, broke in moves if not broke]
    broken = [(side, rate, there, m) for side, rate, there, m, broke in moves if broke]
    parts = []
    if held:
        low, high = min(m for *_, m in held), max(m for *_, m in held)
        parts.append(f"a neighbouring rate moves it {low:+.{digits}f} to {high:+.{digits}f} ("
                     + "; ".join(f"the {side} at {rate:g}, {there:.{digits}f}: {m:+.{digits}f}"
                                 for side, rate, there, m in held) + ")")
    if broken:
        parts.append(f"a side breaks down at {'a' if held else 'every'} neighbouring rate ("
                     + "; ".join(f"the {side} at {rate:g}" + (
                         " diverged" if math.isnan(m) else f", {there:.{digits}f}")
                         for side, rate, there, m in broken) + ")")
    return "; ".join(parts)


def staircase(front, params_key, metric, right):
    """A Pareto front as the step function it is: the best mean reached with at most x
    parameters, from the first front point to `right` (x in millions)."""
    x = [e[params_key] / 1e6 for e in front]
    y = [e[metric][0] for e in front]
    return x + [max(right, x[-1])], y + [y[-1]]


def plot(entries, baseline, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from shapelab.plot import save_figure

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    styles = {  # (color, marker): the hourglass warm, the conventional cool; a learned W_in square
        ("hourglass", "frozen_random"): ("tab:orange", "o"),
        ("hourglass", "learned"): ("tab:red", "s"),
        ("conventional", "direct"): ("tab:blue", "o"),
        ("conventional", "learned"): ("tab:green", "s")}
    kinds = {form_of(*k): k for k in {(e["family"], e["input_proj"]) for e in entries}}
    for col, params_key in enumerate(("params_total", "params_trainable")):
        right = max(e[params_key] for e in entries) / 1e6
        for row, (metric, name) in enumerate(METRICS.items()):
            ax = axes[row, col]
            for i, form in enumerate(forms(entries)):
                color, marker = styles.get(kinds[form], (f"C{i + 4}", "^"))
                form_entries = of_form(entries, form)
                x = [e[params_key] / 1e6 for e in form_entries]
                y = [e[metric][0] for e in form_entries]
                err = [[e[metric][0] - e[metric][1] for e in form_entries],
                       [e[metric][2] - e[metric][0] for e in form_entries]]
                ax.errorbar(x, y, yerr=err, fmt=marker, color=color, alpha=0.45, capsize=3)
                front = pareto_front(form_entries, params_key, metric)
                if front:
                    ax.step(*staircase(front, params_key, metric, right), where="post",
                            color=color, lw=2, label=f"{form} front")
            values = [v for e in entries for v in e[metric][1:] if not math.isnan(v)]
            if values:  # the models' range: a baseline far below would flatten the fronts
                low, high = min(values), max(values)
                ax.set_ylim(low - 0.08 * (high - low or 1), high + 0.08 * (high - low or 1))
            if baseline is not None and metric == "test_psnr_batchmse":
                shown = not values or baseline >= ax.get_ylim()[0]
                ax.axhline(baseline if shown else ax.get_ylim()[0], color="0.5", ls=":",
                           label=f"noisy input: {baseline:.2f} dB" + ("" if shown else " (below)"))
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}M"))
            ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}M" if str(v)[0] in
                                                       "2357" else ""))
            ax.set_xlabel(f"{params_key.split('_')[1]} parameters (M)")
            ax.set_ylabel(name)
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:  # (nothing to name when every run diverged)
                ax.legend(fontsize=8, loc="best")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


SETTING = ("task", "data_source", "epochs", "batch_size", "flips", "noise_sigma",
           "clamp_sr_input")  # what one set of fronts must share


def sweep_rows(paths):
    """The sweep's rows read from its CSVs (paths), each run once, checked to be of one
    setting."""
    rows = unique_runs([dict(r, csv=str(p)) for p in paths for r in read_rows(p)],
                       ", ".join(map(str, paths)))
    if len({tuple(canonical(r.get(k)) for k in SETTING) for r in rows}) > 1:
        raise SystemExit(f"error: {', '.join(map(str, paths))} hold runs of different settings "
                         f"({', '.join(SETTING)}): draw each setting's fronts on its own")
    return rows


def fronts(paths):
    """The sweep's fronts from its CSVs (paths): (what the script prints, each shape's entry, the
    noisy input's mean PSNR or None, the figure's title)."""
    rows = sweep_rows(paths)
    entries = shape_results(rows)
    baselines = [r["baseline_psnr_batchmse"] for r in rows
                 if not math.isnan(r["baseline_psnr_batchmse"])]
    baseline = mean(baselines) if baselines else None
    r0 = rows[0]
    title = (f"{r0['task']} on {r0['data_source'].split(' (')[0]}: {len(rows)} runs, "
             f"{float(r0['epochs']):g} epochs, batch {float(r0['batch_size']):g}; error bars: "
             f"seeds' min-max")
    return report(entries, rows, paths, title), entries, baseline, title


# The page blocks: what docs/ quotes about one set of fronts, written by this script's command
# into every page that shows them (shapelab/pages.py), named after the output they stand beside


def page_blocks(paths, name):
    """The numbers a page quotes about the fronts of the sweep CSVs `paths`, as generated blocks
    {block name: markdown} (nothing written): NAME.runs (the runs, their time, the noisy input,
    the seeds' spread), NAME.shapes (each shape at its lr), NAME.gaps (every front gap with its
    seed-paired range and how far a neighbouring rate moves it), NAME.fronts (the Pareto-optimal
    shapes and the rates at an edge), NAME.brief (each hourglass form against each conventional
    form in one line: the range of the test PSNR gaps over the conventional front's points, for
    a summary such as README's), NAME.grid (whether the grid is whole: grid_line) and, where
    both lifts of a hourglass ran, NAME.lift (each shape frozen -> learned). NAME is the name of
    the output they stand beside (--out)."""
    shown = {str(p): repo_path(p) for p in paths}  # the same text from any working folder
    rows = [dict(r, csv=str(shown[r["csv"]])) for r in sweep_rows(paths)]
    entries = shape_results(rows)
    blocks = {f"{name}.runs": "\n".join(f"- {line}" for line in summary(
                  rows, entries, list(shown.values()))),
              f"{name}.shapes": "\n".join(shape_table(entries)),
              f"{name}.gaps": "\n".join(gap_bullets(entries)),
              f"{name}.fronts": "\n".join(front_bullets(entries)),
              f"{name}.brief": "\n".join(brief_lines(entries)),
              f"{name}.grid": f"- the grid {grid_line(entries)}"}
    lift = lift_bullet(entries)
    if lift:
        blocks[f"{name}.lift"] = lift
    return blocks


def side(found, metric):
    """How one hourglass form stands against one conventional form, by one rule for every pair:
    'ahead' where at every point of the conventional front (`found`: gaps()'s rows with a
    hourglass) the gap of the means, every seed-paired gap and the gap with either side at its
    runner-up rate are all above zero; 'behind' where all are below; 'no clear side' otherwise -
    a gap that a seed or the next rate of the grid turns around is not a side."""
    def sign_of(e, best, gap, paired):
        values = [gap, *(paired or ()), *(gap + m for m in runner_up_moves(e, best, metric))]
        return 1 if all(v > 0 for v in values) else -1 if all(v < 0 for v in values) else 0
    signs = {sign_of(*row) for row in found}
    return ("ahead" if signs == {1} else "behind" if signs == {-1} else "no clear side")


def brief_lines(entries):
    """One line per hourglass form against each conventional form: its side (side()) - a verdict
    only where both forms' grid is whole and none of their Pareto-optimal shapes sits at an edge
    rate (grid_holes, edge_lrs), 'no verdict yet' before - the test PSNR gaps at the
    conventional front's points (total parameters), their range, the parameters they span, and
    their rate sensitivity - the largest move a neighbouring rate makes where training held, and
    at how many points a side's runner-up rate flips the sign."""
    metric, lines = "test_psnr_batchmse", []
    holes, flags = grid_holes(entries), edge_lrs(entries)
    for hourglass in forms(entries, "hourglass"):
        for conventional in forms(entries, "conventional"):
            found = [row for row in gaps(entries, "params_total", metric, hourglass,
                                         conventional) if row[2] is not None]
            if not found:
                continue
            low, high = min(g for _, _, g, _ in found), max(g for _, _, g, _ in found)
            sizes = [e["params_total"] / 1e6 for e, *_ in found]
            held = [abs(m) for e, best, *_ in found
                    for *_, m, broke in rate_moves(e, best, metric) if not broke]
            flips = sum(runner_up_flips(e, best, gap, metric) for e, best, gap, _ in found)
            short = sum(h["form"] in (hourglass, conventional) for h in holes)
            edged = len({id(e) for e, *_ in flags if e["form"] in (hourglass, conventional)})
            why = ([f"{short} of their form-shapes short of the grid"] * bool(short)
                   + [f"{edged} Pareto-optimal shape{'s' * (edged != 1)} at an edge rate"]
                   * bool(edged))
            reading = (f"**no verdict yet** ({', '.join(why)}); so far {side(found, metric)}"
                       if why else f"**{side(found, metric)}**")
            lines.append(f"- {hourglass} minus {conventional}: {reading}; "
                         f"{low:+.3f} to {high:+.3f} dB test "
                         f"PSNR at the {len(found)} points of the conventional front from "
                         f"{min(sizes):.2f}M to {max(sizes):.2f}M total parameters; " + (
                             f"a neighbouring rate moves a gap by up to {max(held):.3f} dB "
                             "where training held" if held else "no neighbouring rate held")
                         + (", and no side's runner-up rate flips a sign" if not flips else
                            f", and a side's runner-up rate flips the sign at {flips} of "
                            f"{len(found)} points"))
    return lines


def repo_path(path):
    """A path as the repo's commands name it: from the repo's root where it lies inside it."""
    try:
        return Path(path).resolve().relative_to(ROOT)
    except ValueError:
        return Path(path)


def gap_bullets(entries):
    """For every hourglass form against every conventional form, on each metric and parameter
    axis: where the hourglass staircase stands at each conventional front point, how sure that
    is across seeds, and whether it keeps its sign when either side takes a neighbouring rate.
    The trainable axis is left out where it is the total for both forms (every parameter
    learns)."""
    lines = []
    for hourglass in forms(entries, "hourglass"):
        for conventional in forms(entries, "conventional"):
            both = of_form(entries, hourglass) + of_form(entries, conventional)
            keys = ["params_total"] + (["params_trainable"] if any(
                e["params_trainable"] != e["params_total"] for e in both) else [])
            for params_key in keys:
                for metric, name in METRICS.items():
                    lines.append(gap_bullet(entries, params_key, metric, hourglass,
                                            conventional))
    return lines


def gap_bullet(entries, params_key, metric, hourglass, conventional):
    d, axis = DIGITS[metric] + 1, params_key.split("_")[1]
    unit = " dB" if "psnr" in metric else ""
    found = [g for g in gaps(entries, params_key, metric, hourglass, conventional)
             if g[1] is not None]
    head = (f"- **{hourglass} minus {conventional}, {METRICS[metric]} against {axis} "
            f"parameters:** ")
    if not found:
        return head + "no hourglass with as few parameters as any conventional front point"
    ahead = sum(gap > 0 for _, _, gap, _ in found)
    side = ("ahead at every point" if ahead == len(found) else "behind at every point"
            if ahead == 0 else f"ahead at {ahead} of {len(found)} points")
    across = sum(paired is not None and paired[0] < 0 < paired[1] for *_, paired in found)
    flips = sum(runner_up_flips(e, best, gap, metric) for e, best, gap, _ in found)
    points = []
    for e, best, gap, paired in found:
        moves = rate_moves(e, best, metric)
        detail = ([f"seed-paired {paired[0]:+.{d}f} to {paired[1]:+.{d}f}"] if paired else [])
        detail.append("neighbouring rates: " + "; ".join(
            f"the {family} " + ", ".join(f"{rate:g} " + (
                "diverged" if math.isnan(m) else "breaks down" if broke else f"{m:+.{d}f}")
                for f_, rate, _, m, broke in moves if f_ == family)
            for family in FAMILIES if any(f_ == family for f_, *_ in moves))
            if moves else "no neighbouring rate run")
        points.append(f"{e[params_key] / 1e6:.2f}M {gap:+.{d}f}{unit} ({'; '.join(detail)})")
    sure = ("every seed-paired range on the side of its mean" if not across else
            f"{across} seed-paired range{'s' * (across > 1)} across zero")
    rates = ("no side's runner-up rate flips a sign" if not flips else
             f"a side's runner-up rate flips the sign at {flips} of {len(found)} points")
    return head + f"{side}; {sure}; {rates}. " + "; ".join(points) + "."


def front_bullets(entries):
    """The Pareto-optimal shapes of each form (PSNR against total parameters, the paper's axis)
    and the shapes whose chosen rate is at an edge of those they were tried at."""
    metric, d = "test_psnr_batchmse", DIGITS["test_psnr_batchmse"]
    lines = [f"- {form} front: " + " -> ".join(
        f"{e['d_z']}/{e['d_h']}/L{e['L']} ({e['params_total'] / 1e6:.2f}M, "
        f"{e[metric][0]:.{d}f} dB)"
        for e in pareto_front(of_form(entries, form), "params_total", metric))
        for form in forms(entries)]
    flags = edge_lrs(entries)
    lines.append("- rates at an edge (Pareto-optimal shapes, any front): " + ("none" if not flags
                 else "; ".join(f"{label(e)} at {e['learning_rate']:g}, the {edge} of "
                                f"{', '.join(f'{x:g}' for x in rates_run(e))}"
                                for e, edge, _ in flags)))
    holes = grid_holes(entries)
    lines.append(f"- the grid {grid_line(entries)}" + ("" if not holes else "; short: " + "; ".join(
        f"{h['form']} {label_shape(h['shape'])} ({h['lacks']})" for h in holes)))
    return lines


def lift_bullet(entries):
    """Each hourglass shape run with both lifts: its test PSNR frozen -> learned, each at its own
    lr ('' where no shape ran with both)."""
    frozen = {(e["d_z"], e["d_h"], e["L"]): e for e in entries
              if e["family"] == "hourglass" and e["input_proj"] == "frozen_random"}
    learned = {(e["d_z"], e["d_h"], e["L"]): e for e in entries
               if e["family"] == "hourglass" and e["input_proj"] == "learned"}
    both = sorted(frozen.keys() & learned.keys(), key=lambda k: frozen[k]["params_total"])
    if not both:
        return ""
    metric = "test_psnr_batchmse"
    return "- hourglass test PSNR, frozen -> learned W_in (each at its own lr): " + "; ".join(
        f"{z}/{h}/L{L} ({frozen[z, h, L]['params_total'] / 1e6:.2f}M) "
        f"{frozen[z, h, L][metric][0]:.2f} -> {learned[z, h, L][metric][0]:.2f} dB"
        for z, h, L in both) + "."


def main(argv):
    """Fronts of one sweep: its CSV, or several CSVs of one setting (seeds run side by side).
    --out=PREFIX writes PREFIX.md and PREFIX.png (default: fronts.md, fronts.png beside the first
    CSV)."""
    out = [a.split("=", 1)[1] for a in argv if a.startswith("--out=")]
    paths = [Path(a) for a in argv if not a.startswith("--out=")]
    if not paths or not all(p.is_file() for p in paths) or len(out) > 1:
        raise SystemExit("usage: python experiments/mlp_hourglass_fronts.py <sweep.csv> "
                         "[<sweep.csv> ...] [--out=PREFIX] (the CSVs written by "
                         "experiments/mlp_hourglass_sweep.py)")
    text, entries, baseline, title = fronts(paths)
    prefix = Path(out[0]) if out else paths[0].parent / "fronts"
    write_atomic(prefix.with_name(prefix.name + ".md"), text)
    plot(entries, baseline, prefix.with_name(prefix.name + ".png"), title)
    print(text)
    print(f"wrote {prefix}.md and {prefix}.png")
    if prefix.resolve().parent == ROOT / "results":  # the pages quote only committed outputs
        for page in write_blocks(pages(ROOT), page_blocks(paths, prefix.name)):
            print(f"wrote its blocks into {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
