"""
Which shape wins at my parameter budget and number of tokens, and what does it cost? One command:

    python compare.py                          # CPU preset: 10 shapes x 600 steps, one rate and
                                               # one seed (~45 min on 2 cores): a demonstration
    python compare.py config/compare_verdict_cpu.py   # the verdict: a rate per shape, 8 seeds
    python compare.py --learning_rates=1e-3,2e-3,4e-3 --extend_rates=2 --seeds=1337,1338,1339 \
        --jobs=2
    python compare.py --models=GPT,CEA --max_iters=200 --out_dir=out-quick   # any preset key
    python compare.py --preset=gpu             # the papers' smallest shapes, on TinyStories
    python shapes.py --preset=gpu              # only the matched shapes, no training

From one baseline shape (the plain GPT) shapes.matched_shapes builds every mechanism at the
baseline's non-embedding parameter count, each by its paper's own matching rule: GPT, hourglass,
><former, hourglass+><former, FFN-Wider, CEA (against FFN-Wider), LWS vanilla/framed/reverse/crown.
Each is trained by train.py with the same data order for a seed (the batch sampler is seeded by
`seed` alone), the same optimizer, schedule and number of tokens, at its own learning rate:

    phase 1   every shape at every rate of --learning_rates, with the first seed; each shape's
              rate is the one of its lowest final val loss (at an end of the list: flagged).
              --extend_rates=N: a shape whose best is at an end tries one more rate past it (a
              step of the list's ratio), and again, up to N rates past the list's ends
              --refine_gain=G: where the parabola through a shape's inside choice and its two
              neighbours (against log rate) dips more than G below the choice, one step of
              x sqrt(2) on each side of it too
    phase 2   every shape's other --seeds, the verdict seeds, at its chosen rate, once its
              phase 1 has finished

and each shape's verdict against the GPT is its difference over the verdict seeds, from one model of
all the runs, with its interval and the smallest difference the runs could detect
(shapelab/verdict.py states the rule; the first seed chose the rate and takes no part).
--report_only=True writes the report from the runs finished so far and trains nothing;
--stop_starting_after=M starts no run after M minutes, lets those running finish and reports what
finished (a job of fixed length on a lent machine: every run it starts ends inside it, and the next
job goes on from the records).
--jobs=2 runs two train.py side by side (each with its share of the threads). A run's min_lr is
its rate x min_lr_ratio. Everything goes into one folder (`out_dir`):

    <name>-lr<rate>-s<seed>/   one run (<name>-s<seed>/ when one rate is given): config.py (rerun
                               it alone with train.py), train.log, ckpt.pt and metrics.jsonl as
                               train.py writes them, result.json once it finished (or diverged)
    results.md      the verdict table, phase 1's loss at every rate, the shapes (parameters by
                    component, FLOPs/token, KV-cache bytes/token, training tokens/s), each
                    shape's own spread with a seed-paired test beside the pooled one, the
                    controls (shapes.CONTROL_NAMES: what the hourglass's difference is made of,
                    a family of their own), every shape's loss at the GPT's training time and
                    FLOPs (shapelab/cost.py)
    results.json    the settings, shapes, every run and every verdict, the controls' readings
                    and the cost readings; results.csv: every run
                    (shape, model_type, lr, seed, val_loss, train_loss, tokens, elapsed_s,
                    tokens_per_s, machine, commit; a diverged run's val_loss is nan)
    val_loss.png    the curves at each shape's chosen rate, against tokens and wall-clock time
    verdict.png     final losses with their seeds beside the GPT's, and loss against the rate

With --record_dir=<a folder of the repository> (the verdict configs set it) every finished run's
config.py and result.json are also kept in record_dir/runs/ as the run finishes, and the report
files in record_dir: commit them as they come. A fresh checkout's out_dir lacks the runs: the same
command copies the records in and trains only what is missing. A report of a record_dir in this
repository also writes its parts into the pages' generated blocks that show them (page_blocks;
shapelab/pages.py), and --report_only reads the controls' records too. Every result records the
machine (CPU with its bf16 units, or GPU) it finished on and the commit of the code that trained
it (git's HEAD, '+changes' if a tracked file differed): results.csv's last two columns.

Interrupt it (Ctrl-C, or a SIGTERM as Slurm and Kubernetes send) and run the same command
again: finished runs are skipped, the interrupted ones resume from their last checkpoint
(train.py's resume is exact, so their losses are those of an uninterrupted run), and the tables
and plots are rebuilt from the saved results. A run is its settings: a longer --learning_rates or
--seeds list reuses every finished run. Tokens/s are measurements and change from one machine
state to the next; every loss and count comes out the same. A run folder holding other settings
is refused: use a new out_dir. So is an out_dir or record_dir in use by another compare.py (its
compare.lock there, deleted at its end) or by a train.py in one of out_dir's run folders. It runs
from any folder: out_dir and data_dir are taken relative to where you run it.
"""

