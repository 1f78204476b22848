"""compare.py's edges, run as a user runs them: a busy out_dir is refused before anything in it is
touched, a bad out_dir or setting is one line (exit status 2) before anything is written, paths are
the caller's (it runs from any folder), and SIGTERM is Ctrl-C. Each case runs compare.py in this
process, each refusal before any training: only the SIGTERM row starts a train.py."""

import os
import signal
import threading
import time

import pytest

import compare
from shapelab import sweep
from shapelab.configurator import ConfigError, read_config_file
from conftest import ROOT, run_here
from shapelab.lock import FileLock

TINY = ["--n_layer=3", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
        "--eval_iters=2", "--width_multiple=4", "--ffn_multiple=8", "--models=GPT",
        "--dtype=float32", "--max_iters=4", "--eval_interval=2"]


def refused(capsys, *argv):
    """compare.main(argv) in-process: it must stop with exit status 2 and one line; return it."""
    with pytest.raises(SystemExit) as stop:
        compare.main([*TINY, *argv])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    return err


def hold_lock(path):
    """The lock run.RunDir (train.py) and compare.py take on path, held by this process."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(path)


@pytest.mark.parametrize("holder", ["another compare.py", "a train.py in a run folder"])
def test_a_busy_out_dir_is_refused_before_anything_in_it_is_touched(holder, tmp_path,
                                                                       char_dataset, capsys):
    out = tmp_path / "cmp"
    live = out / "gpt-s1337" / "metrics.jsonl"  # the running run's early evaluations
    live.parent.mkdir(parents=True)
    live.write_text('{"iter": 0, "val_loss": 3.4}\n')
    lock_file = out / "compare.lock" if holder == "another compare.py" else live.with_name(
        "run.lock")
    with hold_lock(lock_file):
        err = refused(capsys, f"--data_dir={char_dataset}", f"--out_dir={out}")
    assert "is in use by" in err and f"PID {os.getpid()}" in err
    assert live.read_text() == '{"iter": 0, "val_loss": 3.4}\n'
    assert {p.name for p in live.parent.iterdir()} == {"metrics.jsonl", lock_file.name} - {
        "compare.lock"}  # nothing else was written in the run folder


def test_a_busy_record_dir_is_refused_though_the_out_dirs_differ(tmp_path, char_dataset, capsys):
    """Two comparisons into two out_dirs with one record_dir would both write its records and its
    report: the second is refused in one line naming record_dir."""
    records = tmp_path / "records"
    with hold_lock(records / "compare.lock"):
        err = refused(capsys, f"--data_dir={char_dataset}", f"--out_dir={tmp_path / 'other'}",
                      f"--record_dir={records}")
    assert f"{records} is in use by" in err and "--record_dir" in err
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == []  # its lock: gone


@pytest.mark.parametrize("ending", ["--report_only=True with nothing to report",
                                    "a deadline before any run"])
def test_a_comparison_leaves_no_lock_file_behind(ending, tmp_path, char_dataset, capsys):
    out, records = tmp_path / "cmp", tmp_path / "records"
    argv = [f"--data_dir={char_dataset}", f"--out_dir={out}", f"--record_dir={records}",
            "--report_only=True" if ending.startswith("--report_only") else
            "--stop_starting_after=1e-9"]
    try:
        compare.main([*TINY, *argv])
    except SystemExit as stop:  # (--report_only: no finished GPT run, one line)
        assert stop.code == 2
    capsys.readouterr()
    assert not (out / "compare.lock").exists() and not (records / "compare.lock").exists()


def test_a_lock_file_deleted_as_it_is_opened_is_not_locked(tmp_path, monkeypatch):
    """A comparison's lock file goes with its holder: a process that opened it just before
    locks the file at the path then, never the deleted one (two holders of one folder)."""
    from shapelab import lock
    path = tmp_path / "compare.lock"
    first = FileLock(path, removed_at_close=True)
    take = lock._lock
    calls = []

    def first_lets_go_as_the_second_opens(fd, shared):
        calls.append(fd)
        if len(calls) == 1:
            first.close()  # the file the second opened is deleted
        take(fd, shared)

    monkeypatch.setattr(lock, "_lock", first_lets_go_as_the_second_opens)
    second = FileLock(path, removed_at_close=True)
    monkeypatch.setattr(lock, "_lock", take)
    assert len(calls) == 2 and path.read_text() == str(os.getpid())
    with pytest.raises(lock.Busy):  # a third finds the second's lock at the path
        FileLock(path)
    second.close()
    assert not path.exists()


def unwritable_folder(tmp_path):
    """A folder this process cannot create anything in (root writes through chmod: /sys then)."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        (folder / "probe").touch()
    except OSError:
        return folder
    if os.path.isdir("/sys/kernel") and not os.path.exists("/sys/kernel/compare.lock"):
        try:
            open("/sys/kernel/compare.lock", "a").close()
        except OSError:
            return "/sys/kernel"
    pytest.skip("no folder here refuses this user's writes")


@pytest.mark.parametrize("kind", ["a file", "a folder under a file", "a read-only folder",
                                  "inside a read-only folder"])
