"""Tests of checkpoint.py's loader on damaged files: an empty, truncated or foreign ckpt.pt gets one
line, "<path> (N bytes) is corrupt or truncated: ...", with what to do, and never a hint to load it
with weights_only=False (which would run whatever code the file holds). CPU, offline."""

import collections
import pickle
import subprocess
import sys

import pytest
import torch

from conftest import ROOT
from shapelab.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from shapes import model_from_checkpoint

ARGS = dict(vocab_size=50, block_size=16, n_layer=1, n_embd=32, n_head=2)


class NotATensor:
    """Stands for any object another program might pickle; weights_only refuses to build it."""
    def __init__(self):
        self.payload = [1, 2, 3]


def real_checkpoint(path):
    """A checkpoint as train.py writes one: model weights, model_type, model_args, plain config."""
    from shapes import build_model
    model = build_model("gpt", **ARGS)
    save_checkpoint(dict(model=model.state_dict(), model_type="gpt", model_args=ARGS, iter_num=2,
                         config={"dataset": "x"}), path)
    return path


def one_line_error(path):
    """Load path, expect CheckpointError; return its message after the checks every message must
    pass."""
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    message = str(info.value)
    size = path.stat().st_size
    assert message.startswith(f"{path} ({size} bytes) is corrupt or truncated: "), message
    assert "\n" not in message and "weights_only" not in message and "Weights only" not in message
    assert "delete it" in message.lower() and "--out_dir" in message
    # uncaught, Python prints the line and exits 1, no traceback
    assert isinstance(info.value, SystemExit)
    return message


def test_good_checkpoint_loads(tmp_path):
    ckpt = load_checkpoint(real_checkpoint(tmp_path / "ckpt.pt"))
    assert ckpt["iter_num"] == 2 and model_from_checkpoint(ckpt).config.n_layer == 1


def test_empty_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    path.write_bytes(b"")
    assert "empty" in one_line_error(path)


@pytest.mark.parametrize("keep", [0.5, 0.99, 64])
def test_truncated_real_checkpoint(tmp_path, keep):
    path = real_checkpoint(tmp_path / "ckpt.pt")
    data = path.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep
    path.write_bytes(data[:n])
    one_line_error(path)


def test_foreign_pickle_that_weights_only_refuses(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"model": NotATensor()}, path)        # a zip checkpoint holding an arbitrary object
    assert "Python objects" in one_line_error(path)
    legacy = tmp_path / "legacy.pt"
    with open(legacy, "wb") as f:
        pickle.dump({"model": NotATensor()}, f)       # a plain pickle, as other programs write them
    one_line_error(legacy)
    text = tmp_path / "notes.pt"
    text.write_text("these are not weights\n")
    one_line_error(text)


def test_a_loadable_file_that_is_not_a_checkpoint_dict(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save(torch.ones(3), path)
    assert "Tensor" in one_line_error(path)
    torch.save(collections.OrderedDict(a=torch.ones(1)), path)    # a dict subclass is still a dict
    assert set(load_checkpoint(path)) == {"a"}


def test_a_corrupt_checkpoint_stops_a_script_with_one_line(tmp_path):
    """What a user sees: the process exits 1 with the one line on stderr and no traceback."""
    path = real_checkpoint(tmp_path / "ckpt.pt")
    path.write_bytes(path.read_bytes()[:1000])
    foreign = tmp_path / "foreign.pt"
    with open(foreign, "wb") as f:
        pickle.dump({"model": NotATensor()}, f, protocol=4)   # torch also warns about the protocol
    for bad in (path, foreign):
        code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                f"from shapelab.checkpoint import load_checkpoint; load_checkpoint({str(bad)!r})")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 1
        assert "Traceback" not in proc.stderr and "weights_only" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        size = bad.stat().st_size
        assert lines == [lines[0]] and lines[0].startswith(
            f"{bad} ({size} bytes) is corrupt or truncated: "), proc.stderr


def test_a_save_cut_short_leaves_no_temporary_file(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM, which train.py makes an exit) in the middle of a save: the previous
    checkpoint stays, and no ckpt.pt.tmp.PID is left until the next save."""
    save_checkpoint({"step": 1}, tmp_path / "ckpt.pt")

    def cut_short(state, f):
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt
    monkeypatch.setattr(torch, "save", cut_short)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint({"step": 2}, tmp_path / "ckpt.pt")
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]
    assert load_checkpoint(tmp_path / "ckpt.pt")["step"] == 1
