"""A run trains on the data it opened, whatever is prepared meanwhile; a resume hashes the files it
opens; a start reads only its batches. POSIX."""

import ctypes
import json
import mmap
import sys

import numpy as np
import pytest

from conftest import FIXTURE_TEXT, run_here
from data.sources import prepare_text
from shapelab.dataset import TokenFiles

TEXT = FIXTURE_TEXT * 30  # ~7,000 characters
OTHER_TEXT = TEXT[::-1]  # the same length and characters, another text
TINY = ["--n_layer=1", "--n_embd=16", "--n_head=2", "--block_size=16", "--batch_size=2",
        "--eval_iters=2", "--log_interval=1", "--device=cpu", "--dtype=float32",
        "--sample_tokens=0", "--eval_interval=2"]


def split_bytes(data_dir):
    return {split: (data_dir / f"{split}.bin").read_bytes() for split in ("train", "val")}


def test_the_files_a_run_opened_are_the_ones_it_reads_whatever_is_prepared_meanwhile(tmp_path):
    data = tmp_path / "data"
    meta = prepare_text(TEXT, "char", data, "text")
    original, files = split_bytes(data), TokenFiles(data, block_size=16)
    prepare_text(OTHER_TEXT, "char", data, "other text")  # renamed in under the open files
    assert split_bytes(data) != original and files.meta == meta
    for split in ("train", "val"):
        assert files.tokens(split).tobytes() == original[split]


def test_a_resume_on_other_data_is_one_line_even_at_the_same_size_and_meta(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    prepare_text(TEXT, "char", data, "text")
    args = [*TINY, f"--data_dir={data}", f"--out_dir={out}"]
    assert run_here("train.py", *args, "--max_iters=2").returncode == 0
    saved, val = (out / "ckpt.pt").read_bytes(), (data / "val.bin").read_bytes()
    for change in ("in place", "prepared again"):
        if change == "in place":  # the val split set to one id, the size and meta.json kept
            np.zeros(len(val) // 2, dtype=np.uint16).tofile(data / "val.bin")
        else:  # the same vocabulary and length, another text
            prepare_text(OTHER_TEXT, "char", data, "text")
        result = run_here("train.py", *args, "--max_iters=4", "--init_from=resume")
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
        assert "is not the data" in result.stderr and str(out / "ckpt.pt") in result.stderr
        assert (out / "ckpt.pt").read_bytes() == saved and "val loss" not in result.stdout
    prepare_text(TEXT, "char", data, "text")  # prepared again from the same text: it goes on
    assert run_here("train.py", *args, "--max_iters=4", "--init_from=resume").returncode == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore is Linux's")
def test_starting_on_a_2gb_train_bin_reads_only_the_batches(tmp_path):
    libc = ctypes.CDLL(None, use_errno=True)

    def resident_pages(path):
        with open(path, "rb") as f:  # a private mapping: mincore reports the page cache
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        pages = ctypes.create_string_buffer(-(-len(mapped) // mmap.PAGESIZE))
        address = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
        assert libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(len(mapped)), pages) == 0
        return sum(b & 1 for b in pages.raw), len(pages.raw)
    (tmp_path / "data").mkdir()
    with open(tmp_path / "data" / "train.bin", "wb") as f:
        f.truncate(2**31)  # 2**30 ids, a sparse file (all holes: id 0), so it costs no disk
    (np.arange(4096) % 7).astype(np.uint16).tofile(tmp_path / "data" / "val.bin")
    (tmp_path / "data" / "meta.json").write_text(json.dumps(dict(
        tokenizer="char", vocab_size=7, chars="abcdefg", splits=dict(
            train=dict(tokens=2**30, max_id=6), val=dict(tokens=4096, max_id=6)))))
    assert resident_pages(tmp_path / "data" / "train.bin")[0] == 0  # nothing cached yet
    result = run_here("train.py", *TINY, f"--data_dir={tmp_path / 'data'}",
                      f"--out_dir={tmp_path / 'o'}", "--max_iters=2")
    assert result.returncode == 0 and "step 2: train loss" in result.stdout, result.stderr
    read, total = resident_pages(tmp_path / "data" / "train.bin")
    assert read < total // 10, f"{read} of {total} pages of train.bin were read"  # (read-ahead)
