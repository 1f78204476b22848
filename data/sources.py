"""
The helpers of data/<name>/prepare.py (and of nothing else): how a prepared folder is written, and
the routes to data through the package registries, for machines that reach only those.

A text folder holds train.bin and val.bin (uint16 token ids) and meta.json: the tokenizer, the
source in words, and per split {"tokens", "max_id", "sha256"}. replaced_together writes the new
files beside the old ones and renames them in at the end, meta.json out first and in last: a
folder never holds half a dataset, and a run reading the old files keeps them.
"""

import base64
import contextlib
import hashlib
import json
import os
import signal
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
WHISPER_GPT2_MEMBER = "whisper/assets/gpt2.tiktoken"


@contextlib.contextmanager
def replaced_together(folder, index="meta.json"):
    """Yields stage(name), the temporary file to write `name` into. Once the block ends the staged
    files replace theirs (os.replace: each atomic), the index removed first and renamed in last."""
    folder, staged = Path(folder), {}
    folder.mkdir(parents=True, exist_ok=True)
    # SIGTERM ends the script as Ctrl-C does, so the finally below removes the temporaries
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

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


def write_split(path, ids):
    writer = SplitWriter(path)
    writer.append(ids)
    return writer.record()


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
                          f"{block_size + 1}: give a longer text, or prepare and train with a "
                          f"smaller --block_size")
    meta["source"] = source
    with replaced_together(data_dir) as stage:
        meta["splits"] = {split: write_split(stage(f"{split}.bin"), ids)
                          for split, ids in zip(("train", "val"), splits)}
        write_meta(stage("meta.json"), meta)
    return meta


def check_input_file(path, option):
    """A ConfigError unless path is a plain file (a FIFO could be read only once)."""
    if not Path(path).is_file():
        what = "missing" if not os.path.lexists(path) else "not a plain file"
        raise ConfigError(f"{option}={path} is {what}: give a file")


@contextlib.contextmanager
def file_errors_in_one_line():
    """A file a prepare script cannot read or write ends it in one line."""
    try:
        yield
    except OSError as e:
        if e.filename is None:  # a network error, say
            raise SystemExit(f"error: {type(e).__name__}: {e}") from None
        raise SystemExit(f"error: {e.filename}: {e.strerror or e}: fix the permissions or free "
                         f"disk space, or prepare into another folder") from None


class HashMismatchError(ValueError):
    pass


def check_sha256(path, expected, what):
    with open(path, "rb") as f:
        got = hashlib.file_digest(f, "sha256").hexdigest()
    if got != expected:
        raise HashMismatchError(f"sha256 mismatch for {Path(path).name} ({what}): expected "
                                f"{expected}, got {got}; refusing to unpack or use it")


def download(url, dest, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        Path(dest).write_bytes(r.read())
    return Path(dest)


def hub_unreachable():
    """None if the Hugging Face hub answers within 3 s, else why not (datasets would retry for
    half a minute)."""
    url = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=3).close()
    except urllib.error.HTTPError:
        return None  # the server answered
    except OSError as e:
        return f"{url}: {getattr(e, 'reason', e)}"
    return None


def apt_download(package, dest_dir):
    """The .deb of `package` in dest_dir, by apt-get (which checks its signature)."""
    done = subprocess.run(["apt-get", "download", package], cwd=dest_dir, capture_output=True,
                          text=True, timeout=300)
    debs = sorted(Path(dest_dir).glob(f"{package.split('=')[0]}_*.deb"))
    if done.returncode or not debs:
        raise OSError(f"apt-get download {package} failed ({done.stderr.strip()[-120:]}); if "
                      f"apt-get cannot find it, run `apt-get update` first")
    return debs[-1]


def pip_download(requirement, sha256, dest_dir):
    """The archive of requirement ("name==version") in dest_dir, from the index pip uses; pip
    refuses it before it unpacks anything unless its sha256 is the pinned one."""
    pins = Path(dest_dir) / "pins.txt"
    pins.write_text(f"{requirement} --hash=sha256:{sha256}\n")
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--retries=1",
                           "--timeout=30", "--require-hashes", "-r", pins, "-d", dest_dir],
                          capture_output=True, text=True)
    if "DO NOT MATCH THE HASHES" in done.stderr:
        raise HashMismatchError(f"sha256 mismatch for {requirement}: expected {sha256}; "
                                f"refusing to unpack or use it")
    if done.returncode:
        raise RuntimeError(f"pip download {requirement} failed ({done.stderr.strip()[-200:]})")
    return next(Path(dest_dir).glob(requirement.split("==")[0].replace("-", "_") + "-*"))


def save_ranks(data):
    with replaced_together(gpt2_ranks_path().parent, index=None) as stage:
        stage(gpt2_ranks_path().name).write_bytes(data)


def gpt2_tiktoken_file():
    """gpt2_ranks_path(), fetched from the openai-whisper sdist on PyPI if missing."""
    if not gpt2_ranks_path().exists():
        with tempfile.TemporaryDirectory() as tmp:
            with tarfile.open(pip_download(WHISPER_SDIST, WHISPER_SDIST_SHA256, tmp)) as tar:
                member = next(m for m in tar.getmembers()
                              if m.name.endswith("/" + WHISPER_GPT2_MEMBER))
                save_ranks(tar.extractfile(member).read())
    return gpt2_ranks_path()


def get_gpt2_encoding():
    """tiktoken's GPT-2 encoding, its ranks left in gpt2_ranks_path() for export.py and for
    offline use; when tiktoken cannot download them, they come through PyPI."""
    try:
        enc = gpt2_encoding()
    except SystemExit:  # offline, and no ranks saved
        print(f"gpt2 tokenizer: tiktoken cannot download its ranks: {WHISPER_SDIST} sdist from "
              f"PyPI -> {gpt2_ranks_path()}", file=sys.stderr)
        gpt2_tiktoken_file()
        return gpt2_encoding()
    if not gpt2_ranks_path().exists():
        ranks = sorted((enc.encode_single_token(token), token) for token in enc.token_byte_values())
        save_ranks("".join(f"{base64.b64encode(token).decode()} {rank}\n"
                           for rank, token in ranks).encode())
    return enc


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
          + f" images {tuple(meta['image_shape'])}")
    print(f"wrote {out_dir}/{{train,val,test}}.npz and meta.json")
    return meta
