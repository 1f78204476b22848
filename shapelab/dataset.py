"""
The prepared language-modelling data train.py reads: data/<dataset>/{train,val}.bin (uint16 token
ids) and meta.json (the tokenizer, and what data/<dataset>/prepare.py wrote into each split).

- `find_dataset` prepares a missing small dataset (shakespeare_char, shakespeare) by running its
  prepare.py, and names the command to run for the others.
- `open_dataset` opens the .bin files once, for the whole run (TokenFiles: what train.py's
  batches read), after checking them against meta.json without reading them (a web-scale
  train.bin is gigabytes): the tokenizer, each split's size, largest id and length. A preparation
  renamed in during the run leaves the run on the data it started with; a file written over in
  place stops it. Each problem is one line saying what to do.
- `check_same_data` refuses to resume a checkpoint on other data than it was trained on (another
  vocabulary, or splits whose sha256, token count or largest id differ from its meta's).
- `ood_windows`: the fixed windows of out-of-distribution texts (data/fortunes) that train.py's
  eval_ood scores at each evaluation, each text checked against the sha256 its meta.json records.

And the images train_mlp.py reads: data/mnist/prepare.py and data/imagenet32/prepare.py write
{train,val,test}.npz (uint8 images, int64 labels) and meta.json (the source they used, in words).
`load_images` reads a prepared folder, running its prepare script first when the folder is missing
or was prepared from another raw folder; a damaged file is one line saying to prepare it again.
"""

import hashlib
import json
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from shapelab.configurator import ConfigError

ROOT = Path(__file__).resolve().parents[1]  # the repo root
SELF_PREPARING = ("shakespeare_char", "shakespeare")  # small: train.py prepares them when missing
VOCAB_FIELDS = ("tokenizer", "vocab_size", "chars")  # what decides which id is which token
DATA_IDENTITY = ("sha256", "tokens", "max_id")  # what names a split's data in meta.json


class DataError(SystemExit):
    """Prepared data that cannot be used: one line (uncaught, no traceback), exit status 1."""


def data_path(dataset, data_dir=""):
    return Path(data_dir) if data_dir else ROOT / "data" / dataset


def find_dataset(dataset, data_dir="", may_prepare=True):
    """The folder of a prepared dataset. prepare.py writes meta.json last, so a folder without it
    is not ready: a small dataset is prepared now (by the process that `may_prepare`; under
    torchrun the others wait at a barrier), any other is an error naming its prepare command."""
    folder = data_path(dataset, data_dir)
    script = folder / "prepare.py"
    if (folder / "meta.json").exists():
        return folder
    if dataset in SELF_PREPARING and script.exists() and not data_dir:
        if may_prepare:
            print(f"{folder / 'meta.json'} is missing: preparing the data now (python {script})")
            if subprocess.run([sys.executable, str(script)]).returncode != 0:
                raise DataError(f"error: python {script} failed (its message is above)")
        return folder
    hint = (f"run: python {script}" if script.exists()
            else f"there is no {script}; the prepared datasets live in data/<name>/")
    raise DataError(f"error: dataset {dataset!r} is not prepared ({folder / 'meta.json'} is "
                    f"missing): {hint}")


class TokenFiles:
    """The token files of one run, opened once (open_dataset) and read until it ends, whatever
    happens to their names. A prepare script renames new files in (data/sources.py): the run
    reads on the old ones (the operating system keeps a replaced file for whoever has it open),
    the data whose meta.json its checkpoints hold, and says once that a new one is there. A file
    written over in place (a copy onto train.bin) changes under the open file: `check_unchanged`
    (its size and modification time, at every batch) stops the run before a batch of it is used."""

    def __init__(self, folder, files, meta):
        self.folder, self.files, self.meta = folder, files, meta  # files: {split: open file}
        self.stamps = {split: _stamp(os.fstat(f.fileno())) for split, f in files.items()}
        self.new_preparation_noted = False

    def tokens(self, split):
        """The split's token ids: a read-only memmap of the file opened at the start, a fresh
        one each call (the pages read then never pile up in the process's memory, as nanoGPT
        notes)."""
        return np.memmap(self.files[split], dtype=np.uint16, mode="r")

    def check_unchanged(self, split):
        """After a batch is read: stop the run (one line) if the split's open file was written
        over since the run opened it; say once if a new preparation was renamed in."""
        now = os.fstat(self.files[split].fileno())
        path = self.folder / f"{split}.bin"
        if _stamp(now) != self.stamps[split]:
            raise DataError(f"error: {path} was written over while this run read it: the run "
                            f"stops so as not to train on two datasets (its last checkpoint holds "
                            f"the one it started with); write data with its prepare.py, which "
                            f"never writes over a file a run reads, then train again")
        if not self.new_preparation_noted and _renamed_over(path, now):
            self.new_preparation_noted = True
            print(f"note: {self.folder} was prepared again during this run: the run goes on with "
                  f"the data it started with (and so do its checkpoints); a new run reads the new")

    def close(self):
        for f in self.files.values():
            f.close()


