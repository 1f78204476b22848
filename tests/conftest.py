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
    splits = {name: {"tokens": int(part.size), "max_id": int(part.max())}
              for name, part in (("train", ids[:split]), ("val", ids[split:]))}
    (data_dir / "meta.json").write_text(json.dumps(
        {"tokenizer": "char", "vocab_size": len(chars), "chars": "".join(chars),
         "source": "test fixture", "splits": splits}))
    return data_dir


def assert_causal(model, vocab_size, t, batch=2, seq=32):
    """Changing token t leaves the logits before t unchanged (exactly) and changes those from t
    on."""
    idx = torch.randint(vocab_size, (batch, seq))
    changed = idx.clone()
    changed[:, t] = (changed[:, t] + 1) % vocab_size
    with torch.no_grad():
        a, b = all_logits(model.eval(), idx), all_logits(model, changed)
    assert torch.equal(a[:, :t], b[:, :t]), "an earlier position saw a later token"
    assert not torch.allclose(a[:, t:], b[:, t:]), "the changed token had no effect at all"


def overfit_loss(model, vocab_size, steps=150, lr=3e-3, batch=4, seq=16):
    """Train `model` on one fixed random batch; return the final loss (ln(vocab) at the start)."""
    idx = torch.randint(vocab_size, (batch, seq + 1))
    x, y = idx[:, :-1], idx[:, 1:]
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(steps):
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _one_thread():
    """The test models are tiny: one torch thread is faster than two, and much faster when the
    2-core machine is busy (spinning OpenMP threads). Restored after each test."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
