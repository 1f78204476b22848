"""
Which shape wins at my parameter budget and number of tokens, and what does it cost?

    python compare.py                                 # CPU preset: 10 shapes, one rate, one seed
    python compare.py config/compare_verdict_cpu.py   # the verdict: a rate per shape, 8 seeds
    python compare.py --models=GPT,CEA --max_iters=200 --out_dir=out-quick   # any preset key

shapes.matched_shapes builds every mechanism at the plain GPT's non-embedding parameter count;
train.py trains each on the same data order for a seed, with the same optimizer, schedule and
tokens, at its own learning rate. Phase 1: every shape at every rate with the first seed, which
chooses its rate (shapelab/verdict.py: --extend_rates, --refine_gain); phase 2: the other seeds at
that rate, judged against the GPT. The report (results.md, results.json, val_loss.png) goes into
out_dir, and with --record_dir every finished run and the report into the repository, from where
a fresh checkout goes on. --report_only=True reports what finished;
--stop_starting_after=M starts no run after M minutes. Interrupt it and run the same command
again: finished runs are kept, the others resume from their last checkpoint. A run is its
settings and its data: a folder of other settings, or a run trained on other data, is refused.
"""

import json
import math
import os
import shlex
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace

from shapelab.checkpoint import write_atomic
from shapelab.configurator import ConfigError, check_train_settings, usage_error
from shapelab.cost import SPEED_BENCH, bench_speeds, cost_rows, verdict_runs
from shapelab.dataset import check_dataset, find_dataset, ood_windows
from shapelab.plot import plot_curves
from shapelab.report import (controls_json, report_of_the_records, results_md, tokens_per_run,
                             verdict_rows, verdict_table, verdicts_json)
from shapelab.sweep import (ROOT, STOP, TERMINATED, finished_result, lock_out_dir, portable,
                            stop_children, terminated, train_one)
from shapelab.verdict import choose_rate, next_rate, rate_label, refine_rates, seeds_in_verdict
from shapes import (ALL_NAMES, CONTROL_NAMES, MATCHING_KEYS, baseline_of, check_model_settings,
                    describe_shapes, matched_shapes, preset_settings, select_models, shapes_table,
                    slug, train_defaults)

TRAIN_KEYS = ("dataset", "data_dir", "block_size", "batch_size", "gradient_accumulation_steps",
              "max_iters", "warmup_iters", "eval_interval", "eval_iters", "log_interval", "device",
              "dtype", "compile", "eval_ood")
CONTROLLED = "hourglass"  # the shape whose difference shapes.CONTROL_NAMES split


def run_config(settings, model_type, model_args, lr, seed, run_dir):
    """The train.py settings of one run; min_lr keeps the preset's ratio to the rate."""
    config = {k: settings[k] for k in TRAIN_KEYS}
    config.update(out_dir=str(run_dir), learning_rate=lr,
                  min_lr=float(f"{lr * settings['min_lr_ratio']:.12g}"),
                  lr_decay_iters=settings["max_iters"], seed=seed, sample_tokens=0,
                  model_type=model_type, model_args=model_args)
    return config


def plan_run(settings, shape, name, lr, seed, phase):
    """One run: its folder, train.py settings, tag ("GPT lr2e-3 s1337"; "GPT s1337" with one
    rate) and place in the queue (phase, seed's index, shape's index, rate)."""
    rate = [f"lr{rate_label(lr)}"] if len(settings["learning_rates"]) > 1 else []
    run_dir = Path(settings["out_dir"]) / "-".join([slug(name), *rate, f"s{seed}"])
    return SimpleNamespace(name=name, lr=lr, seed=seed, key=(name, lr, seed), dir=run_dir,
                           config=run_config(settings, *shape, lr, seed, run_dir),
                           tag=" ".join([name, *rate, f"s{seed}"]),
                           order=(phase, settings["seeds"].index(seed), ALL_NAMES.index(name), lr))


def next_runs(settings, shape, name, results):
    """The shape's runs still to train given {run.key: result}: phase 1's rates (the list, then
    past an end it chose, then around its choice), else its verdict seeds at the chosen rate."""
    seeds, listed = settings["seeds"], settings["learning_rates"]
    losses = {lr: r["val_loss"] for (n, lr, s), r in results.items() if n == name and s == seeds[0]}
    grid = list(listed)
    while all(lr in losses for lr in grid):
        lr = next_rate(grid, {r: losses[r] for r in grid}, listed, settings["extend_rates"])
        if lr is None:
            more = refine_rates(grid, losses, settings["refine_gain"])
            grid += [r for r in more if r not in grid]
            break
        grid = sorted(grid + [lr])
    missing = [lr for lr in grid if lr not in losses]
    if missing:
        return [plan_run(settings, shape, name, lr, seeds[0], 1) for lr in missing]
    lr, _ = choose_rate({lr: losses[lr] for lr in grid})
    return [plan_run(settings, shape, name, lr, s, 2) for s in seeds[1:]
            if lr is not None and (name, lr, s) not in results]


