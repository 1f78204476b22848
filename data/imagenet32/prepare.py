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
  2. online: the hub parquet copy benjamin-paine/imagenet-1k-32x32 (gated: accept its terms and
     log in), streamed with `datasets`: only its train and validation splits are read, only the
     first --max_train_images training images are fetched and decoded, each converted to RGB.
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
import io
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SPLIT_SEED = 42
HUB_REPO = "benjamin-paine/imagenet-1k-32x32"  # parquet: image, label; train, validation, test
HUB_IMAGE, HUB_LABEL, HUB_VAL_SPLIT = "image", "label", "validation"


def _load_mnist_prepare():
    """data/mnist/prepare.py as a module (data/ is not a package): reachable, write_prepared."""
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


class HubDataError(ValueError):
    """An image or label of the hub copy that cannot be used: one line naming it (never reported
    as data that was not found)."""


def rgb_image(stored, where):
    """A stored image ({"bytes", "path"}, as the hub keeps it) -> uint8 (32, 32, 3), decoded and
    converted to RGB whatever mode it was saved in (grayscale, CMYK, palette, RGBA), so that every
    image has the one shape np.stack needs."""
    from PIL import Image
    source = io.BytesIO(stored["bytes"]) if stored.get("bytes") is not None else stored["path"]
    try:
        with Image.open(source) as image:
            rgb = np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (OSError, ValueError) as e:  # (PIL's UnidentifiedImageError is an OSError)
        raise HubDataError(f"{where} cannot be decoded ({type(e).__name__}: {e})") from None
    if rgb.shape != (32, 32, 3):
        raise HubDataError(f"{where} is {rgb.shape[1]}x{rgb.shape[0]} pixels, not 32x32")
    return rgb


def load_hub_split(repo, split, limit=None, chunk=10_000):
    """One split of a hub dataset, streamed -> (images uint8 (N, 3, 32, 32), labels int64 (N,)).
    Only this split is read, only its first `limit` images (all when None) are fetched and decoded,
    one at a time (the images stay encoded until then: Image(decode=False)), and they are packed
    into arrays `chunk` at a time, never held as a list of 1.28M decoded images."""
    from datasets import Image, load_dataset
    stream = load_dataset(repo, split=split, streaming=True)
    stream = stream.cast_column(HUB_IMAGE, Image(decode=False))
    if limit:
        stream = stream.take(limit)  # the train[:N] of a stream: nothing after N is fetched
    chunks, labels, block = [], [], []
    for i, row in enumerate(stream):
        block.append(rgb_image(row[HUB_IMAGE], f"{repo} {split} image {i}"))
        labels.append(row[HUB_LABEL])
        if len(block) == chunk:
            chunks.append(np.stack(block).transpose(0, 3, 1, 2))  # (n, 32, 32, 3) -> (n, 3, 32, 32)
            block = []
            if len(chunks) % 10 == 0:
                print(f"  hub {split}: {i + 1:,} images")
    if block:
        chunks.append(np.stack(block).transpose(0, 3, 1, 2))
    if not chunks:
        raise HubDataError(f"{repo} has no images in its {split} split")
    labels = np.asarray(labels, dtype=np.int64)
    bad = np.flatnonzero((labels < 0) | (labels >= 1000))
    if len(bad):
        raise HubDataError(f"{repo} {split} image {bad[0]} has label {labels[bad[0]]}, not 0..999 "
                           f"(an unlabelled split?)")
    return np.concatenate(chunks), labels


def load_imagenet32_hub(max_train_images=None, repo=None):
    """The hub parquet copy (repo: HUB_REPO), streamed: its validation split and the first
    max_train_images of its train split (its unlabelled test split is never read) -> (splits,
    source), or None when the hub cannot be reached or refuses (the copy is gated)."""
    repo = repo or HUB_REPO
    if not mnist_prepare.reachable("https://huggingface.co", timeout=3.0):
        print(f"  hub ({repo}): not reachable")
        return None
    try:
        va_x, va_y = load_hub_split(repo, HUB_VAL_SPLIT)  # the small split first: a quick refusal
        tr_x, tr_y = load_hub_split(repo, "train", max_train_images)
    except HubDataError:
        raise
    except ImportError as e:
        print(f"  hub ({repo}): needs `datasets` and Pillow ({e}): pip install datasets pillow")
        return None
    except Exception as e:  # offline, or no access to the gated copy: say so, go on
        gated = ("" if isinstance(e, ConnectionError) else "; the copy is gated: accept its terms "
                 "on huggingface.co and log in (hf auth login)")
        print(f"  hub ({repo}): failed ({type(e).__name__}: {e}){gated}")
        return None
    val, test = split_val_test(va_x, va_y)
    return {"train": (tr_x, tr_y), "val": val, "test": test}, (
        f"imagenet32 from the hub ({repo}, {len(tr_x)} train images; val/test: RandomState(42) "
        f"halves of the hub's validation order)")


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
    except (FileNotFoundError, HubDataError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    mnist_prepare.stop_on_sigterm()  # SIGTERM: no half-written file left
    with mnist_prepare.file_errors_in_one_line("--out_dir"):
        main()
