"""
Out-of-distribution English texts for train.py's eval_ood: four fortune files of the Debian package
`fortunes` 1:1.99.1-7.3 (the data of fortune-mod), a fixed archive whose sha256 is pinned, so
every machine scores the same characters. Writes <name>.txt and meta.json here.

    python data/fortunes/prepare.py                  # downloads the package (~830 kB)
    python data/fortunes/prepare.py --deb=path/to/fortunes_1.99.1-7.3_all.deb   # a copy you have

The package, first route that works (the script prints which one it used):
  1. plain HTTP from the Debian archive (any OS): DEB_URL;
  2. `apt-get download fortunes=1:1.99.1-7.3` (Debian/Ubuntu: the machine's own mirror or proxy).
Either way the .deb is refused unless its sha256 is DEB_SHA256, checked before anything opens it.
A .deb is an `ar` archive (debian-binary, control.tar.*, data.tar.*): it is read here with a
short ar parse and Python's tarfile (no dpkg needed).

The texts, from usr/share/games/fortunes/ (plain English, none of it Shakespeare): science,
people, songs-poems, computers - short quotations, jokes and verse separated by lines holding
only "%". Each is written byte for byte as the package holds it, so its sha256 in meta.json can be
checked against any copy of the package. A scorer keeps only windows whose characters are all in
the model's vocabulary (shapelab/dataset.py, in_vocab_windows), so the "%" lines and tabs are
never scored.

meta.json: the source in words, the route, the .deb's name, size and sha256, and per text its
file, sha256, bytes and characters; written last (a folder without it is not ready).
"""

import argparse
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: data/
from data.sources import (HashMismatchError, check_sha256, stop_on_sigterm,  # noqa: E402
                          check_input_file, file_errors_in_one_line, replaced_together,
                          write_meta)

PACKAGE = "fortunes=1:1.99.1-7.3"  # what apt-get calls it
DEB_NAME = "fortunes_1.99.1-7.3_all.deb"
DEB_URL = "http://deb.debian.org/debian/pool/main/f/fortune-mod/" + DEB_NAME
DEB_SHA256 = "41d0551dc0ff52f875a2ecef7c39da2f672ab468c37e170119f7e0245a9d63c5"  # 848,988 bytes
TEXTS_DIR = "usr/share/games/fortunes/"
TEXTS = ("science", "people", "songs-poems", "computers")
TIMEOUT_S = 30


def ar_members(data: bytes) -> dict:
    """{name: bytes} of an `ar` archive (a .deb): the global header, then per member a 60-byte
    header (name, dates, modes, size in decimal, "`\\n") and its data, padded to an even size."""
    if data[:8] != b"!<arch>\n":
        raise ValueError("not an ar archive (a .deb starts with '!<arch>')")
    members, pos = {}, 8
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        if header[58:60] != b"`\n":
            raise ValueError(f"damaged ar member header at byte {pos}")
        name = header[:16].decode("ascii").strip().rstrip("/")  # (GNU ar ends names with '/')
        size = int(header[48:58].decode("ascii"))
        members[name] = data[pos + 60:pos + 60 + size]
        pos += 60 + size + size % 2
    return members


def texts_from_deb(deb_path) -> dict:
    """{name: bytes} of TEXTS, read from the .deb's data.tar.* (tarfile knows xz, gz and bz2)."""
    members = ar_members(Path(deb_path).read_bytes())
    data_tar = next((m for m in members if m.startswith("data.tar")), None)
    if data_tar is None:
        raise ValueError(f"{deb_path} holds no data.tar.* (members: {', '.join(members)})")
    found = {}
    with tarfile.open(fileobj=io.BytesIO(members[data_tar]), mode="r:*") as tar:
        for member in tar.getmembers():
            path = member.name.removeprefix("./")
            name = path.removeprefix(TEXTS_DIR)
            if member.isfile() and path.startswith(TEXTS_DIR) and name in TEXTS:
                found[name] = tar.extractfile(member).read()
    missing = [name for name in TEXTS if name not in found]
    if missing:
        raise ValueError(f"{deb_path} has no {', '.join(TEXTS_DIR + m for m in missing)}")
    return {name: found[name] for name in TEXTS}


