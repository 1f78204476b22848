"""Out-of-distribution texts scored along each run: data/fortunes/prepare.py on a tiny fake .deb
(no network), dataset.py's checks, train.py's eval_ood (logged at each evaluation, the training
RNG untouched), and how sweep.py keeps and compares such runs."""

import hashlib
import io
import json
import tarfile

import pytest

from conftest import ROOT
from test_lm_data import load_script
from test_train import TINY, run, step_losses

TEXT = "Before we proceed, hear me speak.\n%\nAll: speak, speak.\n\tFirst Citizen\n%\n" * 30


def ar_archive(members):
    """An `ar` archive of {name: bytes}, as a .deb is one."""
    out = b"!<arch>\n"
    for name, data in members.items():
        header = (f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}".encode()
                  + b"`\n")
        out += header + data + b"\n" * (len(data) % 2)
    return out


def tar_xz(files):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def fake_deb(path, names=("science", "people", "songs-poems", "computers")):
    """A .deb in the real layout: debian-binary, control.tar.xz, data.tar.xz holding the texts
    under ./usr/share/games/fortunes/ (each a little different) and a .dat index beside them."""
    files = {f"./usr/share/games/fortunes/{n}": f"{n}:\n{TEXT}".encode() for n in names}
    files["./usr/share/games/fortunes/science.dat"] = b"\x00\x01 binary index"
    path.write_bytes(ar_archive({"debian-binary": b"2.0\n",
                                 "control.tar.xz": tar_xz({"./control": b"Package: fortunes\n"}),
                                 "data.tar.xz": tar_xz(files)}))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def ood_folder(tmp_path):
    """data/fortunes prepared from the fake .deb."""
    prep = load_script("data/fortunes/prepare.py")
    sha = fake_deb(tmp_path / "fortunes.deb")
    prep.prepare(tmp_path / "fortunes.deb", tmp_path / "ood", "fixture", expected_sha256=sha)
    return tmp_path / "ood"


def test_prepare_extracts_the_four_texts_byte_for_byte_and_records_their_sha256(tmp_path):
    prep = load_script("data/fortunes/prepare.py")
    sha = fake_deb(tmp_path / "fortunes.deb")
    meta = prep.prepare(tmp_path / "fortunes.deb", tmp_path / "out", "fixture",
                        expected_sha256=sha)
    assert meta == json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["deb_sha256"] == sha and meta["route"] == "fixture"
    assert list(meta["texts"]) == ["science", "people", "songs-poems", "computers"]
    for name, record in meta["texts"].items():
        data = (tmp_path / "out" / record["file"]).read_bytes()
        assert data == f"{name}:\n{TEXT}".encode()
        assert record["sha256"] == hashlib.sha256(data).hexdigest()
        assert record["bytes"] == record["characters"] == len(data)
    from shapelab.dataset import load_ood_texts
    texts, hashes = load_ood_texts(tmp_path / "out")
    assert texts["people"] == f"people:\n{TEXT}" and hashes["people"] == meta["texts"]["people"][
        "sha256"]


def test_prepare_refuses_any_other_deb_and_names_what_to_do(tmp_path, monkeypatch, capsys):
    prep = load_script("data/fortunes/prepare.py")
    fake_deb(tmp_path / "fortunes.deb")  # not the pinned package: its sha256 differs
    with pytest.raises(prep.HashMismatchError):
        prep.prepare(tmp_path / "fortunes.deb", tmp_path / "out", "fixture")
    assert not (tmp_path / "out").exists()  # checked before anything is unpacked
    with pytest.raises(SystemExit, match="error: sha256 mismatch for fortunes.deb"):
        prep.main([f"--deb={tmp_path / 'fortunes.deb'}", f"--out_dir={tmp_path / 'out'}"])
    fake_deb(tmp_path / "short.deb", names=("science", "people"))  # the right hash, two texts
    with pytest.raises(ValueError, match="has no usr/share/games/fortunes/songs-poems"):
        prep.prepare(tmp_path / "short.deb", tmp_path / "out", "fixture",
                     expected_sha256=hashlib.sha256((tmp_path / "short.deb").read_bytes())
                     .hexdigest())

    def offline(dest_dir):
        raise OSError("network unreachable")
    monkeypatch.setattr(prep, "download_http", offline)
    monkeypatch.setattr(prep, "download_apt", offline)
    with pytest.raises(SystemExit) as stop:
        prep.main([f"--out_dir={tmp_path / 'out'}"])
    message = str(stop.value.code)
    assert "\n" not in message and prep.DEB_URL in message and "apt-get download" in message
    assert message.endswith("run python data/fortunes/prepare.py --deb=<its path>")


