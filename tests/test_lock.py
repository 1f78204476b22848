"""lock.py, the one lock of run folders, comparisons and sweeps: a planted link is refused and the
file it points to left as it was; on a Python without fcntl (Windows) every script imports and a
second run into a busy out_dir still stops in one line. CPU, fast."""

import os
import subprocess
import sys
import textwrap

import pytest

from shapelab import sweep
from shapelab.configurator import ConfigError
from conftest import ROOT, run_here
from shapelab.lock import Busy, FileLock, NotALockFile, held_by
from shapelab.run import RunDir

sys.path.insert(0, str(ROOT / "experiments"))
import mlp_hourglass_sweep  # noqa: E402


def test_a_second_holder_is_busy_and_learns_the_first_ones_pid(tmp_path):
    path = tmp_path / "run.lock"
    assert held_by(path) is None and not path.exists()  # a probe creates nothing
    with FileLock(path):
        assert path.read_text() == str(os.getpid())
        with pytest.raises(Busy) as busy:
            FileLock(path)
        assert busy.value.pid == str(os.getpid()) and held_by(path) == str(os.getpid())
    assert held_by(path) is None
    FileLock(path).close()  # free again


def one_line(capsys, call):
    with pytest.raises(SystemExit) as stop:
        call()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    return err


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_planted_link_is_refused_and_the_file_it_names_left_as_it_was(link, tmp_path, capsys):
    victim = tmp_path / "thesis.txt"
    victim.write_text("four years of work\n")
    out = tmp_path / "out"
    out.mkdir()
    plant = os.symlink if link == "symbolic" else os.link
    for name in "run.lock", "compare.lock", "sweep.csv.lock":
        plant(victim, out / name)
    assert "is a symbolic link or not a plain file" in one_line(capsys, lambda: RunDir(out))
    assert "is a symbolic link or not a plain file" in one_line(
        capsys, lambda: sweep.lock_out_dir(out))
    with pytest.raises(ConfigError, match="is a symbolic link"):  # (its main: one line)
        with mlp_hourglass_sweep.sweep_lock(out / "sweep.csv"):
            pass
    with pytest.raises(NotALockFile):
        FileLock(out / "run.lock")
    assert held_by(out / "run.lock") is None
    assert victim.read_text() == "four years of work\n"
    assert sorted(p.name for p in out.iterdir()) == ["compare.lock", "run.lock", "sweep.csv.lock"]


def test_train_py_refuses_a_run_lock_that_links_to_a_file(tmp_path, char_dataset):
    victim = tmp_path / "notes.txt"
    victim.write_text("mine\n")
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "run.lock").symlink_to(victim)
    result = run_here("train.py", f"--data_dir={char_dataset}", f"--out_dir={tmp_path / 'o'}",
                      "--n_layer=1", "--n_embd=32", "--n_head=2", "--block_size=16",
                      "--batch_size=4", "--max_iters=2", "--dtype=float32")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "run.lock is a symbolic link" in result.stderr
    assert victim.read_text() == "mine\n"


# Windows, as far as this machine can play it: no fcntl, and an msvcrt whose `locking` does what
# Windows' does (a byte range, LK_NBLCK: OSError at once when another process holds it), here
# with flock, so that it meets the lock this test process holds
WITHOUT_FCNTL = """
import fcntl, os, runpy, subprocess, sys, types
sys.modules["fcntl"] = None  # import fcntl: ImportError, as on Windows
# (the stand-in msvcrt is for lock.py: the standard library, imported first, stays Linux's)
msvcrt = types.ModuleType("msvcrt")
msvcrt.LK_UNLCK, msvcrt.LK_NBLCK = 0, 2
def locking(fd, mode, nbytes):
    try:
        fcntl.flock(fd, fcntl.LOCK_UN if mode == msvcrt.LK_UNLCK else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise PermissionError(13, "Permission denied") from None
msvcrt.locking = locking
sys.modules["msvcrt"] = msvcrt
sys.path.insert(0, {root!r})
import train_mlp, compare, bench, shapes, export
from shapelab import plot, sweep, run, verdict, lock
assert lock.fcntl is None and lock.msvcrt is msvcrt
with lock.FileLock({free!r}):
    assert lock.held_by({free!r}) == str(os.getpid())
assert lock.held_by({free!r}) is None  # unlocked at close
sys.argv = ["train.py", *{argv!r}]
runpy.run_path({train!r}, run_name="__main__")  # import train: it runs
"""


def test_without_fcntl_every_script_imports_and_a_busy_out_dir_is_refused(tmp_path,
                                                                          char_dataset):
    out = tmp_path / "o"
    out.mkdir()
    argv = [f"--data_dir={char_dataset}", f"--out_dir={out}", "--n_layer=1", "--n_embd=32",
            "--n_head=2", "--block_size=16", "--batch_size=4", "--max_iters=2"]
    script = WITHOUT_FCNTL.format(root=str(ROOT), free=str(tmp_path / "free.lock"), argv=argv,
                                  train=str(ROOT / "train.py"))
    with FileLock(out / "run.lock"):  # a training run of this process holds out_dir
        result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=tmp_path,
                                capture_output=True, text=True, timeout=120,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 2, result.stderr
    assert result.stderr == (f"error: {out} is in use by another training run (PID {os.getpid()}):"
                             f" wait for it to finish, or use another --out_dir\n")