import csv
import io
import json
import math
import os
import shlex
import signal
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from shapelab.checkpoint import write_atomic
from shapelab.configurator import ConfigError, check_train_settings, usage_error
from shapelab.cost import SPEED_BENCH, bench_speeds, cost_rows, verdict_runs
from shapelab.dataset import check_dataset, find_dataset, ood_windows
from shapelab import looks
from shapelab.pages import pages, write_blocks
from shapelab.plot import plot_curves, plot_verdict
from shapelab.report import (controls_json, page_blocks, regime_line, report_of_the_records,
                             report_sections, seed_header, tokens_per_run, verdict_rows,
                             verdicts_json)
from shapelab.sweep import (NOT_IDENTITY, ROOT, TERMINATED, busy, lock_out_dir, lock_record_dir,
                            portable, read_result, record_run, run_all, run_identity, same_settings,
                            sync_records, terminated, train_one, training_in)
from shapelab.verdict import (choose_rate, next_rate, rate_label, refine_rates,
                              seeds_in_verdict)
from shapes import (ALL_NAMES, CONTROL_NAMES, MATCHING_KEYS, baseline_of, check_model_settings,
                    describe_shapes, matched_shapes, preset_settings, select_models, shapes_table,
                    slug, train_defaults)

# ----------------------------------------------------------------------------------------
# The runs of a comparison: their settings and folders, the two phases


TRAIN_KEYS = ("dataset", "data_dir", "block_size", "batch_size", "gradient_accumulation_steps",
              "max_iters", "warmup_iters", "eval_interval", "eval_iters", "log_interval", "device",
              "dtype", "compile", "eval_ood")  # (eval_ood: not part of a run's identity: sweep.py)
CSV_COLUMNS = ("shape", "model_type", "lr", "seed", "val_loss", "train_loss", "tokens",
               "elapsed_s", "tokens_per_s", "machine", "commit")


def run_config(settings, model_type, model_args, lr, seed, run_dir):
    """The train.py settings of one run (out_dir: its absolute path; train.py runs in the repo).
    min_lr keeps the preset's ratio to the rate (2e-3 decays to 2e-4), rounded as one writes it."""
    config = {k: settings[k] for k in TRAIN_KEYS}
    config.update(out_dir=str(run_dir), learning_rate=lr,
                  min_lr=float(f"{lr * settings['min_lr_ratio']:.12g}"),
                  lr_decay_iters=settings["max_iters"], seed=seed, sample_tokens=0,
                  model_type=model_type, model_args=model_args)
    return config


@dataclass(eq=False)
class Run:
    name: str
    lr: float
    seed: int
    dir: Path
    config: dict
    tag: str  # "GPT lr2e-3 s1337" ("GPT s1337" with one rate)
    order: tuple  # (phase, seed's index, shape's index, rate): the queue's order

    @property
    def key(self):
        return self.name, self.lr, self.seed


def run_dirs(out_dir, name, lr, seed):
    """The two folders a run may be in: <slug>-lr<rate>-s<seed>, <slug>-s<seed> (the name a
    comparison of one rate gives its runs)."""
    return [out_dir / f"{slug(name)}-lr{rate_label(lr)}-s{seed}", out_dir / f"{slug(name)}-s{seed}"]


