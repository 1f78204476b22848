"""The image prepare scripts on IDX, .deb and npz fixtures: the reference splits, checked
downloads, a folder prepared again while a run reads it."""

import gzip
import hashlib
import io
import json
import runpy
import subprocess
import sys
import tarfile

import numpy as np
import pytest

from conftest import ROOT, digit_splits, idx_fixture, imagenet32_fixture, write_prepared
from shapelab import images

MNIST = runpy.run_path(str(ROOT / "data/mnist/prepare.py"))
IMAGENET32 = runpy.run_path(str(ROOT / "data/imagenet32/prepare.py"))


def test_mnist_prepare_splits_the_official_sets_as_the_reference_code(tmp_path):
    tr, trl, te, tel = idx_fixture(tmp_path / "raw")
    out = tmp_path / "prepared"
    done = subprocess.run([sys.executable, ROOT / "data/mnist/prepare.py",
                           f"--data_dir={tmp_path / 'raw'}", f"--out_dir={out}"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta == {"dataset": "mnist", "data_dir": str(tmp_path / "raw"), "split_seed": 42,
                    "source": f"mnist from local IDX files in {tmp_path / 'raw'}, split 100/20 + "
                              f"official test as the reference code (RandomState(42))",
                    "n_classes": int(trl.max()) + 1, "image_shape": [1, 28, 28],
                    "splits": {"train": 100, "val": 20, "test": 30}}
    splits, read = images.load_prepared(out, "mnist")
    perm = np.random.RandomState(42).permutation(120)  # github.com/mtkresearch/Hourglass_LM's
    for split, x, y in (("train", tr[perm[:100]], trl[perm[:100]]),
                        ("val", tr[perm[100:]], trl[perm[100:]]), ("test", te, tel)):
        assert np.array_equal(getattr(splits, split)[:, 0], x)
        assert np.array_equal(getattr(splits, f"{split}_labels"), y)
    assert read == meta and splits.source == meta["source"] and splits.dataset == "mnist"
    with pytest.raises(ValueError, match="not an IDX file"):
        MNIST["read_idx"](b"\x12\x34\x08\x01\x00\x00\x00\x02ab")


def fake_deb(path, files):
    """An ar archive holding data.tar.xz with `files` ({path: bytes}), as a .deb is laid out."""
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w:xz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    members = [("debian-binary", b"2.0\n"), ("data.tar.xz", tar_bytes.getvalue())]
    path.write_bytes(b"!<arch>\n" + b"".join(
        f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode() + data
        + b"\n" * (len(data) % 2) for name, data in members))


def test_fashion_mnist_comes_out_of_its_debian_package_and_a_swapped_one_is_refused(
        tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    idx_fixture(raw)
    deb_dir = MNIST["FASHION_DEB_DIR"]
    fake_deb(tmp_path / "fashion.deb", {f"{deb_dir}/{p.name}": p.read_bytes()
                                        for p in raw.iterdir()} | {"usr/share/doc/x": b"doc"})
    idx_files = MNIST["idx_files"]
    sha256 = hashlib.sha256((tmp_path / "fashion.deb").read_bytes()).hexdigest()
    monkeypatch.setitem(idx_files.__globals__, "FASHION_DEB_SHA256", sha256)
    monkeypatch.setitem(idx_files.__globals__, "FASHION_DEB_URL",
                        (tmp_path / "fashion.deb").as_uri())
    files, source = idx_files("fashion_mnist", None, tmp_path / "cache")
    assert source.startswith("fashion_mnist (full 60k/10k) from the Debian package")
    assert files == {p.name: p.read_bytes() for p in raw.iterdir()}
    swapped = tmp_path / "cache/mnist/train-images-idx3-ubyte.gz"  # as a bad mirror sends it
    swapped.parent.mkdir()
    swapped.write_bytes(gzip.compress(b"tampered"))
    with pytest.raises(ValueError, match="md5 mismatch for train-images-idx3-ubyte.gz") as info:
        idx_files("mnist", None, tmp_path / "cache")  # refused before it is read, and deleted
    assert "\n" not in str(info.value) and not list((tmp_path / "cache/mnist").iterdir())


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