def _stamp(stat):
    return stat.st_size, stat.st_mtime_ns


def _renamed_over(path, opened_stat):
    """Whether `path` names another file than the open one (a new one renamed in, or none)."""
    try:
        now = path.stat()
    except OSError:
        return True
    return (now.st_dev, now.st_ino) != (opened_stat.st_dev, opened_stat.st_ino)


OPEN_ATTEMPTS = 50  # a prepare renames its files in within microseconds: retry 0.02 s apart


def open_dataset(folder, block_size, resumed=None):
    """The TokenFiles of a prepared folder, after checking meta.json and the open files against
    each other. Files of one preparation: meta.json is read, the .bin files opened, and meta.json
    read again; a prepare script removes meta.json before it renames its .bin files in and
    renames the new one in last, so the same bytes twice mean the files opened are those that
    meta.json describes (otherwise it is tried again: a preparation was being renamed in).
    resumed: (the checkpoint's meta, its path) of a resumed run, which must be this data."""
    path = folder / "meta.json"
    again = f"prepare the data again (python {folder / 'prepare.py'})"
    for _ in range(OPEN_ATTEMPTS):
        before = _read_or_none(path)
        files = {split: _open_split(folder / f"{split}.bin", again) for split in ("train", "val")}
        after = _read_or_none(path)
        if before is not None and before == after:
            break
        for f in files.values():
            f.close()
        time.sleep(0.02)
    else:
        raise DataError(f"error: {path} is missing: {again}" if after is None else
                        f"error: {path} keeps changing: a prepare script is writing into "
                        f"{folder}; wait for it to end, then run again")
    try:
        try:
            meta = json.loads(after.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise DataError(f"error: {path} is not valid JSON ({e}): {again}") from None
        meta = _checked_meta(meta, folder, block_size, files, again)
        if resumed:
            check_same_data(resumed[0], meta, folder, resumed[1])
    except BaseException:
        for f in files.values():
            f.close()
        raise
    return TokenFiles(folder, files, meta)


def _read_or_none(path):
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise DataError(f"error: {path} cannot be read ({e.strerror})") from None


def _open_split(path, again):
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"error: {path} is missing: {again}") from None
    except OSError as e:
        raise DataError(f"error: {path} cannot be read ({e.strerror})") from None


def check_dataset(folder, block_size, resumed=None):
    """meta.json of a prepared folder, after checking it and the .bin files it describes
    (open_dataset, the files closed again)."""
    data = open_dataset(folder, block_size, resumed)
    data.close()
    return data.meta


def _checked_meta(meta, folder, block_size, files, again):
    """meta (meta.json's content), checked: the tokenizer is described, every split's open file
    has the size prepare recorded (a truncated or swapped file is caught without reading it: a
    web-scale train.bin is gigabytes), the largest id recorded fits the vocabulary, and a split
    holds more than block_size tokens. Each problem is one line saying what to do."""
    path = folder / "meta.json"
    vocab = meta.get("vocab_size") if isinstance(meta, dict) else None
    chars = meta.get("chars") if isinstance(meta, dict) else None
    if not isinstance(vocab, int) or meta.get("tokenizer") not in ("char", "gpt2") or (
            meta["tokenizer"] == "char"
            and not (isinstance(chars, str) and len(set(chars)) == len(chars) == vocab)):
        raise DataError(f"error: {path} does not describe a tokenizer (tokenizer 'char' with "
                        f"vocab_size distinct chars, or 'gpt2'; an integer vocab_size): {again}")
    splits = meta.get("splits")
    if not isinstance(splits, dict):
        raise DataError(f"error: {path} records no token counts per split (prepare.py writes "
                        f"them): {again}")
    for split in ("train", "val"):
        bin_path, info = folder / f"{split}.bin", splits.get(split, {})
        tokens, size = info.get("tokens"), os.fstat(files[split].fileno()).st_size
        if size % 2:
            raise DataError(f"error: {bin_path} has {size} bytes, not a whole number of uint16 "
                            f"token ids: it is truncated or not a token file; {again}")
        if size // 2 != tokens:
            raise DataError(f"error: {bin_path} holds {size // 2:,} tokens, but {path} records "
                            f"{tokens}: it is truncated or from another preparation; {again}")
        max_id = info.get("max_id")
        if not isinstance(max_id, int) or max_id >= vocab:
            raise DataError(f"error: {bin_path} holds token id {max_id} (as prepare recorded it), "
                            f"but {path} says vocab_size={vocab}: {again}")
        if tokens <= block_size:
            raise DataError(f"error: {bin_path} has {tokens} tokens, fewer than block_size + 1 = "
                            f"{block_size + 1}: use a smaller --block_size or more data")
    return meta