def test_ood_windows_are_checked_and_char_level_only(ood_folder, tmp_path):
    from shapelab.dataset import DataError, ood_windows
    chars = "".join(sorted(set(TEXT) - set("%\t")))
    meta = {"tokenizer": "char", "chars": chars}
    windows, hashes = ood_windows(str(ood_folder), meta, 16)
    assert set(windows) == set(hashes) == {"science", "people", "songs-poems", "computers"}
    again, _ = ood_windows(str(ood_folder), meta, 16)
    for name, ids in windows.items():  # the same windows every time, none with a '%' or a tab
        assert ids.shape == (64, 17) and (ids == again[name]).all()
        assert "%" not in "".join(chars[i] for i in ids.flatten())
    with pytest.raises(DataError, match="tokenizer is 'gpt2': use a char-level dataset"):
        ood_windows(str(ood_folder), {"tokenizer": "gpt2"}, 16)
    with pytest.raises(DataError, match="fortunes_not_prepared.*meta.json is missing"):
        ood_windows("fortunes_not_prepared", meta, 16)
    (ood_folder / "people.txt").write_text("edited")
    with pytest.raises(DataError, match="people.txt is not the text its meta.json records"):
        ood_windows(str(ood_folder), meta, 16)


def test_train_logs_ood_losses_at_each_evaluation_and_trains_exactly_as_without(
        char_dataset, ood_folder, tmp_path):
    """The OOD windows are scored by rank 0 with no generator: the step losses (dropout on) and
    the val losses are those of a run without eval_ood."""
    from shapelab import sweep
    common = [*TINY, f"--data_dir={char_dataset}", "--max_iters=6", "--eval_interval=3"]
    run("train.py", *common, f"--out_dir={tmp_path / 'plain'}")
    shown = run("train.py", *common, f"--out_dir={tmp_path / 'ood'}", f"--eval_ood={ood_folder}")
    assert step_losses(tmp_path / "ood") == step_losses(tmp_path / "plain")
    evals = {name: [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text()
                    .splitlines() if "val_loss" in line] for name in ("plain", "ood")}
    assert [r["val_loss"] for r in evals["ood"]] == [r["val_loss"] for r in evals["plain"]]
    for r in evals["ood"]:
        assert set(r["ood"]) == {"science", "people", "songs-poems", "computers"}
        assert r["ood_loss"] == pytest.approx(sum(r["ood"].values()) / 4)
    assert f"OOD loss {evals['ood'][-1]['ood_loss']:.4f}" in shown.stdout
    result = sweep.summarize_run(tmp_path / "ood", 6)
    assert [c["ood_loss"] for c in result["curve"]] == [r["ood_loss"] for r in evals["ood"]]
    meta = json.loads((ood_folder / "meta.json").read_text())
    assert result["ood_texts"] == {k: v["sha256"] for k, v in meta["texts"].items()}
    plain = sweep.summarize_run(tmp_path / "plain", 6)
    assert "ood_texts" not in plain and all("ood_loss" not in c for c in plain["curve"])


def test_eval_ood_is_not_part_of_a_runs_identity(tmp_path):
    """A run recorded without eval_ood is the same run as one asked for with it (it measures,
    and changes no loss); compare.py passes it to every run."""
    import compare
    from shapelab import sweep
    settings = {**{k: 1 for k in compare.TRAIN_KEYS}, "eval_ood": "fortunes", "min_lr_ratio": 0.1}
    config = compare.run_config(settings, "gpt", {}, 2e-3, 1337, tmp_path / "run")
    assert config["eval_ood"] == "fortunes"
    recorded = {k: v for k, v in config.items() if k != "eval_ood"}
    (tmp_path / "config.py").write_text(sweep.config_text(recorded))
    assert sweep.same_settings(tmp_path / "config.py", config)
    assert not sweep.same_settings(tmp_path / "config.py", {**config, "seed": 1338})
    assert (ROOT / "config" / "compare_verdict_cpu.py").read_text().count(
        'eval_ood = "fortunes"') == 1