def download_http(dest_dir) -> Path:
    path = Path(dest_dir) / DEB_NAME
    with urllib.request.urlopen(DEB_URL, timeout=TIMEOUT_S) as r, open(path, "wb") as f:
        shutil.copyfileobj(r, f)
    return path


def download_apt(dest_dir) -> Path:
    """apt-get download names the file with the epoch escaped (fortunes_1%3a1.99.1-7.3_all.deb)."""
    if shutil.which("apt-get") is None:
        raise OSError("no apt-get on this machine")
    done = subprocess.run(["apt-get", "download", PACKAGE], cwd=dest_dir, capture_output=True,
                          text=True, timeout=120)
    debs = sorted(Path(dest_dir).glob("fortunes_*_all.deb"))
    if done.returncode != 0 or not debs:
        last = (done.stderr.strip().splitlines() or ["no .deb written"])[-1]
        raise OSError(f"exit {done.returncode}: {last[:120]}")
    return debs[0]


def fetch_deb(dest_dir) -> tuple[Path, str]:
    """(path of the .deb in dest_dir, the route in words); SystemExit (one line) if none works."""
    errors = []
    for route, download in ((DEB_URL, download_http),
                            (f"apt-get download {PACKAGE}", download_apt)):
        try:
            return download(dest_dir), route
        except (OSError, subprocess.SubprocessError) as e:  # URLError, timeouts, apt's failures
            errors.append(f"{route}: {type(e).__name__}: {str(e)[:120]}")
    raise SystemExit(f"error: could not download {DEB_NAME} ({'; '.join(errors)}): fetch it by "
                     f"other means (848,988 bytes, sha256 {DEB_SHA256}) and run python "
                     f"data/fortunes/prepare.py --deb=<its path>")


def prepare(deb_path, out_dir, route, expected_sha256=DEB_SHA256) -> dict:
    """Check the .deb's sha256, then write each text and meta.json (last) into out_dir.
    Returns the meta dict as written. HashMismatchError (one line) for another file."""
    check_sha256(deb_path, expected_sha256, PACKAGE)
    texts = texts_from_deb(deb_path)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    records = {}
    with replaced_together(out_dir) as stage:  # beside the old files, renamed in at the end
        for name, data in texts.items():
            characters = len(data.decode("utf-8"))  # (train.py reads the texts as UTF-8)
            stage(f"{name}.txt").write_bytes(data)
            records[name] = dict(file=f"{name}.txt", sha256=hashlib.sha256(data).hexdigest(),
                                 bytes=len(data), characters=characters)
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
        if args.deb:
            try:
                check_input_file(args.deb, "--deb")
            except ValueError as e:  # (ConfigError)
                raise SystemExit(f"error: {e}") from None
            deb, route = Path(args.deb), f"the file {args.deb}"
        else:
            deb, route = fetch_deb(tmp)
        try:
            meta = prepare(deb, args.out_dir, route)
        except HashMismatchError as e:
            raise SystemExit(f"error: {e}") from None
        except ValueError as e:  # not a .deb, or not this package's
            raise SystemExit(f"error: {e}: use {DEB_NAME} (sha256 {DEB_SHA256})") from None
    print(f"source: {meta['source']}, from {route} (sha256 {DEB_SHA256[:12]}..., checked)")
    for name, r in meta["texts"].items():
        print(f"  {r['file']:16s} {r['characters']:>9,} characters  sha256 {r['sha256'][:16]}...")
    print(f"wrote {args.out_dir}/{{{','.join(TEXTS)}}}.txt and meta.json")
    return meta


if __name__ == "__main__":
    stop_on_sigterm()  # SIGTERM: no half-written file left
    with file_errors_in_one_line("--out_dir"):
        main()
