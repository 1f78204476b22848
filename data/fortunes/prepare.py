"""
Out-of-distribution English texts for train.py's eval_ood: four fortune files (science, people,
songs-poems, computers) of the Debian package `fortunes` 1:1.99.1-7.3, a fixed archive whose
sha256 is pinned, so every machine scores the same characters. Writes <name>.txt and meta.json.

    python data/fortunes/prepare.py                  # downloads the package (~830 kB)
    python data/fortunes/prepare.py --deb=path/to/fortunes_1.99.1-7.3_all.deb   # a copy you have
"""

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: data/
from data.sources import (check_hash, deb_files, download, replaced_together,  # noqa: E402
                          write_meta)

PACKAGE = "fortunes=1:1.99.1-7.3"
DEB_NAME = "fortunes_1.99.1-7.3_all.deb"
DEB_URL = "http://deb.debian.org/debian/pool/main/f/fortune-mod/" + DEB_NAME
DEB_SHA256 = "41d0551dc0ff52f875a2ecef7c39da2f672ab468c37e170119f7e0245a9d63c5"  # 848,988 bytes
TEXTS_DIR = "usr/share/games/fortunes"
TEXTS = ("science", "people", "songs-poems", "computers")


def prepare(deb_path, out_dir, route, expected_sha256=DEB_SHA256):
    """Check the .deb's sha256, then write each text and meta.json into out_dir. Returns meta."""
    check_hash(deb_path, expected_sha256)
    texts, records = deb_files(deb_path, TEXTS_DIR), {}
    if missing := [name for name in TEXTS if name not in texts]:
        raise ValueError(f"{deb_path} has no {TEXTS_DIR}/{missing[0]}")
    with replaced_together(out_dir) as stage:
        for name in TEXTS:
            stage(f"{name}.txt").write_bytes(texts[name])
            records[name] = dict(file=f"{name}.txt", sha256=hashlib.sha256(texts[name]).hexdigest(),
                                 bytes=len(texts[name]),
                                 characters=len(texts[name].decode("utf-8")))
        meta = dict(source=f"Debian package {PACKAGE} (fortune-mod's data), {TEXTS_DIR}/",
                    route=route, deb=DEB_NAME, deb_bytes=Path(deb_path).stat().st_size,
                    deb_sha256=expected_sha256, texts=records)
        write_meta(stage("meta.json"), meta)
    return meta


def main(argv=None):
    parser = argparse.ArgumentParser(description="Prepare the out-of-distribution texts.")
    parser.add_argument("--deb", default="", help=f"a copy of {DEB_NAME} (default: download it)")
    parser.add_argument("--out_dir", default=str(Path(__file__).resolve().parent))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            deb = args.deb or download(DEB_URL, Path(tmp) / DEB_NAME, DEB_SHA256)
            meta = prepare(deb, args.out_dir, f"the file {args.deb}" if args.deb else DEB_URL)
        except (OSError, ValueError) as e:
            raise SystemExit(f"error: {e}: use {DEB_NAME} (sha256 {DEB_SHA256}), "
                             f"--deb=<its path>") from None
    for r in meta["texts"].values():
        print(f"  {r['file']:16s} {r['characters']:>9,} characters  sha256 {r['sha256'][:16]}...")
    print(f"wrote {args.out_dir}/{{{','.join(TEXTS)}}}.txt and meta.json from {meta['route']}")
    return meta


if __name__ == "__main__":
    main()
