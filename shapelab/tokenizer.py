"""The tokenizers of train.py and sample.py: characters (id i is meta.json's chars[i]), or GPT-2's
BPE through tiktoken; offline, its ranks come from the file a GPT-2 prepare script saved."""

import os
from pathlib import Path

import tiktoken.load  # (and tiktoken)
from tiktoken_ext.openai_public import r50k_pat_str as GPT2_PAT_STR  # noqa: F401 (export.py's)

GPT2_VOCAB_SIZE = 50257
GPT2_EOT = 50256  # <|endoftext|>
GPT2_TIKTOKEN_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"


def gpt2_ranks_path():
    cache = os.environ.get("SHAPE_LAB_CACHE", Path.home() / ".cache" / "shape_lab")
    return Path(cache) / "gpt2.tiktoken"


def gpt2_encoding():
    try:
        return tiktoken.get_encoding("gpt2")
    except Exception as e:  # offline: requests' ConnectionError
        if not gpt2_ranks_path().exists():
            raise SystemExit(f"error: no GPT-2 BPE ranks: tiktoken could not download them "
                             f"({type(e).__name__}) and {gpt2_ranks_path()} is missing; run: "
                             f"python data/shakespeare/prepare.py (it saves them)") from None
    ranks = tiktoken.load.load_tiktoken_bpe(str(gpt2_ranks_path()), GPT2_TIKTOKEN_SHA256)
    return tiktoken.Encoding("gpt2", pat_str=GPT2_PAT_STR, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": GPT2_EOT},
                             explicit_n_vocab=GPT2_VOCAB_SIZE)


class Tokenizer:
    def __init__(self, chars=None, enc=None):
        self.chars, self.enc = chars, enc
        self.vocab_size = GPT2_VOCAB_SIZE if enc else len(chars)
        self.stoi = {ch: i for i, ch in enumerate(chars or "")}

    @classmethod
    def char(cls, chars):
        return cls(chars)

    @classmethod
    def gpt2(cls):
        return cls(enc=gpt2_encoding())

    @classmethod
    def of(cls, meta):
        """The tokenizer a prepared dataset's meta.json names."""
        return cls(meta["chars"]) if meta["tokenizer"] == "char" else cls.gpt2()

    def encode(self, text):
        if self.enc:
            return self.enc.encode(text, allowed_special={"<|endoftext|>"})
        missing = set(text) - self.stoi.keys()
        if missing:
            raise ValueError(f"{min(missing)!r} is not in this vocabulary: use only characters "
                             f"of the training text")
        return [self.stoi[ch] for ch in text]

    def decode(self, ids):
        if self.enc:
            return self.enc.decode([int(i) for i in ids])
        return "".join(self.chars[int(i)] for i in ids)
