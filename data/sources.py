"""
The helpers of data/<name>/prepare.py (and of nothing else): how a prepared folder is written, and
the downloads, each checked against its pinned hash, from the package registries where a machine
reaches only those.

A text folder holds train.bin and val.bin (uint16 token ids) and meta.json: the tokenizer, the
source in words, and per split {"tokens", "max_id", "sha256"}. replaced_together writes the new
files beside the old ones and renames them in at the end, meta.json out first and in last: a
folder never holds half a dataset, and a run reading the old files keeps them.
"""

import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

import numpy as np

from shapelab.configurator import ConfigError
from shapelab.tokenizer import (GPT2_EOT, GPT2_VOCAB_SIZE, Tokenizer, gpt2_encoding,
                                gpt2_ranks_path)

WHISPER_SDIST = "openai-whisper==20250625"  # its source archive ships GPT-2's ranks
WHISPER_SDIST_SHA256 = "37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96"


@contextlib.contextmanager
def replaced_together(folder, index="meta.json"):
    """Yields stage(name), the temporary file to write `name` into. Once the block ends the staged
    files replace theirs (os.replace: each atomic), the index removed first and renamed in last."""
    folder, staged = Path(folder), {}
    folder.mkdir(parents=True, exist_ok=True)

    def stage(name):
        staged[name] = folder / f"{name}.{os.getpid()}.tmp"
        return staged[name]
    try:
        yield stage
        if index in staged:
            (folder / index).unlink(missing_ok=True)
        for name in sorted(staged, key=lambda name: name == index):
            os.replace(staged[name], folder / name)
    finally:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)


class SplitWriter:
    """Token ids appended to a file as uint16, and meta.json's record of them."""

    def __init__(self, path):
        self.file, self.hash = open(path, "wb"), hashlib.sha256()
        self.tokens, self.max_id = 0, -1

    def append(self, ids):
        data = np.asarray(ids, dtype=np.uint16)
        self.file.write(data.tobytes())
        self.hash.update(data.tobytes())
        self.tokens += data.size
        self.max_id = max(self.max_id, int(data.max()))

    def record(self):
        self.file.close()
        return {"tokens": self.tokens, "max_id": self.max_id, "sha256": self.hash.hexdigest()}


def write_meta(path, meta):
    Path(path).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def prepare_text(text, tokenizer, data_dir, source, block_size=0, name="the text"):
    """data_dir/{train.bin,val.bin,meta.json} of `text` with the tokenizer "char" or "gpt2": the
    first 90% of its characters train, the rest val, each encoded on its own. Returns meta."""
    n_train = int(len(text) * 0.9)
    if tokenizer == "char":
        chars = "".join(sorted(set(text)))
        meta = {"tokenizer": "char", "vocab_size": len(chars), "chars": chars}
        ids = Tokenizer.char(chars).encode(text)
        splits = ids[:n_train], ids[n_train:]
    else:
        enc = get_gpt2_encoding()
        meta = {"tokenizer": "gpt2", "vocab_size": GPT2_VOCAB_SIZE, "eot_token": GPT2_EOT}
        splits = enc.encode_ordinary(text[:n_train]), enc.encode_ordinary(text[n_train:])
    if len(splits[1]) <= block_size:
        raise ConfigError(f"{name} is too short: its last 10% (the val split) holds "
                          f"{len(splits[1])} tokens, and train.py's windows are block_size + 1 = "
                          f"{block_size + 1}: give a longer text, or a smaller --block_size")
    meta["source"] = source
    with replaced_together(data_dir) as stage:
        meta["splits"] = {}
        for split, ids in zip(("train", "val"), splits):
            writer = SplitWriter(stage(f"{split}.bin"))
            writer.append(ids)
            meta["splits"][split] = writer.record()
        write_meta(stage("meta.json"), meta)
    return meta


def check_hash(path, expected, algorithm="sha256"):
    """A ValueError (one line) unless the file's hash is the pinned one; a download is deleted."""
    with open(path, "rb") as f:
        got = hashlib.file_digest(f, algorithm).hexdigest()
    if got != expected:
        raise ValueError(f"{algorithm} mismatch for {Path(path).name}: expected {expected}, got "
                         f"{got}; refusing to read it")


