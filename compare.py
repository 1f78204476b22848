"""
Which shape wins at my parameter and token budget, and what does it cost? One command:

    python compare.py                          # CPU preset: 10 shapes x 600 steps,
                                               # ~45 min on 2 cores
    python compare.py --preset=gpu             # the papers' smallest shapes (12L/768 baseline)
                                               # on TinyStories
    python compare.py --seeds=1337,1338,1339   # more seeds: the table shows mean +- std
    python compare.py --models=GPT,CEA --max_iters=200 --out_dir=out-quick   # any preset key
    python shapes.py --preset=gpu              # only the matched shapes, no training

From one baseline shape (the plain GPT) shapes.matched_shapes builds every mechanism at the
baseline's non-embedding parameter count, each by its paper's own matching rule:

    GPT, hourglass, ><former, hourglass+><former, FFN-Wider, CEA (against FFN-Wider),
    LWS vanilla, LWS framed, LWS reverse, LWS crown.

Each is trained by train.py with the same data order and seed (the batch sampler is seeded
by `seed` alone, so every model sees the same batches), the same optimizer, schedule and
token budget. Everything goes into one folder (`out_dir`):

    <name>-s<seed>/config.py     the train.py config of that run (rerun it alone with train.py)
    <name>-s<seed>/train.log     its output; ckpt.pt and metrics.jsonl as train.py writes them
    <name>-s<seed>/result.json   written when the run has finished
    results.md, results.json     the table: shape, parameters by component, FLOPs/token,
                                 KV-cache bytes/token, training tokens/s, final val loss
    val_loss.png                 the validation-loss curves, against tokens and wall-clock time

Interrupt it (Ctrl-C) and run the same command again: finished runs are skipped, the
interrupted one resumes from its last checkpoint (train.py's resume is exact, so its losses
are those of an uninterrupted run), and the table and plot are rebuilt from the saved
results. Tokens/s are measurements and change from one machine state to the next; every
loss and count in the table comes out the same. Changing a run's settings and reusing its
out_dir is refused: use a new out_dir.
"""

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from configurator import ConfigError, usage_error
from dataset import find_dataset
from plot import read_evals
from shapes import (MATCHING_KEYS, ROOT, SHAPE_NAMES, baseline_of, describe_shapes, matched_shapes,
                    preset_settings, select_models, shapes_table, slug)


# ----------------------------------------------------------------------------------------
# Running one model through train.py, resumably


TRAIN_KEYS = ("dataset", "data_dir", "block_size", "batch_size", "gradient_accumulation_steps",
              "max_iters", "learning_rate", "min_lr", "warmup_iters", "eval_interval", "eval_iters",
              "log_interval", "device", "dtype", "compile")


def run_config(settings, model_type, model_args, seed, run_dir):
    """The train.py settings of one run, as the text of a config file."""
    config = {k: settings[k] for k in TRAIN_KEYS}
    config.update(out_dir=str(run_dir), lr_decay_iters=settings["max_iters"], seed=seed,
                  sample_tokens=0, model_type=model_type, model_args=model_args)
    header = "# written by compare.py; run alone with: python train.py <this file>\n"
    return header + "".join(f"{k} = {v!r}\n" for k, v in config.items())


def summarize_run(run_dir, max_iters):
    """result.json's content from a finished run's metrics.jsonl."""
    evals = {r["iter"]: r for r in read_evals(run_dir)}  # one record per step, even after resumes
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
               if line.strip()]
    steps = [r for r in records if "tokens_per_s" in r]
    # step 0 includes warm-up (and compilation)
    steps = [r for r in steps if r["iter"] > 0] or steps
    if max_iters not in evals:
        raise RuntimeError(f"{run_dir}: no evaluation at step {max_iters} in metrics.jsonl")
    median = lambda key: statistics.median(r[key] for r in steps) if steps else None
    mfus = [r["mfu"] for r in steps if r.get("mfu") is not None]
    return dict(val_loss=evals[max_iters]["val_loss"], train_loss=evals[max_iters]["train_loss"],
                tokens=evals[max_iters]["tokens"], elapsed_s=evals[max_iters]["elapsed_s"],
                tokens_per_s=median("tokens_per_s"), ms_per_iter=median("ms_per_iter"),
                mfu=statistics.median(mfus) if mfus else None,
                curve=[dict(iter=k, tokens=evals[k]["tokens"], val_loss=evals[k]["val_loss"],
                            elapsed_s=evals[k]["elapsed_s"]) for k in sorted(evals)])


