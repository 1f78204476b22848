"""
The Pareto fronts of an image-MLP sweep: does the hourglass reach a better test PSNR than the
conventional MLP at the same parameter count? "Rethinking the Shape Convention of an MLP"
(Chen, Lee, Liao, Shiu, 2025, arXiv:2510.01796), section 4.2.2-4.2.3.

Each shape's lr is picked by its mean validation loss over the seeds. Each pair of forms is read
at the points of each front against the other's staircase: **ahead** where every gap of the
means, every seed-paired gap and the gap with either side at its runner-up rate is above zero,
**behind** where all are below. A side is a verdict only once the grid is whole (every form at
every shape its family ran, 3+ rates with every seed) and no front shape chose an edge rate.
Writes PREFIX.md and PREFIX.png; with --out=results/NAME also the pages' NAME.brief block.

    python experiments/mlp_hourglass_fronts.py results/mlp_fashion_denoise_fair/*/sweep.csv \\
        results/mlp_fashion_denoise_learned/*/sweep.csv \\
        --out=results/mlp_fashion_denoise_forms_fronts
"""

import csv
import math
import sys
from collections import defaultdict
from pathlib import Path
from statistics import fmean as mean

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shapelab.checkpoint import write_atomic
from shapelab.pages import pages, write_blocks

# a sweep row: the setting, the run (shape, input, lr, seed), then what it measured
SWEEP_FIELDS = [
    "task", "data_source", "n_train", "epochs", "max_iters", "batch_size", "flips", "noise_sigma",
    "input_proj", "dtype", "weight_decay", "eval_interval", "shape", "latent_dim", "hidden_dim",
    "n_blocks", "learning_rate", "seed", "params_total", "params_trainable", "val_loss",
    "test_psnr_batchmse", "test_psnr_per_image", "test_ssim", "test_accuracy",
    "baseline_psnr_batchmse", "steps", "train_time_s", "clamp_sr_input",
    "baseline_psnr_per_image", "baseline_ssim"]
KEY_FIELDS = SWEEP_FIELDS[:18]  # what names a run: the rest it measured
NUMBERS = ("epochs", "batch_size", "latent_dim", "hidden_dim", "n_blocks", "learning_rate", "seed",
           "params_total", "params_trainable", "val_loss", "test_psnr_batchmse", "test_ssim")
PSNR = "test_psnr_batchmse"
# A neighbouring rate whose mean validation loss is over 1.25x the chosen one's (about 1 dB on a
# denoising loss) is where training breaks down: it bounds the grid but moves no gap.
BREAKS_DOWN = 1.25
MIN_RATES = 3
FAMILIES = ("hourglass", "conventional")
INPUT_WORDS = {"frozen_random": "frozen W_in", "direct": "direct", "learned": "learned W_in",
               "zero_pad": "zero-padded"}


def canonical(value):
    """A field as rows compare it: 30 and 30.0 alike, None as ''."""
    try:
        return "" if value in (None, "") else repr(float(value))
    except ValueError:
        return str(value)


def run_key(row):
    return tuple(canonical(row.get(k)) for k in KEY_FIELDS)


def sweep_lines(path):
    """A sweep CSV's header line and its whole rows [(line, row)], each run once; a file whose
    header is not the sweep's stops in one line, untouched."""
    with open(path, newline="") as f:
        lines = f.readlines()
    if lines and next(csv.reader(lines[:1])) != SWEEP_FIELDS:
        raise SystemExit(f"error: {path} is not a sweep CSV (its first line is not the sweep's "
                         f"header): left as it is; give the sweep another --out_dir")
    whole, torn = {}, 0
    for line in lines[1:]:
        fields = next(csv.reader([line]), [])
        if line.endswith("\n") and len(fields) == len(SWEEP_FIELDS):
            row = dict(zip(SWEEP_FIELDS, fields))
            whole.setdefault(run_key(row), (line, row))
        else:
            torn += bool(fields)
    if torn:
        print(f"warning: {path}: {torn} row(s) not written whole: left out (the sweep runs them "
              f"again)", file=sys.stderr)
    return (lines or [""])[0], list(whole.values())


