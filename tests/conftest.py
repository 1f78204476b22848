"""Shared helpers for the tests: tiny models, a tiny prepared dataset on disk, a text in the shape
of Shakespeare's, GPT-2's ranks, and digit-like images in the image MLPs' prepared and raw (IDX)
formats."""

import gzip
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The commands the tests start run one torch thread each, unless the environment says otherwise:
# up to 4 test processes share the cores, and a tiny model's second thread only spins and waits.
os.environ.setdefault("OMP_NUM_THREADS", "1")


# a fixture in the shape of the real text: speaker lines, verse, punctuation, blank lines
FIXTURE_TEXT = """FIRST CITIZEN:
Before we proceed any further, hear me speak.

ALL:
Speak, speak.

HAMLET:
To be, or not to be: that is the question--
Whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous fortune? [Exit.]
"""


@pytest.fixture(scope="session")
def gpt2_file():
    """The cached gpt2.tiktoken, fetched through PyPI if needed; skip only if the download fails."""
    from data import sources
    try:
        return sources.gpt2_tiktoken_file()
    except RuntimeError as e:  # no network at all (a wrong file is a ValueError: it fails)
        pytest.skip(f"cannot download {sources.WHISPER_SDIST} for the GPT-2 ranks: {e}")


def run_here(script, *args, cwd=ROOT):
    """`python <script> <args>` run in this process (no interpreter start): its exit status,
    stdout and stderr, as subprocess.run gives them. The run folder's lock is let go at its end,
    and the signal handlers, sys.argv, __main__, the working folder and the fp32 matmul precision
    are restored."""
    import contextlib
    import io
    import signal
    import subprocess
    import types

    from shapelab.run import RunDir

    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
                for _ in range(2))  # (text files with reconfigure(), which train.py calls)
    path = ROOT / script
    main = types.ModuleType("__main__", None)  # (its --help reads sys.modules["__main__"])
    main.__file__ = str(path)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    saved = sys.argv, sys.modules["__main__"], os.getcwd(), torch.get_float32_matmul_precision()
    sys.argv, sys.modules["__main__"] = [str(path), *map(str, args)], main
    code = 0
    os.chdir(cwd)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), main.__dict__)
        except SystemExit as e:  # (Python's exit: a message goes to stderr with status 1)
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except BaseException as e:  # noqa: BLE001 (any uncaught exception, as the process ends)
            code = 1
            sys.excepthook(type(e), e, e.__traceback__)
        finally:
            for value in main.__dict__.values():
                if isinstance(value, RunDir) and value._lock is not None:
                    value._lock.release()  # (the OS frees it when a process ends)
            sys.argv, sys.modules["__main__"], folder, precision = saved
            os.chdir(folder)
            torch.set_float32_matmul_precision(precision)
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
            main.__dict__.clear()
    return subprocess.CompletedProcess([script, *args], code, out.buffer.getvalue().decode(),
                                       err.buffer.getvalue().decode())


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


# ------------------------------------------------------------------ images for the image MLPs


