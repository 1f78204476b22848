"""
Out-of-distribution English texts for train.py's eval_ood: four fortune files (science, people,
songs-poems, computers) of the Debian package `fortunes` 1:1.99.1-7.3, a fixed archive whose
sha256 is pinned, so every machine scores the same characters. Writes <name>.txt and meta.json.

    python data/fortunes/prepare.py                  # downloads the package (~830 kB)
    python data/fortunes/prepare.py --deb=path/to/fortunes_1.99.1-7.3_all.deb   # a copy you have

The package comes over plain HTTP from the Debian archive, else by `apt-get download`; either way
it is refused unless its sha256 is DEB_SHA256. A .deb is an `ar` archive holding data.tar.*: read
here with a short ar parse and tarfile. Each text is written byte for byte, its sha256 in meta.json.
"""

import argparse
import hashlib
import io
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: data/
from data.sources import (apt_download, check_input_file, check_sha256, download,  # noqa: E402
                          file_errors_in_one_line, replaced_together, write_meta)

PACKAGE = "fortunes=1:1.99.1-7.3"  # what apt-get calls it
DEB_NAME = "fortunes_1.99.1-7.3_all.deb"
DEB_URL = "http://deb.debian.org/debian/pool/main/f/fortune-mod/" + DEB_NAME
DEB_SHA256 = "41d0551dc0ff52f875a2ecef7c39da2f672ab468c37e170119f7e0245a9d63c5"  # 848,988 bytes
TEXTS_DIR = "usr/share/games/fortunes/"
TEXTS = ("science", "people", "songs-poems", "computers")


def texts_from_deb(deb_path):
    """{name: bytes} of TEXTS in the .deb's data.tar.*. An ar archive: an 8-byte magic, then per
    member a 60-byte header (its name, and its size in decimal at bytes 48-58) and its data,
    padded to an even size."""
    data, pos, found = Path(deb_path).read_bytes(), 8, {}
    while pos + 60 <= len(data):
        name, size = data[pos:pos + 16].decode().strip(), int(data[pos + 48:pos + 58])
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(data[pos + 60:pos + 60 + size])) as tar:
                for member in tar.getmembers():
                    text = member.name.removeprefix("./").removeprefix(TEXTS_DIR)
                    if member.isfile() and text in TEXTS and TEXTS_DIR in member.name:
                        found[text] = tar.extractfile(member).read()
        pos += 60 + size + size % 2
    missing = [name for name in TEXTS if name not in found]
    if missing:
        raise ValueError(f"{deb_path} has no {', '.join(TEXTS_DIR + m for m in missing)}")
    return {name: found[name] for name in TEXTS}


def fetch_deb(dest_dir):
    """(the .deb in dest_dir, the route in words); SystemExit (one line) if none works."""
    errors = []
    for route, fetch in ((DEB_URL, lambda: download(DEB_URL, Path(dest_dir) / DEB_NAME)),
                         (f"apt-get download {PACKAGE}", lambda: apt_download(PACKAGE, dest_dir))):
        try:
            return fetch(), route
        except Exception as e:  # URLError, timeouts, no apt-get
            errors.append(f"{route}: {type(e).__name__}: {str(e)[:120]}")
    raise SystemExit(f"error: could not download {DEB_NAME} ({'; '.join(errors)}): fetch it by "
                     f"other means (848,988 bytes, sha256 {DEB_SHA256}) and run python "
                     f"data/fortunes/prepare.py --deb=<its path>")


def prepare(deb_path, out_dir, route, expected_sha256=DEB_SHA256):
    """Check the .deb's sha256, then write each text and meta.json into out_dir. Returns meta."""
    check_sha256(deb_path, expected_sha256, PACKAGE)
    records = {}
    with replaced_together(out_dir) as stage:
        for name, data in texts_from_deb(deb_path).items():
            stage(f"{name}.txt").write_bytes(data)
            records[name] = dict(file=f"{name}.txt", sha256=hashlib.sha256(data).hexdigest(),
                                 bytes=len(data), characters=len(data.decode("utf-8")))
        meta = dict(source=f"Debian package {PACKAGE} (fortune-mod's data), {TEXTS_DIR}",
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
            if args.deb:
                check_input_file(args.deb, "--deb")
            deb, route = (Path(args.deb), f"the file {args.deb}") if args.deb else fetch_deb(tmp)
            meta = prepare(deb, args.out_dir, route)
        except ValueError as e:  # not a .deb, or not this package's
            raise SystemExit(f"error: {e}: use {DEB_NAME} (sha256 {DEB_SHA256})") from None
    print(f"source: {meta['source']}, from {route} (sha256 {DEB_SHA256[:12]}..., checked)")
    for r in meta["texts"].values():
        print(f"  {r['file']:16s} {r['characters']:>9,} characters  sha256 {r['sha256'][:16]}...")
    print(f"wrote {args.out_dir}/{{{','.join(TEXTS)}}}.txt and meta.json")
    return meta


if __name__ == "__main__":
    with file_errors_in_one_line():
        main()