def plan_run(settings, shape, name, lr, seed, phase):
    """One shape at one rate and seed. Its folder is this comparison's name for it, unless the
    other name holds a run of exactly these settings (left there by a comparison of more, or of
    one, rates): a run is its settings."""
    rates, seeds = settings["learning_rates"], settings["seeds"]
    named = run_dirs(Path(settings["out_dir"]), name, lr, seed)[::-1 if len(rates) == 1 else 1]
    config = lambda run_dir: run_config(settings, *shape, lr, seed, run_dir)  # noqa: E731
    folder = next((d for d in named if same_settings(d / "config.py", config(d))), named[0])
    tag = f"{name}{'' if len(rates) == 1 else f' lr{rate_label(lr)}'} s{seed}"
    order = (phase, seeds.index(seed), ALL_NAMES.index(name), lr)
    return Run(name, lr, seed, folder, config(folder), tag, order)


def phase1_runs(settings, shape, name, rates=None):
    """The shape's first seed at `rates` (default: the list's)."""
    return [plan_run(settings, shape, name, lr, settings["seeds"][0], 1)
            for lr in (settings["learning_rates"] if rates is None else rates)]


def phase1_losses(settings, name, rates, results):
    return {lr: results[(name, lr, settings["seeds"][0])]["val_loss"] for lr in rates}


def rate_to_add(settings, name, grid, results):
    """The rate past an end of `grid` the shape chose that phase 1 tries next (with
    --extend_rates), or None: the grid stands."""
    return next_rate(grid, phase1_losses(settings, name, grid, results),
                     settings["learning_rates"], settings["extend_rates"])


def rates_to_refine(settings, name, grid, results):
    """The rates of x sqrt(2) around the grid's choice that phase 1 tries too (--refine_gain), or
    [] (the choice stands, or is refined)."""
    return [lr for lr in refine_rates(grid, phase1_losses(settings, name, grid, results),
                                      settings["refine_gain"]) if lr not in grid]


def phase2_runs(settings, shape, name, results, rates):
    """The shape's verdict seeds at the rate its phase-1 results at `rates` chose (none if all
    diverged)."""
    lr, _ = choose_rate(phase1_losses(settings, name, rates, results))
    return [] if lr is None else [plan_run(settings, shape, name, lr, seed, 2)
                                  for seed in settings["seeds"][1:]]


def finished(run):
    return (run.dir / "result.json").exists() and same_settings(run.dir / "config.py", run.config)


def finished_results(settings, shape, name):
    """({run.key: result}, complete) of one shape's runs finished in out_dir with exactly these
    settings, walked as the comparison plans them: phase 1's list, the rates past its ends and
    the refinements while they finished, then the verdict seeds that finished at the chosen rate.
    complete: every run the comparison plans for the shape finished."""
    read = lambda runs: {run.key: read_result(run.dir / "result.json")  # noqa: E731
                         for run in runs}
    grid, results = list(settings["learning_rates"]), {}
    while True:
        runs = phase1_runs(settings, shape, name, grid)
        results.update(read(r for r in runs if finished(r)))
        if not all(map(finished, runs)):
            return results, False
        if (lr := rate_to_add(settings, name, grid, results)) is None:
            break
        grid = sorted(grid + [lr])
    refined = phase1_runs(settings, shape, name, rates_to_refine(settings, name, grid, results))
    results.update(read(r for r in refined if finished(r)))
    if not all(map(finished, refined)):
        return results, False
    more = phase2_runs(settings, shape, name, results, grid + [r.lr for r in refined])
    results.update(read(r for r in more if finished(r)))
    return results, all(map(finished, more))


def rate_chosen(settings, name, results):
    """Whether the shape's phase 1 is in `results` ({run.key: ...}) whole: its list, the rates
    past its ends and around its choice, so that its rate is chosen."""
    have = lambda lr: (name, lr, settings["seeds"][0]) in results  # noqa: E731
    grid = list(settings["learning_rates"])
    while all(map(have, grid)):
        lr = rate_to_add(settings, name, grid, results)
        if lr is None:
            return all(map(have, rates_to_refine(settings, name, grid, results)))
        grid = sorted(grid + [lr])
    return False


