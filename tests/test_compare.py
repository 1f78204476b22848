"""compare.py end to end on a tiny dataset (its train.py runs in this process): both phases, the
report, a resume that trains each run once, records that are read and never rewritten, runs of
other settings or other data refused. The plan of runs is checked on made-up losses."""

import io
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import Executor, Future
from pathlib import Path
from types import SimpleNamespace

import pytest

import compare
from conftest import ROOT, run_here
from shapelab import sweep
from shapelab.run import held_by

TINY = ["--n_layer=3", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
        "--eval_iters=2", "--width_multiple=4", "--ffn_multiple=8", "--dtype=float32"]
TWO = ["--models=GPT,hourglass+><former", "--max_iters=20", "--eval_interval=10",
       "--seeds=1,2", "--learning_rates=1e-3,4e-3"]


def compare_here(capsys, *args):
    """compare.py's main in this process: (exit status, stdout + stderr)."""
    capsys.readouterr()
    code = 0
    try:
        compare.main([*TINY, *args])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else f"{e.code}"
    printed = capsys.readouterr()
    return code, printed.out + printed.err + (code if isinstance(code, str) else "")


class TrainHere:
    """subprocess.Popen as sweep.train_one starts train.py, run to its end in this process."""

    def __init__(self, command, **kwargs):
        result = run_here(command[1], *command[2:])
        self.returncode, self.stdout = result.returncode, io.StringIO(result.stdout + result.stderr)

    def wait(self, timeout=None):
        return self.returncode


