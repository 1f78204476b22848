"""A run trains on the data it started with: shapelab/dataset.py's open_dataset opens the token
files once, a prepare script renames its new files in beside them (data/sources.py), so a
re-prepare under a running train.py never gives a checkpoint whose meta.json is not the data it
trained on; a file written over in place stops the run in one line; a resume on other data is
one line. POSIX semantics (a replaced file lives on for whoever has it open). CPU, seconds."""

import importlib.util
import json

import numpy as np
import pytest

from conftest import FIXTURE_TEXT, ROOT, run_here
from shapelab.checkpoint import load_checkpoint
from shapelab.dataset import DataError, open_dataset

TEXT = FIXTURE_TEXT * 30  # ~7,000 characters
OTHER_TEXT = TEXT[::-1]  # the same length and characters, another text
TINY = ["--n_layer=1", "--n_embd=16", "--n_head=2", "--block_size=16", "--batch_size=2",
        "--eval_iters=2", "--log_interval=1", "--device=cpu", "--dtype=float32",
        "--sample_tokens=0"]


def prepare(text, data_dir, tmp_path, tokenizer="char"):
    """data/text/prepare.py on `text`, as a user runs it; the meta.json it wrote."""
    spec = importlib.util.spec_from_file_location("text_prepare", ROOT / "data/text/prepare.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    source = tmp_path / f"input_{tokenizer}_{hash(text)}.txt"
    source.write_text(text)
    script.main([f"--input={source}", f"--data_dir={data_dir}", f"--tokenizer={tokenizer}",
                 "--block_size=16"])
    return json.loads((data_dir / "meta.json").read_text())


def split_bytes(data_dir):
    return {split: (data_dir / f"{split}.bin").read_bytes() for split in ("train", "val")}


@pytest.fixture(params=["char", "gpt2"])
def other_tokenizer(request, monkeypatch):
    """The second preparation's tokenizer: characters again (another text of the same length),
    or GPT-2's BPE (ids far past the first vocabulary)."""
    if request.param == "gpt2":
        monkeypatch.setenv("SHAPE_LAB_CACHE", str(request.getfixturevalue("gpt2_file").parent))
    return request.param


def test_the_files_a_run_opened_are_the_ones_it_reads_whatever_is_prepared_meanwhile(
        tmp_path, capsys, other_tokenizer):
    data = tmp_path / "data"
    meta = prepare(TEXT, data, tmp_path)
    original = split_bytes(data)
    files = open_dataset(data, block_size=16)
    prepare(OTHER_TEXT, data, tmp_path, other_tokenizer)  # renamed in under the open files
    assert split_bytes(data) != original
    capsys.readouterr()
    for split in ("train", "val"):
        assert files.tokens(split).tobytes() == original[split]
        files.check_unchanged(split)  # (renamed in: no error)
    assert files.meta == meta
    assert capsys.readouterr().out.count("was prepared again") == 1  # said once
    with open(data / "train.bin", "r+b") as f:  # written over in place: the same file changes
        f.write(b"\0\0")
    files = open_dataset(data, block_size=16)
    files.tokens("train")
    with open(data / "train.bin", "r+b") as f:
        f.write(b"\1\0")
    with pytest.raises(DataError) as stop:
        files.check_unchanged("train")
    assert str(data / "train.bin") in str(stop.value) and "\n" not in str(stop.value)


def test_a_prepare_under_a_running_train_py_never_gives_a_checkpoint_of_other_data(
        tmp_path, monkeypatch, other_tokenizer):
    """The data is prepared again while train.py runs (at its sixth read of a token file, between
    its two checkpoints): every read after it is of the data the run started with and the
    checkpoints hold that data's meta.json, or the run stops in one line."""
    data = tmp_path / "data"
    meta = prepare(TEXT, data, tmp_path)
    original = split_bytes(data)
    reads, real_memmap = [], np.memmap

    def memmap(*args, **kwargs):
        if len(reads) == 6:
            prepare(OTHER_TEXT, data, tmp_path, other_tokenizer)
        mapped = real_memmap(*args, **kwargs)
        reads.append(mapped.tobytes())
        return mapped
    monkeypatch.setattr(np, "memmap", memmap)
    result = run_here("train.py", *TINY, f"--data_dir={data}", f"--out_dir={tmp_path / 'out'}",
                      "--max_iters=10", "--eval_interval=5")
    assert len(reads) > 6
    assert all(read in original.values() for read in reads), "a batch of the new data was read"
    if result.returncode:
        assert result.stderr.count("\n") == 1, result.stderr
    else:
        checkpoint = load_checkpoint(tmp_path / "out" / "ckpt.pt")
        assert checkpoint["iter_num"] == 10 and checkpoint["meta"] == meta


def test_a_resume_on_data_prepared_again_is_one_line(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    prepare(TEXT, data, tmp_path)
    args = [*TINY, f"--data_dir={data}", f"--out_dir={out}", "--eval_interval=2"]
    assert run_here("train.py", *args, "--max_iters=2").returncode == 0
    saved = (out / "ckpt.pt").read_bytes()
    prepare(OTHER_TEXT, data, tmp_path)  # the same vocabulary and length, another text
    result = run_here("train.py", *args, "--max_iters=4", "--init_from=resume")
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "train.bin" in result.stderr and str(out / "ckpt.pt") in result.stderr
    assert (out / "ckpt.pt").read_bytes() == saved
    prepare(TEXT, data, tmp_path)  # prepared again from the same text: the run goes on
    assert run_here("train.py", *args, "--max_iters=4", "--init_from=resume").returncode == 0


def test_a_run_starting_while_a_preparation_is_renamed_in_opens_files_of_one_preparation(
        tmp_path, monkeypatch):
    """The new files renamed in between the run's first read of meta.json and its opening of the
    .bin files: it opens them again, and its meta.json is theirs."""
    from shapelab import dataset

    data = tmp_path / "data"
    prepare(TEXT, data, tmp_path)
    real_open, opened = dataset._open_split, []

    def open_split(path, again):
        if not opened:  # the first opening: a prepare script renames its files in just before
            prepare(OTHER_TEXT, data, tmp_path, "char")
        opened.append(path.name)
        return real_open(path, again)
    monkeypatch.setattr(dataset, "_open_split", open_split)
    files = open_dataset(data, block_size=16)
    assert opened == ["train.bin", "val.bin"] * 2  # (opened again)
    assert files.meta == json.loads((data / "meta.json").read_text())
    assert {split: files.tokens(split).tobytes() for split in ("train", "val")} == split_bytes(data)