def finished_results(settings, shapes):
    """{run.key: result} of the shapes' runs finished in out_dir, walked as next_runs plans them."""
    results = {}
    for name, shape in shapes.items():
        while runs := next_runs(settings, shape, name, results):
            done = {run.key: found for run in runs if (found := finished_result(
                run.dir, run.config, settings["record_dir"], settings["data"])) is not None}
            results.update(done)
            if len(done) < len(runs):
                break
    return results


def check_lists(settings):
    """The comparison's own settings checked (a ConfigError names the key), the rates sorted."""
    seeds, rates = settings["seeds"], settings["learning_rates"]
    problems = {
        "seeds: give distinct integers, e.g. --seeds=1337,1338,1339":
            not seeds or len(set(seeds)) < len(seeds) or any(type(s) is not int for s in seeds),
        "learning_rates: give rates > 0, distinct in their first 6 digits":
            not rates or not all(type(r) in (int, float) and 0 < r < math.inf for r in rates)
            or len(set(map(rate_label, rates))) < len(rates),
        "min_lr_ratio: give a number in [0, 1]": not 0 <= settings["min_lr_ratio"] <= 1,
        "jobs: give 1 or more": settings["jobs"] < 1,
        "out_dir='': name a folder for the comparison": not settings["out_dir"]}
    problems.update({f"{key}: give a number >= 0 (0: off)": settings[key] < 0
                     for key in ("extend_rates", "stop_starting_after", "refine_gain")})
    for message, bad in problems.items():
        if bad:
            raise ConfigError(message)
    settings["learning_rates"] = tuple(sorted(float(r) for r in rates))


def main(argv):
    try:
        settings = preset_settings(argv)
        check_lists(settings)
        names = select_models(settings["models"])
    except ConfigError as e:
        usage_error(e)
    for key in ("out_dir", "data_dir", "record_dir"):  # the caller's folder's, not the repo's
        settings[key] = settings[key] and os.path.abspath(settings[key])
    meta = check_dataset(find_dataset(settings["dataset"], settings["data_dir"]),
                         settings["block_size"])
    # a run is its settings and its data: a dataset prepared again may hold other tokens
    settings["data"] = {split: meta["splits"][split].get("sha256") for split in ("train", "val")}
    if settings["eval_ood"]:  # its texts prepared once here, not by each train.py
        ood_windows(settings["eval_ood"], meta, settings["block_size"])
    out_dir, rates, seeds = Path(settings["out_dir"]), settings["learning_rates"], settings["seeds"]
    try:  # every shape, for the report of all that finished; those to train checked as train.py
        shapes = matched_shapes(baseline_of(settings), **{k: settings[k] for k in MATCHING_KEYS},
                                models=ALL_NAMES)
        for name in names:
            run_settings = {**train_defaults(),
                            **run_config(settings, *shapes[name], rates[-1], seeds[0], out_dir)}
            check_train_settings(run_settings, here=not settings["report_only"])
            check_model_settings(run_settings)
    except (ConfigError, ValueError) as e:
        usage_error(e)
    record_dir = settings["record_dir"]
    # two comparisons must not write one record_dir's report
    other = record_dir and Path(record_dir).resolve() != out_dir.resolve()
    with lock_out_dir(out_dir), lock_out_dir(record_dir, "record_dir") if other else nullcontext():
        if not settings["report_only"]:
            run_comparison(settings, {n: shapes[n] for n in names})
        # the report: every shape finished in out_dir with these settings, not only this command's
        results = finished_results(settings, shapes)
        found = {n: shapes[n] for n in shapes if n in {name for name, lr, seed in results}}
        if "GPT" not in found:
            usage_error(f"no finished GPT run in {out_dir} with these settings (the baseline of "
                        f"every verdict): train them first")
        report(settings, found, results)


