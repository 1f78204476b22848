"""OOD texts: fortunes on a fake .deb, checked by sha256; eval_ood leaves training untouched."""

import hashlib
import io
import json
import runpy
import tarfile

import pytest

from conftest import ROOT, run_here
from shapelab import sweep
from shapelab.dataset import DataError, ood_windows

TEXT = "Before we proceed, hear me speak.\n%\nAll: speak, speak.\n\tFirst Citizen\n%\n" * 30
NAMES = ["science", "people", "songs-poems", "computers"]
FORTUNES = runpy.run_path(str(ROOT / "data/fortunes/prepare.py"))


def fake_deb(path, names=NAMES):
    """A .deb in the real layout: an ar archive holding data.tar.xz, the texts in it under
    ./usr/share/games/fortunes/ beside a .dat index."""
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w:xz") as archive:
        for name in [*names, "science.dat"]:
            info = tarfile.TarInfo(f"./usr/share/games/fortunes/{name}")
            info.size = len(f"{name}:\n{TEXT}".encode())
            archive.addfile(info, io.BytesIO(f"{name}:\n{TEXT}".encode()))
    data = tar.getvalue()
    path.write_bytes(b"!<arch>\n" + f"{'data.tar.xz/':<48}{len(data):<10}`\n".encode() + data)
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def ood_folder(tmp_path):
    sha = fake_deb(tmp_path / "fortunes.deb")
    meta = FORTUNES["prepare"](tmp_path / "fortunes.deb", tmp_path / "ood", "fixture", sha)
    assert meta == json.loads((tmp_path / "ood" / "meta.json").read_text())
    for name, record in meta["texts"].items():  # byte for byte, with their sha256
        data = (tmp_path / "ood" / record["file"]).read_bytes()
        assert data == f"{name}:\n{TEXT}".encode() and record["sha256"] == hashlib.sha256(
            data).hexdigest()
    return tmp_path / "ood"


def test_prepare_refuses_any_deb_but_the_pinned_one_and_names_what_to_do(tmp_path):
    fake_deb(tmp_path / "fortunes.deb")  # not the pinned package: its sha256 differs
    with pytest.raises(SystemExit, match="error: sha256 mismatch for fortunes.deb"):
        FORTUNES["main"]([f"--deb={tmp_path / 'fortunes.deb'}", f"--out_dir={tmp_path / 'o'}"])
    assert not (tmp_path / "o").exists()  # checked before anything is unpacked
    sha = fake_deb(tmp_path / "short.deb", names=NAMES[:2])  # the right hash, two texts
    with pytest.raises(ValueError, match="has no usr/share/games/fortunes/songs-poems"):
        FORTUNES["prepare"](tmp_path / "short.deb", tmp_path / "o", "fixture", sha)


def test_ood_windows_are_fixed_in_vocabulary_and_checked_against_their_sha256(ood_folder):
    meta = {"tokenizer": "char", "chars": "".join(sorted(set(TEXT) - set("%\t")))}
    windows, hashes = ood_windows(str(ood_folder), meta, 16)
    again, _ = ood_windows(str(ood_folder), meta, 16)
    assert list(windows) == list(hashes) == NAMES
    for name, ids in windows.items():  # the same windows every time, none with a '%' or a tab
        assert ids.shape == (64, 17) and (ids == again[name]).all()
        assert "%" not in "".join(meta["chars"][i] for i in ids.flatten())
    with pytest.raises(DataError, match="tokenizer is 'gpt2': use a char-level dataset"):
        ood_windows(str(ood_folder), {"tokenizer": "gpt2"}, 16)
    (ood_folder / "people.txt").write_text("edited")
    with pytest.raises(DataError, match="people.txt is not the text its meta.json records"):
        ood_windows(str(ood_folder), meta, 16)


def test_train_logs_ood_losses_at_each_evaluation_and_trains_exactly_as_without(
        char_dataset, ood_folder, tmp_path):
    common = ["--n_layer=2", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
              "--eval_iters=2", "--dropout=0.1", "--dtype=float32", "--sample_tokens=0",
              f"--data_dir={char_dataset}", "--max_iters=6", "--eval_interval=3"]
    records = {}
    for name, more in (("plain", []), ("ood", [f"--eval_ood={ood_folder}"])):
        assert run_here("train.py", *common, f"--out_dir={tmp_path / name}", *more).returncode == 0
        records[name] = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl")
                         .read_text().splitlines() if "loss" in line]
    assert [(r.get("loss"), r.get("val_loss")) for r in records["ood"]] == [
        (r.get("loss"), r.get("val_loss")) for r in records["plain"]]  # the RNG untouched
    evals = [r for r in records["ood"] if "val_loss" in r]
    assert len(evals) == 3 and all(set(r["ood"]) == set(NAMES) for r in evals)
    result = sweep.summarize_run(tmp_path / "ood", 6)  # the run's record names the texts
    assert result["ood_texts"] == {k: v["sha256"] for k, v in json.loads(
        (ood_folder / "meta.json").read_text())["texts"].items()}

