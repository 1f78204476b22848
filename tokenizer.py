"""
Tokenizers and the on-disk data format shared by data/*/prepare.py, train.py and sample.py.

Data format (as in nanoGPT): every data/<name>/ directory holds
    train.bin, val.bin   token ids as a flat array of uint16
                         (read them with np.memmap(path, dtype=np.uint16, mode="r"))
    meta.json            which tokenizer made them, e.g.
                         {"tokenizer": "char", "vocab_size": 65, "chars": "\\n !...", "source": "..."}
                         {"tokenizer": "gpt2", "vocab_size": 50257, "source": "..."}
`load_tokenizer(data_dir)` turns meta.json back into a Tokenizer with encode/decode.

GPT-2 BPE: `get_gpt2_encoding()` returns tiktoken's "gpt2" encoding. It tries, in order,
  1. tiktoken.get_encoding("gpt2") - the usual route; it downloads (or reuses tiktoken's
     cache) and is bounded by a timeout so a black-holed network cannot hang us;
  2. a gpt2.tiktoken file cached by an earlier run of step 3, in $SHAPE_LAB_CACHE
     (default ~/.cache/shape_lab);
  3. the registry route for machines that reach only PyPI: the GPT-2 ranks ship inside
     the source archive of openai-whisper==20250625 (whisper/assets/gpt2.tiktoken,
     identical to tiktoken's r50k_base file). We download that archive from the index pip
     uses (download_sdist: no pip build, whisper is not installed), check the archive's
     pinned sha256 before opening it, extract the one file, check its sha256, and cache it
     (step 2).
It prints one line to stderr saying which route it used. All three give the same ids:
"Hello world" -> [15496, 995].

Public functions:
    get_gpt2_encoding()              -> tiktoken.Encoding (cached per process)
    gpt2_tiktoken_file()             -> Path of the cached gpt2.tiktoken, fetched through PyPI if missing
    gpt2_encoding_from_file(path)    -> tiktoken.Encoding built from a local gpt2.tiktoken
    Tokenizer.char(chars), Tokenizer.gpt2(); .encode(str), .decode(ids), .vocab_size, .eot_token
    load_tokenizer(data_dir)         -> Tokenizer described by data_dir/meta.json
    write_split(path, ids)           -> number of tokens written (uint16, atomic)
    write_meta(data_dir, meta)       -> path of meta.json (atomic)
    download_sdist(requirement, dest_dir, expected_sha256) -> path of the source archive, hash checked
    check_sha256(path, expected, what), HashMismatchError, index_urls(), sha256_file(path), cache_dir()
"""

import functools
import hashlib
import json
import os
import re
import shutil
import ssl
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

GPT2_VOCAB_SIZE = 50257
GPT2_EOT = 50256  # <|endoftext|>

# the registry fallback for the GPT-2 ranks: the PyPI source archive of openai-whisper ships them
WHISPER_SDIST = "openai-whisper==20250625"
WHISPER_GPT2_MEMBER = "whisper/assets/gpt2.tiktoken"  # under the sdist's top directory
GPT2_TIKTOKEN_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
# sha256 of openai_whisper-20250625.tar.gz (803,191 bytes) as PyPI serves it: computed from
# `pip download --no-deps openai-whisper==20250625` (pip checks the file against the digest the
# index publishes). Checked before the archive is opened.
WHISPER_SDIST_SHA256 = "37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96"
PYPI_SIMPLE_URL = "https://pypi.org/simple/"

# tiktoken's r50k/gpt2 split pattern, copied from tiktoken_ext/openai_public.py (r50k_pat_str).
# It is an equivalent, faster form of the original GPT-2 pattern
# r"""'s|'t|'re|'ve|'m|'ll|'d| ?[\p{L}]+| ?[\p{N}]+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT2_PAT_STR = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

ONLINE_TIMEOUT_S = 20  # bound on tiktoken's own download (it calls requests.get with no timeout)


def cache_dir() -> Path:
    """Where downloaded helper files live: $SHAPE_LAB_CACHE, default ~/.cache/shape_lab."""
    return Path(os.environ.get("SHAPE_LAB_CACHE", Path.home() / ".cache" / "shape_lab"))


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class HashMismatchError(ValueError):
    """A downloaded archive whose sha256 is not the pinned one; its message is one line naming the
    file, the expected and the actual hash."""


def check_sha256(path, expected_sha256: str, what: str = "") -> None:
    """Raise HashMismatchError (one line) unless the file's sha256 is expected_sha256."""
    got = sha256_file(path)
    if got != expected_sha256:
        raise HashMismatchError(f"sha256 mismatch for {Path(path).name}{' (' + what + ')' if what else ''}: "
                                f"expected {expected_sha256}, got {got}; refusing to unpack or use it")


