"""Shared helpers for the tests: tiny models and a tiny prepared dataset on disk."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def tiny_config(**overrides):
    from model import GPTConfig
    args = dict(vocab_size=50, block_size=32, n_layer=2, n_embd=64, n_head=4)
    args.update(overrides)
    return GPTConfig(**args)


def all_logits(model, idx):
    """Logits at every position (forward only returns the last one without targets)."""
    logits, _ = model(idx, targets=idx)
    return logits


@pytest.fixture
def char_dataset(tmp_path):
    """A prepared character-level dataset in the real on-disk format (uint16 bins + meta.json)."""
    text = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
            "All:\nSpeak, speak.\n\n") * 200
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text], dtype=np.uint16)
    split = int(0.9 * len(ids))
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    ids[:split].tofile(data_dir / "train.bin")
    ids[split:].tofile(data_dir / "val.bin")
    (data_dir / "meta.json").write_text(json.dumps(
        {"tokenizer": "char", "vocab_size": len(chars), "chars": "".join(chars), "source": "test fixture"}))
    return data_dir


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
