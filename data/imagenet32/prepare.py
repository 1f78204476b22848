"""
ImageNet-32 (Downsampled ImageNet, 32x32x3, 1000 classes) for train_mlp.py's imagenet32_* tasks.
Writes train.npz, val.npz, test.npz and meta.json next to this script.

    python data/imagenet32/prepare.py --data_dir=/path/to/imagenet32        # the official npz files
    python data/imagenet32/prepare.py --data_dir=/path/to/imagenet32 --max_train_images=100000
    options: --out_dir=FOLDER (write the prepared arrays there instead)

Without the npz files, the gated hub copy benjamin-paine/imagenet-1k-32x32, streamed. The
official validation set is split in val and test halves as the reference code draws them.
"""

import argparse
import io
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repo root, for data/sources.py
from data.sources import file_errors_in_one_line, hub_unreachable, write_prepared  # noqa: E402

SPLIT_SEED = 42
HUB_REPO = "benjamin-paine/imagenet-1k-32x32"  # parquet: image, label; train, validation, test


def split_val_test(images, labels):
    perm = np.random.RandomState(SPLIT_SEED).permutation(len(images))
    val, test = perm[:len(images) // 2], perm[len(images) // 2:]
    return (images[val], labels[val]), (images[test], labels[test])


def read_npz(path):
    """(images (N, 3, 32, 32), labels 0..999) of an official file (R, G, B planes, labels 1..)."""
    with np.load(path) as f:
        return f["data"].reshape(-1, 3, 32, 32), np.asarray(f["labels"], dtype=np.int64) - 1


def load_imagenet32_npz(data_dir, max_train_images=None):
    """(splits, source) of the official npz files under data_dir, or None."""
    train_files = sorted(Path(data_dir).rglob("train_data_batch_*.npz"),
                         key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    val_files = list(Path(data_dir).rglob("val_data.npz"))
    if not train_files or not val_files:
        return None
    batches = []
    for path in train_files:
        batches.append(read_npz(path))
        if max_train_images and sum(len(images) for images, _ in batches) >= max_train_images:
            break
    train = [np.concatenate(arrays)[:max_train_images] for arrays in zip(*batches)]
    val, test = split_val_test(*read_npz(val_files[0]))
    source = (f"imagenet32 from npz files in {data_dir} ({len(train[0])} train images; val/test "
              f"halves as the reference code, RandomState(42))")
    return {"train": train, "val": val, "test": test}, source


def load_hub_split(split, limit=None):
    """(images uint8 (N, 3, 32, 32), labels) of a split of the hub copy, streamed: only its first
    `limit` images are fetched, each converted to RGB whatever mode it was saved in."""
    from datasets import Image, load_dataset
    from PIL import Image as PIL
    stream = load_dataset(HUB_REPO, split=split, streaming=True).cast_column(
        "image", Image(decode=False))
    images, labels = [], []
    for row in stream.take(limit) if limit else stream:
        with PIL.open(io.BytesIO(row["image"]["bytes"])) as image:
            images.append(np.asarray(image.convert("RGB")).transpose(2, 0, 1))
        labels.append(row["label"])
    return np.stack(images), np.asarray(labels, dtype=np.int64)


def load_imagenet32_hub(max_train_images=None):
    """(splits, source) of the hub copy, or None when the hub cannot be read or refuses."""
    why = hub_unreachable()
    if why:
        print(f"  hub ({HUB_REPO}): not reachable ({why})")
        return None
    try:
        val = load_hub_split("validation")  # the small split first: a quick refusal
        train = load_hub_split("train", max_train_images)
    except Exception as e:  # offline, or no access to the gated copy
        print(f"  hub ({HUB_REPO}): failed ({type(e).__name__}: {e}); the copy is gated: accept "
              f"its terms on huggingface.co and log in (hf auth login)")
        return None
    val, test = split_val_test(*val)
    return {"train": train, "val": val, "test": test}, (
        f"imagenet32 from the hub ({HUB_REPO}, {len(train[0])} train images; val/test: "
        f"RandomState(42) halves of the hub's validation order)")


def prepare(data_dir=None, out_dir=None, max_train_images=None):
    """Load ImageNet-32 from the first source that works and write it to out_dir. Returns meta."""
    found = load_imagenet32_npz(data_dir, max_train_images) if data_dir else None
    if data_dir and not found:
        print(f"imagenet32: no train_data_batch_*.npz + val_data.npz under {data_dir}")
    found = found or load_imagenet32_hub(max_train_images)
    if not found:
        raise FileNotFoundError(
            "ImageNet-32 not found. Download Imagenet32_train_npz and Imagenet32_val_npz "
            "(Downsampled ImageNet 32x32, npz format, from image-net.org after accepting its "
            "terms), unpack them into one folder and pass --data_dir=FOLDER "
            "(--max_train_images=N to use fewer).")
    meta = {"dataset": "imagenet32", "requested": "imagenet32", "source": found[1],
            "data_dir": os.path.abspath(data_dir) if data_dir else None, "n_classes": 1000,
            "split_seed": SPLIT_SEED, "max_train_images": max_train_images}
    return write_prepared(Path(out_dir) if out_dir else HERE, found[0], meta)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    parser.add_argument("--data_dir", default=None, help="Imagenet32_{train,val}_npz/'s folder")
    parser.add_argument("--out_dir", default=None, help="default: data/imagenet32/")
    parser.add_argument("--max_train_images", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        return prepare(args.data_dir, args.out_dir, args.max_train_images)
    except FileNotFoundError as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    with file_errors_in_one_line():
        main()
