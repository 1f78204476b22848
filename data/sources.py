"""
The data side's helpers, shared by data/<name>/prepare.py (and imported by nothing else): where
the data comes from, and how a prepared folder is written. Training and sampling need only
shapelab/tokenizer.py and the files written here.

A prepared language-modelling folder data/<name>/ holds (as in nanoGPT)
    train.bin, val.bin   token ids, a flat array of uint16 (np.memmap(path, dtype=np.uint16))
    meta.json            the tokenizer (shapelab/tokenizer.py), the source in words, and per split
                         "splits": {"train": {"tokens": N, "max_id": M, "sha256": H}, "val": ...}
                         (N uint16 ids in the file, M the largest of them, -1 if N is 0, H the
                         sha256 of its bytes), so train.py checks the .bin files against it
                         without reading them, and a checkpoint names the data it was trained on.
A prepare script writes its files beside the old ones and renames them in together at the end
(`replaced_together`: meta.json out first, in last), so a crash never leaves a half-written file,
a run reading the old files keeps them, and a run starting meanwhile never pairs new .bin files
with the old meta.json (shapelab/dataset.py's open_dataset). A temporary file cut short is removed
(an error, Ctrl-C, or SIGTERM with `stop_on_sigterm`, which every prepare script calls); one a
kill -9 left is removed by the next prepare. A file the script cannot read or write is one line
(`file_errors_in_one_line`).

Sources: each prepare script tries the usual online source first, then a package-registry
fallback for machines that reach only PyPI, and prints which one it used.
- download_sdist() fetches one source archive from the index pip uses, without pip building it,
  and refuses it (HashMismatchError, one line) unless its sha256 is the pinned one; the caller
  reads the members it needs with tarfile.
- get_gpt2_encoding() is tiktoken's GPT-2 BPE for the GPT-2 prepare scripts. Routes, in order:
  1. tiktoken.get_encoding("gpt2"), the usual download (bounded by a timeout: a black-holed
     network cannot hang us);
  2. the gpt2.tiktoken file saved by an earlier prepare (tokenizer.gpt2_ranks_path());
  3. PyPI: the ranks ship inside the source archive of openai-whisper==20250625
     (whisper/assets/gpt2.tiktoken, identical to tiktoken's r50k_base file); archive and file
     are sha256-checked, whisper is never installed.
  It prints one line to stderr saying which route it used, and leaves the ranks in
  tokenizer.gpt2_ranks_path() so that Tokenizer.gpt2() works offline from then on. Every route
  gives the same ids: "Hello world" -> [15496, 995].
"""

import base64
import contextlib
import errno
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import ssl
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import numpy as np

from shapelab.configurator import ConfigError
from shapelab.tokenizer import GPT2_TIKTOKEN_SHA256, gpt2_encoding_from_file, gpt2_ranks_path

PYPI_SIMPLE_URL = "https://pypi.org/simple/"
# the registry route to the GPT-2 ranks: the PyPI source archive of openai-whisper ships them
WHISPER_SDIST = "openai-whisper==20250625"
WHISPER_GPT2_MEMBER = "whisper/assets/gpt2.tiktoken"  # under the archive's top directory
# sha256 of openai_whisper-20250625.tar.gz (803,191 bytes) as PyPI serves it: from `pip download
# --no-deps openai-whisper==20250625` (pip checks it against the digest the index publishes)
WHISPER_SDIST_SHA256 = "37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96"
ONLINE_TIMEOUT_S = 20  # bound on tiktoken's own download (it calls requests.get with no timeout)


# -----------------------------------------------------------------------------
# writing a prepared folder

