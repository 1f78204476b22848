"""dataset.py: train.py checks a prepared dataset against what its meta.json records, without
reading the token files (a web-scale train.bin is gigabytes, read at every start otherwise)."""

import ctypes
import json
import mmap
import os
import sys

import numpy as np
import pytest

from conftest import run_here


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore is Linux's")


def resident_pages(path):
    """How many pages of the file sit in the page cache (mincore(2)): what any process read."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    os.close(fd)
    pages = -(-size // mmap.PAGESIZE)
    vec = ctypes.create_string_buffer(pages)
    assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
    libc.munmap(addr, size)
    return sum(b & 1 for b in vec.raw), pages


def test_starting_on_a_2gb_train_bin_reads_only_the_batches(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    tokens = 2**30  # 2 GB of uint16 ids: a sparse file, all holes (id 0), so it costs no disk
    with open(data / "train.bin", "wb") as f:
        f.truncate(2 * tokens)
    val = (np.arange(4096) % 7).astype(np.uint16)
    val.tofile(data / "val.bin")
    chars = "abcdefg"
    (data / "meta.json").write_text(json.dumps(dict(
        tokenizer="char", vocab_size=len(chars), chars=chars,
        splits=dict(train=dict(tokens=tokens, max_id=6), val=dict(tokens=len(val), max_id=6)))))
    assert resident_pages(data / "train.bin")[0] == 0  # a new file: nothing cached yet
    result = run_here("train.py", f"--data_dir={data}", f"--out_dir={tmp_path / 'o'}",
                      "--n_layer=1", "--n_embd=16", "--n_head=2", "--block_size=16",
                      "--batch_size=2", "--max_iters=2", "--eval_iters=2", "--eval_interval=1",
                      "--log_interval=1", "--device=cpu", "--dtype=float32", "--sample_tokens=0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "step 2: train loss" in result.stdout
    read, total = resident_pages(data / "train.bin")
    # the ~20 windows read are a few pages each, plus the kernel's read-ahead around each (up to a
    # few MiB: ~80 MiB in all was seen); reading the whole file once, e.g. for its largest id,
    # would leave all of its 524,288 pages cached
    assert read < total // 10, f"{read} of {total} pages of train.bin were read"
