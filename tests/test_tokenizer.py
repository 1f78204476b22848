"""shapelab/tokenizer.py: characters and GPT-2's BPE round-trip; offline, GPT-2's ranks come from
the file a prepare script saved, and without it the error says what to run."""

import hashlib

import pytest
import tiktoken
from conftest import FIXTURE_TEXT

from data import sources
from shapelab import tokenizer
from shapelab.tokenizer import GPT2_EOT, GPT2_TIKTOKEN_SHA256, Tokenizer


def offline(name):
    raise ConnectionError("offline (test)")


def test_char_tokenizer_round_trips_and_names_an_unknown_character():
    tok = Tokenizer.char("abc ")
    assert tok.encode("cab a") == [2, 0, 1, 3, 0] and tok.decode(tok.encode("cab a")) == "cab a"
    with pytest.raises(ValueError, match="'z' is not in this vocabulary"):
        tok.encode("abz")


def test_gpt2_offline_reads_the_saved_ranks(gpt2_file, tmp_path, monkeypatch):
    (tmp_path / "gpt2.tiktoken").write_bytes(gpt2_file.read_bytes())
    monkeypatch.setenv("SHAPE_LAB_CACHE", str(tmp_path))
    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    tok = Tokenizer.gpt2()
    assert tok.encode("Hello world") == [15496, 995]
    assert tok.encode("a<|endoftext|>") == [64, GPT2_EOT]
    assert tok.decode(tok.encode(FIXTURE_TEXT)) == FIXTURE_TEXT
    monkeypatch.setenv("SHAPE_LAB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(SystemExit) as stop:
        Tokenizer.gpt2()
    assert "\n" not in str(stop.value) and "run: python data/shakespeare/prepare.py" in str(
        stop.value)


def test_the_online_route_saves_tiktokens_ranks_byte_for_byte(gpt2_file, tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPE_LAB_CACHE", str(gpt2_file.parent))
    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    online = tokenizer.gpt2_encoding()  # stands in for tiktoken's download
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: online)
    monkeypatch.setenv("SHAPE_LAB_CACHE", str(tmp_path))
    assert sources.get_gpt2_encoding() is online
    assert hashlib.sha256((tmp_path / "gpt2.tiktoken").read_bytes()).hexdigest() == (
        GPT2_TIKTOKEN_SHA256)