def stop_on_sigterm():
    """SIGTERM (what Slurm and Kubernetes send) ends a prepare script as Ctrl-C does, by an
    exception that unwinds through `replaced_together` (whose temporary files go), instead of
    killing it at once; exit status 143."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


WINDOWS = os.name == "nt"


def _writer_gone(pid: int) -> bool:
    """Whether the process that was writing a temporary file has ended. On Windows, where
    os.kill(pid, 0) would send that process a Ctrl-C, the delete itself answers: a file that its
    writer holds open cannot be deleted there."""
    if WINDOWS:
        return True
    try:
        os.kill(pid, 0)  # (signal 0: asks, sends nothing)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process
        return False
    return False


def _remove_temporaries_of_killed_writers(path: Path):
    """The `<path>.<pid>.tmp` files whose writer is gone (kill -9) are removed."""
    for stale in path.parent.glob(f"{path.name}.*.tmp"):
        pid = stale.name[len(path.name) + 1:-len(".tmp")]
        if pid.isdigit() and _writer_gone(int(pid)):
            try:
                stale.unlink(missing_ok=True)
            except PermissionError:  # (Windows: its writer has it open still)
                pass


@contextlib.contextmanager
def replaced_together(folder, index="meta.json"):
    """Yields `stage(name)`: the temporary file `<folder>/<name>.<pid>.tmp` to write the file
    `name` into, beside the old one. Once the block ends, the staged files replace their names
    one right after another (os.replace: each atomic), the index file (meta.json) removed first
    and renamed in last. So a reader that reads meta.json, opens the other files, and reads
    meta.json again (shapelab/dataset.py) has files of one preparation whenever both reads are
    the same bytes; a run that has its files open keeps reading the old ones (POSIX: a replaced
    file lives on for whoever holds it open). If the block fails or is stopped, every temporary
    file goes; the temporary files that killed writers left (kill -9) go when a name is staged."""
    folder = Path(folder)
    staged = {}  # name -> its temporary file, in the order staged

    def stage(name):
        path = folder / name
        _remove_temporaries_of_killed_writers(path)
        staged[name] = path.with_name(f"{name}.{os.getpid()}.tmp")
        return staged[name]

    try:
        yield stage
        if index in staged:
            (folder / index).unlink(missing_ok=True)
        for name in sorted(staged, key=lambda name: name == index):  # the index last
            os.replace(staged[name], folder / name)
    finally:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def written_atomically(path):
    """Yields `<path>.<pid>.tmp` to write; once written it replaces `path` (os.replace: atomic).
    replaced_together for one file."""
    path = Path(path)
    with replaced_together(path.parent, index=None) as stage:
        yield stage(path.name)


class SplitWriter:
    """Token ids appended to an open file as uint16, chunk by chunk (a text of any length in
    bounded memory), and the record meta.json keeps of them: {"tokens": how many ids, "max_id":
    the largest (-1 if none), "sha256": of the file's bytes} (what identifies the data a
    checkpoint was trained on)."""

    def __init__(self, file, name):
        self.file, self.name = file, name
        self.tokens, self.max_id, self.hash = 0, -1, hashlib.sha256()

    def append(self, ids):
        arr = np.asarray(ids, dtype=np.int64)
        if arr.ndim != 1:
            raise ValueError(f"ids for {self.name} must be 1-D, got shape {arr.shape}")
        if arr.size and (arr.min() < 0 or arr.max() >= 2**16):
            raise ValueError(f"ids for {self.name} must be in [0, 65536) to fit uint16, "
                             f"got [{arr.min()}, {arr.max()}]")
        data = arr.astype(np.uint16).tobytes()
        self.file.write(data)
        self.hash.update(data)
        self.tokens += int(arr.size)
        self.max_id = max(self.max_id, int(arr.max()) if arr.size else -1)

    def record(self) -> dict:
        return {"tokens": self.tokens, "max_id": self.max_id, "sha256": self.hash.hexdigest()}


def write_split(path, ids) -> dict:
    """Write token ids to the file `path` (a staged one: replaced_together) as uint16. Returns
    the split's record for meta.json (SplitWriter.record)."""
    with open(path, "wb") as f:
        writer = SplitWriter(f, Path(path).name)
        writer.append(ids)
    return writer.record()


def write_meta(path, meta: dict) -> Path:
    """Write meta as JSON to the file `path` (a staged meta.json: replaced_together)."""
    Path(path).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Path(path)


