"""
28x28 grey images for train_mlp.py (the image MLPs of mlp_hourglass.py): MNIST or Fashion-MNIST,
split as the reference code splits them. Writes train.npz, val.npz, test.npz and meta.json.

    python data/mnist/prepare.py                          # MNIST (needs the internet)
    python data/mnist/prepare.py --dataset=fashion_mnist  # -> data/mnist/fashion_mnist/
    options: --data_dir=FOLDER (the four IDX files you have, plain or .gz), --out_dir=FOLDER

MNIST comes as its usual .gz files (MD5 checked), Fashion-MNIST inside Debian's package
dataset-fashion-mnist (sha256 pinned), which a machine that reaches only the package registries
can download too.
"""

import argparse
import gzip
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repo root, for data/sources.py
from data.sources import deb_files, download, write_prepared  # noqa: E402

CACHE = HERE / "cache"  # git-ignored
SPLIT_SEED = 42
IDX_NAMES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
             "t10k-labels-idx1-ubyte")
MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"
MNIST_MD5 = ("f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
             "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c")  # torchvision
FASHION_DEB = "dataset-fashion-mnist_0.0~git20200523.55506a9-1_all.deb"
FASHION_DEB_URL = "http://deb.debian.org/debian/pool/main/d/dataset-fashion-mnist/" + FASHION_DEB
FASHION_DEB_SHA256 = "39e172fe32dd318ebb3e512220c3beea2fa47d7e20bab348fb4e0922d6beefc0"
FASHION_DEB_DIR = "usr/share/datasets/fashion-mnist"


def read_idx(data):
    """An IDX array of uint8 from its bytes, plain or gzipped: 0, 0, 0x08, the number of dims,
    each dim as a big-endian uint32, then the bytes."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if data[:3] != b"\0\0\x08":
        raise ValueError(f"not an IDX file of uint8 (it starts {data[:4]!r})")
    dims = np.frombuffer(data, ">u4", data[3], 4)
    return np.frombuffer(data, np.uint8, offset=4 + 4 * data[3]).reshape(dims)


def idx_files(dataset, data_dir, cache):
    """({name: bytes} of the dataset's IDX files, where from in words): data_dir's, else
    downloaded into cache (MNIST's .gz files, Fashion-MNIST's Debian package)."""
    if data_dir:
        files = {p.name: p.read_bytes() for p in Path(data_dir).iterdir() if p.is_file()}
        return files, f"{dataset} from local IDX files in {data_dir}"
    if dataset == "mnist":
        paths = [download(f"{MNIST_URL}{stem}.gz", cache / "mnist" / f"{stem}.gz", md5, "md5")
                 for stem, md5 in zip(IDX_NAMES, MNIST_MD5)]
        return ({p.name: p.read_bytes() for p in paths},
                f"mnist from the IDX .gz files (downloaded to {cache / 'mnist'})")
    deb = download(FASHION_DEB_URL, cache / FASHION_DEB, FASHION_DEB_SHA256)
    return deb_files(deb, FASHION_DEB_DIR), (f"fashion_mnist (full 60k/10k) from the Debian "
                                             f"package dataset-fashion-mnist ({deb.name})")


def split_train_val(images, labels, test_images, test_labels):
    """{"train", "val", "test"}: (images (N, 1, 28, 28) uint8, labels int64), as the reference
    code: val the last 10k of RandomState(42)'s permutation (a sixth of a small set), the
    official test set as test."""
    n_val = 10_000 if len(images) >= 20_000 else len(images) // 6
    perm = np.random.RandomState(SPLIT_SEED).permutation(len(images))
    train, val = perm[:-n_val], perm[-n_val:]
    images, labels = images[:, None], np.asarray(labels, dtype=np.int64)
    return {"train": (images[train], labels[train]), "val": (images[val], labels[val]),
            "test": (test_images[:, None], np.asarray(test_labels, dtype=np.int64))}


def prepare(dataset="mnist", data_dir=None, out_dir=None, cache=CACHE):
    """The dataset from data_dir's IDX files, else downloaded, written to out_dir. Returns meta."""
    files, source = idx_files(dataset, data_dir, Path(cache))
    found = [next((files[n] for n in (stem, f"{stem}.gz") if n in files), None)
             for stem in IDX_NAMES]
    if None in found:
        raise FileNotFoundError(f"{data_dir} does not hold the four IDX files "
                                f"{', '.join(IDX_NAMES)} (plain or .gz)")
    splits = split_train_val(*map(read_idx, found))
    source += (f", split {len(splits['train'][0])}/{len(splits['val'][0])} + official test as "
               f"the reference code (RandomState(42))")
    meta = {"dataset": dataset, "source": source,
            "data_dir": os.path.abspath(data_dir) if data_dir else None,
            "n_classes": int(splits["train"][1].max()) + 1, "split_seed": SPLIT_SEED}
    out_dir = out_dir or (HERE if dataset == "mnist" else HERE / dataset)
    return write_prepared(Path(out_dir), splits, meta)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    parser.add_argument("--dataset", default="mnist", choices=("mnist", "fashion_mnist"))
    parser.add_argument("--data_dir", default=None, help="the four IDX files (plain or .gz)")
    parser.add_argument("--out_dir", default=None, help="default: data/mnist/[<dataset>/]")
    args = parser.parse_args(argv)
    try:
        return prepare(args.dataset, args.data_dir, args.out_dir)
    except OSError as e:  # offline, say
        also = ", or prepare --dataset=fashion_mnist" if args.dataset == "mnist" else ""
        sys.exit(f"error: {e}: give the four IDX files (--data_dir=FOLDER){also}")
    except ValueError as e:
        sys.exit(f"error: {e}")

if __name__ == "__main__":
    main()
