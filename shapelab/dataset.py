"""The prepared text data train.py reads: data/<name>/{train,val}.bin (uint16 token ids) and
meta.json (the tokenizer, and per split its token count, largest id and sha256); the texts of
eval_ood. A run reads the .bin files it opened to its end, whatever is prepared meanwhile."""

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from shapelab.images import ImageSplits, load_images  # noqa: F401 (train_mlp.py's)

ROOT = Path(__file__).resolve().parents[1]
SELF_PREPARING = ("shakespeare_char", "shakespeare")  # small: train.py prepares them when missing


class DataError(SystemExit):
    """Prepared data that cannot be used: one line, exit status 1."""


def run_script(script):
    print(f"{script.parent / 'meta.json'} is missing: preparing it now (python {script})")
    if subprocess.run([sys.executable, str(script)]).returncode != 0:
        raise DataError(f"error: python {script} failed (its message is above)")
    return script.parent


def find_dataset(dataset, data_dir="", may_prepare=True):
    """The folder of a prepared dataset; a missing small one is prepared now, if may_prepare."""
    folder = Path(data_dir) if data_dir else ROOT / "data" / dataset
    script = folder / "prepare.py"
    if (folder / "meta.json").exists():  # prepare.py writes it last
        return folder
    if dataset in SELF_PREPARING and not data_dir:
        return run_script(script) if may_prepare else folder
    hint = (f"run: python {script}" if script.exists()
            else f"there is no {script}; the prepared datasets live in data/<name>/")
    raise DataError(f"error: dataset {dataset!r} is not prepared ({folder / 'meta.json'} is "
                    f"missing): {hint}")


class TokenFiles:
    """The token files of a run, open until it ends: a file renamed over lives on for it."""

    def __init__(self, folder, files):
        self.folder, self.files, self.meta = folder, files, None
        self.stamps = {split: self.stamp(split) for split in files}

    def stamp(self, split):
        stat = os.fstat(self.files[split].fileno())
        return stat.st_size, stat.st_mtime_ns

    def tokens(self, split):
        # We recreate np.memmap every batch to avoid a memory leak
        return np.memmap(self.files[split], dtype=np.uint16, mode="r")

    def check_unchanged(self, split):
        if self.stamp(split) != self.stamps[split]:
            raise DataError(f"error: {self.folder / split}.bin was written over while this run "
                            f"read it: write data with its prepare.py, then train again")

    def close(self):
        for f in self.files.values():
            f.close()


def read_or_none(path):
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def open_dataset(folder, block_size, resumed=None):
    """The TokenFiles of a folder, checked against its meta.json: the same before and after the
    .bin files open, as a prepare renames it in last. resumed: (a checkpoint's meta, its path)."""
    path, again = folder / "meta.json", f"prepare the data again (python {folder / 'prepare.py'})"
    for _ in range(50):
        try:
            before = read_or_none(path)
            files = {split: open(folder / f"{split}.bin", "rb") for split in ("train", "val")}
            data = TokenFiles(folder, files)
            after = read_or_none(path)
        except OSError as e:
            raise DataError(f"error: {e.filename} cannot be read ({e.strerror}): {again}") from None
        if after is not None and before == after:
            break
        data.close()
        time.sleep(0.02)  # a preparation is being renamed in
    else:
        raise DataError(f"error: {path} is missing: {again}")
    data.meta = checked_meta(after, path, files, block_size, again)
    if resumed:
        check_same_data(resumed[0], data.meta, folder, resumed[1], files)
    return data


def check_dataset(folder, block_size, resumed=None):
    data = open_dataset(folder, block_size, resumed)
    data.close()
    return data.meta


def checked_meta(text, path, files, block_size, again):
    """meta.json, checked against the open files' sizes (a web-scale train.bin is never read)."""
    try:
        meta = json.loads(text)
    except ValueError as e:
        raise DataError(f"error: {path} is not valid JSON ({e}): {again}") from None
    if meta.get("tokenizer") not in ("char", "gpt2") or "splits" not in meta:
        raise DataError(f"error: {path} is not a prepared dataset's meta.json: {again}")
    for split, f in files.items():
        tokens, info = os.fstat(f.fileno()).st_size // 2, meta["splits"][split]
        bin_path = path.with_name(f"{split}.bin")
        if tokens != info["tokens"] or info["max_id"] >= meta["vocab_size"]:
            raise DataError(f"error: {bin_path} ({tokens:,} tokens) is not the file {path} "
                            f"records: {again}")
        if tokens <= block_size:
            raise DataError(f"error: {bin_path} has {tokens} tokens, fewer than block_size + 1 = "
                            f"{block_size + 1}: use a smaller --block_size or more data")
    return meta