def check_input_file(path, option, folder_too=False):
    """A ConfigError (one line) unless `path`, given as `option`, is a plain file (or a link to
    one; or a folder, if folder_too): a FIFO, a device, a loop of symbolic links or a path that
    cannot be looked at is said as what it is, never as a missing file."""
    try:
        mode = Path(path).stat().st_mode  # (follows a symbolic link)
    except FileNotFoundError:
        raise ConfigError(f"{option}={path}: no such file") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ConfigError(f"{option}={path} is a loop of symbolic links: name the file "
                              f"itself") from None
        raise ConfigError(f"{option}={path} cannot be read ({e.strerror})") from None
    if stat.S_ISFIFO(mode):
        raise ConfigError(f"{option}={path} is a FIFO (a named pipe), which can be read only "
                          f"once, and the file is read more than once here: save it to a file "
                          f"and give that")
    if not (stat.S_ISREG(mode) or (folder_too and stat.S_ISDIR(mode))):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a plain file (a device or a socket)"
        raise ConfigError(f"{option}={path} is {kind}: give a file")


@contextlib.contextmanager
def file_errors_in_one_line(folder_option=""):
    """A prepare script's work, where a file it cannot read or write (a folder without write
    permission, a read-only or full disk, a file another program holds open on Windows) ends in
    one line naming the file and what to do, instead of a traceback. folder_option: the
    script's option that writes into another folder (--data_dir, --out_dir), if it has one."""
    try:
        yield
    except OSError as e:
        if e.filename is None:  # (a network error, say: its own words)
            raise SystemExit(f"error: {type(e).__name__}: {e}") from None
        elsewhere = (f", or prepare into another folder ({folder_option}=...)" if folder_option
                     else "")
        raise SystemExit(f"error: {e.filename}: {e.strerror or e}: the script reads "
                         f"its input and writes its folder: fix the permissions or free disk "
                         f"space{elsewhere}; on Windows, a training run that has the data open "
                         f"holds it until the run ends") from None


# -----------------------------------------------------------------------------
# source archives from the package index, hash-checked before anything opens them

def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class HashMismatchError(ValueError):
    """A downloaded file whose sha256 is not the pinned one; its message is one line naming the
    file, the expected and the actual hash."""


def check_sha256(path, expected_sha256: str, what: str = "") -> None:
    """Raise HashMismatchError (one line) unless the file's sha256 is expected_sha256."""
    got = sha256_file(path)
    if got != expected_sha256:
        what = f" ({what})" if what else ""
        raise HashMismatchError(f"sha256 mismatch for {Path(path).name}{what}: expected "
                                f"{expected_sha256}, got {got}; refusing to unpack or use it")


def _pip_config() -> list[tuple[str, str]]:
    """(key, value) of each line of `pip config list` (its files and PIP_* variables), or []."""
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                             text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    pairs = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        pairs.append((key.strip(), value.strip().strip("'\"")))
    return pairs


def index_urls() -> list[str]:
    """The package indexes pip is set up to use, in pip's order: index-url (PyPI's simple index
    unless pip's config or PIP_INDEX_URL says otherwise), then each extra-index-url."""
    main, extra = None, []
    for key, value in _pip_config():
        if key.endswith(".index-url") and not key.endswith("extra-index-url"):
            main = value.split()[0] if value.split() else main
        elif key.endswith(".extra-index-url"):
            extra += [u for u in value.split() if u not in extra]
    return [main or PYPI_SIMPLE_URL] + extra


def _ssl_context():
    """The certificate bundle pip is told to use (its `cert` setting), else the system's."""
    cafile = next((v for k, v in _pip_config() if k.endswith(".cert") and os.path.isfile(v)), None)
    return ssl.create_default_context(cafile=cafile)


class _Anchors(HTMLParser):
    """The (text, href) of each <a> in a PEP 503 simple-index page."""
    def __init__(self):
        super().__init__()
        self.links, self._href = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href is not None:
            self.links.append((data.strip(), self._href))
            self._href = None