def test_an_out_dir_that_cannot_hold_the_comparison_is_one_line(kind, tmp_path, char_dataset,
                                                                capsys):
    (tmp_path / "file").write_text("not a folder")
    out = {"a file": lambda: tmp_path / "file",
           "a folder under a file": lambda: tmp_path / "file" / "sub",
           "a read-only folder": lambda: unwritable_folder(tmp_path),
           "inside a read-only folder": lambda: f"{unwritable_folder(tmp_path)}/cmp"}[kind]()
    err = refused(capsys, f"--data_dir={char_dataset}", f"--out_dir={out}")
    assert f"out_dir={out}" in err and ("is a file" in err or "is not writable" in err)
    assert (tmp_path / "file").read_text() == "not a folder"


@pytest.mark.parametrize("setting", [
    "--batch_size=0", "--learning_rates=nan", "--learning_rates=1e-3,0", "--learning_rates=",
    "--learning_rates=1e-3,1e-3", "--seeds=1,x", "--seeds=", "--jobs=0", "--min_lr_ratio=2",
    "--dtype=fp32", "--out_dir=", "--max_iters=0", "--seeds=18446744073709551616"])
def test_a_setting_no_run_can_use_is_one_line_before_anything_is_written(setting, tmp_path,
                                                                         char_dataset, capsys):
    out = tmp_path / "cmp"
    err = refused(capsys, f"--data_dir={char_dataset}", f"--out_dir={out}", setting)
    assert setting.split("=")[0][2:] in err
    assert not out.exists()


def test_the_rates_are_one_list_and_one_rate_is_a_list_of_one():
    """compare.py's rates are the list learning_rates (one rate: a list of one); learning_rate,
    train.py's one rate, is an unknown key whose line names learning_rates."""
    assert compare.preset_settings(["--learning_rates=1e-3"])["learning_rates"] == (1e-3,)
    with pytest.raises(ConfigError, match="Did you mean learning_rates"):
        compare.preset_settings(["--learning_rate=1e-3"])


def test_relative_paths_are_the_callers_not_the_repo_roots(tmp_path, char_dataset, monkeypatch):
    """train.py runs in the repo root: compare.py hands it absolute paths, those of the folder it
    was run from (the end-to-end run from another folder: tests/test_compare.py)."""
    started = []

    class NoTraining(Exception):
        pass

    def popen(command, cwd, **kwargs):
        started.append((command, cwd))
        raise NoTraining

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sweep.subprocess, "Popen", popen)
    with pytest.raises(NoTraining):
        compare.main([*TINY, f"--data_dir={char_dataset.name}", "--out_dir=rel"])
    (command, cwd), = started
    config = tmp_path / "rel" / "gpt-s1337" / "config.py"
    assert cwd == ROOT and command[2] == str(config)
    settings = read_config_file(config)
    assert settings["out_dir"] == str(config.parent)
    assert settings["data_dir"] == str(char_dataset)
    assert not (ROOT / "rel").exists()


@pytest.mark.parametrize("jobs", [1, 2])
def test_sigterm_stops_the_comparison_like_ctrl_c(jobs, tmp_path, char_dataset):
    """SIGTERM to compare.py alone (as Kubernetes sends it): its train.py (both, with --jobs=2)
    stops as on Ctrl-C, and compare.py says in one line what finished and the command that
    continues. compare.py's command line runs in this process (conftest.run_here, its SIGTERM
    handler and all), the signal sent to it here; its train.py are processes of their own."""
    out = tmp_path / "cmp"
    args = [*TINY, "--max_iters=100000", "--eval_interval=5", f"--data_dir={char_dataset}",
            f"--out_dir={out}"] + (["--learning_rates=1e-3,2e-3", "--jobs=2"] if jobs > 1 else [])
    runs = {"GPT s1337": out / "gpt-s1337"} if jobs == 1 else {
        f"GPT lr{lr} s1337": out / f"gpt-lr{lr}-s1337" for lr in ("1e-3", "2e-3")}
    done = threading.Event()

    def send_sigterm():
        deadline = time.time() + 60
        while not all((d / "metrics.jsonl").exists() for d in runs.values()) and (
                not done.is_set() and time.time() < deadline):
            time.sleep(0.02)  # (every train.py has started training)
        if not done.is_set():
            os.kill(os.getpid(), signal.SIGTERM)

    stray = []  # a SIGTERM that compare.py's handler does not take: noted, and the run stops

    def not_compares(signum, frame):
        stray.append(signum)
        raise KeyboardInterrupt

    guard = signal.signal(signal.SIGTERM, not_compares)
    sender = threading.Thread(target=send_sigterm)
    try:
        sender.start()
        result = run_here("compare.py", *args)
        done.set()
        sender.join()
    finally:
        signal.signal(signal.SIGTERM, guard)
        sweep.TERMINATED.clear()  # (this process goes on: the next interrupt is a Ctrl-C)
    err = result.stderr
    assert not stray, result.stdout + err
    assert result.returncode == 143, err  # 128 + SIGTERM, as a shell's (and train.py's)
    assert err.startswith(f"interrupted: 0 of {jobs} runs finished; ") and err.count(
        "\n") == 1, err
    assert all(f"{tag} resumes from its last checkpoint" in err or f"{tag} starts again" in err
               for tag in runs), err
    assert err.rstrip().endswith(f"continue with: python {ROOT / 'compare.py'} " + " ".join(args))
    for run_dir in runs.values():
        assert compare.training_in(run_dir) is None  # train.py has ended
        assert "interrupted" in (run_dir / "train.log").read_text().splitlines()[-1]
    assert not [p for p in out.rglob("*") if ".tmp" in p.name]