class InThisThread(Executor):
    """ThreadPoolExecutor as run_comparison uses it, each run in the calling (main) thread."""

    def __init__(self, workers):
        pass

    def submit(self, fn, *args):
        future = Future()
        try:
            future.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001 (the worker thread's way: in the future)
            future.set_exception(e)
        return future


@pytest.fixture
def here(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(compare, "ThreadPoolExecutor", InThisThread)
    monkeypatch.setattr(sweep, "subprocess", SimpleNamespace(**{**vars(subprocess),
                                                               "Popen": TrainHere}))
    return monkeypatch


def runs(folder):
    return json.loads((folder / "results.json").read_text())["runs"]


def test_compare_two_rates_two_seeds_resumes_and_keeps_its_records(tmp_path, char_dataset,
                                                                   capsys, here):
    """Interrupted after three runs, the same command trains the other three once; a fresh
    out_dir reads the six records and trains nothing; a committed record of other settings is
    left byte-identical; other settings into the same folders or records are refused."""
    out, rec = tmp_path / "cmp", tmp_path / "rec"
    committed = rec / "runs" / "gpt-lr2e-3-s1337"
    shutil.copytree(ROOT / "results" / "compare_verdict_cpu" / "runs" / committed.name, committed)
    before = {p: p.read_bytes() for p in committed.iterdir()}
    args = [*TWO, f"--data_dir={char_dataset}", f"--out_dir={out}", f"--record_dir={rec}"]
    calls = []

    def stop_at_the_fourth(*a, train=compare.train_one):
        calls.append(a)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return train(*a)

    with here.context() as stopping:
        stopping.setattr(compare, "train_one", stop_at_the_fourth)
        code, printed = compare_here(capsys, *args)
    assert code == 130 and "interrupted: finished runs are kept" in printed, printed
    code, printed = compare_here(capsys, *args)
    assert code == 0, printed
    assert printed.count("finished before, skipping") == 3 and printed.count(": training") == 3
    chosen = {v["shape"]: v["lr"] for v in json.loads((out / "results.json").read_text())[
        "verdicts"]}
    keys = [(r["shape"], r["lr"], r["seed"]) for r in runs(out)]
    assert sorted(keys) == sorted({(n, lr, s) for n in chosen
                                   for lr, s in ((1e-3, 1), (4e-3, 1), (chosen[n], 2))})
    assert "no verdict (1 verdict seed; 2 needed)" in (out / "results.md").read_text()
    assert (out / "val_loss.png").exists()
    assert {p: p.read_bytes() for p in committed.iterdir()} == before
    assert len(list((rec / "runs").iterdir())) == 7
    code, printed = compare_here(capsys, *args[:-1], "--max_iters=30")
    assert code != 0 and "new --out_dir" in printed
    code, printed = compare_here(capsys, *args, "--max_iters=30")
    assert code != 0 and "new --record_dir" in printed
    shutil.rmtree(out)
    code, printed = compare_here(capsys, *args)
    assert printed.count("finished before, skipping") == 6, printed
    assert ": training" not in printed and runs(out) == runs(rec)


def test_a_run_of_other_data_or_damaged_is_refused_and_an_older_record_accepted(
        tmp_path, char_dataset, capsys, here):
    """A record names the splits' sha256 it trained on; the data prepared again differently, the
    same command refuses the run in one line; a record that names no data (one from before) is
    read as it is; a damaged one is one line."""
    meta = json.loads((char_dataset / "meta.json").read_text())
    for split in meta["splits"].values():
        split["sha256"] = "a" * 64
    (char_dataset / "meta.json").write_text(json.dumps(meta))
    args = ["--models=GPT", "--max_iters=2", "--eval_interval=2", f"--data_dir={char_dataset}",
            f"--out_dir={tmp_path / 'cmp'}"]
    assert compare_here(capsys, *args)[0] == 0
    result = tmp_path / "cmp" / "gpt-s1337" / "result.json"
    assert json.loads(result.read_text())["data"] == {"train": "a" * 64, "val": "a" * 64}
    meta["splits"]["val"]["sha256"] = "b" * 64
    (char_dataset / "meta.json").write_text(json.dumps(meta))
    code, printed = compare_here(capsys, *args)
    assert code != 0 and "was trained on other data" in printed.splitlines()[-1], printed
    older = json.loads(result.read_text())
    del older["data"]
    result.write_text(json.dumps(older))
    code, printed = compare_here(capsys, *args)
    assert code == 0 and "finished before, skipping" in printed, printed
    result.write_text(json.dumps({"val_loss": "2.1"}))
    code, printed = compare_here(capsys, *args)
    assert printed.splitlines()[-1].startswith(f"error: {result} is damaged (no "), printed


def test_each_shape_walks_phase_one_then_its_verdict_seeds(tmp_path):
    """A choice at an end tries past it up to extend_rates; an inside choice on a coarse grid
    tries x sqrt(2) on each side; then the verdict seeds, at the chosen rate only."""
    settings = {**{k: 1 for k in compare.TRAIN_KEYS}, "min_lr_ratio": 0.1, "seeds": (1, 2, 3),
                "learning_rates": (1e-3, 2e-3), "extend_rates": 1, "refine_gain": 0.002,
                "out_dir": str(tmp_path)}

    def plan(losses):
        results = {("GPT", lr, 1): dict(val_loss=v) for lr, v in losses.items()}
        return [(r.lr, r.seed) for r in compare.next_runs(settings, ("gpt", {}), "GPT", results)]

    assert plan({}) == [(1e-3, 1), (2e-3, 1)]
    assert plan({1e-3: 2.0, 2e-3: 1.9}) == [(4e-3, 1)]  # the highest end: one past it
    # extend_rates=1 used: the end stands
    assert plan({1e-3: 2.0, 2e-3: 1.9, 4e-3: 1.8}) == [(4e-3, 2), (4e-3, 3)]
    coarse = {1e-3: 2.0, 2e-3: 1.9, 4e-3: 1.91}  # the parabola dips 0.009 below 2e-3's loss
    assert plan(coarse) == [(1.41e-3, 1), (2.83e-3, 1)]
    assert plan({**coarse, 1.41e-3: 1.95, 2.83e-3: 1.85}) == [(2.83e-3, 2), (2.83e-3, 3)]
    assert plan({**coarse, 4e-3: 1.99}) == [(2e-3, 2), (2e-3, 3)]  # no dip: the choice stands
    assert plan({1e-3: None, 2e-3: None}) == []  # every rate diverged: no verdict seeds
    one = compare.plan_run({**settings, "learning_rates": (1e-3,)}, ("gpt", {}), "GPT", 1e-3, 2, 2)
    assert one.dir.name == "gpt-s2" and one.tag == "GPT s2"


def test_report_only_writes_the_committed_report_again(tmp_path, monkeypatch):
    """From a copy of the committed records (no dataset here: it stands in for the prepared one),
    --report_only=True writes the committed results.md byte for byte."""
    name = "compare_verdict_cpu_scale_gpu"
    records = tmp_path / name
    shutil.copytree(ROOT / "results" / name, records, ignore=shutil.ignore_patterns("*.png"))
    monkeypatch.setattr(compare, "find_dataset", lambda *a: None)
    monkeypatch.setattr(compare, "check_dataset", lambda *a: {"splits": {"train": {}, "val": {}}})
    monkeypatch.setattr(compare, "ood_windows", lambda *a: None)
    monkeypatch.setattr(compare, "baseline_of", lambda s, of=compare.baseline_of: {**of(s),
                                                                                  "vocab_size": 84})
    compare.main([str(ROOT / "config" / f"{name}.py"), "--report_only=True",
                  f"--out_dir={tmp_path / 'out'}", f"--record_dir={records}"])
    report = (tmp_path / "out" / "results.md").read_text()
    assert report == (ROOT / "results" / name / "results.md").read_text()


@pytest.mark.parametrize("setting, words", [
    ("--seeds=1,1", "seeds: give distinct integers"),
    ("--learning_rates=1e-3,1.0000001e-3", "distinct in their first 6 digits"),
    ("--jobs=0", "jobs: give 1 or more"),
    ("--stop_starting_after=-1", "stop_starting_after: give a number >= 0"),
])
def test_a_setting_no_comparison_can_use_is_one_line(setting, words, tmp_path, char_dataset,
                                                     capsys):
    code, printed = compare_here(capsys, setting, f"--data_dir={char_dataset}",
                                 f"--out_dir={tmp_path / 'cmp'}")
    assert code == 2 and words in printed and not (tmp_path / "cmp").exists(), printed


def test_sigterm_stops_both_train_py_like_ctrl_c(tmp_path, char_dataset):
    """SIGTERM to compare.py alone (as Kubernetes sends it): its two train.py processes stop as
    on Ctrl-C, and it says in one line what finished and the command that goes on."""
    out = tmp_path / "cmp"
    args = [*TINY, "--models=GPT", "--max_iters=100000", "--eval_interval=5", "--jobs=2",
            "--learning_rates=1e-3,2e-3", f"--data_dir={char_dataset}", f"--out_dir={out}"]
    runs = [out / f"gpt-lr{lr}-s1337" for lr in ("1e-3", "2e-3")]

    def send_sigterm():
        deadline = time.time() + 60
        while not all((d / "metrics.jsonl").exists() for d in runs) and time.time() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=send_sigterm).start()
    try:
        result = run_here("compare.py", *args)
    finally:
        sweep.TERMINATED.clear()
    err = result.stderr
    assert result.returncode == 143 and err.count("\n") == 1, err
    assert err.startswith("interrupted: finished runs are kept"), err
    assert err.rstrip().endswith(f"continue with: python {ROOT / 'compare.py'} " + " ".join(args))
    for run_dir in runs:
        assert held_by(run_dir / "run.lock") is None
        assert "interrupted" in (run_dir / "train.log").read_text().splitlines()[-1]


@pytest.mark.parametrize("config", sorted(p.name for p in (ROOT / "config").glob("compare_*")))
def test_the_verdict_configs_load(config):
    settings = compare.preset_settings([str(ROOT / "config" / config)])
    compare.check_lists(settings)
    assert len(settings["seeds"]) > 2 and Path(settings["out_dir"]).name.startswith("out-")
