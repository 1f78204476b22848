"""
ImageNet-32 (Downsampled ImageNet, 32x32x3, 1000 classes) for train_mlp.py's imagenet32_* tasks.
Writes train.npz, val.npz, test.npz and meta.json next to this script.

    python data/imagenet32/prepare.py --data_dir=/path/to/imagenet32        # the official npz files
    python data/imagenet32/prepare.py --data_dir=/path/to/imagenet32 --max_train_images=100000
    options: --out_dir=FOLDER (write the prepared arrays there instead)

Sources, the first that works (meta.json["source"] says which):
  1. the official npz files under --data_dir (train_data_batch_{1..10}.npz and val_data.npz, from
     image-net.org after accepting its terms; on no package registry);
  2. online: the gated hub copy benjamin-paine/imagenet-1k-32x32, streamed with `datasets`: only
     its first --max_train_images training images are fetched, each converted to RGB.
Splits, as in the paper: the official training set, and the official 50k validation set split
25k val / 25k test as the reference code draws it (RandomState(42) permutation, val the first
half; github.com/mtkresearch/Hourglass_LM, hourglass_mlp/utils/ds.py).
"""

import argparse
import io
import itertools
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repo root, for data/sources.py
from data.sources import (file_errors_in_one_line, hub_unreachable,  # noqa: E402
                          stop_on_sigterm, write_prepared)

SPLIT_SEED = 42
HUB_REPO = "benjamin-paine/imagenet-1k-32x32"  # parquet: image, label; train, validation, test


class HubDataError(ValueError):
    """An image or label of the hub copy that cannot be used (never said as data not found)."""


def split_val_test(images, labels, seed=SPLIT_SEED):
    perm = np.random.RandomState(seed).permutation(len(images))
    half = len(images) // 2
    return (images[perm[:half]], labels[perm[:half]]), (images[perm[half:]], labels[perm[half:]])


def load_imagenet32_npz(data_dir, max_train_images=None):
    """(splits, source) of the official npz files under data_dir (R, G, B planes of 3072 bytes,
    labels 1..1000), or None."""
    train_files = sorted(Path(data_dir).rglob("train_data_batch_*.npz"),
                         key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    val_files = list(Path(data_dir).rglob("val_data.npz"))
    if not train_files or not val_files:
        return None
    xs, ys = [], []
    for path in train_files:
        with np.load(path) as f:
            xs.append(f["data"].reshape(-1, 3, 32, 32))
            ys.append(np.asarray(f["labels"], dtype=np.int64) - 1)
        if max_train_images and sum(map(len, xs)) >= max_train_images:
            break
    train = np.concatenate(xs)[:max_train_images], np.concatenate(ys)[:max_train_images]
    with np.load(val_files[0]) as f:
        val, test = split_val_test(f["data"].reshape(-1, 3, 32, 32),
                                   np.asarray(f["labels"], dtype=np.int64) - 1)
    source = (f"imagenet32 from npz files in {data_dir} ({len(train[0])} train images; val/test "
              f"halves as the reference code, RandomState(42))")
    return {"train": train, "val": val, "test": test}, source


def rgb_image(stored, where):
    """A stored hub image as uint8 (32, 32, 3), whatever mode it was saved in."""
    from PIL import Image
    try:
        with Image.open(io.BytesIO(stored["bytes"]) if stored.get("bytes") else stored["path"]) \
                as image:
            rgb = np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (OSError, ValueError) as e:
        raise HubDataError(f"{where} cannot be decoded ({type(e).__name__}: {e})") from None
    if rgb.shape != (32, 32, 3):
        raise HubDataError(f"{where} is {rgb.shape[1]}x{rgb.shape[0]} pixels, not 32x32")
    return rgb


def load_hub_split(repo, split, limit=None):
    """(images uint8 (N, 3, 32, 32), labels) of one split, streamed; the images stay encoded until
    they are decoded, one at a time, and packed 10,000 at a time."""
    from datasets import Image, load_dataset
    stream = load_dataset(repo, split=split, streaming=True).cast_column("image",
                                                                         Image(decode=False))
    rows, chunks, labels = iter(stream.take(limit) if limit else stream), [], []
    while batch := list(itertools.islice(rows, 10_000)):
        chunks.append(np.stack([rgb_image(row["image"], f"{repo} {split} image {len(labels) + i}")
                                for i, row in enumerate(batch)]).transpose(0, 3, 1, 2))
        labels += [row["label"] for row in batch]
    labels = np.asarray(labels, dtype=np.int64)
    if not chunks or ((labels < 0) | (labels >= 1000)).any():
        raise HubDataError(f"{repo} {split} has no images, or labels outside 0..999 (an "
                           f"unlabelled split?)")
    return np.concatenate(chunks), labels


def load_imagenet32_hub(max_train_images=None):
    """(splits, source) of the hub copy, or None when the hub cannot be read or refuses."""
    why = hub_unreachable()
    if why:
        print(f"  hub ({HUB_REPO}): not reachable ({why})")
        return None
    try:
        val = load_hub_split(HUB_REPO, "validation")  # the small split first: a quick refusal
        train = load_hub_split(HUB_REPO, "train", max_train_images)
    except HubDataError:
        raise
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
    except (FileNotFoundError, HubDataError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    stop_on_sigterm()
    with file_errors_in_one_line():
        main()
