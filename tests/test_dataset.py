"""train.py checks a prepared dataset against its meta.json without reading the token files: a
web-scale train.bin is gigabytes. Linux: mincore(2) says which pages any process read."""

import ctypes
import json
import mmap
import sys

import numpy as np
import pytest

from conftest import run_here


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
    result = run_here("train.py", f"--data_dir={tmp_path / 'data'}", f"--out_dir={tmp_path / 'o'}",
                      "--n_layer=1", "--n_embd=16", "--n_head=2", "--block_size=16",
                      "--batch_size=2", "--max_iters=2", "--eval_iters=2", "--eval_interval=1",
                      "--device=cpu", "--dtype=float32", "--sample_tokens=0")
    assert result.returncode == 0 and "step 2: train loss" in result.stdout, result.stderr
    read, total = resident_pages(tmp_path / "data" / "train.bin")
    assert read < total // 10, f"{read} of {total} pages of train.bin were read"  # (read-ahead)