def check_same_data(saved_meta, meta, folder, checkpoint_path, files):
    """A resumed run goes on with the data it was trained on: the same vocabulary, and files
    (hashed here) whose sha256 is the one its checkpoint recorded."""
    if any(saved_meta.get(k) != meta.get(k) for k in ("tokenizer", "vocab_size", "chars")):
        raise DataError(f"error: {folder / 'meta.json'} has another vocabulary than "
                        f"{checkpoint_path}: resume on the data it was trained on, or train "
                        f"from scratch")
    for split, f in files.items():
        saved = saved_meta.get("splits", {}).get(split, {})
        now = dict(meta["splits"][split], sha256=hashlib.file_digest(f, "sha256").hexdigest())
        if any(saved[k] != now[k] for k in ("sha256", "tokens", "max_id") if k in saved):
            raise DataError(f"error: {folder / split}.bin is not the data {checkpoint_path} was "
                            f"trained on: resume on that data (prepare it again from the same "
                            f"text), or train from scratch in another --out_dir")


def in_vocab_windows(text, chars, length, n_windows):
    """Start offsets of up to n_windows windows of `length` characters of `text` that are all in
    `chars`, evenly spaced over every such window. ValueError if there is none."""
    vocab = set(chars)
    ok = np.fromiter((c in vocab for c in text), dtype=bool, count=len(text))
    bad_before = np.concatenate([[0], np.cumsum(~ok)])  # out-of-vocabulary characters before i
    starts = np.nonzero(bad_before[length:] == bad_before[:-length] if len(text) >= length
                        else [])[0]
    if len(starts) == 0:
        raise ValueError(f"no window of {length} characters is entirely in the vocabulary: use "
                         f"a text closer to the training data or a shorter block_size")
    pick = np.unique(np.linspace(0, len(starts) - 1, min(n_windows, len(starts))).round())
    return starts[pick.astype(int)].tolist()


def ood_windows(eval_ood, meta, block_size):
    """({name: (64, block_size + 1) ids}, {name: sha256}): the same windows of each text of
    eval_ood for every run of this vocabulary and block_size; each text checked by its sha256."""
    if meta["tokenizer"] != "char":
        raise DataError(f"error: eval_ood={eval_ood!r} scores texts character by character, but "
                        f"this dataset's tokenizer is {meta['tokenizer']!r}: use a char-level "
                        f"dataset (e.g. shakespeare_char) or eval_ood=''")
    folder = ROOT / "data" / eval_ood if "/" not in eval_ood else Path(eval_ood)
    if not (folder / "meta.json").exists() and eval_ood == "fortunes":
        run_script(folder / "prepare.py")
    again = (f"eval_ood={eval_ood!r} names a folder of texts and their meta.json (python "
             f"{folder / 'prepare.py'} writes them), e.g. --eval_ood=fortunes")
    try:
        records = json.loads((folder / "meta.json").read_text(encoding="utf-8"))["texts"]
        texts = {name: (folder / r["file"]).read_bytes() for name, r in records.items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DataError(f"error: {folder}'s texts cannot be read ({type(e).__name__}: {e}): "
                        f"{again}") from None
    windows, index = {}, {c: i for i, c in enumerate(meta["chars"])}
    for name, text in texts.items():
        if hashlib.sha256(text).hexdigest() != records[name]["sha256"]:
            raise DataError(f"error: {folder / records[name]['file']} is not the text its "
                            f"meta.json records: {again}")
        text = text.decode("utf-8")
        try:
            starts = in_vocab_windows(text, meta["chars"], block_size + 1, 64)
        except ValueError as e:
            raise DataError(f"error: eval_ood={eval_ood!r}, text {name!r}: {e}") from None
        windows[name] = torch.tensor([[index[c] for c in text[s:s + block_size + 1]]
                                      for s in starts])
    return windows, {name: r["sha256"] for name, r in records.items()}