def write_idx(path, array):
    """IDX as published: 0x00 0x00, dtype 0x08 (uint8), ndim, big-endian dims, raw bytes."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(">" + "I" * array.ndim, *array.shape)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def idx_fixture(folder, n_train=120, n_test=30, seed=0):
    """The four IDX files of a tiny MNIST-format set in folder; returns the arrays written."""
    rng = np.random.default_rng(seed)
    tr = rng.integers(0, 256, size=(n_train, 28, 28), dtype=np.uint8)
    trl = rng.integers(0, 10, size=n_train).astype(np.uint8)
    te = rng.integers(0, 256, size=(n_test, 28, 28), dtype=np.uint8)
    tel = rng.integers(0, 10, size=n_test).astype(np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    write_idx(folder / "train-images-idx3-ubyte.gz", tr)
    write_idx(folder / "train-labels-idx1-ubyte.gz", trl)
    write_idx(folder / "t10k-images-idx3-ubyte", te)  # one uncompressed, as some mirrors have
    write_idx(folder / "t10k-labels-idx1-ubyte.gz", tel)
    return tr, trl, te, tel


def imagenet32_fixture(folder):
    """ImageNet-32 in the official npz layout: Imagenet32_train_npz/train_data_batch_{1,2}.npz
    (6 + 4 images) and Imagenet32_val_npz/val_data.npz (10): `data` uint8 (N, 3072) as R, G, B
    planes (10, 20, 30; each image's first pixel tags it), `labels` 1..n, `mean` (train)."""
    def batch(n, offset):
        data = np.empty((n, 3072), dtype=np.uint8)
        data[:, :1024], data[:, 1024:2048], data[:, 2048:] = 10, 20, 30    # R, G, B planes
        data[:, 0] = np.arange(n) + offset                                    # tag each image
        return data, list(range(1, n + 1))                                     # labels 1..n
    (folder / "Imagenet32_train_npz").mkdir(parents=True)
    (folder / "Imagenet32_val_npz").mkdir()
    for i, (n, off) in enumerate(((6, 0), (4, 100)), start=1):
        d, lab = batch(n, off)
        np.savez(folder / "Imagenet32_train_npz" / f"train_data_batch_{i}.npz", data=d, labels=lab,
                 mean=d.mean(0))
    d, lab = batch(10, 200)
    np.savez(folder / "Imagenet32_val_npz" / "val_data.npz", data=d, labels=lab)


def bar_templates(seed=123, size=28):
    """Ten 'digit' templates (uint8): two or three bright bars each on a black background."""
    rng = np.random.default_rng(seed)
    templates = np.zeros((10, 1, size, size), dtype=np.uint8)
    for k in range(10):
        for _ in range(rng.integers(2, 4)):
            r, c = rng.integers(4, size - 8, size=2)
            if rng.random() < 0.5:
                templates[k, 0, r:r + 3, c:c + rng.integers(6, 14)] = 255
            else:
                templates[k, 0, r:r + rng.integers(6, 14), c:c + 3] = 255
    return templates


def digit_like(n, seed):
    """n images: the template of a random class at a random brightness in [0.6, 1]."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=n)
    scale = rng.uniform(0.6, 1.0, size=(n, 1, 1, 1))
    images = (bar_templates()[labels] * scale).round().astype(np.uint8)
    return torch.from_numpy(images), torch.from_numpy(labels).long()


def digit_splits(n_train=768, n_val=128, n_test=256):
    """dataset.ImageSplits of digit-like images (train, val and test drawn apart)."""
    from shapelab.images import ImageSplits

    return ImageSplits("synthetic bar digits", *digit_like(n_train, 0), *digit_like(n_val, 1),
                       *digit_like(n_test, 2))


def write_prepared(folder, splits, source="synthetic bar digits", data_dir=None):
    """A prepared folder in the format of data/mnist/prepare.py: {split}.npz + meta.json."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("train", "val", "test"):
        images, labels = getattr(splits, name), getattr(splits, name + "_labels")
        np.savez(folder / f"{name}.npz", images=images.numpy(), labels=labels.numpy())
    sizes = {name: len(getattr(splits, name)) for name in ("train", "val", "test")}
    (folder / "meta.json").write_text(json.dumps({
        "dataset": "mnist", "source": source, "data_dir": data_dir,
        "image_shape": list(splits.train.shape[1:]), "splits": sizes}))
    return folder


def at_step(monkeypatch, n, action):
    """Call action(model) at the n-th optimizer step of train_mlp.py's runs (every run started
    after this call), before its update: a kill, a Ctrl-C or NaN weights at a known step."""
    import train_mlp
    make_optimizer = train_mlp.make_optimizer

    def make(model, c):
        optimizer, calls = make_optimizer(model, c), [0]
        step = optimizer.step

        def counted(*a, **k):
            calls[0] += 1
            if calls[0] == n:
                action(model)
            return step(*a, **k)
        optimizer.step = counted
        return optimizer
    monkeypatch.setattr(train_mlp, "make_optimizer", make)