def finished_elsewhere(settings, matching, exclude):
    """{name: (shape, {run.key: result})} of the shapes not in `exclude` whose every run of this
    comparison finished in out_dir with exactly these settings (an earlier `--models=...`
    command), so that a command for a few shapes adds to the table instead of replacing it."""
    out_dir, seed = Path(settings["out_dir"]), settings["seeds"][0]
    names = [n for n in ALL_NAMES if n not in exclude and all(
        any((d / "result.json").exists() for d in run_dirs(out_dir, n, lr, seed))
        for lr in settings["learning_rates"])]
    found = {}
    for name, shape in (matched_shapes(baseline_of(settings), **matching, models=names)
                        if names else {}).items():
        results, complete = finished_results(settings, shape, name)
        if complete:
            found[name] = (shape, results)
    return found


# ----------------------------------------------------------------------------------------


def check_lists(settings):
    """The list settings, checked (a ConfigError names the key) and the rates sorted."""
    seeds, rates = settings["seeds"], settings["learning_rates"]
    if not seeds or any(type(s) is not int for s in seeds) or len(set(seeds)) < len(seeds):
        raise ConfigError(f"seeds={seeds!r}: give distinct integers, e.g. --seeds=1337,1338,1339")
    if not rates or len(set(rates)) < len(rates) or not all(
            type(r) in (int, float) and math.isfinite(r) and r > 0 for r in rates):
        raise ConfigError(f"learning_rates={rates!r}: give distinct finite rates > 0, e.g. "
                          f"--learning_rates=1e-3,2e-3,4e-3")
    labels = [rate_label(float(r)) for r in rates]
    if len(set(labels)) < len(labels):
        raise ConfigError(f"learning_rates={rates!r}: two rates are written the same "
                          f"({', '.join(sorted({x for x in labels if labels.count(x) > 1}))}), "
                          f"so their runs would share a folder: give rates that differ in their "
                          f"first 6 digits")
    stop = settings["stop_starting_after"]
    if type(stop) not in (int, float) or not (math.isfinite(stop) and stop >= 0):
        raise ConfigError(f"stop_starting_after={stop!r}: give minutes >= 0 (0: no deadline), "
                          f"e.g. --stop_starting_after=7")
    gain = settings["refine_gain"]
    if type(gain) not in (int, float) or not (math.isfinite(gain) and gain >= 0):
        raise ConfigError(f"refine_gain={gain!r}: give a loss difference >= 0 (0: never refine), "
                          f"e.g. --refine_gain=0.002")
    if not 0 <= settings["min_lr_ratio"] <= 1:
        raise ConfigError(f"min_lr_ratio={settings['min_lr_ratio']}: it must be in [0, 1]")
    if settings["jobs"] < 1:
        raise ConfigError(f"jobs={settings['jobs']}: it must be 1 or more")
    if settings["max_iters"] < 1:  # (train.py's max_iters=0 is a time limit: no matched tokens)
        raise ConfigError(f"max_iters={settings['max_iters']}: a comparison trains every shape "
                          f"for the same number of steps: give it 1 or more")
    if any(not 0 <= s < 2 ** 63 for s in seeds):
        raise ConfigError(f"seeds={seeds!r}: each must be in [0, 2**63)")
    extend = settings["extend_rates"]
    if type(extend) is not int or extend < 0 or extend and len(rates) < 2:
        raise ConfigError(f"extend_rates={extend!r}: give a whole number, 0 or more, of rates to "
                          f"try past the list's ends, a step of the list's ratio apart (the list "
                          f"needs two rates or more, e.g. --learning_rates=1e-3,2e-3,4e-3)")
    settings["learning_rates"] = tuple(sorted(float(r) for r in rates))