def _pip_config() -> list[tuple[str, str]]:
    """(key, value) of each line of `pip config list` (files and PIP_* variables), or [] if pip cannot say."""
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


def download_sdist(requirement: str, dest_dir, expected_sha256: str) -> Path:
    """
    Fetch the source archive of `requirement` ("name==version") from the package index pip uses
    (PyPI, or the index in pip's config) into dest_dir, check its sha256 against expected_sha256,
    and return its path. Nothing of the archive is unpacked, built or run here: unlike
    `pip download`, which runs an sdist's build backend to read its metadata before any hash is
    checked, this only downloads the file (the index page names it, as pip would find it) and
    hashes it; the caller then reads the members it needs with tarfile. Raises RuntimeError if no
    index serves the file (e.g. no network), HashMismatchError (a ValueError, one line naming the
    file and both hashes) if it is not the pinned file; a mismatching download is deleted.
    """
    if not expected_sha256:
        raise ValueError(f"download_sdist({requirement!r}) needs the archive's pinned sha256")
    name, _, version = requirement.partition("==")
    if not version:
        raise ValueError(f"download_sdist needs an exact 'name==version', got {requirement!r}")
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    wanted = _normalize(f"{name}-{version}")
    errors = []
    for index in index_urls():
        page_url = f"{index.rstrip('/')}/{_normalize(name)}/"
        try:
            parser = _Anchors()
            # a local (file://) index is a tree of folders, each page its index.html, as pip reads it
            parser.feed(_read_url(page_url + ("index.html" if page_url.startswith("file:") else ""))
                        .decode("utf-8", "replace"))
        except Exception as e:  # URLError, timeouts, a missing page in a local index
            errors.append(f"{page_url}: {type(e).__name__}: {str(e)[:80]}")
            continue
        for text, href in parser.links:
            filename = text or href.split("#")[0].rsplit("/", 1)[-1]
            stem = filename[:-len(".tar.gz")] if filename.endswith(".tar.gz") else filename[:-len(".zip")] \
                if filename.endswith(".zip") else None
            if stem is None or _normalize(stem) != wanted or "/" in filename or filename.startswith("."):
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
    raise RuntimeError(f"could not download the source archive of {requirement}: " + "; ".join(errors))


# -----------------------------------------------------------------------------
# GPT-2 BPE

def _tiktoken_online(timeout_s: float):
    """tiktoken.get_encoding("gpt2") in a daemon thread, so a hanging download is bounded.
    Returns (encoding or None, reason for failure)."""
    import tiktoken
    result = {}

    def target():
        try:
            result["enc"] = tiktoken.get_encoding("gpt2")
        except Exception as e:  # offline: requests' ConnectionError; anything else: also fall back
            result["err"] = f"{type(e).__name__}: {str(e)[:100]}"

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        return None, f"timed out after {timeout_s}s"
    return result.get("enc"), result.get("err")


def gpt2_encoding_from_file(path):
    """The GPT-2 encoding built from a local gpt2.tiktoken (= r50k_base.tiktoken) file, sha256 checked."""
    import tiktoken
    import tiktoken.load
    ranks = tiktoken.load.load_tiktoken_bpe(str(path), expected_hash=GPT2_TIKTOKEN_SHA256)
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=GPT2_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": GPT2_EOT},
        explicit_n_vocab=GPT2_VOCAB_SIZE,
    )


