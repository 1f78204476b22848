"""What keeps a run safe, below train.py: the lock, atomic checkpoints, weights_only loading."""

import os
import pickle
import subprocess
import sys

import pytest
import torch

from shapelab.checkpoint import CheckpointError, load_checkpoint, save_checkpoint, write_atomic
from shapelab.configurator import ConfigError
from shapelab.run import held_by, lock_folder, read_jsonl


def test_a_lock_is_held_until_released_and_dropped_when_its_process_is_killed(tmp_path):
    lock = lock_folder(tmp_path / "o")
    assert held_by(tmp_path / "o" / "run.lock") == str(os.getpid())
    with pytest.raises(ConfigError, match=f"in use by another training run .PID {os.getpid()}"):
        lock_folder(tmp_path / "o")
    lock.release()
    assert held_by(tmp_path / "o" / "run.lock") is None
    holds = ("import sys, filelock; lock = filelock.FileLock(sys.argv[1], timeout=0); "
             "lock.acquire(); print(1, flush=True); sys.stdin.read()")  # (no torch: fast)
    killed = subprocess.Popen([sys.executable, "-c", holds, str(tmp_path / "o" / "run.lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    killed.stdout.readline()
    with pytest.raises(ConfigError, match="in use by another training run"):
        lock_folder(tmp_path / "o")
    killed.kill()  # kill -9: no code of ours runs
    killed.wait()
    lock_folder(tmp_path / "o").release()
    with lock_folder(tmp_path / "c", "compare.lock", removed_at_close=True):
        assert (tmp_path / "c" / "compare.lock").exists()
    assert not (tmp_path / "c" / "compare.lock").exists()


def test_a_save_cut_short_keeps_the_previous_checkpoint_and_leaves_no_temporary_file(
        tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    save_checkpoint({"iter_num": 1}, path)

    def dies_halfway(state, file):
        file.write(b"half a checkpoint")
        raise KeyboardInterrupt  # Ctrl-C, SIGTERM, a full disk: the same for the file
    monkeypatch.setattr(torch, "save", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint({"iter_num": 2}, path)
    assert load_checkpoint(path) == {"iter_num": 1} and os.listdir(tmp_path) == ["ckpt.pt"]
    write_atomic(tmp_path / "a.txt", "text")
    assert (tmp_path / "a.txt").read_text() == "text"


class Planted:
    def __reduce__(self):
        return (os.mkdir, ("ran",))


def test_a_checkpoint_is_loaded_with_weights_only_and_its_code_never_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil.pt").write_bytes(pickle.dumps({"model": Planted()}))
    with pytest.raises(CheckpointError, match="damaged or not a checkpoint") as error:
        load_checkpoint(tmp_path / "evil.pt")
    assert not (tmp_path / "ran").exists() and "weights_only=False" not in str(error.value)
    torch.save(torch.zeros(2), tmp_path / "tensor.pt")
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "tensor.pt")


def test_a_torn_last_metrics_line_is_dropped(tmp_path):
    (tmp_path / "m.jsonl").write_text('{"iter": 0}\n{"iter": 1}\n{"it')
    assert read_jsonl(tmp_path / "m.jsonl") == [{"iter": 0}, {"iter": 1}]


def test_the_thread_search_trains_nothing():
    from contextlib import nullcontext

    from model import GPT, GPTConfig
    from shapelab.hardware import fastest_cpu_threads
    model = GPT(GPTConfig(vocab_size=16, block_size=8, n_embd=32, n_layer=1, n_head=2))
    x = torch.randint(0, 16, (2, 8))
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    threads = torch.get_num_threads()
    try:
        fastest_cpu_threads(model, x, x, nullcontext())
        assert 1 <= torch.get_num_threads() <= threads
    finally:
        torch.set_num_threads(threads)
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in weights.items())
