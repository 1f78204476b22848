"""
Checkpoints that are never lost and never run pickled code.

- `save_checkpoint` writes to `<path>.tmp`, fsyncs it, then renames it over `<path>`.
  A rename within one directory is atomic, so a run killed mid-save leaves the previous
  checkpoint intact (and at worst a stray .tmp file, which the next save overwrites).
- `load_checkpoint` uses `torch.load(weights_only=True)`: only tensors and plain Python
  containers are unpickled, so a checkpoint from someone else cannot execute code.
  That is why everything we store (model arguments, the training config, RNG states)
  is kept as plain dicts, lists, numbers, strings and tensors.
- `model_from_checkpoint` rebuilds whatever model_type the checkpoint names.
"""

import os
from pathlib import Path

import torch

from configurator import build_model


def save_checkpoint(state, path):
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path, map_location="cpu"):
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: train one first (python train.py) "
                                f"or point --out_dir at the folder that holds ckpt.pt")
    return torch.load(path, map_location=map_location, weights_only=True)


def model_from_checkpoint(checkpoint):
    """The model described by checkpoint['model_type'] / ['model_args'], with its weights."""
    model = build_model(checkpoint["model_type"], **checkpoint["model_args"])
    model.load_state_dict(checkpoint["model"])
    return model