def train_one(run_dir, config_text, max_iters, tag):
    """Train (or resume, or skip) one run; return its result dict."""
    result_path = run_dir / "result.json"
    config_path = run_dir / "config.py"
    if config_path.exists() and config_path.read_text() != config_text:
        raise SystemExit(f"{config_path} holds different settings from this command's. Results of "
                         f"different settings must not mix: pass a new --out_dir (or delete "
                         f"{run_dir} to retrain it).")
    if result_path.exists():
        print(f"{tag}: finished before, skipping ({result_path})")
        return json.loads(result_path.read_text())
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path.write_text(config_text)
    resume = (run_dir / "ckpt.pt").exists()
    if not resume and (run_dir / "metrics.jsonl").exists():
        (run_dir / "metrics.jsonl").unlink()  # killed before its first checkpoint: start clean
    print(f"{tag}: {'resuming from ' + str(run_dir / 'ckpt.pt') if resume else 'training'} "
          f"(log: {run_dir / 'train.log'})")
    command = [sys.executable, str(ROOT / "train.py"), str(config_path),
               f"--init_from={'resume' if resume else 'scratch'}"]
    with open(run_dir / "train.log", "a") as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, cwd=ROOT)
        for line in process.stdout:
            log.write(line)
            log.flush()  # tail -f works
            if line.startswith(("step ", "error", "Traceback")) or "Error" in line:
                print(f"  {tag} {line.rstrip()}", flush=True)
        if process.wait() != 0:
            raise SystemExit(f"{tag}: train.py failed (exit {process.returncode}); "
                             f"see {run_dir / 'train.log'}")
    result = summarize_run(run_dir, max_iters)
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(result_path)  # atomic: a result.json is always a finished run's
    return result


def parse_seeds(text):
    try:
        return [int(seed) for seed in str(text).split(",")]
    except ValueError:
        raise ConfigError(f"seeds={text!r}: give comma-separated integers, "
                          "e.g. 1337,1338") from None


def finished_elsewhere(settings, seeds, out_dir, matching, exclude):
    """{name: ((model_type, model_args), {seed: result})} of the shapes not in `exclude` whose
    runs of every seed finished in out_dir with exactly this command's settings (an earlier
    `--models=...` run), so a run of a few models adds to the table instead of replacing it."""
    names = [n for n in SHAPE_NAMES if n not in exclude and all(
        (out_dir / f"{slug(n)}-s{seed}" / "result.json").exists() for seed in seeds)]
    if not names:
        return {}
    shapes = matched_shapes(baseline_of(settings), **matching, models=names)
    found = {}
    for name, (model_type, model_args) in shapes.items():
        dirs = {seed: out_dir / f"{slug(name)}-s{seed}" for seed in seeds}
        if all((d / "config.py").read_text()
               == run_config(settings, model_type, model_args, seed, d)
               for seed, d in dirs.items()):
            found[name] = ((model_type, model_args),
                           {seed: json.loads((d / "result.json").read_text())
                            for seed, d in dirs.items()})
    return found


# ----------------------------------------------------------------------------------------
# The table and the plot


def results_table(shapes_info, results, seeds):
    """shapes.shapes_table with the training results on the right: tokens/s (mean over seeds, as
    a ratio to the first model) and the final val loss (mean, and std if several seeds)."""
    first = next(iter(shapes_info))
    base_tps = statistics.fmean(results[(first, s)]["tokens_per_s"] for s in seeds)
    head = [f"tokens/s (vs {first})",
            "val loss" + (" (mean +- std over seeds)" if len(seeds) > 1 else "")]
    cells = {}
    for name in shapes_info:
        tps = statistics.fmean(results[(name, s)]["tokens_per_s"] for s in seeds)
        losses = [results[(name, s)]["val_loss"] for s in seeds]
        spread = f" +- {statistics.stdev(losses):.4f}" if len(losses) > 1 else ""
        cells[name] = [f"{tps:,.0f} ({tps / base_tps:.2f}x)",
                       f"{statistics.fmean(losses):.4f}{spread}"]
    return shapes_table(shapes_info, (head, cells))