def form_of(row):
    proj = row["input_proj"]
    return f"{row['shape']} ({INPUT_WORDS.get(proj, proj or 'input not recorded')})"


def dims(row):
    return f"{row['latent_dim']:g}/{row['hidden_dim']:g}/L{row['n_blocks']:g}"


def sweep_rows(paths):
    """The finite rows of the CSVs `paths`, numbers as numbers, each run once, of one setting."""
    rows, left_out = {}, []
    for path in paths:
        for _, row in sweep_lines(path)[1]:
            row = {**row, **{k: float(row[k] or "nan") for k in NUMBERS}}
            if all(math.isfinite(row[k]) for k in ("val_loss", PSNR, "test_ssim")):
                rows.setdefault(run_key(row), row)
            else:
                left_out.append(f"{form_of(row)} {dims(row)} at lr {row['learning_rate']:g}, "
                                f"seed {row['seed']:g}")
    where, rows = ", ".join(map(str, paths)), list(rows.values())
    if left_out:
        print(f"warning: {where}: non-finite results left out: {'; '.join(left_out)}",
              file=sys.stderr)
    if not rows:
        raise SystemExit(f"error: {where} holds no finished runs yet: run python "
                         f"experiments/mlp_hourglass_sweep.py first")
    setting = ("task", "data_source", "epochs", "batch_size", "flips", "noise_sigma")
    if len({tuple(canonical(r[k]) for k in setting) for r in rows}) > 1:
        raise SystemExit(f"error: {where} hold runs of different settings "
                         f"({', '.join(setting)}): draw each setting's fronts on its own")
    return rows


def forms(entries, family=None):
    """The forms among entries (shape_results' order: hourglass first)."""
    return list(dict.fromkeys(e["form"] for e in entries if family in (None, e["family"])))


def of_form(entries, form):
    return [e for e in entries if e["form"] == form]


def shape_results(rows):
    """One entry per form and shape at its lr (most seeds, then the lowest mean validation
    loss): PSNR and SSIM as (mean, min, max), each seed's PSNR, each fully run rate's means."""
    by_shape = defaultdict(lambda: defaultdict(list))  # (form, dims) -> lr -> rows
    for r in rows:
        by_shape[form_of(r), dims(r)][r["learning_rate"]].append(r)
    results = []
    for (form, shape), by_lr in by_shape.items():
        lr, runs = min(by_lr.items(), key=lambda item: (
            -len(item[1]), mean(r["val_loss"] for r in item[1])))
        seeds_at = {rate: {r["seed"] for r in at} for rate, at in by_lr.items()}
        per_seed = {r["seed"]: r[PSNR] for r in runs}
        ssim = [r["test_ssim"] for r in runs]
        results.append(dict(
            family=runs[0]["shape"], form=form, dims=shape, learning_rate=lr, seeds_at=seeds_at,
            per_seed=per_seed, params_total=runs[0]["params_total"],
            params_trainable=runs[0]["params_trainable"],
            psnr=(mean(per_seed.values()), min(per_seed.values()), max(per_seed.values())),
            ssim=(mean(ssim), min(ssim), max(ssim)),
            mean_at={rate: {k: mean(r[k] for r in at) for k in (PSNR, "val_loss")}
                     for rate, at in by_lr.items() if seeds_at[lr] <= seeds_at[rate]}))
    return sorted(results, key=lambda e: (FAMILIES.index(e["family"]), e["form"],
                                          e["params_total"]))


def pareto_front(entries):
    front, best = [], -math.inf
    for e in sorted(entries, key=lambda e: (e["params_total"], -e["psnr"][0])):
        if e["psnr"][0] > best:
            front.append(e)
            best = e["psnr"][0]
    return front


