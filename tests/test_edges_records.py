"""A comparison's records (record_dir: config.py and result.json of every finished run, and the
report, committed in the repository) are data it reads, never writes back unless it produced
them: a command of other settings copies none in, rewrites none, and leaves the committed report
alone; a damaged record is one line naming its file. compare.py runs in-process."""

import json
import shutil

import pytest
from conftest import ROOT

import compare
from shapelab import sweep

TINY = ["--n_layer=3", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
        "--eval_iters=2", "--width_multiple=4", "--ffn_multiple=8", "--models=GPT",
        "--max_iters=2", "--eval_interval=2"]


def files(folder):
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_the_cpu_verdict_in_float32_leaves_every_committed_record_byte_identical(
        tmp_path, char_dataset, capsys, monkeypatch):
    """The CPU verdict's config with --dtype=float32 (its advice for a CPU without bf16) into a new
    out_dir, one GPT run of 2 steps, against a copy of its committed records: it copied all of
    them in, rewrote their config.py (the out_dir line), stopped on 'holds different settings',
    and a finished run's report replaced the committed results.json and results.csv."""
    records = tmp_path / "records"
    shutil.copytree(ROOT / "results" / "compare_verdict_cpu", records)
    committed = files(records)
    others = sum(1 for d in (records / "runs").iterdir() if d.is_dir())
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "new"
    compare.main([str(ROOT / "config" / "compare_verdict_cpu.py"), "--dtype=float32",
                  f"--out_dir={out}", f"--record_dir={records}", f"--data_dir={char_dataset}",
                  "--jobs=1", "--learning_rates=1e-3", "--seeds=1337", "--extend_rates=0",
                  "--refine_gain=0", "--eval_ood=", *TINY])
    printed = capsys.readouterr().out
    now = files(records)
    assert {k: now.get(k) for k in committed} == committed  # every committed byte as it was
    assert {str(k) for k in set(now) - set(committed)} <= {"runs/gpt-s1337/config.py",
                                                             "runs/gpt-s1337/result.json"}
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["gpt-s1337"]  # none copied in
    assert f"{others} of other runs left alone, neither read nor rewritten (" in printed, printed
    assert printed.count("note: ") == 1 and "keeps its report" in printed, printed  # (said once)
    assert (out / "results.json").exists()


def write_record(folder, config_text, result_text):
    folder.mkdir(parents=True)
    (folder / "config.py").write_text(config_text)
    (folder / "result.json").write_text(result_text)


GOOD = dict(dict.fromkeys(sweep.RESULT_KEYS, 1.0), curve=[])


@pytest.mark.parametrize("config,result,expected", [
    ("seed = 1\n", "{not json", "result.json is damaged (not JSON"),
    ("seed = 1\n", json.dumps({k: v for k, v in GOOD.items() if k != "val_loss"}),
     "result.json is damaged (no val_loss)"),
    ("seed = 1\n", json.dumps({**GOOD, "val_loss": "2.1"}), "val_loss='2.1' is not a number"),
    ("seed = 1\n", "[1, 2]", "not a dict of a run's results"),
    ("seed = (\n", json.dumps(GOOD), "config.py, line 1: not valid Python"),
    ("import os\nseed = 1\n", json.dumps(GOOD), "config.py, line 1: only assignments"),
])
def test_a_damaged_record_is_one_line_naming_its_file(tmp_path, capsys, config, result, expected):
    """A record as a merge or a hand edit leaves it: one line, exit status 1, nothing copied."""
    records, out = tmp_path / "records", tmp_path / "out"
    write_record(records / "runs" / "gpt-s1", config, result)
    out.mkdir()
    with pytest.raises(SystemExit) as stop:
        sweep.sync_records(out, records, ROOT, wanted=lambda folder, settings: True)
    message = str(stop.value.code)
    assert message.startswith("error: ") and "\n" not in message and expected in message, message
    assert str(records / "runs" / "gpt-s1") in message and list(out.iterdir()) == []


def test_a_damaged_result_in_out_dir_is_one_line_when_its_run_is_skipped(tmp_path):
    run_dir = tmp_path / "gpt-s1"
    config = {"seed": 1, "out_dir": str(run_dir)}
    write_record(run_dir, sweep.config_text(config), json.dumps({**GOOD, "tokens": None,
                                                                 "curve": "x"}))
    with pytest.raises(SystemExit) as stop:
        sweep.train_one(run_dir, config, 2, "[1/1 GPT s1]")
    assert f"{run_dir / 'result.json'} is damaged (its curve is not a list)" in str(
        stop.value.code)
