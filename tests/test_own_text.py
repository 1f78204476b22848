"""Your own text: data/text/prepare.py --input=FILE; a file that is no usable text is one line."""

import os
import re
import runpy
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURE_TEXT, ROOT, run_here
from shapelab.tokenizer import Tokenizer

TEXT = FIXTURE_TEXT * 30  # ~7,000 characters: val ~700, more than block_size + 1 for 16


def prepare(*args):
    return runpy.run_path(str(ROOT / "data/text/prepare.py"))["main"](list(args))


def decoded(data_dir, tok):
    return tok.decode(np.concatenate([np.fromfile(data_dir / f"{split}.bin", dtype=np.uint16)
                                      for split in ("train", "val")]))


def test_your_own_text_trains_and_samples_in_a_run_folder_of_its_own(tmp_path, capsys):
    mine = tmp_path / "my notes.txt"  # as Windows' Notepad saves it: a BOM, CRLF line ends
    mine.write_bytes(b"\xef\xbb\xbf" + TEXT.replace("\n", "\r\n").encode())
    meta = prepare(f"--input={mine}", f"--data_dir={tmp_path / 'mine'}")
    assert decoded(tmp_path / "mine", Tokenizer.char(meta["chars"])) == TEXT
    printed = capsys.readouterr().out
    train, sample = (re.search(rf"python {script}\.py (.*)", printed).group(1).split()
                     for script in ("train", "sample"))
    result = run_here("train.py", *train, "--n_layer=1", "--n_embd=32", "--n_head=2",
                      "--block_size=16", "--batch_size=4", "--max_iters=4", "--eval_interval=4",
                      "--eval_iters=2", "--dtype=float32", "--sample_tokens=0", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    result = run_here("sample.py", *sample, "--num_samples=1", "--max_new_tokens=50", cwd=tmp_path)
    assert result.returncode == 0 and (tmp_path / "out-mine" / "ckpt.pt").exists(), result.stderr


def test_gpt2s_bpe(tmp_path, gpt2_file):
    (tmp_path / "a.txt").write_text(TEXT)
    done = subprocess.run([sys.executable, ROOT / "data/text/prepare.py", "--tokenizer=gpt2",
                           f"--input={tmp_path / 'a.txt'}", f"--data_dir={tmp_path / 'mine'}",
                           "--block_size=16"], capture_output=True, text=True,
                          env=dict(os.environ, SHAPE_LAB_CACHE=str(gpt2_file.parent)))
    assert done.returncode == 0, done.stderr
    assert decoded(tmp_path / "mine", Tokenizer.gpt2()) == TEXT


@pytest.mark.parametrize("content, why", [
    (b"\n \n", "is empty"),
    ("caf\u00e9 au lait. ".encode("latin-1") * 200, "is not UTF-8 text (byte 0xe9)"),
    (b"To be, or not to be.\n" * 20, "is too short: its last 10% (the val split) holds 42 tokens"),
    (None, "is not a file"), ("folder", "is not a file"), ("fifo", "is not a file")])
def test_a_file_that_is_no_usable_text_is_one_line_and_nothing_is_written(
        content, why, tmp_path, capsys):
    path = tmp_path / "input"
    if content == "folder":
        path.mkdir()
    elif content == "fifo":
        os.mkfifo(path)
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(SystemExit) as stop:
        prepare(f"--input={path}", f"--data_dir={tmp_path / 'data'}")
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and why in err, err
    assert not (tmp_path / "data").exists()


def test_a_data_folder_that_cannot_be_written_is_one_line(tmp_path, capsys):
    (tmp_path / "a_file").write_text(TEXT)
    with pytest.raises(SystemExit) as stop:  # (a folder under a file cannot be made)
        prepare(f"--input={tmp_path / 'a_file'}", f"--data_dir={tmp_path / 'a_file' / 'd'}")
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "a_file/d" in err and err.count("\n") == 1
