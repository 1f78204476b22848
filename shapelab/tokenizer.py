"""
The tokenizers train.py and sample.py use: characters (id i is meta.json's chars[i]), or GPT-2's
BPE through tiktoken (<|endoftext|> = 50256). Offline, GPT-2's ranks come from the gpt2.tiktoken
file a GPT-2 prepare script saves in $SHAPE_LAB_CACHE (default ~/.cache/shape_lab).
"""

import json
import os
from pathlib import Path

import tiktoken
import tiktoken.load
from tiktoken_ext.openai_public import r50k_pat_str as GPT2_PAT_STR  # noqa: F401 (export.py)

GPT2_VOCAB_SIZE = 50257
GPT2_EOT = 50256  # <|endoftext|>
GPT2_TIKTOKEN_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"


class TokenizerError(SystemExit):
    """No GPT-2 ranks: one line saying what to run, exit status 1."""


def gpt2_ranks_path():
    cache = os.environ.get("SHAPE_LAB_CACHE", Path.home() / ".cache" / "shape_lab")
    return Path(cache) / "gpt2.tiktoken"


def gpt2_encoding_from_file(path):
    ranks = tiktoken.load.load_tiktoken_bpe(str(path), expected_hash=GPT2_TIKTOKEN_SHA256)
    return tiktoken.Encoding(name="gpt2", pat_str=GPT2_PAT_STR, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": GPT2_EOT},
                             explicit_n_vocab=GPT2_VOCAB_SIZE)


def gpt2_encoding():
    """tiktoken's GPT-2 encoding; offline, the one of the ranks a prepare script saved."""
    try:
        return tiktoken.get_encoding("gpt2")
    except Exception as e:  # offline: requests' ConnectionError
        if not gpt2_ranks_path().exists():
            raise TokenizerError(f"error: no GPT-2 BPE ranks: tiktoken could not download them "
                                 f"({type(e).__name__}) and {gpt2_ranks_path()} is missing; run: "
                                 f"python data/shakespeare/prepare.py (it saves them)") from None
    return gpt2_encoding_from_file(gpt2_ranks_path())


class Tokenizer:
    def __init__(self, kind, chars=None, enc=None):
        self.kind, self.chars, self.enc = kind, chars, enc
        self.vocab_size = len(chars) if kind == "char" else GPT2_VOCAB_SIZE
        self.eot_token = GPT2_EOT if kind == "gpt2" else None
        self.stoi = {ch: i for i, ch in enumerate(chars or "")}

    @classmethod
    def char(cls, chars):
        return cls("char", chars=chars)

    @classmethod
    def gpt2(cls):
        return cls("gpt2", enc=gpt2_encoding())

    def encode(self, text):
        if self.kind == "gpt2":
            return self.enc.encode(text, allowed_special={"<|endoftext|>"})
        missing = set(text) - set(self.stoi)
        if missing:
            raise ValueError(f"character {min(missing)!r} is not in this vocabulary: use only "
                             f"characters of the training text")
        return [self.stoi[ch] for ch in text]

    def decode(self, ids):
        if self.kind == "gpt2":
            return self.enc.decode([int(i) for i in ids])
        return "".join(self.chars[int(i)] for i in ids)


def load_tokenizer(data_dir):
    """The tokenizer that made data_dir/*.bin, as its meta.json names it."""
    path = Path(data_dir) / "meta.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: prepare the data first with "
                                f"python {Path(data_dir) / 'prepare.py'}")
    meta = json.loads(path.read_text(encoding="utf-8"))
    return Tokenizer.char(meta["chars"]) if meta["tokenizer"] == "char" else Tokenizer.gpt2()