def _read_url(url: str, dest=None, timeout_s: float = 60):
    """GET url (https or file); the body as bytes, or streamed into the file dest."""
    context = _ssl_context() if url.startswith("https:") else None
    with urllib.request.urlopen(url, timeout=timeout_s, context=context) as r:
        if dest is None:
            return r.read()
        with open(dest, "wb") as f:
            shutil.copyfileobj(r, f)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _archive_stem(filename: str):
    """"name-1.0" of "name-1.0.tar.gz" / ".zip"; None for anything else."""
    for suffix in (".tar.gz", ".zip"):
        if filename.endswith(suffix) and "/" not in filename and not filename.startswith("."):
            return filename[:-len(suffix)]
    return None


def download_sdist(requirement: str, dest_dir, expected_sha256: str) -> Path:
    """
    Fetch the source archive of `requirement` ("name==version") from the package index pip uses
    (PyPI, or the index in pip's config) into dest_dir, check its sha256 against expected_sha256,
    and return its path. Nothing of the archive is unpacked, built or run here: unlike
    `pip download`, which runs an sdist's build backend to read its metadata before any hash is
    checked, this only downloads the file (the index page names it, as pip would find it) and
    hashes it. Raises RuntimeError if no index serves the file (e.g. no network),
    HashMismatchError (a ValueError, one line naming the file and both hashes) if it is not the
    pinned file; a mismatching download is deleted.
    """
    if not expected_sha256:
        raise ValueError(f"download_sdist({requirement!r}) needs the archive's pinned sha256")
    name, _, version = requirement.partition("==")
    if not version:
        raise ValueError(f"download_sdist needs an exact 'name==version', got {requirement!r}")
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    wanted, errors = _normalize(f"{name}-{version}"), []
    for index in index_urls():
        page_url = f"{index.rstrip('/')}/{_normalize(name)}/"
        try:
            parser = _Anchors()  # a local (file://) index: a folder per page, each its index.html
            local = "index.html" if page_url.startswith("file:") else ""
            parser.feed(_read_url(page_url + local).decode("utf-8", "replace"))
        except Exception as e:  # URLError, timeouts, a missing page in a local index
            errors.append(f"{page_url}: {type(e).__name__}: {str(e)[:80]}")
            continue
        for text, href in parser.links:
            filename = text or href.split("#")[0].rsplit("/", 1)[-1]
            stem = _archive_stem(filename)
            if stem is None or _normalize(stem) != wanted:
                continue
            url = urllib.parse.urljoin(page_url, href.split("#")[0])
            archive = dest_dir / filename
            part = archive.with_name(archive.name + ".part")
            try:
                _read_url(url, dest=part)
            except Exception as e:
                errors.append(f"{url}: {type(e).__name__}: {str(e)[:80]}")
                part.unlink(missing_ok=True)
                continue
            try:
                check_sha256(part, expected_sha256, f"{requirement} from {url}")
            except HashMismatchError as e:
                part.unlink(missing_ok=True)
                raise HashMismatchError(str(e).replace(part.name, filename, 1)) from None
            os.replace(part, archive)
            return archive
        errors.append(f"{page_url}: no source archive {name}-{version}.tar.gz")
    raise RuntimeError(f"could not download the source archive of {requirement}: "
                       + "; ".join(errors))


# -----------------------------------------------------------------------------
# GPT-2 BPE: online, or the saved file, or PyPI

