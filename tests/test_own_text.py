"""Your own text: data/text/prepare.py --input=FILE (characters or GPT-2's BPE; also reached as
data/shakespeare_char/prepare.py --input=FILE) writes a dataset train.py trains on; a file that
is empty, binary, not UTF-8 or too short is one line and nothing is written. CPU, small."""

import importlib.util
import os
import re
from pathlib import Path

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


def test_your_own_text_prepared_as_characters_trains_samples_in_a_run_folder_of_its_own(
        tmp_path, capsys):
    """The commands prepare prints, run as printed (with tiny settings added) where out/ holds
    another run: they train and sample in a folder of their own, on the text's characters, and
    out/ is left as it was."""
    mine = tmp_path / "my notes.txt"  # as Windows' Notepad saves it: a BOM, CRLF line ends
    mine.write_bytes(b"\xef\xbb\xbf" + TEXT.replace("\n", "\r\n").encode())
    data = tmp_path / "mine"
    load_script("data/text/prepare.py").main([f"--input={mine}", f"--data_dir={data}"])
    assert decoded(data) == TEXT
    printed = capsys.readouterr().out
    train, sample, export = (re.search(rf"python {script}\.py (.*)", printed).group(1).split()
                             for script in ("train", "sample", "export"))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "ckpt.pt").write_bytes(b"the workshop's Shakespeare run")
    result = run_here("train.py", *train, "--n_layer=1", "--n_embd=32", "--n_head=2",
                      "--block_size=16", "--batch_size=4", "--max_iters=4", "--eval_interval=4",
                      "--eval_iters=2", "--dtype=float32", "--sample_tokens=0", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    result = run_here("sample.py", *sample, "--num_samples=1", "--max_new_tokens=200",
                      "--seed=1", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    sampled = [line for line in result.stdout.splitlines()[1:]  # (under sample.py's heading)
               if set(line) != {"-"}]  # (nor its separator line)
    assert sampled and set("".join(sampled)) <= set(TEXT)
    assert export == [train[-1].removeprefix("--out_dir="), sample[-1].removeprefix("--out_dir=")
                      + "-hf"]  # (export.py itself: tests/test_export.py)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["ckpt.pt"]
    assert (tmp_path / "out" / "ckpt.pt").read_bytes() == b"the workshop's Shakespeare run"


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


def whole_text(path):
    """The text prepare reads, read whole (the oracle of the streamed reading)."""
    if path.is_dir():
        return "\n\n".join(whole_text(f).strip("\n") for f in sorted(path.glob("*.txt"))) + "\n"
    return path.read_bytes().decode("utf-8-sig").replace("\r\n", "\n")


@pytest.mark.parametrize("tokenizer", ["char", "gpt2"])
def test_a_text_streamed_in_small_pieces_gives_the_ids_of_the_whole_text(
        tokenizer, tmp_path, monkeypatch, request):
    """Read 7 bytes and encoded 5 characters at a time, so that pieces end inside a CRLF, a
    character of several bytes, a word, a run of blank lines: the ids are those of the whole
    text (GPT-2's BPE encoding each split whole), for a file and for a folder."""
    if tokenizer == "gpt2":
        monkeypatch.setenv("SHAPE_LAB_CACHE", str(request.getfixturevalue("gpt2_file").parent))
    script = load_script("data/text/prepare.py")
    monkeypatch.setattr(script, "READ_BYTES", 7)
    monkeypatch.setattr(script, "PIECE_CHARS", 5)
    text = ("Caf\u00e9 \U0001f600 na\u00efve,\r\n\r\n  indented  \r\n\ttab\r\n\n\n   \n" + TEXT) * 3
    (tmp_path / "one.txt").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "b.txt").write_bytes(b"\n\n" + text[:2000].encode() + b"\n\n\n")
    (tmp_path / "folder" / "a.txt").write_bytes(text[2000:].encode() + b"\r\n")
    for given in (tmp_path / "one.txt", tmp_path / "folder"):
        expected = whole_text(given)
        n_train = int(len(expected) * 0.9)
        data = tmp_path / f"data_{given.stem}"
        meta = script.prepare_text(given, tokenizer, data, block_size=16)
        ids = [np.fromfile(data / f"{split}.bin", dtype=np.uint16).tolist()
               for split in ("train", "val")]
        if tokenizer == "char":
            assert meta["chars"] == "".join(sorted(set(expected)))
            assert "".join(meta["chars"][i] for i in ids[0] + ids[1]) == expected
            assert len(ids[0]) == n_train
        else:
            from data.sources import get_gpt2_encoding
            enc = get_gpt2_encoding()
            assert ids == [enc.encode_ordinary(expected[:n_train]),
                           enc.encode_ordinary(expected[n_train:])]


def test_an_input_that_is_not_a_plain_readable_file_is_one_line(tmp_path, capsys, monkeypatch):
    """A FIFO (read twice, it would hang or read nothing the second time), a loop of symbolic
    links and a file the user may not read: one line each, and nothing written."""
    script = load_script("data/text/prepare.py")
    (tmp_path / "text.txt").write_text(TEXT)
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "loop_b", tmp_path / "loop_a")
    os.symlink(tmp_path / "loop_a", tmp_path / "loop_b")
    real_open = Path.open

    def unreadable(path, *args, **kwargs):  # (as root, chmod 000 does not stop the reading)
        if path.name == "text.txt":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)
    for given, why in (("fifo", "is a FIFO"), ("loop_a", "is a loop of symbolic links"),
                       ("text.txt", "cannot be read (Permission denied)")):
        with monkeypatch.context() as patch:
            patch.setattr(Path, "open", unreadable)
            with pytest.raises(SystemExit) as stop:
                script.main([f"--input={tmp_path / given}", f"--data_dir={tmp_path / 'data'}"])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1 and why in err, err
    assert not (tmp_path / "data").exists()


def test_a_data_folder_that_cannot_be_written_is_one_line_and_keeps_the_old_files(
        tmp_path, monkeypatch):
    script = load_script("data/text/prepare.py")
    (tmp_path / "text.txt").write_text(TEXT)
    (tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(SystemExit) as stop:  # a folder that cannot be made
        script.main([f"--input={tmp_path / 'text.txt'}", f"--data_dir={tmp_path / 'a_file/d'}"])
    assert "a_file" in str(stop.value.code) and "\n" not in str(stop.value.code)
    data = tmp_path / "data"
    script.main([f"--input={tmp_path / 'text.txt'}", f"--data_dir={data}"])
    before = {p.name: p.read_bytes() for p in data.iterdir()}
    real_open = Path.open

    def read_only(path, mode="r", *args, **kwargs):  # (as root, chmod 555 does not stop writing)
        if path.parent == data and "w" in mode:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, mode, *args, **kwargs)
    monkeypatch.setattr(Path, "open", read_only)
    monkeypatch.setattr("builtins.open", lambda path, mode="r", *a, **k: read_only(
        Path(path), mode, *a, **k))
    with pytest.raises(SystemExit) as stop:
        script.main([f"--input={tmp_path / 'text.txt'}", f"--data_dir={data}"])
    message = str(stop.value.code)
    assert "Permission denied" in message and str(data) in message and "\n" not in message
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in data.iterdir()} == before