def main(argv):
    try:
        settings = preset_settings(argv)
        check_lists(settings)
        names = select_models(settings["models"])  # before matching: only these are built
        if settings["report_only"] and not settings["models"]:  # (the controls, where recorded)
            names = ALL_NAMES
    except ConfigError as e:
        usage_error(e)
    if not settings["out_dir"]:
        usage_error("out_dir='': name a folder for the comparison")
    for key in ("out_dir", "data_dir", "record_dir"):  # the caller's folder's, not the repo's
        settings[key] = settings[key] and os.path.abspath(settings[key])
    find_dataset(settings["dataset"], settings["data_dir"])  # the shapes' vocab_size is the data's
    if settings["eval_ood"]:  # its texts prepared and checked once here, not by each train.py
        meta = check_dataset(find_dataset(settings["dataset"], settings["data_dir"]),
                             settings["block_size"])
        ood_windows(settings["eval_ood"], meta, settings["block_size"])
    matching = {k: settings[k] for k in MATCHING_KEYS}
    out_dir = Path(settings["out_dir"])
    rates, seeds = settings["learning_rates"], settings["seeds"]
    try:
        shapes = matched_shapes(baseline_of(settings), **matching, models=names)
        for i, (model_type, model_args) in enumerate(shapes.values()):  # as train.py checks them
            for lr in rates if i == 0 else rates[:1]:
                run_settings = {**train_defaults(), **run_config(
                    settings, model_type, model_args, lr, seeds[0], out_dir)}
                check_train_settings(run_settings, here=not settings["report_only"])
                check_model_settings(run_settings)
    except (ConfigError, ValueError) as e:
        usage_error(e)
    with lock_out_dir(out_dir), lock_record_dir(settings["record_dir"], out_dir):  # until its end
        for run_dir in sorted(d for d in out_dir.iterdir() if d.is_dir()):
            if pid := training_in(run_dir):
                usage_error(busy(run_dir, pid))
        if settings["record_dir"]:
            copied, other = sync_records(out_dir, settings["record_dir"], ROOT,
                                         planned_here(settings, shapes))
            print(records_line(settings, copied, other))
        if settings["report_only"]:
            results = {}
            for name, shape in shapes.items():
                results.update(finished_results(settings, shape, name)[0])
            found = {n: shapes[n] for n in shapes if any(key[0] == n for key in results)}
            if "GPT" not in found:
                usage_error(f"report_only: no finished GPT run in {out_dir} with these settings "
                            f"(the baseline of every verdict): train them first")
            return report(settings, found, results, tokens_per_run(settings))
        state = SimpleNamespace(total=len(shapes) * (len(rates) + len(seeds) - 1), started=0,
                                running=[], finished=[])
        try:
            run_comparison(settings, shapes, matching, state)
        except KeyboardInterrupt:  # exit status 130 or 143 (SIGTERM), as a shell's and train.py's
            print(interrupted_message(state), file=sys.stderr)
            raise SystemExit(143 if TERMINATED else 130) from None


def planned_here(settings, shapes):
    """wanted(folder, config) for sync_records: whether this command may plan a run of these
    settings in out_dir/<folder>: one of its shapes at one of its seeds, at a rate of its list (or
    any rate, where rates are added past the list's ends or between them), in a folder plan_run
    names. Records of other runs are left alone: a comparison never reads nor rewrites them."""
    out_dir, rates = Path(settings["out_dir"]), settings["learning_rates"]
    any_rate = settings["extend_rates"] or settings.get("refine_gain")

    def wanted(folder, config):
        lr, seed = config.get("learning_rate"), config.get("seed")
        if seed not in settings["seeds"] or not (any_rate or lr in rates) or type(lr) is not float:
            return False
        return any(folder in [d.name for d in run_dirs(out_dir, name, lr, seed)]
                   and run_identity(config) == run_identity(
                       run_config(settings, *shape, lr, seed, out_dir / folder))
                   for name, shape in shapes.items())
    return wanted


def records_line(settings, copied, other):
    """The line that says what the records gave this command, and which it left alone."""
    where, out_dir = portable(settings["record_dir"], ROOT), settings["out_dir"]
    line = (f"records: {where}/runs/ keeps every finished run of these settings"
            f"{f'; {copied} copied from there into {out_dir}' if copied else ''}")
    if other:
        _, config = other[0]
        differ = [f"{k}={config.get(k)!r} there, {settings[k]!r} here" for k in TRAIN_KEYS
                  if k not in NOT_IDENTITY and config.get(k) != settings[k]]
        line += (f"; {len(other)} of other runs left alone, neither read nor rewritten ("
                 f"{'; '.join(differ[:3]) or 'other shapes, seeds or rates'})")
    return line


