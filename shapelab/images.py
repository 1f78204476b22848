"""
The prepared image data sets train_mlp.py reads: {train,val,test}.npz (uint8 images, int64
labels) and meta.json (the source in words), written by data/mnist/prepare.py and
data/imagenet32/prepare.py.
"""

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from shapelab.configurator import ConfigError

ROOT = Path(__file__).resolve().parents[1]

# under data/, each written by data/<its first folder>/prepare.py
PREPARED_DIRS = {"mnist": "mnist", "fashion_mnist": "mnist/fashion_mnist",
                 "imagenet32": "imagenet32"}


def prepare_script(dataset):
    return Path("data") / PREPARED_DIRS[dataset].split("/")[0] / "prepare.py"


@dataclass
class ImageSplits:
    source: str  # what was loaded, in words (printed, and saved with every result)
    train: torch.Tensor  # (N, C, H, W) uint8
    train_labels: torch.Tensor  # (N,) int64
    val: torch.Tensor
    val_labels: torch.Tensor
    test: torch.Tensor
    test_labels: torch.Tensor
    dataset: str = ""  # meta.json's "dataset"


def load_prepared(folder, dataset):
    """(ImageSplits, meta) of a prepared folder, read whole: a preparation renamed in during a run
    is never seen by it, and meta.json read before and after the arrays is theirs."""
    again = f"prepare it again (python {prepare_script(dataset)} ...)"
    for _ in range(50):
        try:
            text = (folder / "meta.json").read_bytes()
            arrays = []
            for split in ("train", "val", "test"):
                with np.load(folder / f"{split}.npz") as f:
                    arrays += [torch.from_numpy(f["images"]), torch.from_numpy(f["labels"]).long()]
            if (folder / "meta.json").read_bytes() == text:
                meta = json.loads(text)
                return ImageSplits(meta["source"], *arrays, dataset=meta.get("dataset", "")), meta
        except FileNotFoundError:
            pass  # a preparation is being renamed in
        except Exception as e:  # a damaged .npz: zipfile's, numpy's and json's errors
            raise ConfigError(f"{folder} holds a damaged file ({type(e).__name__}: {e}): "
                              f"{again}") from None
        time.sleep(0.02)
    raise ConfigError(f"{folder} is not a whole prepared data set: {again}")


def load_images(task, dataset="", data_dir="", max_train_images=0, prepared_dir=""):
    """The prepared splits of `dataset` for `task` (image_tasks.Task), prepared first when the
    folder is missing or was prepared from another --data_dir."""
    dataset = dataset or ("mnist" if task.dataset_kind == "28x28" else "imagenet32")
    if dataset not in PREPARED_DIRS:
        raise ConfigError(f"dataset={dataset!r} is unknown; choose one of "
                          f"{', '.join(PREPARED_DIRS)}")
    folder = Path(prepared_dir or ROOT / "data" / PREPARED_DIRS[dataset])
    meta_path = folder / "meta.json"
    stale = data_dir and meta_path.exists() and json.loads(
        meta_path.read_text()).get("data_dir") != os.path.abspath(data_dir)
    if stale or not meta_path.exists():
        args = [f"--out_dir={folder}"]
        if data_dir:
            args.append(f"--data_dir={data_dir}")
        if dataset != "imagenet32":
            args.append(f"--dataset={dataset}")
        elif max_train_images:
            args.append(f"--max_train_images={max_train_images}")
        print(f"preparing {folder}: python {prepare_script(dataset)} {' '.join(args)}")
        if subprocess.run([sys.executable, ROOT / prepare_script(dataset), *args]).returncode:
            raise ConfigError(f"preparing {dataset} failed (see the messages above)")
    splits, meta = load_prepared(folder, dataset)
    if tuple(meta["image_shape"]) != task.image_shape:
        raise ConfigError(f"{folder} holds {tuple(meta['image_shape'])} images, task "
                          f"{task.name} needs {task.image_shape}")
    if max_train_images:
        splits.train = splits.train[:max_train_images]
        splits.train_labels = splits.train_labels[:max_train_images]
    print(f"data: {splits.source} (prepared in {folder}; {len(splits.train)} train images)")
    return splits
