"""gpu_check.py: every part on the CPU, a FAIL and its line, no CUDA, the recompile count."""

import re
import subprocess
import sys

import pytest
import torch
from conftest import ROOT

import gpu_check


def test_every_part_runs_on_the_cpu_with_tiny_shapes(char_dataset, tmp_path):
    proc = subprocess.run([sys.executable, "gpu_check.py", "--device=cpu", "--tiny",
                           f"--data_dir={char_dataset}", f"--out_dir={tmp_path}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert all(f"\n| {part} | PASS | " in proc.stdout for part in gpu_check.PARTS)
    assert re.search(r"\| resume \| PASS \| killed after the step-(\d+) checkpoint; resumed at "
                     r"step \1 ", proc.stdout)
    assert re.search(r"\| train \| PASS \| .*ms/iter.*0 recompiles after step 5 ", proc.stdout)
    assert all((tmp_path / f"{part}.log").stat().st_size for part in gpu_check.PARTS[1:])


def test_a_failing_part_is_fail_with_its_error_line(char_dataset, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:  # no checkpoint to sample from
        gpu_check.main(["--device=cpu", "--tiny", "--parts=sample,data",
                        f"--data_dir={char_dataset}", f"--out_dir={tmp_path}"])
    out = capsys.readouterr().out
    assert stop.value.code == 1 and "\n| data | PASS | " in out
    assert "\n| sample | FAIL | exit 1: error: no checkpoint at" in out


def test_no_cuda_or_an_unknown_part_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for argv, why in (([], "no CUDA GPU"), (["--parts=train,bogus"], "--parts: unknown")):
        with pytest.raises(SystemExit):
            gpu_check.main(argv)
        err = capsys.readouterr().err
        assert why in err and err.count("\n") == 1 and err.endswith("--tiny\n")


def test_recompiles_are_counted_after_the_warm_up_steps():
    log = ("iter 0/9: loss 4.2\nRecompiling function forward\niter 10/9: loss 3.9\nRecompiling "
           "function forward\ntorch._dynamo hit config.recompile_limit (8)\niter 20/9: loss 3\n")
    assert gpu_check.recompiles_after(log, 10) == 2 and gpu_check.recompiles_after(log, 20) == 0