def check_same_data(saved_meta, meta, folder, checkpoint_path):
    """A resumed run must go on with the data it was trained on: the same vocabulary (the token
    ids it learned), and each split what the checkpoint's meta.json records of it (DATA_IDENTITY:
    its sha256, written by every prepare script, its token count and largest id; what both
    records hold)."""
    saved = {k: saved_meta.get(k) for k in VOCAB_FIELDS}
    if saved != {k: meta.get(k) for k in VOCAB_FIELDS}:
        raise DataError(
            f"error: {folder / 'meta.json'} has another vocabulary than the checkpoint's "
            f"({meta.get('tokenizer')}, {meta.get('vocab_size')} tokens now; {saved['tokenizer']}, "
            f"{saved['vocab_size']} tokens in {checkpoint_path}): the data was prepared again "
            f"differently. Resume on the data it was trained on, or train from scratch")
    for split in ("train", "val"):
        saved, now = (saved_meta.get("splits") or {}).get(split, {}), meta["splits"][split]
        differ = [k for k in DATA_IDENTITY if k in saved and k in now and saved[k] != now[k]]
        if differ:
            raise DataError(
                f"error: {folder / split}.bin is not the data {checkpoint_path} was trained on "
                f"(its {' and '.join(differ)} differ: the data was prepared again since). Resume "
                f"on the data it was trained on (prepare it again from the same text), or train "
                f"from scratch in another --out_dir")


# -----------------------------------------------------------------------------------------------
# Out-of-distribution texts, scored at each evaluation (train.py's eval_ood): a folder of plain
# texts and the meta.json that names each with its sha256 (data/fortunes/prepare.py writes one)

OOD_WINDOWS = 64  # windows of block_size + 1 characters scored per text (8,192 positions at 128)


def find_ood_texts(eval_ood, may_prepare=True):
    """The folder of eval_ood's texts: data/<eval_ood> for a bare name, else the folder it names.
    A missing data/fortunes is prepared now (a small download, by the process that
    `may_prepare`); anything else missing is an error naming what to run."""
    folder = ROOT / "data" / eval_ood if "/" not in eval_ood else Path(eval_ood)
    script = folder / "prepare.py"
    if not (folder / "meta.json").exists() and eval_ood == "fortunes" and may_prepare:
        print(f"{folder / 'meta.json'} is missing: preparing the OOD texts now (python {script})")
        if subprocess.run([sys.executable, str(script)]).returncode != 0:
            raise DataError(f"error: python {script} failed (its message is above)")
    if not (folder / "meta.json").exists():
        hint = (f"run: python {script}" if script.exists()
                else "name a folder of texts with a meta.json, e.g. --eval_ood=fortunes")
        raise DataError(f"error: eval_ood={eval_ood!r}: {folder / 'meta.json'} is missing: {hint}")
    return folder


def load_ood_texts(folder):
    """({name: text}, {name: sha256}) of a prepared folder, each file checked against the sha256
    its meta.json records."""
    again = f"prepare them again (python {folder / 'prepare.py'})"
    try:
        records = json.loads((folder / "meta.json").read_text(encoding="utf-8"))["texts"]
        texts = {}
        for name, record in records.items():
            data = (folder / record["file"]).read_bytes()
            if hashlib.sha256(data).hexdigest() != record["sha256"]:
                raise DataError(f"error: {folder / record['file']} is not the text its meta.json "
                                f"records (sha256 {record['sha256'][:12]}...): {again}")
            texts[name] = data.decode("utf-8")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DataError(f"error: the OOD texts in {folder} cannot be read ({type(e).__name__}: "
                        f"{e}): {again}") from None
    return texts, {name: record["sha256"] for name, record in records.items()}


