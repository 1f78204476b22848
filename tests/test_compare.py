"""compare.py end to end on a tiny dataset: it trains every asked-for shape through train.py at
every rate, then the other seeds at each shape's chosen rate, writes the tables and the plots, and
an interrupted comparison resumes to the same results. The rate choice and the verdict are checked
in-process on made-up losses (verdict.py), the order of the two phases with a faked train.py."""

import csv
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Executor, Future
from types import SimpleNamespace

import pytest
import torch

import compare
from shapelab import hardware
from shapelab import sweep
from shapelab import report
from shapelab import verdict
from conftest import ROOT, run_here
from shapelab.sweep import config_text
from shapes import SHAPE_NAMES, preset_settings

TINY = ["--n_layer=3", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
        "--eval_iters=2", "--width_multiple=4", "--ffn_multiple=8",
        "--models=GPT,hourglass+><former", "--dtype=float32"]


def compare_process(out_dir, data_dir, *extra):
    """compare.py started as a process of its own, in a session of its own (a Ctrl-C to the
    session reaches its train.py too, as a terminal's would)."""
    command = [sys.executable, str(ROOT / "compare.py"), *TINY, f"--data_dir={data_dir}",
               f"--out_dir={out_dir}", *extra]
    return subprocess.Popen(command, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def compare_here(capsys, out_dir, data_dir, *extra):
    """compare.py's main in this process (no interpreter to start), where the interpreter's start
    is not what is checked (its train.py runs too go through this process with `train_here`): the
    exit status, stdout and stderr, as subprocess.run gives them."""
    capsys.readouterr()  # (what came before is not this command's)
    code, message = 0, ""
    try:
        compare.main([*TINY, f"--data_dir={data_dir}", f"--out_dir={out_dir}", *extra])
    except SystemExit as e:  # (a message, as Python prints it on exit: stderr, status 1)
        code, message = (e.code, "") if isinstance(e.code, int) else (1, f"{e.code}\n")
    printed = capsys.readouterr()
    return subprocess.CompletedProcess([], code, printed.out, printed.err + message)


class TrainHere:
    """subprocess.Popen as sweep.train_one starts train.py: the command runs to its end in this
    process (conftest.run_here), its output the pipe's lines, as a finished child's."""

    def __init__(self, command, **kwargs):
        python, script, *args = command
        result = run_here(script, *args)
        self.returncode, self.stdout = result.returncode, io.StringIO(result.stdout + result.stderr)

    def wait(self, timeout=None):
        return self.returncode

    def send_signal(self, signum):  # (a run here has ended before anything can stop it)
        pass

    kill = send_signal


class InThisThread(Executor):
    """ThreadPoolExecutor as sweep.run_all uses it, one run at a time in the calling thread: the
    main thread, where a script's signal handlers can be set (run_here)."""

    def __init__(self, workers):
        pass

    def submit(self, fn, *args, **kwargs):
        future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 (the worker thread's way: in the future)
            future.set_exception(e)
        return future


def train_here(monkeypatch):
    """compare.py's train.py runs (--jobs=1) go through TrainHere in this process: for the
    commands whose train.py start (3-9 s of imports each) is not what the test checks."""
    monkeypatch.setattr(sweep, "ThreadPoolExecutor", InThisThread)
    # (sweep's own name only: subprocess.run, git's for the commit, keeps the real Popen)
    monkeypatch.setattr(sweep, "subprocess", SimpleNamespace(**{**vars(subprocess),
                                                               "Popen": TrainHere}))


def git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def losses(out_dir):
    """Everything in results.json's runs except the speed measurements."""
    runs = json.loads((out_dir / "results.json").read_text())["runs"]
    return [(r["shape"], r["lr"], r["seed"], r["val_loss"], r["train_loss"], r["tokens"])
            for r in runs]


def test_compare_two_rates_two_seeds(tmp_path, char_dataset, capsys, monkeypatch):
    """Run from another folder than the repo's, with relative paths: they are the caller's. Phase
    1 trains both shapes at both rates (seed 1), phase 2 seed 2 at each one's chosen rate; a rerun
    retrains nothing, nor does a one-rate command whose runs a two-rate one left (a run is its
    settings, whatever its folder's name). The six train.py runs go through this process (--jobs=2
    is planned and said, the runs one after the other): two train.py processes side by side are
    test_edges_compare.py's SIGTERM test, and compare.py's own process this file's interrupted
    comparison."""
    out = tmp_path / "cmp"
    args = ("--max_iters=20", "--eval_interval=10", "--seeds=1,2")
    start = git("rev-parse", "HEAD")  # (the code that runs: HEAD now or one committed since)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    with monkeypatch.context() as here:
        train_here(here)
        done = compare_here(capsys, "cmp", char_dataset.name, *args,
                            "--learning_rates=1e-3,4e-3", "--jobs=2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 at a time (1 thread each)" in done.stdout
    results = json.loads((out / "results.json").read_text())
    chosen = {v["shape"]: v["lr"] for v in results["verdicts"]}
    assert set(chosen) == {"GPT", "hourglass+><former"} and set(chosen.values()) <= {1e-3, 4e-3}
    folders = {f"{compare.slug(n)}-lr{r}-s1" for n in chosen for r in ("1e-3", "4e-3")} | {
        f"{compare.slug(n)}-lr{verdict.rate_label(lr)}-s2" for n, lr in chosen.items()}
    assert {p.name for p in out.iterdir() if p.is_dir()} == folders
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(compare.CSV_COLUMNS) and len(rows) == 6
    assert {(r["shape"], float(r["lr"]), int(r["seed"])) for r in rows} == {
        (n, lr, s) for n in chosen for lr, s in ((1e-3, 1), (4e-3, 1), (chosen[n], 2))}
    table = (out / "results.md").read_text()
    assert "| hourglass+><former |" in table and "no verdict (1 verdict seed; 2 needed)" in table
    assert "| model | lr 1e-3 | lr 4e-3 |" in table and "**" in table  # phase 1, chosen in bold
    assert (out / "val_loss.png").stat().st_size > 10_000
    assert (out / "verdict.png").stat().st_size > 10_000
    # the composed model (hourglass FFNs in a ><former) samples from its checkpoint like any other
    one = out / "hourglass-xformer-lr1e-3-s1"
    sample = run_here("sample.py", f"--out_dir={one}", "--start=All:", "--num_samples=1",
                      "--max_new_tokens=20")
    assert sample.returncode == 0 and sample.stdout.startswith("composed from"), (
        sample.stdout + sample.stderr)
    # a finished comparison is not retrained: the rerun only rebuilds the table
    monkeypatch.chdir(ROOT)  # (the commands below run in this process, from the repository)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    again = compare_here(capsys, out, char_dataset, *args, "--learning_rates=1e-3,4e-3")
    assert again.stdout.count("finished before, skipping") == 6, again.stdout + again.stderr
    assert losses(out) == [(r["shape"], r["lr"], r["seed"], r["val_loss"], r["train_loss"],
                            r["tokens"]) for r in results["runs"]]
    # its records: a fresh checkout (no out_dir) goes on from them without training anything
    recorded = compare_here(capsys, out, char_dataset, *args, "--learning_rates=1e-3,4e-3",
                            f"--record_dir={tmp_path / 'rec'}")
    assert "records: " in recorded.stdout and "training" not in recorded.stdout
    runs = sorted((tmp_path / "rec" / "runs").iterdir())
    assert [d.name for d in runs] == sorted(folders)
    assert all(f"out_dir = 'cmp/{d.name}'" in (d / "config.py").read_text() for d in runs)
    shutil.rmtree(out)
    fresh = compare_here(capsys, out, char_dataset, *args, "--learning_rates=1e-3,4e-3",
                         f"--record_dir={tmp_path / 'rec'}")
    assert f"6 copied from there into {out}" in fresh.stdout, fresh.stdout + fresh.stderr
    assert fresh.stdout.count("finished before, skipping") == 6 and "training" not in fresh.stdout
    assert losses(out) == losses(tmp_path / "rec")  # (the report written there too)
    with open(tmp_path / "rec" / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["machine"] for r in rows} == {hardware.machine_name()}
    heads = {start, *git("rev-list", f"{start}..HEAD").split()}  # (commits made meanwhile)
    assert {r["commit"].removesuffix("+changes") for r in rows} <= {h[:12] for h in heads}
    # one rate (its folders would be <slug>-s<seed>): the two-rate comparison's runs at it count
    one_rate = compare_here(capsys, out, char_dataset, *args, "--learning_rates=4e-3",
                            "--models=hourglass+><former")
    assert one_rate.returncode == 0, one_rate.stdout + one_rate.stderr
    assert chosen == {"GPT": 4e-3, "hourglass+><former": 4e-3}  # (20 steps: the higher rate)
    assert one_rate.stdout.count("finished before, skipping") == 2
    assert "training" not in one_rate.stdout and "| GPT |" in (out / "results.md").read_text()
    # other settings into the same folders are refused
    changed = compare_here(capsys, out, char_dataset, "--max_iters=30", "--eval_interval=10",
                           "--seeds=1,2", "--learning_rates=1e-3,4e-3")
    assert changed.returncode != 0 and "new --out_dir" in changed.stdout + changed.stderr
    # --report_only: the report of records trained on another machine (here: records that say
    # cuda, read where torch sees no GPU) is written, and nothing trains
    cuda = tmp_path / "cuda"
    shutil.copytree(tmp_path / "rec" / "runs", cuda / "runs")
    for config in (cuda / "runs").glob("*/config.py"):
        config.write_text(re.sub(r"^device = .*$", "device = 'cuda'", config.read_text(),
                                 flags=re.M))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    from_records = compare_here(capsys, tmp_path / "cuda-out", char_dataset, *args,
                                "--learning_rates=1e-3,4e-3", f"--record_dir={cuda}",
                                "--device=cuda", "--report_only=True")
    assert from_records.returncode == 0, from_records.stdout + from_records.stderr
    assert "training" not in from_records.stdout and (cuda / "results.md").exists()
    assert losses(tmp_path / "cuda-out") == losses(tmp_path / "rec")
    elsewhere = compare_here(capsys, tmp_path / "cuda-out", char_dataset, *args,
                             "--learning_rates=1e-3,4e-3", "--device=cuda")
    assert elsewhere.returncode != 0 and "no CUDA GPU" in elsewhere.stderr  # (to train: refused)


def test_interrupted_compare_resumes_to_the_same_results(tmp_path, char_dataset, capsys,
                                                         monkeypatch):
    """The comparison interrupted by Ctrl-C (a process of its own, with its train.py) goes on to
    the losses of the one that ran straight through (both run in this process, their train.py
    too: a resume is exact across processes)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    args = ("--max_iters=150", "--eval_interval=20")  # (the interrupt comes at step 20)
    with monkeypatch.context() as here:
        train_here(here)
        straight = compare_here(capsys, tmp_path / "straight", char_dataset, *args)
    assert straight.returncode == 0, straight.stdout + straight.stderr

    out = tmp_path / "interrupted"
    process = compare_process(out, char_dataset, *args)
    checkpoint = out / "hourglass-xformer-s1337" / "ckpt.pt"  # the second model's first checkpoint
    deadline = time.time() + 120
    while not checkpoint.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: compare.py and its train.py
    process.communicate(timeout=60)
    if (out / "hourglass-xformer-s1337" / "result.json").exists():
        pytest.fail("the second run finished before it could be interrupted: raise max_iters")
    assert (out / "gpt-s1337" / "result.json").exists()

    train_here(monkeypatch)
    resumed = compare_here(capsys, out, char_dataset, *args)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "finished before, skipping" in resumed.stdout and "resuming from" in resumed.stdout
    assert losses(out) == losses(tmp_path / "straight")


def test_missing_dataset_is_prepared_or_explained(tmp_path):
    from shapelab.dataset import find_dataset  # (compare.py's call before it matches shapes)
    with pytest.raises(SystemExit, match="not prepared.*prepare.py"):
        find_dataset("tinystories", str(tmp_path / "nothing-here"))


def test_the_plot_shows_every_evaluation_of_a_short_run(tmp_path):
    """A 3-evaluation run: the y-axis must hold all three points (it once took its limits from
    the third evaluation, the last, and the curves fell off the plot)."""
    from shapelab.plot import plot_curves

    def curve(losses):
        return [dict(iter=i, tokens=1000 * i, val_loss=v, elapsed_s=10.0 * i)
                for i, v in enumerate(losses)]

    curves = {"GPT": [curve([4.2, 2.3, 2.2126])], "hourglass": [curve([4.2, 2.4, 2.2147])]}
    low, high = plot_curves(curves, tmp_path / "p.png", "t")
    assert low <= 2.2126 and high >= 4.2


def drawn_curves(monkeypatch, tmp_path, n_evals, n_shapes, seeds):
    """plot_curves' figure for made-up runs of n_evals evaluations (kept, drawn, before closing)."""
    from shapelab import plot
    figures, save = [], plot.save_figure
    monkeypatch.setattr(plot, "save_figure", lambda fig, path: (figures.append(fig),
                                                               save(fig, path)))
    curves = {f"shape{k}": [[dict(iter=50 * j, tokens=6400 * j, elapsed_s=9.0 * j + k,
                                  val_loss=2.2 + 0.001 * k + 0.0003 * s + 2.25 / (1 + 3 * j))
                             for j in range(n_evals)] for s in range(seeds)]
              for k in range(n_shapes)}
    plot.plot_curves(curves, tmp_path / "p.png", "a title")
    assert (tmp_path / "p.png").stat().st_size > 0
    return figures[0], curves


@pytest.mark.parametrize("n_evals,n_shapes,seeds,inset", [(3, 2, 1, False), (13, 10, 3, True)])
def test_the_curves_read_for_a_short_and_a_long_run(monkeypatch, tmp_path, n_evals, n_shapes,
                                                    seeds, inset):
    """compare.py's val_loss.png after `--max_iters=100 --eval_interval=50` (3 evaluations) once
    had an inset of near-vertical lines, 6-decimal ticks, an end point cut off and the inset's
    title on the plot's: the inset comes only with plot.INSET_MIN_EVALS evaluations, every tick
    label reads as a number of a few decimals, every curve ends inside the axes, titles apart."""
    from shapelab import plot
    assert (n_evals >= plot.INSET_MIN_EVALS) == inset
    fig, curves = drawn_curves(monkeypatch, tmp_path, n_evals, n_shapes, seeds)
    left, right = fig.axes
    assert len(left.child_axes) == inset and not right.child_axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(fig)  # (closed: drawn again, as saved)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in (left, right, *left.child_axes):
        for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            shown = [t.get_text() for t, v in zip(axis.get_ticklabels(), axis.get_ticklocs())
                     if min(lim) <= v <= max(lim) and t.get_text()]
            assert len(shown) >= 3 or axis is right.yaxis  # (shared with the left one's)
            assert all(re.fullmatch(r"-?\d+(\.\d{1,3})?", t) for t in shown), (
                shown)
            assert axis.get_offset_text().get_text() == ""
    means = {name: [sum(c[j]["val_loss"] for c in runs) / len(runs) for j in range(n_evals)]
             for name, runs in curves.items()}
    for ax in (left, right):  # every curve's last point inside the axes (the first, at the top)
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        for line in ax.get_lines():
            x, y = line.get_xdata()[-1], line.get_ydata()[-1]
            assert x0 < x < x1 and y0 < y < y1, (line.get_label(), x, y, ax.get_xlim(), (y0, y1))
    assert left.get_ylim()[1] > max(m[0] for m in means.values()) or n_evals > 5
    legend = [t.get_text() for t in right.get_legend().get_texts()]
    assert legend == [f"{name}: {m[-1]:.4f}" for name, m in means.items()]  # the final val losses
    if inset:
        zoom = left.child_axes[0]
        best = min(means, key=lambda name: means[name][-1])
        (x0, x1), (y0, y1) = zoom.get_xlim(), zoom.get_ylim()
        end = [line for line in zoom.get_lines() if line.get_label().startswith(best + ":")][0]
        assert x0 < end.get_xdata()[-1] < x1 and y0 < end.get_ydata()[-1] < y1
        assert sum(x0 <= x <= x1 for x in end.get_xdata()) >= 3  # a curve, not one segment
        title, inset_title = left.title.get_window_extent(renderer), zoom.title.get_window_extent(
            renderer)
        assert not title.overlaps(inset_title) and inset_title.y1 < left.get_window_extent(
            renderer).y1


# ----------------------------------------------------------------------------------------
# The rate choice and the verdict, on made-up losses


def test_each_shape_takes_the_rate_of_its_lowest_loss_and_an_end_of_the_list_is_flagged():
    assert verdict.choose_rate({1e-3: 1.70, 2e-3: 1.65, 4e-3: 1.68}) == (2e-3, "")
    assert verdict.choose_rate({1e-3: 1.60, 2e-3: 1.65, 4e-3: 1.68}) == (1e-3, "lowest")
    assert verdict.choose_rate({1e-3: 1.70, 2e-3: 1.65, 4e-3: 1.61}) == (4e-3, "highest")
    # a diverged rate (None) is never chosen; the best finite one inside the list is not an end
    assert verdict.choose_rate({1e-3: 1.70, 2e-3: 1.65, 4e-3: None}) == (2e-3, "")
    assert verdict.choose_rate({1e-3: None, 2e-3: float("nan")}) == (None, "")
    assert verdict.choose_rate({2e-3: 1.65}) == (2e-3, "only")
    # the flag that looks past the ends chosen: one more rate there, the list's own step
    assert verdict.rates_flag(verdict.extended_rates([1e-3, 2e-3, 4e-3], ["", "highest"])) == (
        "--learning_rates=1e-3,2e-3,4e-3,8e-3")
    assert verdict.rates_flag(verdict.extended_rates([1e-3, 3e-3], ["lowest", "highest"])) == (
        "--learning_rates=3.33e-4,1e-3,3e-3,9e-3")
    assert verdict.extended_rates([2e-3], ["only"]) == [1e-3, 2e-3, 4e-3]
    assert [verdict.rate_label(r) for r in (0.002, 1.5e-4, 6e-4, 1e-2)] == [
        "2e-3", "1.5e-4", "6e-4", "1e-2"]


def made_up_rows(shape_losses, gpt_losses, rates=(1e-3, 2e-3, 4e-3), more=None):
    """shape_rows of GPT, one shape (and `more` shapes) from {rate: [loss per seed]} (the first
    seed: the selection seed, phase 1)."""
    losses = {}
    tables = (("GPT", gpt_losses), ("shape", shape_losses), *(more or {}).items())
    for name, table in tables:
        for lr, seeds in table.items():
            losses.update({(name, lr, s): loss for s, loss in enumerate(seeds, 1)})
    seeds = range(1, max(len(v) for v in shape_losses.values()) + 1)
    return verdict.shape_rows(losses, [name for name, _ in tables], list(rates), list(seeds),
                              "GPT")


def additive_model_fit(table):
    """sigma^2 of the two-way additive model by least squares on dummy columns (numpy), a check
    on pooled_differences that shares none of its arithmetic. table: {name: [loss per seed]}."""
    import numpy as np
    names, n = list(table), len(next(iter(table.values())))
    y, x = [], []
    for i, name in enumerate(names):
        for s, loss in enumerate(table[name]):
            y.append(loss)
            x.append([1.0] + [float(i == j) for j in range(1, len(names))]
                     + [float(s == t) for t in range(1, n)])
    x, y = np.array(x), np.array(y)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ coef
    return float(residual @ residual) / ((len(names) - 1) * (n - 1))


def test_the_verdict_is_one_model_of_every_run_at_the_verdict_seeds():
    """The selection seed (the first) is left out; the difference, its interval and the
    detectable difference come from the residual variance pooled over every shape."""
    gpt = {1e-3: [1.70], 2e-3: [1.600, 1.650, 1.660, 1.640], 4e-3: [1.69]}
    lws = {1e-3: [1.71], 2e-3: [1.610, 1.658, 1.652, 1.646], 4e-3: [1.70]}
    # better on every verdict seed by ~0.03 at its own (higher) rate; a selection-seed loss that
    # would change the mean if it counted
    rows = made_up_rows({1e-3: [1.75], 2e-3: [1.66], 4e-3: [1.500, 1.620, 1.631, 1.609]}, gpt,
                        more={"LWS": lws})
    row = rows["shape"]
    assert row["lr"] == 4e-3 and row["edge"] == "highest"
    assert row["losses"] == {2: 1.620, 3: 1.631, 4: 1.609}  # the verdict seeds only
    d = row["diff"]
    assert d["n"] == 3 and d["df"] == 4 and d["mean"] == pytest.approx(-0.03)
    table = {"GPT": [1.650, 1.660, 1.640], "shape": [1.620, 1.631, 1.609],
             "LWS": [1.658, 1.652, 1.646]}
    assert d["sigma"] ** 2 == pytest.approx(additive_model_fit(table), rel=1e-9)
    assert d["se"] == pytest.approx(math.sqrt(2 * d["sigma"] ** 2 / 3))
    t = 2.7764451051977987  # t(0.975, 4)
    assert (d["lo"], d["hi"]) == pytest.approx((-0.03 - t * d["se"], -0.03 + t * d["se"]))
    assert d["detectable"] == pytest.approx((t + 0.9409646403) * d["se"])  # + t(0.80, 4)
    assert row["verdict"] == f"better by 0.0300 [{-d['hi']:.4f}, {-d['lo']:.4f}]"
    assert rows["LWS"]["verdict"].startswith("no difference larger than ")
    assert rows["LWS"]["verdict"].endswith(" detected at this scale")
    text = report.verdict_table(rows, "GPT")
    assert f"| shape | 4e-3 (highest: extend) | 3 | 1.6200 +- 0.0110 | -0.0300 [{d['lo']:+.4f}, " \
           f"{d['hi']:+.4f}] | {d['detectable']:.4f} / {d['detectable_family']:.4f} |" in text
    footer = report.verdict_footer(rows, [1e-3, 2e-3, 4e-3], [1, 2, 3, 4], "GPT")
    assert "verdict seeds: 2, 3, 4 (the selection seed 1" in footer and "Holm" in footer
    assert "`--learning_rates=1e-3,2e-3,4e-3,8e-3`" in footer
    assert "| shape | 1.7500 | 1.6600 | **1.5000** |" in report.rates_table(
        rows, [1e-3, 2e-3, 4e-3])

def test_a_shape_ahead_of_the_others_shows_the_verdicts_seeds_and_the_rest_apart():
    """A comparison under way: one shape has a fifth seed GPT has not reached. Its mean, std and
    difference are over seeds 2-4 (those of the verdict); the fifth is counted apart."""
    gpt = {1e-3: [1.70], 2e-3: [1.600, 1.650, 1.660, 1.640], 4e-3: [1.69]}
    rows = made_up_rows({1e-3: [1.75], 2e-3: [1.66], 4e-3: [1.500, 1.620, 1.631, 1.609, 1.3]},
                        gpt)
    assert rows["shape"]["beyond"] == [5] and rows["GPT"]["beyond"] == []
    assert rows["shape"]["mean"] == pytest.approx(1.62) and rows["shape"]["diff"]["n"] == 3
    assert rows["shape"]["diff"]["mean"] == pytest.approx(1.62 - 1.65)
    text = report.verdict_table(rows, "GPT")
    assert "| shape | 4e-3 (highest: extend) | 3 (+1 not in the verdict yet) | 1.6200 +- 0.0110 |" \
        in text


def test_a_shape_with_no_finished_run_is_not_called_diverged():
    """A job of fixed length can stop before a shape's first run: its row says so."""
    gpt = {2e-3: [1.60, 1.65, 1.66]}
    rows = made_up_rows({2e-3: [1.61, 1.64, 1.65]}, gpt, more={"waiting": {}, "lost": {
        2e-3: [float("nan")]}})
    assert rows["waiting"]["verdict"] == "no verdict (no run finished yet)"
    assert rows["lost"]["verdict"] == "no verdict (diverged at every rate)"
    text = report.verdict_table(rows, "GPT")
    assert "| waiting | - | 0 | no run finished yet |" in text
    assert "| lost | - | 0 | diverged at every rate |" in text


def test_holm_corrects_for_testing_many_shapes_against_one_baseline():
    """Holm tests the smallest p at 5% / m, the next at 5% / (m - 1), ... and stops at the first
    it keeps: p = 0.03 passes 5% alone but not as the second of three."""
    assert verdict.holm({"a": 0.001, "b": 0.03, "c": 0.04}) == {"a": True, "b": False,
                                                              "c": False}
    assert verdict.holm({"a": 0.02, "b": 0.01}) == {"b": True, "a": True}  # .01 < .025, .02 < .05
    assert verdict.holm({"a": 0.2, "b": 0.001}) == {"b": True, "a": False}
    kept = dict(mean=-0.01, se=0.001, lo=-0.012, hi=-0.008, p=0.03, detectable=0.003,
                detectable_family=0.004, holm=False)
    assert verdict.verdict(kept) == "no difference larger than 0.0040 detected at this scale"
    assert verdict.verdict({**kept, "holm": True}) == "better by 0.0100 [0.0080, 0.0120]"
    assert verdict.verdict({**kept, "holm": True, "mean": 0.01, "lo": 0.008, "hi": 0.012}) == (
        "worse by 0.0100 [0.0080, 0.0120]")


def test_a_verdict_needs_two_verdict_seeds_and_survives_odd_records():
    gpt = {1e-3: [1.70], 2e-3: [1.650, 1.660], 4e-3: [1.69]}
    one = made_up_rows({1e-3: [1.75], 2e-3: [1.55, 1.56], 4e-3: [1.76]}, gpt)
    assert one["shape"]["verdict"] == "no verdict (1 verdict seed; 2 needed)"
    # identical differences: no spread, no interval (not 'worse by 0.0000 +- 0.0000')
    same = verdict.pooled_differences({"GPT": {2: 1.6, 3: 1.7}, "s": {2: 1.6, 3: 1.7}}, "GPT")
    assert same["s"]["verdict"].startswith("no verdict (the runs show no spread")
    # a shape missing a seed the others have: compared on the seeds all have, no KeyError
    part = verdict.pooled_differences({"GPT": {2: 1.6, 3: 1.7, 4: 1.65},
                                       "s": {2: 1.62, 3: 1.69}, "t": {}}, "GPT")
    assert part["s"]["n"] == 2 and part["t"]["verdict"].startswith("no verdict (no verdict seed")
    diverged = made_up_rows({1e-3: [1.75], 2e-3: [1.6, None, 1.61], 4e-3: [1.76]},
                            {1e-3: [1.70], 2e-3: [1.650, 1.660, 1.655], 4e-3: [1.69]})
    assert diverged["shape"]["verdict"] == "no verdict (diverged at seed 2)"


def test_refine_rates_looks_between_the_grids_rates_only_where_it_is_coarse():
    # the CPU verdict's hourglass at the selection seed: the parabola's best near 1.3e-3
    hourglass = {5e-4: 1.6907, 1e-3: 1.6460, 2e-3: 1.6538, 4e-3: 1.6961}
    assert verdict.parabola_gain(sorted(hourglass), hourglass, 1e-3) == pytest.approx(
        0.00324, abs=1e-5)
    assert verdict.refine_rates(list(hourglass), hourglass, 0.002) == [7.07e-4, 1.41e-3]
    assert verdict.refine_rates(list(hourglass), hourglass, 0.004) == []
    assert verdict.refine_rates(list(hourglass), hourglass, 0) == []
    gpt = {1e-3: 1.6592, 2e-3: 1.6473, 4e-3: 1.6687}  # its best well inside: no refinement
    assert verdict.refine_rates(list(gpt), gpt, 0.002) == []
    edge = {1e-3: 1.70, 2e-3: 1.65, 4e-3: 1.60}  # an end: extending, not refining
    assert verdict.refine_rates(list(edge), edge, 0.002) == []


def test_close_rates_step_past_their_end_by_at_least_half_again():
    """Rates a hair apart give a step that rounds back into the list without a floor."""
    listed = [1e-3, 1.0004e-3]
    assert verdict.next_rate(listed, {1e-3: 1.7, 1.0004e-3: 1.6}, listed, 2) == 1.5e-3
    assert verdict.next_rate(listed, {1e-3: 1.6, 1.0004e-3: 1.7}, listed, 2) == pytest.approx(
        6.67e-4)


def test_rates_written_the_same_are_refused():
    with pytest.raises(compare.ConfigError, match="written the same"):
        compare.check_lists(preset_settings(["--learning_rates=1e-3,1.0000001e-3"]))


def test_the_verdict_figure_reads_with_one_rate_one_seed_and_a_diverged_rate(tmp_path):
    from shapelab.plot import plot_verdict
    one = made_up_rows({2e-3: [1.62]}, {2e-3: [1.65]}, rates=(2e-3,))
    plot_verdict(one, "GPT", tmp_path / "one.png", "one rate, one seed", verdict.rate_label)
    diverged = made_up_rows({1e-3: [1.75], 2e-3: [1.66, 1.65, 1.64], 4e-3: [None]},
                            {1e-3: [1.70], 2e-3: [1.650, 1.660, 1.640], 4e-3: [9.0]})
    plot_verdict(diverged, "GPT", tmp_path / "diverged.png", "t", verdict.rate_label)
    assert (tmp_path / "one.png").stat().st_size > 10_000
    assert (tmp_path / "diverged.png").stat().st_size > 10_000


# ----------------------------------------------------------------------------------------
# The two phases, with a faked train.py (in-process)


def test_phase_two_starts_a_shapes_seeds_only_after_its_phase_one(tmp_path, char_dataset,
                                                                    monkeypatch):
    """Two jobs at once, three rates, three seeds: a shape's seeds 8 and 9 run at the rate its
    phase-1 runs (seed 7) chose, and only once they have all finished."""
    loss = {"gpt": {1e-3: 1.70, 2e-3: 1.65, 4e-3: 1.68},
            "hourglass": {1e-3: 1.66, 2e-3: 1.64, 4e-3: 1.60}}
    events, lock, running, most = [], threading.Lock(), [], []

    def fake_train_one(run_dir, config, max_iters, tag, threads):
        key = (config["model_type"], config["learning_rate"], config["seed"])
        with lock:
            running.append(key)
            events.append(("start", key))
            most.append(len(running))
        time.sleep(0.05)
        with lock:
            running.remove(key)
            events.append(("end", key))
        value = loss[key[0]][key[1]] + 0.001 * key[2]
        return dict(val_loss=value, train_loss=value, tokens=1, elapsed_s=1.0, tokens_per_s=1.0,
                    curve=[])

    reported = {}
    monkeypatch.setattr(compare, "train_one", fake_train_one)
    monkeypatch.setattr(compare, "report", lambda *args: reported.update(args[2]))
    compare.main([*TINY[:-2], "--models=GPT,hourglass", f"--data_dir={char_dataset}",
                  f"--out_dir={tmp_path / 'cmp'}", "--learning_rates=4e-3,1e-3,2e-3",
                  "--seeds=7,8,9", "--jobs=2"])
    assert len(events) == 2 * 2 * (3 + 2) and max(most) == 2 and len(reported) == 10
    for model, chosen in (("gpt", 2e-3), ("hourglass", 4e-3)):
        phase1_done = max(events.index(("end", (model, lr, 7))) for lr in loss[model])
        later = [(i, key) for i, (kind, key) in enumerate(events)
                 if kind == "start" and key[0] == model and key[2] != 7]
        assert [key for _, key in later] == [(model, chosen, 8), (model, chosen, 9)]
        assert min(i for i, _ in later) > phase1_done


def test_help_shows_the_list_settings():
    shown = run_here("compare.py", "--help")
    assert shown.returncode == 0
    for setting in ("--learning_rates=(0.002,)", "--seeds=(1337,)", "--jobs=1",
                    "--min_lr_ratio=0.1"):
        assert setting in shown.stdout


@pytest.mark.parametrize("name", ["compare_verdict_cpu", "compare_verdict_gpu",
                                  "compare_verdict_cpu_scale_gpu", "compare_verdict_tinystories"])
def test_the_verdict_configs_load(name):
    settings = preset_settings([str(ROOT / "config" / f"{name}.py")])
    compare.check_lists(settings)
    assert len(settings["learning_rates"]) >= 2 and len(settings["seeds"]) >= 3
    assert len(settings["seeds"]) >= 9 or name == "compare_verdict_gpu"  # 8 verdict seeds
    assert settings["preset"] == ("gpu" if name.endswith(("_gpu", "tinystories")) and
                                  name != "compare_verdict_cpu_scale_gpu" else "cpu")
    assert compare.select_models(settings["models"]) == SHAPE_NAMES


def test_a_shape_that_chose_an_end_tries_past_it_up_to_extend_rates(tmp_path, char_dataset,
                                                                      monkeypatch):
    """--extend_rates=2: the hourglass keeps getting better at higher rates, so it tries 8e-3 and
    1.6e-2 past the list (1e-3, 2e-3, 4e-3), one at a time, then stops (still at an end: flagged)
    and runs its seeds at 1.6e-2; the GPT chose inside its list and tries nothing more. A later
    command for the GPT alone finds the hourglass's grown list in out_dir and reports it."""
    trained = []

    def fake_train_one(run_dir, config, max_iters, tag, threads):
        model, lr, seed = config["model_type"], config["learning_rate"], config["seed"]
        trained.append((model, lr, seed))
        value = (abs(math.log2(lr / 2e-3)) if model == "gpt" else -lr) + 1.6 + 1e-3 * seed
        result = dict(val_loss=value, train_loss=value, tokens=1, elapsed_s=1.0, tokens_per_s=1.0,
                      ms_per_iter=1.0, mfu=None, curve=[])
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.py").write_text(config_text(config))
        (run_dir / "result.json").write_text(json.dumps(result))
        return result

    reported = {}
    monkeypatch.setattr(compare, "train_one", fake_train_one)
    monkeypatch.setattr(compare, "report", lambda *args: reported.update(args[2]))
    common = [*TINY[:-2], f"--data_dir={char_dataset}", f"--out_dir={tmp_path / 'cmp'}",
              "--learning_rates=1e-3,2e-3,4e-3", "--extend_rates=2", "--seeds=7,8,9"]
    compare.main([*common, "--models=GPT,hourglass", "--jobs=2"])
    assert sorted(k for k in trained if k[0] == "gpt") == sorted(
        [("gpt", lr, 7) for lr in (1e-3, 2e-3, 4e-3)] + [("gpt", 2e-3, 8), ("gpt", 2e-3, 9)])
    hourglass = [k for k in trained if k[0] == "hourglass"]
    assert [k for k in hourglass if k[2] == 7][3:] == [("hourglass", 8e-3, 7),  # in turn
                                                      ("hourglass", 1.6e-2, 7)]
    assert sorted(k for k in hourglass if k[2] != 7) == [("hourglass", 1.6e-2, 8),
                                                  ("hourglass", 1.6e-2, 9)]
    assert len(reported) == 5 + 7
    rows = verdict.shape_rows({k: r["val_loss"] for k, r in reported.items()},
                              ["GPT", "hourglass"], sorted({k[1] for k in reported}), [7, 8, 9],
                              "GPT")
    assert rows["hourglass"]["edge"] == "highest" and len(rows["hourglass"]["phase1"]) == 5
    assert list(rows["GPT"]["phase1"]) == [1e-3, 2e-3, 4e-3]
    assert "| GPT | 2.6070 | **1.6070** | 2.6070 | - | - |" in report.rates_table(
        rows, sorted(rows["hourglass"]["phase1"]))
    footer = report.verdict_footer(rows, [1e-3, 2e-3, 4e-3], [7, 8, 9], "GPT", 2)
    assert "up to 2 beyond the list" in footer and "`--extend_rates=3`" in footer
    # the GPT alone: nothing trains, and the hourglass's runs (all 7) join its table
    trained.clear(), reported.clear()
    compare.main([*common, "--models=GPT"])
    assert trained and all(k[0] == "gpt" for k in trained)  # (faked: not skipped)
    assert {k for k in reported if k[0] == "hourglass"} == {
        ("hourglass", lr, 7) for lr in (1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2)} | {
        ("hourglass", 1.6e-2, s) for s in (8, 9)}


@pytest.mark.parametrize("rates, extend", [((1e-3, 2e-3), 1.5), ((1e-3, 2e-3), -1), ((2e-3,), 2)])
def test_extend_rates_is_checked(rates, extend):
    with pytest.raises(compare.ConfigError, match="extend_rates="):  # (a float: when read)
        compare.check_lists(preset_settings([f"--learning_rates={','.join(map(str, rates))}",
                                             f"--extend_rates={extend}"]))


def test_next_rate_steps_past_the_end_chosen_until_extend_rates_are_used():
    listed = [1e-3, 2e-3, 4e-3]
    assert verdict.next_rate(listed, {1e-3: 1.7, 2e-3: 1.6, 4e-3: 1.65}, listed, 3) is None
    assert verdict.next_rate(listed, {1e-3: 1.5, 2e-3: 1.6, 4e-3: 1.65}, listed, 3) == 5e-4
    assert verdict.next_rate(listed, {1e-3: 1.7, 2e-3: 1.6, 4e-3: 1.5}, listed, 3) == 8e-3
    assert verdict.next_rate(listed, {1e-3: 1.7, 2e-3: 1.6, 4e-3: 1.5}, listed, 0) is None
    grown = [5e-4, 1e-3, 2e-3, 4e-3, 8e-3]  # two past the ends already: a third, not a fourth
    losses = {5e-4: 1.4, 1e-3: 1.5, 2e-3: 1.6, 4e-3: 1.65, 8e-3: 1.7}
    assert verdict.next_rate(grown, losses, listed, 3) == 2.5e-4
    assert verdict.next_rate(grown, losses, listed, 2) is None
    assert verdict.next_rate(listed, {1e-3: 1.5, 2e-3: None, 4e-3: None}, listed, 1) == 5e-4


def test_no_run_starts_after_the_deadline_and_the_report_holds_what_finished(
        tmp_path, char_dataset, monkeypatch):
    """--stop_starting_after: the runs started before it finish, none starts after it, the report
    has the finished ones, and the same command goes on with the rest."""
    trained, reported = [], {}

    def fake_train_one(run_dir, config, max_iters, tag, threads):
        if (run_dir / "result.json").exists():  # (finished: skipped, as train_one does)
            return json.loads((run_dir / "result.json").read_text())
        trained.append((config["model_type"], config["learning_rate"], config["seed"]))
        time.sleep(0.3)
        value = 1.6 + abs(math.log2(config["learning_rate"] / 2e-3)) + 1e-3 * config["seed"]
        result = dict(val_loss=value, train_loss=value, tokens=1, elapsed_s=1.0,
                      tokens_per_s=1.0, ms_per_iter=1.0, mfu=None, curve=[])
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.py").write_text(config_text(config))
        (run_dir / "result.json").write_text(json.dumps(result))
        return result

    monkeypatch.setattr(compare, "train_one", fake_train_one)
    monkeypatch.setattr(compare, "report", lambda *args: reported.update(args[2]))
    argv = [*TINY[:-2], "--models=GPT", f"--data_dir={char_dataset}",
            f"--out_dir={tmp_path / 'cmp'}", "--learning_rates=1e-3,2e-3,4e-3", "--seeds=7,8,9",
            "--jobs=2", "--stop_starting_after=0.002"]  # 0.12 s: the first two start, no more
    compare.main(argv)
    assert len(trained) == 2 and set(reported) == {("GPT", lr, 7) for _, lr, _ in trained}
    trained.clear()
    compare.main(argv[:-1])  # no deadline: the rest
    assert sorted(trained) == [("gpt", 2e-3, 8), ("gpt", 2e-3, 9), ("gpt", 4e-3, 7)]


def test_a_deadline_before_any_run_finished_says_so_in_one_line(tmp_path, char_dataset, capsys,
                                                               monkeypatch):
    """--stop_starting_after=1e-9: no run starts, and there is no report to write (it was a
    ValueError from the plot of no curves): one line says so, and nothing is half-written."""
    monkeypatch.setattr(compare, "train_one", lambda *args: pytest.fail("a run started"))
    result = compare_here(capsys, tmp_path / "cmp", char_dataset, "--stop_starting_after=1e-9")
    assert result.returncode == 0, result.stderr
    assert "no run finished" in result.stdout and "Traceback" not in result.stderr
    assert not list((tmp_path / "cmp").glob("results.*"))


# ----------------------------------------------------------------------------------------
# The report of made-up records: the controls as a family of their own, the cost, the blocks


def made_up_results(settings, names, missing=()):
    """{(name, lr, seed): result} of every shape in `names`: phase 1 at 1e-3 (worse) and 2e-3
    on the first seed, the verdict seeds at 2e-3 (but those in `missing`, (name, seed) pairs).
    The hourglass is 0.02 below the GPT, GPT wide 0.01 (half of it), the rest level; each
    result has a curve of three evaluations, a speed (the hourglass at 0.6x) and a machine."""
    tokens = compare.tokens_per_run(settings)
    offset = {"GPT": 0.0, "hourglass": -0.02, "><former": 0.0, "GPT wide": -0.01,
              "hourglass same-d": -0.015}
    speed = {"hourglass": 600, "hourglass same-d": 700}
    seeds = settings["seeds"]
    results = {}
    for k, name in enumerate(names):
        for lr in (1e-3, 2e-3):
            for i, seed in enumerate(seeds if lr == 2e-3 else seeds[:1]):
                if (name, seed) in missing:
                    continue
                wiggle = 0.002 * math.sin(3 * i + 2 * k)  # (a spread of each shape's own)
                loss = 1.6 + offset[name] + 0.01 * math.cos(i) + wiggle + (lr == 1e-3) * 0.05
                curve = [dict(iter=j, tokens=tokens * j // 2, val_loss=v, elapsed_s=5.0 * j)
                         for j, v in enumerate((4.2, loss + 0.1, loss))]
                results[(name, lr, seed)] = dict(
                    val_loss=loss, train_loss=loss, tokens=tokens, elapsed_s=10.0,
                    tokens_per_s=speed.get(name, 1000), machine="CPU A", curve=curve)
    return results


def made_up_report(folder, names, missing=(), record_dir=""):
    settings = preset_settings([*TINY[:-2], "--seeds=1,2,3,4,5", "--learning_rates=1e-3,2e-3",
                                "--extend_rates=0", "--refine_gain=0", f"--out_dir={folder}",
                                f"--record_dir={record_dir}"])
    compare.check_lists(settings)
    folder.mkdir()
    shapes = compare.matched_shapes(compare.baseline_of(settings), **{
        k: settings[k] for k in compare.MATCHING_KEYS}, models=names)
    results = made_up_results(settings, names, missing)
    compare.report(settings, shapes, results, compare.tokens_per_run(settings))
    return (folder / "results.md").read_text(), json.loads((folder / "results.json").read_text())


def test_the_controls_are_a_family_of_their_own_and_the_cost_stands_beside(tmp_path):
    """The controls' records leave the verdict of the shapes compared as it was (its table, its
    Holm family, results.json's verdicts); GPT wide, with every verdict seed, shows half the
    hourglass's difference, with an interval; hourglass same-d, one seed short, says how many it
    has. page_blocks gives the report's parts from results.json alone."""
    compared = ["GPT", "hourglass", "><former"]
    alone, held = made_up_report(tmp_path / "compare_alone", compared)
    text, with_controls = made_up_report(tmp_path / "compare_verdict_test",
                                         [*compared, "GPT wide", "hourglass same-d"],
                                         missing=[("hourglass same-d", 5)])
    verdict_part = lambda t: t.split("## The shapes")[0]  # noqa: E731
    assert verdict_part(text) == verdict_part(alone)
    assert with_controls["verdicts"] == held["verdicts"]
    assert re.search(r"^\| hourglass \| .* \| better by 0\.0[12]\d\d \[", text, re.M)
    assert "| GPT wide |" not in verdict_part(text)
    wide = next(c for c in with_controls["controls"] if c["shape"] == "GPT wide")["reading"]
    assert wide["vs_baseline"]["mean"] == pytest.approx(-0.01, abs=0.002)
    assert wide["vs_reference"]["mean"] == pytest.approx(0.01, abs=0.003)
    share = wide["share"]
    assert share["ratio"] == pytest.approx(0.5, abs=0.1) and share["lo"] < 0.5 < share["hi"]
    assert "| GPT wide | 2e-3 (highest: extend) | 4 | " in text
    assert f"{share['ratio']:.0%} [{share['lo']:.0%}, {share['hi']:.0%}] |" in text
    assert "| hourglass same-d | 2e-3 (highest: extend) | 3 of 4 verdict seeds so far |" in text
    assert re.search(r"^\| GPT wide \| 1\.6\d+ \| \*\*1\.5\d+\*\* \|$", text, re.M)  # its phase 1
    assert "No control run recorded yet" in alone
    assert "| hourglass | 0.60x (4 on CPU A) | " in text  # the cost, on the verdict's seeds
    assert "| GPT wide | 1.00x (4 on CPU A) | " in text
    blocks = compare.page_blocks(tmp_path / "compare_verdict_test")
    assert set(blocks) == {f"verdict_test.{part}" for part in (
        "regime", "words", "table", "rates", "spreads", "controls", "cost")}
    for part in ("regime", "table", "rates", "spreads", "controls", "cost"):
        assert blocks[f"verdict_test.{part}"] in text, part
    assert re.search(r"^\| hourglass \| better by 0\.0[12]\d \[", blocks["verdict_test.words"],
                     re.M)


def test_a_records_report_writes_its_blocks_into_the_pages_that_show_them(tmp_path, monkeypatch):
    """A report that replaces the records' report of a folder in the repository (here: a made-up
    repository in tmp_path) writes each part into the generated block of that name on its
    pages, the text outside the blocks and every other block as they were."""
    monkeypatch.setattr(compare, "ROOT", tmp_path)
    monkeypatch.setattr(compare, "report_of_the_records", lambda *args: True)
    records = tmp_path / "results" / "compare_verdict_test"
    records.mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    command = "python compare.py config/compare_verdict_test.py --report_only=True"
    page = ("# The lab\n\nProse.\n\n"
            f"<!-- generated: verdict_test.words by `{command}` -->\nold\n"
            "<!-- end generated: verdict_test.words -->\n\nMore prose.\n\n"
            "<!-- generated: other.block by `python other.py` -->\nkept\n"
            "<!-- end generated: other.block -->\n")
    (tmp_path / "README.md").write_text(page)
    (tmp_path / "docs" / "compare.md").write_text("No blocks here.\n")
    made_up_report(tmp_path / "out", ["GPT", "hourglass", "><former"], record_dir=records)
    words = compare.page_blocks(records)["verdict_test.words"]
    assert (tmp_path / "README.md").read_text() == page.replace("\nold\n", f"\n{words}\n")
    assert (tmp_path / "docs" / "compare.md").read_text() == "No blocks here.\n"
    assert (records / "results.md").read_text() == (tmp_path / "out" / "results.md").read_text()