def interrupted_message(state):
    """The one line of an interrupted comparison: what finished, and the command that goes on."""
    command = shlex.join(["python", sys.argv[0], *sys.argv[1:]])
    done = ", ".join(run.tag for run in state.finished[:4])
    done += f" and {len(state.finished) - 4} more" if len(state.finished) > 4 else ""
    where = "; ".join(
        f"{run.tag} resumes from its last checkpoint, {run.dir / 'ckpt.pt'}"
        if (run.dir / "ckpt.pt").exists() else f"{run.tag} starts again (it had no checkpoint yet)"
        for run in state.running)
    if not where:
        where = ("the table was not written" if len(state.finished) >= state.total
                 else "the next runs start when you continue")
    return (f"interrupted: {len(state.finished)} of {state.total} runs finished"
            f"{f' ({done})' if done else ''}; {where}; continue with: {command}")


def run_comparison(settings, shapes, matching, state):
    """Train (or skip, or resume) both phases' runs, noting them in `state`; then the report."""
    rates, seeds, jobs = settings["learning_rates"], settings["seeds"], settings["jobs"]
    tokens = tokens_per_run(settings)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = os.environ.get("OMP_NUM_THREADS", "")
    threads = max(1, (int(threads) if threads.isdigit() else cores) // jobs) if jobs > 1 else None
    print(f"{len(shapes)} shapes: {len(rates)} rate(s) with seed {seeds[0]}, then "
          f"{len(seeds) - 1} more seed(s) at each shape's chosen rate = {state.total} runs of "
          f"{tokens / 1e6:.2f}M tokens, {jobs} at a time"
          f"{f' ({threads} thread' + 's' * (threads > 1) + ' each)' if threads else ''}, "
          f"into {settings['out_dir']}/")
    print(shapes_table(describe_shapes(shapes, settings["block_size"])) + "\n")

    start, fresh = time.time(), []

    def train(run, k):
        tag = f"[{k}/{state.total} {run.tag}]"
        before = (run.dir / "result.json").exists()
        result = train_one(run.dir, run.config, settings["max_iters"], tag, threads)
        if settings["record_dir"]:
            record_run(run.dir, settings["record_dir"], ROOT)
        if not before:  # (a worker thread: list.append is atomic)
            fresh.append(run)
            left = state.total - len(state.finished) - 1
            loss = "diverged" if result["val_loss"] is None else f"{result['val_loss']:.4f}"
            print(f"{tag} val loss {loss}; {(time.time() - start) / 60:.1f} min so far, "
                  f"~{left * (time.time() - start) / len(fresh) / 60:.0f} min to go", flush=True)
        return result

    first = [run for name, shape in shapes.items() for run in phase1_runs(settings, shape, name)]
    left = Counter(run.name for run in first)
    tried = {name: list(rates) for name in shapes}  # each shape's grid of rates, as it grows
    refined = {name: [] for name in shapes}  # the x sqrt(2) rates around its choice

    def after(run, results):
        """Once a shape's phase-1 runs have all finished: one more rate past the end it chose
        (--extend_rates), else the rates around its choice (--refine_gain), else its phase 2."""
        left[run.name] -= run.order[0] == 1
        if run.order[0] != 1 or left[run.name]:
            return []
        name, shape = run.name, shapes[run.name]
        lr = rate_to_add(settings, name, tried[name], results)
        if lr is not None:
            best, edge = choose_rate(phase1_losses(settings, name, tried[name], results))
            print(f"{name}: its best rate {rate_label(best)} is the {edge} it tried: trying "
                  f"{rate_label(lr)} too (one run more)", flush=True)
            tried[name] = sorted(tried[name] + [lr])
            new = [lr]
        else:
            new = [lr for lr in rates_to_refine(settings, name, tried[name], results)
                   if lr not in refined[name]]
            if not new:
                return phase2_runs(settings, shape, name, results, tried[name] + refined[name])
            best, _ = choose_rate(phase1_losses(settings, name, tried[name], results))
            print(f"{name}: the rates around its best, {rate_label(best)}, leave more than "
                  f"{settings['refine_gain']:g} to find: trying "
                  f"{' and '.join(map(rate_label, new))} too", flush=True)
            refined[name] += new
        left[name] += len(new)
        state.total += len(new)
        return [plan_run(settings, shape, name, lr, seeds[0], 1) for lr in new]

    deadline = settings["stop_starting_after"] and start + 60 * settings["stop_starting_after"]
    results = run_all(first, after, train, jobs, state, deadline)
    if state.left:  # (a deadline: only the runs of this command that finished are in the report)
        for name, shape in shapes.items():
            results.update(finished_results(settings, shape, name)[0])
        print(f"stop_starting_after={settings['stop_starting_after']:g} min: {len(state.left)} "
              f"planned run(s) not started (and those that follow them); "
              f"{'the report holds the runs finished so far' if results else 'no run finished'}"
              f"; the same command goes on from them", flush=True)
    # the table: every shape finished in out_dir with these settings, not only this command's
    for name, (shape, found) in finished_elsewhere(settings, matching, exclude=shapes).items():
        shapes[name] = shape
        results.update(found)
    if not results:  # (a deadline before any run finished: no report to write)
        return
    report(settings, {name: shapes[name] for name in ALL_NAMES if name in shapes}, results,
           tokens)


CONTROLLED = "hourglass"  # the shape whose difference shapes.CONTROL_NAMES split


def report(settings, shapes, results, tokens):
    """results.md / .json / .csv, val_loss.png and verdict.png from the finished runs' results;
    and, where the report replaces the records' report of a folder of this repository, the
    pages' generated blocks of that folder (page_blocks)."""
    out_dir, rates, seeds = Path(settings["out_dir"]), settings["learning_rates"], settings["seeds"]
    names = list(shapes)
    losses = {key: r["val_loss"] for key, r in results.items()}
    ran = {key: dict(val_loss=loss) for key, loss in losses.items()}  # (as rate_chosen reads them)
    unchosen = [n for n in names if not rate_chosen(settings, n, ran)]
    rows, controls, baseline = verdict_rows(settings, names, losses, unchosen, CONTROL_NAMES,
                                            CONTROLLED)
    compared = list(rows)
    # the verdict seeds at each shape's rate that finished (the selection seed where none has)
    every = {**rows, **controls}
    chosen = {n: [results[(n, every[n]["lr"], s)] for s in seeds[1:]
                  if (n, every[n]["lr"], s) in results]
              or [results[(n, every[n]["lr"], seeds[0])]] if every[n]["lr"] else []
              for n in names}
    info = describe_shapes(shapes, settings["block_size"])
    speed = {n: statistics.fmean([r["tokens_per_s"] for r in chosen[n] if r["tokens_per_s"]]
                                 or [math.nan]) for n in names}
    shapes_md = shapes_table(info, ([f"tokens/s (vs {names[0]})"], {
        n: [f"{speed[n]:,.0f} ({speed[n] / speed[names[0]]:.2f}x)"] for n in names}))
    title = (f"{settings['dataset']}, {tokens / 1e6:.3g}M tokens per run, matched budget "
             f"({settings['preset']} preset)")
    used = seeds_in_verdict(rows)
    readable = verdict_runs(results, {n: row["lr"] for n, row in every.items()
                                      if row["lr"] and n not in unchosen}, used)
    # the controls trained sessions after the shapes: their speed from one bench.py run with GPT
    bench = (bench_speeds(ROOT / settings["record_dir"] / SPEED_BENCH, {baseline, *CONTROL_NAMES})
             if settings["record_dir"] else ({}, None))
    cost = cost_rows(readable, {n: info[n]["flops_per_token"] for n in readable}, used, baseline,
                     tokens, bench)
    sections = report_sections(settings, names, losses, cost, unchosen, CONTROL_NAMES, CONTROLLED)
    extend, refine = settings["extend_rates"], settings["refine_gain"]
    extended = f" and up to {extend} past their ends where a shape chose an end" if extend else ""
    extended += " and x sqrt(2) around a choice the grid left coarse" if refine else ""
    text = (f"# Shape comparison: {title}\n\n"
            f"Baseline {info[baseline]['shape']}, block {settings['block_size']}, batch "
            f"{settings['batch_size']} x {settings['gradient_accumulation_steps']}, "
            f"{settings['max_iters']} steps, learning rates "
            f"{', '.join(map(rate_label, rates))}{extended} (min_lr = rate x "
            f"{settings['min_lr_ratio']}), "
            f"selection seed {seeds[0]}, verdict seeds {seed_header(settings, rows)}, dtype "
            f"{settings['dtype']}.\n\n"
            f"{regime_line(settings, info[baseline], tokens)}\n\n"
            f"## Every shape at its own learning rate, against {baseline}\n\n"
            f"{sections['table']}\n\n"
            f"## Phase 1: final val loss at every rate (selection seed {seeds[0]}; bold: "
            f"chosen)\n\n"
            f"{sections['rates']}\n\n## The shapes\n\n{shapes_md}\n\n"
            f"budget = non-embedding parameters without an untied LM head; tokens/s = median "
            f"training speed of a run, mean over the seeds at the chosen rate (a measurement: it "
            f"varies between machines and runs). CEA's attention column includes its Inner-FFN; "
            f"'budget without W_end' leaves out Appendix A's endpoint matrices (the ><formers' "
            f"first-layer columns on the zero padding and last rows cut to d), as the "
            f"><formers' matching does.\n\n"
            f"## Each shape's own spread: the verdict without assuming equal spreads\n\n"
            f"{sections['spreads']}\n\n"
            f"## The controls: what the {CONTROLLED}'s difference is made of\n\n"
            f"{sections['controls']}\n\n"
            f"## The cost beside the loss: each shape at {baseline}'s time and FLOPs\n\n"
            f"{sections['cost']}\n")
    write_atomic(out_dir / "results.md", text)
    runs = [dict(shape=name, model_type=shapes[name][0], lr=lr, seed=seed,
                 **{k: v for k, v in r.items() if k != "curve"})
            for (name, lr, seed), r in sorted(results.items(), key=lambda kv: (
                ALL_NAMES.index(kv[0][0]), seeds.index(kv[0][2]), kv[0][1]))]
    paths = {k: settings[k] and portable(settings[k], ROOT)  # (no path of this machine)
             for k in ("out_dir", "data_dir", "record_dir")}
    summary = json.dumps(dict(settings={**settings, **paths}, shapes={
        n: dict(i, model_args=shapes[n][1]) for n, i in info.items()},
        verdicts=verdicts_json(rows), controls=controls_json(controls),
        control_names=CONTROL_NAMES, controlled=CONTROLLED, rates_not_chosen=unchosen, cost=cost,
        runs=runs), indent=1)
    write_atomic(out_dir / "results.json", summary)
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(CSV_COLUMNS)
    writer.writerows([math.nan if run.get(k) is None and k == "val_loss" else run.get(k)
                      for k in CSV_COLUMNS] for run in runs)
    write_atomic(out_dir / "results.csv", table.getvalue())
    plot_curves({n: [r["curve"] for r in chosen[n]] for n in compared}, out_dir / "val_loss.png",
                title)
    plot_verdict(rows, baseline, out_dir / "verdict.png", title, rate_label)
    record_dir = settings["record_dir"]
    if record_dir and not report_of_the_records(record_dir, settings, results, runs):
        print(f"note: {portable(record_dir, ROOT)} keeps its report: this one holds runs that are "
              f"not its records, or fewer shapes or seeds than its results.json (this report is "
              f"in {out_dir} only)")
        record_dir = ""
    written = ("results.md", "results.json", "results.csv", "val_loss.png", "verdict.png")
    for name in written if record_dir else ():
        write_atomic(Path(record_dir) / name, (out_dir / name).read_bytes())
    also = f" and in {portable(record_dir, ROOT)}" if record_dir else ""
    if record_dir and Path(record_dir).resolve().is_relative_to(ROOT):  # the pages quote it
        changed = write_blocks(pages(ROOT), page_blocks(record_dir))
        if Path(record_dir).resolve() in {(ROOT / f).resolve() for f in looks.FOLDERS}:
            changed += write_blocks(pages(ROOT), looks.page_blocks())  # README's table
        also += "".join(f"; {portable(page, ROOT)}'s generated blocks" for page in changed)
    print(f"\n{sections['table'].split(chr(10) * 2)[0]}\n\n{sections['rates']}\n\nwrote "
          f"{out_dir / 'results.md'}, results.json, results.csv, val_loss.png and verdict.png "
          f"there{also}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, terminated)
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:
        print("\ninterrupted: run the same command again to resume (finished runs are kept, the "
              "interrupted one continues from its last checkpoint)", file=sys.stderr)
        raise SystemExit(143 if TERMINATED else 130) from None