def download(url, dest, expected, algorithm="sha256"):
    """dest, downloaded from url unless it is there; deleted unless its hash is `expected`."""
    dest = Path(dest)
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(url, timeout=30) as r:
            dest.write_bytes(r.read())
    try:
        check_hash(dest, expected, algorithm)
    except ValueError:
        dest.unlink()
        raise
    return dest


def deb_files(deb_path, folder):
    """{name: bytes} of the files under `folder` in a .deb's data.tar.*. A .deb is an ar archive:
    an 8-byte magic, then per member a 60-byte header (its name, its size in decimal at bytes
    48-58) and its data, padded to an even size."""
    data, pos, found = Path(deb_path).read_bytes(), 8, {}
    while pos + 60 <= len(data):
        name, size = data[pos:pos + 16].decode().strip(), int(data[pos + 48:pos + 58])
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(data[pos + 60:pos + 60 + size])) as tar:
                for member in tar.getmembers():
                    path = member.name.removeprefix("./")
                    if member.isfile() and path.startswith(folder + "/"):
                        found[path.removeprefix(folder + "/")] = tar.extractfile(member).read()
        pos += 60 + size + size % 2
    return found


def pip_download(requirement, sha256, dest_dir):
    """The archive of requirement ("name==version") in dest_dir, from the index pip uses; pip
    refuses it before it unpacks anything unless its sha256 is the pinned one."""
    pins = Path(dest_dir) / "pins.txt"
    pins.write_text(f"{requirement} --hash=sha256:{sha256}\n")
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--retries=1",
                           "--timeout=30", "--require-hashes", "-r", pins, "-d", dest_dir],
                          capture_output=True, text=True)
    if "DO NOT MATCH THE HASHES" in done.stderr:
        raise ValueError(f"{requirement} is not the archive expected (sha256 {sha256}); "
                         f"refusing to unpack it")
    if done.returncode:
        raise RuntimeError(f"pip download {requirement} failed ({done.stderr.strip()[-200:]})")
    return next(Path(dest_dir).glob(requirement.split("==")[0].replace("-", "_") + "-*"))


def gpt2_tiktoken_file():
    """gpt2_ranks_path(), from the openai-whisper sdist on PyPI if missing: for export.py and for
    tokenizer.py offline."""
    if not gpt2_ranks_path().exists():
        with tempfile.TemporaryDirectory() as tmp:
            with tarfile.open(pip_download(WHISPER_SDIST, WHISPER_SDIST_SHA256, tmp)) as tar:
                member = next(m for m in tar.getmembers()
                              if m.name.endswith("/whisper/assets/gpt2.tiktoken"))
                with replaced_together(gpt2_ranks_path().parent, index=None) as stage:
                    stage(gpt2_ranks_path().name).write_bytes(tar.extractfile(member).read())
    return gpt2_ranks_path()


def get_gpt2_encoding():
    gpt2_tiktoken_file()
    return gpt2_encoding()


def write_prepared(out_dir, splits, meta):
    """{split}.npz (images uint8 (N, C, H, W), labels int64) and meta.json of an image data set,
    renamed in together. Returns meta with image_shape and the split sizes added."""
    meta = dict(meta, image_shape=list(splits["train"][0].shape[1:]),
                splits={name: len(images) for name, (images, labels) in splits.items()})
    with replaced_together(out_dir) as stage:
        for name, (images, labels) in splits.items():
            with open(stage(f"{name}.npz"), "wb") as f:
                np.savez(f, images=np.asarray(images, dtype=np.uint8),
                         labels=np.asarray(labels, dtype=np.int64))
        write_meta(stage("meta.json"), meta)
    print(f"source: {meta['source']}")
    print(" ".join(f"{name} {n:,}" for name, n in meta["splits"].items())
          + f" images {tuple(meta['image_shape'])}, written to {out_dir}")
    return meta
