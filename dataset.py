"""
The prepared language-modelling data train.py reads: data/<dataset>/{train,val}.bin (uint16 token
ids) and meta.json (the tokenizer, and what data/<dataset>/prepare.py wrote into each split).

- `find_dataset` prepares a missing small dataset (shakespeare_char, shakespeare) by running its
  prepare.py, and names the command to run for the others.
- `check_dataset` checks the files against meta.json once, before training: the tokenizer is
  described, every split exists with the size prepare recorded (a truncated or swapped file is
  caught without reading it: a web-scale train.bin is gigabytes), the largest id recorded fits the
  vocabulary, and a split holds more than block_size tokens. Each problem is one line saying what
  to do.
- `check_same_vocabulary` refuses to resume a checkpoint on data prepared with another vocabulary.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SELF_PREPARING = ("shakespeare_char", "shakespeare")  # small: train.py prepares them when missing
VOCAB_FIELDS = ("tokenizer", "vocab_size", "chars")  # what decides which id is which token


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


def check_dataset(folder, block_size, resumed=None):
    """meta.json of a prepared folder, after checking it and the .bin files it describes.
    resumed: (the checkpoint's meta, its path) of a resumed run, whose vocabulary must be this."""
    path = folder / "meta.json"
    again = f"prepare the data again (python {folder / 'prepare.py'})"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"error: {path} is not valid JSON ({e}): {again}") from None
    vocab = meta.get("vocab_size") if isinstance(meta, dict) else None
    chars = meta.get("chars") if isinstance(meta, dict) else None
    if not isinstance(vocab, int) or meta.get("tokenizer") not in ("char", "gpt2") or (
            meta["tokenizer"] == "char"
            and not (isinstance(chars, str) and len(set(chars)) == len(chars) == vocab)):
        raise DataError(f"error: {path} does not describe a tokenizer (tokenizer 'char' with "
                        f"vocab_size distinct chars, or 'gpt2'; an integer vocab_size): {again}")
    splits = meta.get("splits")
    if not isinstance(splits, dict):
        raise DataError(f"error: {path} records no token counts per split (it was written by an "
                        f"older prepare.py): {again}")
    for split in ("train", "val"):
        bin_path, info = folder / f"{split}.bin", splits.get(split, {})
        if not bin_path.exists():
            raise DataError(f"error: {bin_path} is missing: {again}")
        tokens, size = info.get("tokens"), bin_path.stat().st_size
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
    if resumed:
        check_same_vocabulary(resumed[0], meta, folder, resumed[1])
    return meta


def check_same_vocabulary(saved_meta, meta, folder, checkpoint_path):
    """A resumed run must see the token ids it was trained on."""
    saved = {k: saved_meta.get(k) for k in VOCAB_FIELDS}
    if saved != {k: meta.get(k) for k in VOCAB_FIELDS}:
        raise DataError(
            f"error: {folder / 'meta.json'} has another vocabulary than the checkpoint's "
            f"({meta.get('tokenizer')}, {meta.get('vocab_size')} tokens now; {saved['tokenizer']}, "
            f"{saved['vocab_size']} tokens in {checkpoint_path}): the data was prepared again "
            f"differently. Resume on the data it was trained on, or train from scratch")
