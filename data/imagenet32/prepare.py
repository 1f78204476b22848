"""
ImageNet-32 (Downsampled ImageNet, 32x32x3, 1000 classes) for train_mlp.py's imagenet32_* tasks.
Writes train.npz, val.npz, test.npz and meta.json next to this script.

    python data/imagenet32/prepare.py --data_dir=/path/to/imagenet32        # the official npz files
    python data/imagenet32/prepare.py --data_dir=/path/to/imagenet32 --max_train_images=100000
    options: --out_dir=FOLDER (write the prepared arrays there instead)

train_mlp.py runs this script itself when data/imagenet32/ is not prepared (it passes its own
--data_dir on).

Sources, first one that works (the script prints which one it used, meta.json["source"] keeps it):
  1. the official npz files under --data_dir: Imagenet32_train_npz/train_data_batch_{1..10}.npz
     and Imagenet32_val_npz/val_data.npz (found anywhere below the folder), keys `data` uint8
     (N, 3072) as R, G, B planes and `labels` 1..1000. Get them from image-net.org (Downsampled
     ImageNet 32x32, npz format) after accepting its terms; they are on no package registry.
  2. online: the hub parquet copy benjamin-paine/imagenet-1k-32x32 (with `datasets`).
There is no offline fallback: without either the script says where to get the files.

Output: {train,val,test}.npz, each with `images` uint8 (N, 3, 32, 32) and `labels` int64 (N,)
(0..999), and meta.json: {"dataset": "imagenet32", "source", "data_dir", "image_shape",
"n_classes", "splits", "split_seed", "max_train_images"}. The full training set is 1.28M
images, 3.9 GB as uint8; --max_train_images=N keeps only the first N (in batch order).

Splits, as in the paper: train = the official training set; the official 50k validation set is
split 25k validation / 25k test at random, exactly as the reference code draws it
(https://github.com/mtkresearch/Hourglass_LM, hourglass_mlp/utils/ds.py: RandomState(42)
permutation, validation = the first half; the paper gives no seed), so the halves match its.
"""

import argparse
import glob
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SPLIT_SEED = 42
HUB_REPO = "benjamin-paine/imagenet-1k-32x32"


def _load_mnist_prepare():
    """data/mnist/prepare.py as a module (data/ is not a package): reachable, load_from_hub,
    write_prepared."""
    path = HERE.parent / "mnist" / "prepare.py"
    spec = importlib.util.spec_from_file_location("mnist_prepare", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mnist_prepare = _load_mnist_prepare()


def split_val_test(images, labels, seed=SPLIT_SEED):
    """The official validation set -> (val, test) halves of a random permutation, drawn as the
    reference code draws it (np.random.RandomState(42); val = the first half)."""
    perm = np.random.RandomState(seed).permutation(len(images))
    half = len(images) // 2
    return (images[perm[:half]], labels[perm[:half]]), (images[perm[half:]], labels[perm[half:]])


def load_imagenet32_npz(data_dir, max_train_images=None):
    """The official npz files under data_dir -> ({"train": (images, labels), "val", "test"},
    source), or None."""
    train_files = sorted(glob.glob(os.path.join(data_dir, "**", "train_data_batch_*.npz"),
                                   recursive=True),
                         key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    val_files = glob.glob(os.path.join(data_dir, "**", "val_data.npz"), recursive=True)
    if not train_files or not val_files:
        return None
    xs, ys, n = [], [], 0
    for p in train_files:
        with np.load(p) as f:
            xs.append(f["data"].reshape(-1, 3, 32, 32))  # R, G, B planes -> (N, 3, 32, 32)
            ys.append(np.asarray(f["labels"], dtype=np.int64) - 1)  # 1..1000 -> 0..999
        n += len(xs[-1])
        if max_train_images and n >= max_train_images:
            break
    tr_x, tr_y = np.concatenate(xs)[:max_train_images], np.concatenate(ys)[:max_train_images]
    with np.load(val_files[0]) as f:
        va_x = f["data"].reshape(-1, 3, 32, 32)
        va_y = np.asarray(f["labels"], dtype=np.int64) - 1
    val, test = split_val_test(va_x, va_y)
    source = (f"imagenet32 from npz files in {data_dir} ({len(tr_x)} train images; val/test halves "
              f"as the reference code, RandomState(42))")
    return {"train": (tr_x, tr_y), "val": val, "test": test}, source


def load_imagenet32_hub(max_train_images=None):
    """The hub parquet copy -> (splits, source), or None when the hub cannot be reached."""
    hub = mnist_prepare.load_from_hub(HUB_REPO)
    if hub is None or "train" not in hub:
        return None
    val_key = "validation" if "validation" in hub else ("val" if "val" in hub else None)
    if val_key is None:
        return None
    tr_x, tr_y = hub["train"]
    tr_x, tr_y = tr_x[:max_train_images], tr_y[:max_train_images]
    va_x, va_y = hub[val_key]

    def nchw(a):
        return a.transpose(0, 3, 1, 2)                  # (N, 32, 32, 3) -> (N, 3, 32, 32)
    val, test = split_val_test(nchw(va_x), va_y)
    return {"train": (nchw(tr_x), tr_y), "val": val, "test": test}, (
        f"imagenet32 from the hub ({HUB_REPO}; val/test: RandomState(42) halves of the hub's "
        f"validation order)")


def load_imagenet32(data_dir=None, max_train_images=None):
    """The first source that works -> (splits, source); FileNotFoundError saying where to get the
    files."""
    if data_dir:
        found = load_imagenet32_npz(data_dir, max_train_images)
        if found is not None:
            return found
        print(f"imagenet32: no train_data_batch_*.npz + val_data.npz under {data_dir}")
    found = load_imagenet32_hub(max_train_images)
    if found is not None:
        return found
    raise FileNotFoundError(
        "ImageNet-32 not found. Download Imagenet32_train_npz and Imagenet32_val_npz (Downsampled "
        "ImageNet 32x32, npz format, from image-net.org after accepting its terms), unpack them "
        "into one folder and pass --data_dir=FOLDER (--max_train_images=N to use fewer).")


def prepare(data_dir=None, out_dir=None, max_train_images=None):
    """Load ImageNet-32 from the first source that works and write it to out_dir. Returns meta."""
    out_dir = Path(out_dir) if out_dir else HERE
    splits, source = load_imagenet32(data_dir, max_train_images)
    meta = {"dataset": "imagenet32", "requested": "imagenet32", "source": source,
            "data_dir": os.path.abspath(data_dir) if data_dir else None, "n_classes": 1000,
            "split_seed": SPLIT_SEED, "max_train_images": max_train_images}
    meta = mnist_prepare.write_prepared(out_dir, splits, meta)
    return meta


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=None,
                        help="folder with Imagenet32_train_npz/ and Imagenet32_val_npz/")
    parser.add_argument("--out_dir", default=None, help="default: data/imagenet32/")
    parser.add_argument("--max_train_images", type=int, default=None,
                        help="keep only the first N training images")
    args = parser.parse_args(argv)
    try:
        return prepare(args.data_dir, args.out_dir, args.max_train_images)
    except FileNotFoundError as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    mnist_prepare.stop_on_sigterm()  # SIGTERM: no half-written file left
    main()