def in_vocab_windows(text, chars, length, n_windows):
    """Start offsets of up to n_windows windows of `length` characters of `text` whose characters
    are ALL in `chars`, evenly spaced over every such window (the text is never edited: a model is
    scored only on text that exists). Raises ValueError if there is none."""
    vocab = set(chars)
    ok = np.fromiter((c in vocab for c in text), dtype=bool, count=len(text))
    bad_before = np.concatenate([[0], np.cumsum(~ok)])  # out-of-vocabulary characters before i
    starts = np.nonzero(bad_before[length:] == bad_before[:-length] if len(text) >= length
                        else [])[0]
    if len(starts) == 0:
        raise ValueError(f"no window of {length} characters of this text is entirely in the "
                         f"vocabulary: use a text closer to the training data or a shorter "
                         f"block_size")
    pick = np.unique(np.linspace(0, len(starts) - 1, min(n_windows, len(starts))).round()
                     .astype(int))
    return starts[pick].tolist()


def ood_windows(eval_ood, meta, block_size, may_prepare=True):
    """({name: (n, block_size + 1) int64 ids}, {name: sha256}): OOD_WINDOWS windows of each text
    of eval_ood, the same for every run of this vocabulary and block_size (no randomness).
    Character-level datasets only: a text is scored character by character."""
    if meta["tokenizer"] != "char":
        raise DataError(f"error: eval_ood={eval_ood!r} scores texts character by character, but "
                        f"this dataset's tokenizer is {meta['tokenizer']!r}: use a char-level "
                        f"dataset (e.g. shakespeare_char) or eval_ood=''")
    folder = find_ood_texts(eval_ood, may_prepare)
    texts, sha256 = load_ood_texts(folder)
    index = {c: i for i, c in enumerate(meta["chars"])}
    windows = {}
    for name, text in texts.items():
        try:
            starts = in_vocab_windows(text, meta["chars"], block_size + 1, OOD_WINDOWS)
        except ValueError as e:
            raise DataError(f"error: eval_ood={eval_ood!r}, text {name!r}: {e}") from None
        windows[name] = torch.tensor([[index[c] for c in text[s:s + block_size + 1]]
                                      for s in starts], dtype=torch.long)
    return windows, sha256


# -----------------------------------------------------------------------------------------------
# Images for train_mlp.py

IMAGE_DATASETS = ("mnist", "mnist5k", "fashion_mnist", "imagenet32")
PREPARE_SCRIPTS = {"mnist": ROOT / "data" / "mnist" / "prepare.py",
                   "mnist5k": ROOT / "data" / "mnist" / "prepare.py",
                   "fashion_mnist": ROOT / "data" / "mnist" / "prepare.py",
                   "imagenet32": ROOT / "data" / "imagenet32" / "prepare.py"}
PREPARED_DIRS = {"mnist": ROOT / "data" / "mnist", "mnist5k": ROOT / "data" / "mnist" / "mnist5k",
                 "fashion_mnist": ROOT / "data" / "mnist" / "fashion_mnist",
                 "imagenet32": ROOT / "data" / "imagenet32"}


@dataclass
class ImageSplits:
    source: str  # what was loaded, in words (printed, and saved with every result)
    train: torch.Tensor  # (N, C, H, W) uint8
    train_labels: torch.Tensor  # (N,) int64
    val: torch.Tensor
    val_labels: torch.Tensor
    test: torch.Tensor
    test_labels: torch.Tensor
    dataset: str = ""  # meta.json's "dataset": what loaded (mnist5k for --dataset=mnist offline)


def run_prepare(dataset, data_dir="", prepared_dir="", max_train_images=0):
    """Run data/<name>/prepare.py as a subprocess (no training file imports data code)."""
    cmd = [sys.executable, str(PREPARE_SCRIPTS[dataset])]
    if dataset != "imagenet32":
        cmd.append(f"--dataset={dataset}")
    if data_dir:
        cmd.append(f"--data_dir={data_dir}")
    if prepared_dir:
        cmd.append(f"--out_dir={prepared_dir}")
    if max_train_images and dataset == "imagenet32":
        cmd.append(f"--max_train_images={max_train_images}")
    print("preparing: " + " ".join(cmd[1:]))
    if subprocess.run(cmd).returncode != 0:
        raise ConfigError(f"preparing {dataset} failed (see the messages above): "
                          f"python {' '.join(cmd[1:])}")


