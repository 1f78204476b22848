"""The image prepare scripts on IDX and npz fixtures: the reference splits, checked downloads."""

import gzip
import json
import runpy
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, digit_splits, idx_fixture, imagenet32_fixture, write_prepared
from shapelab import images

MNIST = runpy.run_path(str(ROOT / "data/mnist/prepare.py"))
IMAGENET32 = runpy.run_path(str(ROOT / "data/imagenet32/prepare.py"))


def test_the_28x28_loader_splits_the_official_sets_as_the_reference_code(tmp_path):
    tr, trl, te, tel = idx_fixture(tmp_path)
    splits, source, loaded = MNIST["load_28x28"]("fashion_mnist", str(tmp_path), tmp_path / "c")
    assert loaded == "fashion_mnist" and source == (
        f"fashion_mnist from local IDX files in {tmp_path}, split 100/20 + official test as the "
        f"reference code (RandomState(42))")
    perm = np.random.RandomState(42).permutation(120)  # github.com/mtkresearch/Hourglass_LM's
    for split, x, y in (("train", tr[perm[:100]], trl[perm[:100]]),
                        ("val", tr[perm[100:]], trl[perm[100:]]), ("test", te, tel)):
        assert np.array_equal(splits[split][0][:, 0], x) and splits[split][0].dtype == np.uint8
        assert np.array_equal(splits[split][1], y) and splits[split][1].dtype == np.int64
    five_k = MNIST["split_train_val_test"](np.zeros((5000, 1, 1), np.uint8), np.arange(5000),
                                           n_val=500, n_test=1000)  # each image once
    assert sorted(np.concatenate([five_k[s][1] for s in ("train", "val", "test")])) == list(
        range(5000)) and len(five_k["test"][1]) == 1000 and len(five_k["val"][1]) == 500
    (tmp_path / "bad").write_bytes(b"\x12\x34\x08\x01\x00\x00\x00\x02ab")
    with pytest.raises(ValueError, match="not an IDX file"):
        MNIST["read_idx"](tmp_path / "bad")


@pytest.mark.parametrize("dataset", ["mnist", "fashion_mnist"])
def test_a_download_is_checked_before_it_is_read(dataset, tmp_path, monkeypatch):
    """A swapped .gz (Fashion-MNIST comes over plain http) is one line, deleted, never read."""
    load = MNIST["load_28x28"]
    monkeypatch.setitem(load.__globals__, "download", lambda url, dest, timeout: dest.write_bytes(
        gzip.compress(b"tampered " + url.encode())))
    monkeypatch.setitem(load.__globals__, "read_idx", lambda path: pytest.fail(f"{path} read"))
    with pytest.raises(ValueError) as info:
        load(dataset, cache_dir=tmp_path)
    bad = tmp_path / ("mnist" if dataset == "mnist" else dataset) / "train-images-idx3-ubyte.gz"
    assert "\n" not in str(info.value) and str(info.value).startswith(
        f"{bad} is not the {dataset} file {bad.name}: expected md5 "
        f"{MNIST['MD5'][dataset][0]}, got md5 ")
    assert not bad.exists()


def test_mnist_prepare_writes_the_npz_files_and_meta_json_train_mlp_reads(tmp_path):
    tr, trl, te, tel = idx_fixture(tmp_path / "raw")
    out = tmp_path / "prepared"
    done = subprocess.run([sys.executable, ROOT / "data/mnist/prepare.py",
                           f"--data_dir={tmp_path / 'raw'}", f"--out_dir={out}"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "source: mnist from local IDX files" in done.stdout
    meta = json.loads((out / "meta.json").read_text())
    assert meta == {"dataset": "mnist", "requested": "mnist", "source": meta["source"],
                    "data_dir": str(tmp_path / "raw"), "n_classes": int(trl.max()) + 1,
                    "split_seed": 42, "image_shape": [1, 28, 28],
                    "splits": {"train": 100, "val": 20, "test": 30}}
    splits, read = images.load_prepared(out, "mnist")
    assert read == meta and splits.source == meta["source"] and splits.dataset == "mnist"
    assert np.array_equal(splits.test[:, 0], te) and np.array_equal(splits.test_labels, tel)


def test_imagenet32_from_the_official_npz_files(tmp_path):
    imagenet32_fixture(tmp_path)
    meta = IMAGENET32["prepare"](str(tmp_path), tmp_path / "prepared", max_train_images=7)
    assert meta["splits"] == {"train": 7, "val": 5, "test": 5} and meta["max_train_images"] == 7
    assert meta["image_shape"] == [3, 32, 32] and "npz files" in meta["source"]
    splits, _ = images.load_prepared(tmp_path / "prepared", "imagenet32")
    assert (splits.train[:, 1] == 20).all() and (splits.train[:, 2] == 30).all()  # G, B planes
    assert splits.train[:, 0, 0, 0].tolist() == [0, 1, 2, 3, 4, 5, 100]  # batch order kept
    assert splits.train_labels.tolist() == [0, 1, 2, 3, 4, 5, 0]  # labels - 1
    perm = np.random.RandomState(42).permutation(10)  # the reference's halves
    assert splits.val[:, 0, 0, 0].tolist() == (200 + perm[:5]).tolist()
    assert splits.test[:, 0, 0, 0].tolist() == (200 + perm[5:]).tolist()


def test_images_prepared_again_while_a_run_loads_them_are_of_one_preparation(
        tmp_path, monkeypatch):
    folder = write_prepared(tmp_path / "prepared", digit_splits(32, 8, 8), source="old")
    new = digit_splits(48, 8, 8)
    real_load, loads = np.load, []

    def load_then_prepare_again(path, *args, **kwargs):
        if len(loads) == 2:  # a preparation renamed in while the arrays are read
            write_prepared(folder, new, source="new")
        loads.append(path)
        return real_load(path, *args, **kwargs)
    monkeypatch.setattr(np, "load", load_then_prepare_again)
    splits, meta = images.load_prepared(folder, "mnist")
    assert len(loads) == 6 and splits.source == meta["source"] == "new" and len(splits.train) == 48