def plot_curves(names, results, seeds, path, title):
    """Validation loss against tokens (left) and wall-clock minutes (right); the mean over
    seeds as a line, the min-max band shaded when there are several."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), dpi=110, sharey=True)
    zoom = axes[0].inset_axes([0.42, 0.42, 0.55, 0.55])  # the last third of training, magnified
    styles = ["-", "--", "-.", ":"]
    finals, earlies, worst_finals = [], [], []
    for i, name in enumerate(names):
        curves = [results[(name, s)]["curve"] for s in seeds]
        n = min(len(c) for c in curves)
        losses = [[c[j]["val_loss"] for c in curves] for j in range(n)]
        mean = [statistics.fmean(v) for v in losses]
        finals.append(mean[-1])
        earlies.append(mean[2] if n > 5 else max(mean))  # a short run: every evaluation shows
        worst_finals.append(max(mean[-1], mean[max(0, 2 * n // 3)]))
        for ax, key, scale in ((axes[0], "tokens", 1e6), (axes[1], "elapsed_s", 60),
                               (zoom, "tokens", 1e6)):
            xs = [statistics.fmean(c[j][key] for c in curves) / scale for j in range(n)]
            line, = ax.plot(xs, mean, styles[i // 10 % 4], marker="o", markersize=2.5, label=name,
                            color=f"C{i % 10}")
            if len(seeds) > 1:
                ax.fill_between(xs, [min(v) for v in losses], [max(v) for v in losses],
                                color=line.get_color(), alpha=0.15)
    low, high = min(finals), max(earlies)
    axes[0].set_ylim(low - 0.05 * (high - low), high)  # the interesting part: after the first drop
    last_x = max(line.get_xdata()[-1] for line in zoom.get_lines())
    zoom.set_xlim(2 * last_x / 3, last_x * 1.02)
    # the better half of the models, at 2/3 of training
    top = sorted(worst_finals)[len(worst_finals) // 2]
    zoom.set_ylim(low - 0.1 * (top - low), top)
    zoom.tick_params(labelsize=7)
    zoom.grid(alpha=0.3)
    zoom.set_title("last third, magnified", fontsize=8)
    axes[0].set(xlabel="tokens trained on (millions)", ylabel="validation loss", title=title)
    axes[1].set(xlabel="wall-clock minutes (this machine, evaluation included)",
                title="the same, against time")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return axes[0].get_ylim()


# ----------------------------------------------------------------------------------------


def main(argv):
    try:
        settings = preset_settings(argv)
        seeds = parse_seeds(settings["seeds"])
        names = select_models(settings["models"])  # before matching: only these are built
    except ConfigError as e:
        usage_error(e)
    find_dataset(settings["dataset"], settings["data_dir"])  # the shapes' vocab_size is the data's
    matching = {k: settings[k] for k in MATCHING_KEYS}
    try:
        shapes = matched_shapes(baseline_of(settings), **matching, models=names)
    except (ConfigError, ValueError) as e:
        usage_error(e)
    out_dir = Path(settings["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    shapes_info = describe_shapes(shapes, settings["block_size"])
    tokens = settings["max_iters"] * settings["batch_size"] * settings["block_size"] * settings[
        "gradient_accumulation_steps"]
    print(f"{len(shapes)} shapes x {len(seeds)} seed(s), {tokens / 1e6:.2f}M tokens each, "
          f"into {out_dir}/")
    print(shapes_table(shapes_info) + "\n")

    results, start, done_now = {}, time.time(), 0
    jobs = [(seed, name) for seed in seeds for name in shapes]
    for k, (seed, name) in enumerate(jobs):
        model_type, model_args = shapes[name]
        run_dir = out_dir / f"{slug(name)}-s{seed}"
        tag = f"[{k + 1}/{len(jobs)} {name} s{seed}]"
        finished_before = (run_dir / "result.json").exists()
        results[(name, seed)] = train_one(
            run_dir, run_config(settings, model_type, model_args, seed, run_dir),
            settings["max_iters"], tag)
        if not finished_before:
            done_now += 1
            per_run = (time.time() - start) / done_now
            left = len(jobs) - k - 1
            print(f"{tag} val loss {results[(name, seed)]['val_loss']:.4f}; "
                  f"{(time.time() - start) / 60:.1f} min so far, "
                  f"~{left * per_run / 60:.0f} min to go")

    # the table: every shape finished in out_dir with these settings, not only this command's
    earlier = finished_elsewhere(settings, seeds, out_dir, matching, exclude=shapes)
    for name, (shape, result) in earlier.items():
        shapes[name] = shape
        results.update({(name, seed): r for seed, r in result.items()})
    shapes = {name: shapes[name] for name in SHAPE_NAMES if name in shapes}
    shapes_info = describe_shapes(shapes, settings["block_size"])
    title = (f"{settings['dataset']}, {tokens / 1e6:.1f}M tokens, matched budget "
             f"({settings['preset']} preset)")
    table = results_table(shapes_info, results, seeds)
    header = (f"# Shape comparison: {title}\n\n"
              f"Baseline {shapes_info[next(iter(shapes_info))]['shape']}, "
              f"block {settings['block_size']}, batch {settings['batch_size']} x "
              f"{settings['gradient_accumulation_steps']}, {settings['max_iters']} steps, "
              f"lr {settings['learning_rate']}, seeds {','.join(map(str, seeds))}. "
              f"budget = non-embedding parameters without an untied LM head; tokens/s = median "
              f"training speed of the run (a measurement: it varies between machines and runs), "
              f"val loss at the last step. CEA's attention column includes its Inner-FFN; "
              f"'budget without W_end' leaves out Appendix A's endpoint matrices (the ><formers' "
              f"first-layer columns on the zero padding and last rows cut to d), as the "
              f"><formers' matching does.\n\n")
    (out_dir / "results.md").write_text(header + table + "\n")
    (out_dir / "results.json").write_text(json.dumps(dict(
        settings=settings,
        shapes={n: dict(info, model_args=shapes[n][1]) for n, info in shapes_info.items()},
        results=[dict(model=n, seed=s, **{k: v for k, v in r.items() if k != "curve"})
                 for (n, s), r in results.items()]),
        indent=1))
    plot_curves(list(shapes), results, seeds, out_dir / "val_loss.png", title)
    print("\n" + table + f"\n\nwrote {out_dir / 'results.md'}, {out_dir / 'results.json'} and "
          f"{out_dir / 'val_loss.png'}")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:
        raise SystemExit("\ninterrupted: run the same command again to resume (finished runs are "
                         "kept, the interrupted one continues from its last checkpoint)")
