"""Your own text: data/text/prepare.py --input=FILE (characters or GPT-2's BPE; also reached as
data/shakespeare_char/prepare.py --input=FILE) writes a dataset train.py trains on; a file that
is empty, binary, not UTF-8 or too short is one line and nothing is written. CPU, small."""

import importlib.util

import numpy as np
import pytest

from conftest import FIXTURE_TEXT, ROOT, run_here
from shapelab.tokenizer import load_tokenizer

TEXT = FIXTURE_TEXT * 30  # ~7,000 characters: val ~700, more than block_size + 1 for 16


def load_script(relpath):
    spec = importlib.util.spec_from_file_location(relpath.replace("/", "_")[:-3], ROOT / relpath)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def decoded(data_dir):
    tokens = [(data_dir / f"{split}.bin").read_bytes() for split in ("train", "val")]
    ids = np.frombuffer(b"".join(tokens), dtype=np.uint16).tolist()
    return load_tokenizer(data_dir).decode(ids)


def test_your_own_text_prepared_as_characters_trains(tmp_path, capsys):
    mine = tmp_path / "my notes.txt"  # as Windows' Notepad saves it: a BOM, CRLF line ends
    mine.write_bytes(b"\xef\xbb\xbf" + TEXT.replace("\n", "\r\n").encode())
    data = tmp_path / "mine"
    load_script("data/text/prepare.py").main([f"--input={mine}", f"--data_dir={data}"])
    assert f"train on it: python train.py --data_dir={data}" in capsys.readouterr().out
    assert decoded(data) == TEXT
    result = run_here("train.py", f"--data_dir={data}", f"--out_dir={tmp_path / 'o'}",
                      "--n_layer=1", "--n_embd=32", "--n_head=2", "--block_size=16",
                      "--batch_size=4", "--max_iters=4", "--eval_interval=4", "--eval_iters=2",
                      "--dtype=float32")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "o" / "ckpt.pt").exists()


def test_your_own_text_with_gpt2s_bpe_through_the_shakespeare_script(tmp_path, capsys,
                                                                      gpt2_file, monkeypatch):
    monkeypatch.setenv("SHAPE_LAB_CACHE", str(gpt2_file.parent))
    (tmp_path / "texts").mkdir()  # a folder: its .txt files in sorted order
    (tmp_path / "texts" / "b.txt").write_text(TEXT[:3000])
    (tmp_path / "texts" / "a.txt").write_text(TEXT[3000:])
    data = tmp_path / "mine"
    char_script = load_script("data/shakespeare/prepare.py")._load_char_prepare()
    char_script.own_text([f"--input={tmp_path / 'texts'}", f"--data_dir={data}",
                          "--block_size=16"], "gpt2")
    assert "your own text: python data/text/prepare.py --tokenizer=gpt2" in capsys.readouterr().out
    assert load_tokenizer(data).kind == "gpt2"
    assert decoded(data) == TEXT[3000:].strip("\n") + "\n\n" + TEXT[:3000].strip("\n") + "\n"


@pytest.mark.parametrize("content, why", [
    (b"", "is empty"), (b"\n \n", "is empty"),
    (b"\x7fELF\x02\x01\x01\0\0\0" * 300, "is not text (it holds NUL bytes"),
    ("caf\u00e9 au lait. ".encode("latin-1") * 200, "is not UTF-8 text (byte 0xe9 at offset 3)"),
    ("\u00e9t\u00e9".encode("utf-16"), "is not text"),
    (b"To be, or not to be.\n" * 20, "is too short: its last 10% (the val split) holds 42 tokens"),
    (None, "no such file"), ("folder", "is a folder without .txt files")])
def test_a_file_that_is_no_usable_text_is_one_line_and_nothing_is_written(
        content, why, tmp_path, capsys):
    path = tmp_path / "input"
    if content == "folder":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(SystemExit) as stop:
        load_script("data/text/prepare.py").main([f"--input={path}",
                                                  f"--data_dir={tmp_path / 'data'}"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and why in err, err
    assert not (tmp_path / "data").exists()