def run_comparison(settings, shapes):
    """Train (or skip, or resume) both phases' runs, a round of them at a time; on Ctrl-C or
    SIGTERM, one line saying the command that goes on."""
    jobs = settings["jobs"]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    # the cores shared out between the runs side by side
    threads = max(1, int(os.environ.get("OMP_NUM_THREADS") or cores) // jobs) if jobs > 1 else None
    print(f"{len(shapes)} shapes, {jobs} run(s) at a time, into {settings['out_dir']}/")
    print(shapes_table(describe_shapes(shapes, settings["block_size"])) + "\n")
    deadline = settings["stop_starting_after"] and time.time() + 60 * settings[
        "stop_starting_after"]
    results, late = {}, []
    STOP.clear()

    def train(run):
        if deadline and time.time() > deadline:
            late.append(run)
            return None
        return train_one(run.dir, run.config, settings["max_iters"], f"[{run.tag}]", threads,
                         settings["record_dir"], settings["data"])

    try:
        while not late and (runs := sorted((run for name, shape in shapes.items() for run in
                                            next_runs(settings, shape, name, results)),
                                           key=lambda run: run.order)):
            with ThreadPoolExecutor(jobs) as pool:
                try:
                    results.update((run.key, result) for run, result in
                                   zip(runs, pool.map(train, runs)) if result is not None)
                except BaseException:  # Ctrl-C, SIGTERM, a failed run: the others stop too
                    stop_children()
                    raise
    except KeyboardInterrupt:  # exit status 130 or 143 (SIGTERM), as a shell's
        print(f"interrupted: finished runs are kept, the others resume from their last "
              f"checkpoint; continue with: {shlex.join(['python', *sys.argv])}", file=sys.stderr)
        raise SystemExit(143 if TERMINATED else 130) from None
    if late:
        print(f"stop_starting_after={settings['stop_starting_after']:g} min: {len(late)} "
              f"planned run(s) not started; the report holds the runs finished so far; the same "
              f"command goes on from them", flush=True)


def report(settings, shapes, results):
    """results.md, results.json and val_loss.png of the finished runs into out_dir, and into
    record_dir where they may replace its report."""
    out_dir, seeds, record_dir = Path(settings["out_dir"]), settings["seeds"], settings[
        "record_dir"]
    names = list(shapes)
    losses = {key: r["val_loss"] for key, r in results.items()}
    unchosen = [n for n in names if any(run.order[0] == 1 for run in next_runs(
        settings, shapes[n], n, results))]
    rows, controls, baseline = verdict_rows(settings, names, losses, unchosen, CONTROL_NAMES,
                                            CONTROLLED)
    info = describe_shapes(shapes, settings["block_size"])
    used = seeds_in_verdict(rows)
    readable = verdict_runs(results, {n: row["lr"] for n, row in {**rows, **controls}.items()
                                      if row["lr"] and n not in unchosen}, used)
    # the controls trained in a later session: their speed from one bench.py run with the GPT
    bench = bench_speeds(Path(record_dir or out_dir) / SPEED_BENCH, {baseline, *CONTROL_NAMES})
    cost = cost_rows(readable, {n: info[n]["flops_per_token"] for n in readable}, used, baseline,
                     tokens_per_run(settings), bench)
    runs = [dict(shape=name, model_type=shapes[name][0], lr=lr, seed=seed,
                 **{k: v for k, v in r.items() if k != "curve"})
            for (name, lr, seed), r in sorted(results.items(), key=lambda kv: (
                ALL_NAMES.index(kv[0][0]), seeds.index(kv[0][2]), kv[0][1]))]
    paths = {k: settings[k] and portable(settings[k], ROOT)
             for k in ("out_dir", "data_dir", "record_dir")}
    summary = json.dumps(dict(settings={**settings, **paths}, shapes={
        n: dict(i, model_args=shapes[n][1]) for n, i in info.items()},
        verdicts=verdicts_json(rows), controls=controls_json(controls),
        control_names=CONTROL_NAMES, controlled=CONTROLLED, rates_not_chosen=unchosen, cost=cost,
        runs=runs), indent=1)
    text = results_md(json.loads(summary))
    curves = {n: [r["curve"] for (shape, lr, _), r in results.items()
                  if shape == n and lr == rows[n]["lr"]] for n in rows}
    if record_dir and not report_of_the_records(record_dir, settings, runs):
        print(f"note: {portable(record_dir, ROOT)} keeps its report (this one holds fewer shapes "
              f"or seeds); this one is in {out_dir} only")
        record_dir = ""
    for folder in filter(None, (out_dir, record_dir)):
        write_atomic(Path(folder) / "results.json", summary)
        write_atomic(Path(folder) / "results.md", text)
        plot_curves(curves, Path(folder) / "val_loss.png", text.splitlines()[0].removeprefix("# "))
    also = record_dir and f" and {portable(record_dir, ROOT)}"
    print(f"\n{verdict_table(rows, baseline)}\n\nwrote results.md, results.json and val_loss.png "
          f"into {out_dir}{also}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, terminated)
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:
        print("\ninterrupted: run the same command again to resume", file=sys.stderr)
        raise SystemExit(143 if TERMINATED else 130) from None
