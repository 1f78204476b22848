"""The prepared text data train.py reads: data/<name>/{train,val}.bin (uint16 token ids) and
meta.json (the tokenizer, and per split its token count, largest id and sha256); the texts of
eval_ood. A run reads the .bin files it opened to its end, whatever is prepared meanwhile."""

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch


ROOT = Path(__file__).resolve().parents[1]
SELF_PREPARING = ("shakespeare_char", "shakespeare", "fortunes")  # small: prepared when missing


class DataError(SystemExit):
    """Prepared data that cannot be used: one line, exit status 1."""


def find_dataset(dataset, data_dir="", may_prepare=True):
    """The folder of a prepared dataset; a missing small one is prepared now, if may_prepare."""
    folder = Path(data_dir) if data_dir else ROOT / "data" / dataset
    script = folder / "prepare.py"
    if (folder / "meta.json").exists():  # prepare.py writes it last
        return folder
    if dataset not in SELF_PREPARING or data_dir:
        raise DataError(f"error: dataset {dataset!r} is not prepared ({folder / 'meta.json'} is "
                        f"missing): prepare it (python data/<dataset>/prepare.py)")
    if may_prepare:
        print(f"{folder / 'meta.json'} is missing: preparing it now (python {script})")
        if subprocess.run([sys.executable, str(script)]).returncode != 0:
            raise DataError(f"error: python {script} failed (its message is above)")
    return folder


class TokenFiles:
    """The token files of a run, open until it ends: a file renamed over lives on for it."""

    def __init__(self, folder, block_size, resumed=None):
        """resumed: (a checkpoint's meta, its path): the files must hash to what it recorded."""
        folder = Path(folder)
        try:
            self.meta = json.loads((folder / "meta.json").read_text())
            self.files = {split: open(folder / f"{split}.bin", "rb") for split in ("train", "val")}
        except (OSError, ValueError) as e:
            raise DataError(f"error: {folder} holds no readable prepared data ({e}): prepare it "
                            f"again (python {folder / 'prepare.py'})") from None
        for split, f in self.files.items():  # a web-scale train.bin is never read here
            tokens = os.fstat(f.fileno()).st_size // 2
            if tokens <= block_size:
                raise DataError(f"error: {folder / split}.bin has {tokens} tokens, fewer than "
                                f"block_size + 1 = {block_size + 1}: use a smaller --block_size "
                                f"or more data")
            saved = resumed and resumed[0]["splits"][split].get("sha256")
            if saved and saved != hashlib.file_digest(f, "sha256").hexdigest():
                raise DataError(f"error: {folder / split}.bin is not the data {resumed[1]} was "
                                f"trained on: resume on that data (prepare it again from the same "
                                f"text), or train from scratch in another --out_dir")

    def tokens(self, split):
        # We recreate np.memmap every batch to avoid a memory leak
        return np.memmap(self.files[split], dtype=np.uint16, mode="r")

    def close(self):
        for f in self.files.values():
            f.close()


def check_dataset(folder, block_size):
    data = TokenFiles(folder, block_size)
    data.close()
    return data.meta


def in_vocab_windows(text, chars, length, n_windows):
    """Start offsets of up to n_windows windows of `length` characters of `text` that are all in
    `chars`, evenly spaced over every such window. ValueError if there is none."""
    runs = re.finditer(f"[{re.escape(chars)}]{{{length},}}", text)
    starts = [start for run in runs for start in range(run.start(), run.end() - length + 1)]
    if not starts:
        raise ValueError(f"no window of {length} characters is entirely in the vocabulary: use "
                         f"a text closer to the training data or a shorter block_size")
    pick = np.unique(np.linspace(0, len(starts) - 1, min(n_windows, len(starts))).round())
    return [starts[i] for i in pick.astype(int)]


def ood_windows(eval_ood, meta, block_size):
    """({name: (64, block_size + 1) ids}, {name: sha256}): the same windows of each text of
    eval_ood for every run of this vocabulary and block_size; each text checked by its sha256."""
    if meta["tokenizer"] != "char":
        raise DataError(f"error: eval_ood={eval_ood!r} scores texts character by character, but "
                        f"this dataset's tokenizer is {meta['tokenizer']!r}: use a char-level "
                        f"dataset (e.g. shakespeare_char) or eval_ood=''")
    folder = find_dataset(eval_ood, eval_ood if "/" in eval_ood else "")
    records = json.loads((folder / "meta.json").read_text(encoding="utf-8")).get("texts")
    if not records:
        raise DataError(f"error: eval_ood={eval_ood!r} holds no texts: e.g. --eval_ood=fortunes")
    windows, index = {}, {c: i for i, c in enumerate(meta["chars"])}
    for name, record in records.items():
        text = (folder / record["file"]).read_bytes()
        if hashlib.sha256(text).hexdigest() != record["sha256"]:
            raise DataError(f"error: {folder / record['file']} is not the text its meta.json "
                            f"records: prepare it again (python {folder / 'prepare.py'})")
        text = text.decode("utf-8")
        try:
            starts = in_vocab_windows(text, meta["chars"], block_size + 1, 64)
        except ValueError as e:
            raise DataError(f"error: eval_ood={eval_ood!r}, text {name!r}: {e}") from None
        windows[name] = torch.tensor([[index[c] for c in text[s:s + block_size + 1]]
                                      for s in starts])
    return windows, {name: r["sha256"] for name, r in records.items()}
