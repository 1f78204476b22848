"""
Checkpoint files: written whole or not at all (a temporary file renamed over the old one), read
with torch.load(weights_only=True), so a checkpoint from someone else cannot run code. They load
to the CPU.
"""

import os
import warnings
from pathlib import Path

import torch


class CheckpointError(SystemExit):
    """A checkpoint that exists but cannot be used: one line, exit status 1."""


def write_atomic(path, data, write=None):
    """Write `data` as the file `path`, whole or not at all: text or bytes, or whatever
    `write(data, file)` writes."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            if write is None:
                f.write(data.encode() if isinstance(data, str) else data)
            else:
                write(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def save_checkpoint(state, path):
    write_atomic(path, state, torch.save)


def load_checkpoint(path, map_location="cpu", trainer="train.py"):
    """The dict save_checkpoint wrote, loaded with weights_only=True; FileNotFoundError if there
    is no file, CheckpointError (one line) if it is damaged or not a checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: train one first (python {trainer}) "
                                f"or point --out_dir at the folder that holds ckpt.pt")
    try:
        with warnings.catch_warnings():  # another program's pickle: one line, not torch's warning
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # truncated, empty, another program's pickle, ...
        state = e
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} is damaged or not a checkpoint ({type(state).__name__}; "
                              f"only tensors and plain containers are ever loaded): delete it "
                              f"and train again (python {trainer}), or point --out_dir at a "
                              f"folder with a good ckpt.pt")
    return state