def gaps(entries, hourglass, conventional, at="conventional"):
    """[(conventional entry, hourglass entry, the gap of the means, the seed-paired gaps)] at each
    point of the `at` family's front, the other form at its staircase there."""
    points, other = (hourglass, conventional) if at == "hourglass" else (conventional, hourglass)
    staircase = pareto_front(of_form(entries, other))
    out = []
    for e in pareto_front(of_form(entries, points)):
        best = max((s for s in staircase if s["params_total"] <= e["params_total"]),
                   key=lambda s: s["psnr"][0], default=None)
        if best:
            h, c = (e, best) if at == "hourglass" else (best, e)
            paired = [h["per_seed"][s] - c["per_seed"][s]
                      for s in sorted(h["per_seed"].keys() & c["per_seed"].keys())]
            out.append((c, h, h["psnr"][0] - c["psnr"][0], paired))
    return out


def runner_up_moves(conventional, hourglass):
    """The gap's moves with either side at its runner-up rate: its neighbour on the rate grid
    with the lower validation loss, what another draw could have chosen. A neighbour over
    BREAKS_DOWN times the chosen rate's loss is where training breaks down: it moves no gap."""
    moves = []
    for entry, sign in ((hourglass, 1), (conventional, -1)):
        tried, chosen = sorted(entry["mean_at"]), entry["learning_rate"]
        i, limit = tried.index(chosen), BREAKS_DOWN * entry["mean_at"][chosen]["val_loss"]
        held = [entry["mean_at"][rate] for rate in tried[max(i - 1, 0):i + 2]
                if rate != chosen and entry["mean_at"][rate]["val_loss"] <= limit]
        if held:
            moves.append(sign * (min(held, key=lambda m: m["val_loss"])[PSNR] - entry["psnr"][0]))
    return moves


def side(found):
    values = [v for c, h, gap, paired in found
              for v in (gap, *paired, *(gap + m for m in runner_up_moves(c, h)))]
    return ("ahead" if all(v > 0 for v in values) else "behind" if all(v < 0 for v in values)
            else "no clear side")


def edge_lrs(entries):
    """The Pareto-optimal shapes at the top or bottom of the rates they ran."""
    return [e for form in forms(entries) for e in pareto_front(of_form(entries, form))
            if e["learning_rate"] in (min(e["mean_at"]), max(e["mean_at"]))]


def grid_holes(entries):
    """[(form, dims)] of the form-shapes short of MIN_RATES rates with every seed: each form runs
    every shape its family ran."""
    seeds = set().union(*(s for e in entries for s in e["seeds_at"].values()))
    ran = {(e["form"], e["dims"]): e["seeds_at"].values() for e in entries}
    return [(form, shape) for family in FAMILIES for form in forms(entries, family)
            for shape in sorted({e["dims"] for e in entries if e["family"] == family})
            if sum(s == seeds for s in ran.get((form, shape), ())) < MIN_RATES]


def reading(entries, hourglass, conventional):
    """The pair's side and the gaps of the means at each front's points; why no verdict yet."""
    short = sum(form in (hourglass, conventional) for form, _ in grid_holes(entries))
    edged = sum(e["form"] in (hourglass, conventional) for e in edge_lrs(entries))
    why = ([f"{short} form-shape(s) short of the grid"] * bool(short)
           + [f"{edged} front shape(s) at an edge rate"] * bool(edged))
    sides = []
    for at in FAMILIES[::-1]:
        found = gaps(entries, hourglass, conventional, at)
        if found:
            means = [gap for *_, gap, _ in found]
            sides.append(f"{at} front ({len(found)} points) **{side(found)}**, "
                         f"{min(means):+.3f} to {max(means):+.3f} dB")
    return "; ".join(sides) if not why else f"no verdict yet ({', '.join(why)}); so far " + (
        "; ".join(sides).replace("**", ""))