def _save_ranks(data: bytes, path: Path) -> None:
    """Write gpt2.tiktoken atomically, after checking its sha256."""
    got = hashlib.sha256(data).hexdigest()
    if got != GPT2_TIKTOKEN_SHA256:
        raise ValueError(f"gpt2.tiktoken has sha256 {got}, expected {GPT2_TIKTOKEN_SHA256}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with written_atomically(path) as tmp:
        tmp.write_bytes(data)


def ranks_file_bytes(enc) -> bytes:
    """The gpt2.tiktoken file of an encoding: each token's bytes in base64 and its rank, by rank
    (for tiktoken's own GPT-2 encoding, byte for byte tiktoken's r50k_base.tiktoken)."""
    ranks = sorted((enc.encode_single_token(token), token) for token in enc.token_byte_values())
    return "".join(f"{base64.b64encode(token).decode()} {rank}\n" for rank, token in ranks).encode()


def gpt2_tiktoken_file() -> Path:
    """tokenizer.gpt2_ranks_path(); if it is missing (or corrupt), fetched through PyPI first:
    the openai-whisper sdist is downloaded and checked against its pinned sha256, then its
    gpt2.tiktoken is extracted, checked and saved. Raises RuntimeError if the download fails,
    ValueError (HashMismatchError for the archive) if a file is not the expected one."""
    path = gpt2_ranks_path()
    if path.exists():
        if sha256_file(path) == GPT2_TIKTOKEN_SHA256:
            return path
        path.unlink()  # corrupt or truncated: fetch it again
    with tempfile.TemporaryDirectory() as tmp:
        archive = download_sdist(WHISPER_SDIST, tmp, expected_sha256=WHISPER_SDIST_SHA256)
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers()
                       if m.isfile() and m.name.endswith("/" + WHISPER_GPT2_MEMBER)]
            if len(members) != 1:
                raise ValueError(f"{archive.name} has no single {WHISPER_GPT2_MEMBER}")
            data = tar.extractfile(members[0]).read()
    _save_ranks(data, path)
    return path


def _tiktoken_online(timeout_s: float):
    """tiktoken.get_encoding("gpt2") in a daemon thread, so a hanging download is bounded.
    Returns (encoding or None, the reason it failed)."""
    import tiktoken
    result = {}

    def target():
        try:
            result["enc"] = tiktoken.get_encoding("gpt2")
        except Exception as e:  # offline: requests' ConnectionError; anything else: fall back too
            result["err"] = f"{type(e).__name__}: {str(e)[:100]}"

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        return None, f"timed out after {timeout_s}s"
    return result.get("enc"), result.get("err")


@functools.lru_cache(maxsize=None)
def get_gpt2_encoding(online_timeout_s: float = ONLINE_TIMEOUT_S):
    """tiktoken's GPT-2 encoding (50257 tokens, <|endoftext|> = 50256), online or through PyPI
    (routes in the module docstring); the ranks are left in tokenizer.gpt2_ranks_path().
    Cached per process. Raises RuntimeError if no route works."""
    path = gpt2_ranks_path()
    enc, online_err = _tiktoken_online(online_timeout_s)
    if enc is not None:
        if not path.exists():  # so that Tokenizer.gpt2() works offline from now on
            try:
                _save_ranks(ranks_file_bytes(enc), path)
            except (OSError, ValueError) as e:
                print(f"warning: could not save the GPT-2 ranks to {path}: {e}", file=sys.stderr)
        print("gpt2 tokenizer: tiktoken.get_encoding('gpt2')", file=sys.stderr)
        return enc
    route = f"cached {path}" if path.exists() else f"{WHISPER_SDIST} sdist from PyPI -> {path}"
    try:
        path = gpt2_tiktoken_file()
    except (RuntimeError, ValueError) as e:
        raise RuntimeError(
            "Could not get the GPT-2 BPE ranks.\n"
            f"  tiktoken.get_encoding('gpt2') failed: {online_err}\n"
            f"  PyPI fallback ({WHISPER_SDIST} sdist) failed: {e}\n"
            "Connect to the internet (or to PyPI) and retry, or put the file gpt2.tiktoken "
            f"(tiktoken's r50k_base.tiktoken, sha256 {GPT2_TIKTOKEN_SHA256}) at {path} "
            "(set SHAPE_LAB_CACHE to use another directory)."
        ) from e
    enc = gpt2_encoding_from_file(path)
    print(f"gpt2 tokenizer: {route} (tiktoken.get_encoding failed: {online_err})", file=sys.stderr)
    return enc
