"""
ImageNet-32 (Downsampled ImageNet, 32x32x3, 1000 classes) for train_mlp.py's imagenet32_* tasks,
from the official npz files (image-net.org, after accepting its terms). Writes train.npz, val.npz,
test.npz and meta.json next to this script; the official validation set is split in val and test
halves as the reference code draws them.

    python data/imagenet32/prepare.py --data_dir=/path/to/imagenet32        # the official npz files
    python data/imagenet32/prepare.py --data_dir=/path/to/imagenet32 --max_train_images=100000
    options: --out_dir=FOLDER (write the prepared arrays there instead)
"""

import argparse
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repo root, for data/sources.py
from data.sources import write_prepared  # noqa: E402

SPLIT_SEED = 42


def read_npz(path):
    """(images (N, 3, 32, 32), labels 0..999) of an official file (R, G, B planes, labels 1..)."""
    with np.load(path) as f:
        return f["data"].reshape(-1, 3, 32, 32), np.asarray(f["labels"], dtype=np.int64) - 1


def prepare(data_dir, out_dir=None, max_train_images=None):
    """The official npz files under data_dir, written to out_dir. Returns meta."""
    train_files = sorted(Path(data_dir).rglob("train_data_batch_*.npz"),
                         key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    val_files = list(Path(data_dir).rglob("val_data.npz"))
    if not train_files or not val_files:
        raise FileNotFoundError(
            f"no train_data_batch_*.npz and val_data.npz under {data_dir}: download "
            f"Imagenet32_train_npz and Imagenet32_val_npz (Downsampled ImageNet 32x32) from "
            f"image-net.org and unpack them into one folder")
    batches = []
    for path in train_files:
        batches.append(read_npz(path))
        if max_train_images and sum(len(images) for images, _ in batches) >= max_train_images:
            break
    train = [np.concatenate(arrays)[:max_train_images] for arrays in zip(*batches)]
    images, labels = read_npz(val_files[0])
    perm = np.random.RandomState(SPLIT_SEED).permutation(len(images))
    val, test = perm[:len(images) // 2], perm[len(images) // 2:]
    source = (f"imagenet32 from npz files in {data_dir} ({len(train[0])} train images; val/test "
              f"halves as the reference code, RandomState(42))")
    meta = {"dataset": "imagenet32", "source": source, "data_dir": os.path.abspath(data_dir),
            "n_classes": 1000, "split_seed": SPLIT_SEED, "max_train_images": max_train_images}
    splits = {"train": train, "val": (images[val], labels[val]),
              "test": (images[test], labels[test])}
    return write_prepared(Path(out_dir) if out_dir else HERE, splits, meta)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    parser.add_argument("--data_dir", required=True, help="Imagenet32_{train,val}_npz/'s folder")
    parser.add_argument("--out_dir", default=None, help="default: data/imagenet32/")
    parser.add_argument("--max_train_images", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        return prepare(args.data_dir, args.out_dir, args.max_train_images)
    except FileNotFoundError as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