def brief_lines(entries, rows):
    """The scope, each pair of forms' reading, the learned lift's gain."""
    r0, spread = rows[0], max(e["psnr"][2] - e["psnr"][1] for e in entries)
    lines = [f"{r0['task']} on {r0['data_source'].split(' (')[0]}, {r0['epochs']:g} epochs, "
             f"{len({r['seed'] for r in rows})} seeds, {len(rows)} runs, each shape at the rate "
             f"its validation loss chose; test PSNR, hourglass minus conventional, the gaps of the "
             f"means at each front's points (a side: every gap, each seed's and each runner-up "
             f"rate's, on it):"]
    lines += [f"- {h} minus {c}: {reading(entries, h, c)}" for h in forms(entries, "hourglass")
              for c in forms(entries, "conventional")]
    frozen = {e["dims"]: e["psnr"][0] for e in of_form(entries, "hourglass (frozen W_in)")}
    lifts = [e["psnr"][0] - frozen[e["dims"]] for e in of_form(entries, "hourglass (learned W_in)")
             if e["dims"] in frozen]
    if lifts:
        lines.append(f"- the same hourglass, learned minus frozen W_in: {min(lifts):+.3f} to "
                     f"{max(lifts):+.3f} dB ({len(lifts)} shapes)")
    lines.append(f"The fronts are chosen on the test means they report (seeds differ by at most "
                 f"{spread:.3f} dB). No ImageNet-32 run is here: config/"
                 f"mlp_sweep_imagenet32_denoise.py runs one on a GPU.")
    return lines


def shape_table(entries):
    lines = ["| form | d_z/d_h/L | lr | seeds | params total / trainable | test PSNR mean (min-max)"
             " | test SSIM mean (min-max) |", "|---|---|---:|---:|---:|---:|---:|"]
    for e in entries:
        p, s = e["psnr"], e["ssim"]
        lines.append(f"| {e['form']} | {e['dims']} | {e['learning_rate']:g} | {len(e['per_seed'])}"
                     f" | {e['params_total'] / 1e6:.2f}M / {e['params_trainable'] / 1e6:.2f}M | "
                     f"{p[0]:.2f} ({p[1]:.2f}-{p[2]:.2f}) | {s[0]:.4f} ({s[1]:.4f}-{s[2]:.4f}) |")
    return lines


def report(rows):
    entries, r0 = shape_results(rows), rows[0]
    return "\n\n".join([
        f"# {r0['task']} on {r0['data_source'].split(' (')[0]}, batch {r0['batch_size']:g}",
        "\n".join(brief_lines(entries, rows)), "\n".join(shape_table(entries))]) + "\n"


def plot(entries, path):
    from shapelab.plot import plt, save_figure

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for form in forms(entries):
        ours, front = of_form(entries, form), pareto_front(of_form(entries, form))
        dots = ax.plot([e["params_total"] / 1e6 for e in ours], [e["psnr"][0] for e in ours], "o",
                       alpha=0.45)
        ax.step([e["params_total"] / 1e6 for e in front], [e["psnr"][0] for e in front],
                where="post", color=dots[0].get_color(), lw=2, label=f"{form} front")
    ax.set(xlabel="total parameters (M)", ylabel="test PSNR (dB), the seeds' mean")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def main(argv):
    out = [a.split("=", 1)[1] for a in argv if a.startswith("--out=")]
    paths = [Path(a) for a in argv if not a.startswith("--out=")]
    if not paths or not all(p.is_file() for p in paths):
        raise SystemExit("usage: python experiments/mlp_hourglass_fronts.py <sweep.csv> "
                         "[<sweep.csv> ...] [--out=PREFIX]")
    prefix = Path(out[-1]) if out else paths[0].parent / "fronts"
    rows = sweep_rows(paths)
    text = report(rows)
    write_atomic(f"{prefix}.md", text)
    plot(shape_results(rows), f"{prefix}.png")
    print(text + f"wrote {prefix}.md and {prefix}.png")
    if prefix.resolve().parent == ROOT / "results":  # the pages quote only committed outputs
        for page in write_blocks(pages(ROOT), page_blocks(paths, prefix.name, rows)):
            print(f"wrote its block into {page.relative_to(ROOT)}")


def page_blocks(paths, name, rows=None):
    rows = rows or sweep_rows(paths)
    return {f"{name}.brief": "\n".join(brief_lines(shape_results(rows), rows))}


if __name__ == "__main__":
    main(sys.argv[1:])