def gpt2_tiktoken_file() -> Path:
    """Path of the cached gpt2.tiktoken; if it is missing (or corrupt), fetch it through PyPI first:
    download the openai-whisper sdist, check its pinned sha256, extract whisper/assets/gpt2.tiktoken, check its sha256,
    write it atomically. Raises RuntimeError if the download fails, ValueError (HashMismatchError for the
    archive) if a file is not the expected one."""
    path = cache_dir() / "gpt2.tiktoken"
    if path.exists():
        if sha256_file(path) == GPT2_TIKTOKEN_SHA256:
            return path
        path.unlink()  # corrupt or truncated: fetch it again
    with tempfile.TemporaryDirectory() as tmp:
        archive = download_sdist(WHISPER_SDIST, tmp, expected_sha256=WHISPER_SDIST_SHA256)
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith("/" + WHISPER_GPT2_MEMBER)]
            if len(members) != 1:
                raise ValueError(f"{archive.name} has no single {WHISPER_GPT2_MEMBER}")
            data = tar.extractfile(members[0]).read()
    got = hashlib.sha256(data).hexdigest()
    if got != GPT2_TIKTOKEN_SHA256:
        raise ValueError(f"gpt2.tiktoken from {WHISPER_SDIST} has sha256 {got}, expected {GPT2_TIKTOKEN_SHA256}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp_path.write_bytes(data)
    os.replace(tmp_path, path)
    return path


@functools.lru_cache(maxsize=None)
def get_gpt2_encoding(online_timeout_s: float = ONLINE_TIMEOUT_S):
    """tiktoken's GPT-2 encoding (50257 tokens, <|endoftext|> = 50256), online or offline; see the
    module docstring for the order of routes. Cached per process. Raises RuntimeError if none works."""
    enc, online_err = _tiktoken_online(online_timeout_s)
    if enc is not None:
        print("gpt2 tokenizer: tiktoken.get_encoding('gpt2')", file=sys.stderr)
        return enc

    path = cache_dir() / "gpt2.tiktoken"
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


# -----------------------------------------------------------------------------
# Tokenizer: what train.py and sample.py use to turn text into ids and back

class Tokenizer:
    """A character-level or GPT-2 BPE tokenizer with one interface:
    encode(str) -> list[int], decode(list[int]) -> str, vocab_size, eot_token (None for char)."""

    def __init__(self, kind: str, vocab_size: int, eot_token: int | None, chars: str | None = None, enc=None):
        self.kind = kind
        self.vocab_size = vocab_size
        self.eot_token = eot_token
        self._enc = enc
        if chars is not None:
            self.chars = chars
            self._stoi = {ch: i for i, ch in enumerate(chars)}

    @classmethod
    def char(cls, chars: str) -> "Tokenizer":
        """Character-level tokenizer; id i is chars[i]."""
        if len(set(chars)) != len(chars):
            raise ValueError("char vocabulary has duplicate characters")
        return cls("char", len(chars), None, chars=chars)

    @classmethod
    def gpt2(cls) -> "Tokenizer":
        return cls("gpt2", GPT2_VOCAB_SIZE, GPT2_EOT, enc=get_gpt2_encoding())

    def encode(self, text: str) -> list[int]:
        if self.kind == "char":
            try:
                return [self._stoi[ch] for ch in text]
            except KeyError as e:
                raise ValueError(f"character {e.args[0]!r} is not in this char vocabulary "
                                 f"({self.vocab_size} characters); use only characters from the training text") from None
        # sample.py prompts may contain <|endoftext|> on purpose; everything else is ordinary text
        return self._enc.encode(text, allowed_special={"<|endoftext|>"})

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        if self.kind == "char":
            bad = [i for i in ids if not 0 <= i < self.vocab_size]
            if bad:
                raise ValueError(f"id {bad[0]} is outside the char vocabulary of size {self.vocab_size}")
            return "".join(self.chars[i] for i in ids)
        return self._enc.decode(ids)

    def __repr__(self):
        return f"Tokenizer(kind={self.kind!r}, vocab_size={self.vocab_size}, eot_token={self.eot_token})"


def load_tokenizer(data_dir) -> Tokenizer:
    """The tokenizer that made data_dir/*.bin, read from data_dir/meta.json."""
    data_dir = Path(data_dir)
    meta_path = data_dir / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path} not found: prepare the data first with "
                                f"`python {data_dir / 'prepare.py'}`")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    kind = meta.get("tokenizer")
    if kind == "char":
        tok = Tokenizer.char(meta["chars"])
    elif kind == "gpt2":
        tok = Tokenizer.gpt2()
    else:
        raise ValueError(f"{meta_path}: unknown tokenizer {kind!r} (expected 'char' or 'gpt2')")
    if meta.get("vocab_size") != tok.vocab_size:
        raise ValueError(f"{meta_path}: vocab_size {meta.get('vocab_size')} does not match the "
                         f"{kind} tokenizer ({tok.vocab_size}); re-run {data_dir / 'prepare.py'}")
    return tok


# -----------------------------------------------------------------------------
# writers for the on-disk format (atomic: a crash never leaves a half-written file behind)

def write_split(path, ids) -> int:
    """Write token ids to path as uint16 (tmp file + os.replace). Returns the number of tokens."""
    path = Path(path)
    arr = np.asarray(ids, dtype=np.int64)
    if arr.ndim != 1:
        raise ValueError(f"ids for {path} must be 1-D, got shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= 2**16):
        raise ValueError(f"ids for {path} must be in [0, 65536) to fit uint16, got [{arr.min()}, {arr.max()}]")
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    arr.astype(np.uint16).tofile(tmp)
    os.replace(tmp, path)
    return int(arr.size)


def write_meta(data_dir, meta: dict) -> Path:
    """Write data_dir/meta.json atomically."""
    path = Path(data_dir) / "meta.json"
    tmp = path.with_name(f"meta.json.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