def load_prepared(prepared_dir, dataset):
    """{train,val,test}.npz + meta.json in prepared_dir -> (ImageSplits, meta), read whole into
    memory (so a preparation renamed in during a run is never seen by it). The files are of one
    preparation: meta.json is read before and after the arrays, as open_dataset does, and the
    reading tried again if a prepare script was renaming its files in meanwhile."""
    prepared_dir = Path(prepared_dir)
    script = PREPARE_SCRIPTS[dataset].relative_to(ROOT)
    again = f"prepare it again (python {script} --out_dir={prepared_dir} ...)"
    for _ in range(OPEN_ATTEMPTS):
        meta_text = _read_or_none(prepared_dir / "meta.json")
        if meta_text is not None:  # (the arrays are read only when meta.json is there)
            meta = _image_meta(meta_text, prepared_dir, again)
            arrays = _load_arrays(prepared_dir, again)
            if _read_or_none(prepared_dir / "meta.json") == meta_text:
                break
        time.sleep(0.02)
    else:
        raise ConfigError(f"{prepared_dir / 'meta.json'} is missing or keeps changing: prepare "
                          f"{prepared_dir} once, and let the prepare script end before training")
    return ImageSplits(meta["source"], *arrays, dataset=meta.get("dataset", "")), meta


def _image_meta(meta_text, prepared_dir, again):
    try:
        meta = json.loads(meta_text)
        meta["source"], meta["image_shape"]  # both required
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{prepared_dir / 'meta.json'} is not a prepared data set's meta.json "
                          f"({type(e).__name__}: {e}): {again}") from None
    return meta


def _load_arrays(prepared_dir, again):
    """[train, train_labels, val, val_labels, test, test_labels] of the .npz files, as tensors."""
    arrays = []
    for split in ("train", "val", "test"):
        try:
            with np.load(prepared_dir / f"{split}.npz") as f:
                arrays += [torch.from_numpy(f["images"]), torch.from_numpy(f["labels"]).long()]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            if isinstance(e, FileNotFoundError):
                raise ConfigError(f"{prepared_dir / (split + '.npz')} is missing: {again}") \
                    from None
            raise ConfigError(f"{prepared_dir / (split + '.npz')} is damaged or truncated "
                              f"({type(e).__name__}: {e}): {again}") from None
    return arrays


def load_images(task, dataset="", data_dir="", max_train_images=0, prepared_dir=""):
    """The prepared splits of `dataset` for `task` (image_tasks.Task: its name, dataset_kind and
    image_shape), preparing them first when needed."""
    dataset = dataset or ("mnist" if task.dataset_kind == "28x28" else "imagenet32")
    if dataset not in IMAGE_DATASETS:
        raise ConfigError(f"dataset={dataset!r} is unknown; choose one of "
                          f"{', '.join(IMAGE_DATASETS)}")
    if (dataset == "imagenet32") != (task.dataset_kind == "imagenet32"):
        need = ("imagenet32" if task.dataset_kind == "imagenet32"
                else "mnist, mnist5k or fashion_mnist")
        raise ConfigError(f"task {task.name} needs --dataset={need}, got {dataset!r}")
    prepared_dir = Path(prepared_dir) if prepared_dir else PREPARED_DIRS[dataset]
    meta_path = prepared_dir / "meta.json"
    if not meta_path.exists():
        print(f"{meta_path} is missing: preparing {dataset} now")
        run_prepare(dataset, data_dir, prepared_dir, max_train_images)
    elif data_dir and json.loads(meta_path.read_text()).get("data_dir") != os.path.abspath(
            data_dir):
        print(f"{prepared_dir} was not prepared from --data_dir={data_dir}: preparing it again")
        run_prepare(dataset, data_dir, prepared_dir, max_train_images)
    splits, meta = load_prepared(prepared_dir, dataset)
    if tuple(meta["image_shape"]) != task.image_shape:
        raise ConfigError(f"{prepared_dir} holds {tuple(meta['image_shape'])} images, task "
                          f"{task.name} needs {task.image_shape}")
    if max_train_images:
        splits.train = splits.train[:max_train_images]
        splits.train_labels = splits.train_labels[:max_train_images]
    print(f"data: {splits.source} (prepared in {prepared_dir}; {len(splits.train)} train images)")
    return splits
