"""gpu_check.py on the CPU with tiny shapes: each part PASS, a FAIL and its line, no CUDA, the
recompile count."""

import pytest
import torch

import gpu_check


def test_the_parts_run_on_the_cpu_and_a_failing_one_is_fail_with_its_error_line(
        char_dataset, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:  # the first sample has no checkpoint to sample from
        gpu_check.main(["--device=cpu", "--tiny", "--parts=sample,bench,train,sample",
                        f"--data_dir={char_dataset}", f"--out_dir={tmp_path}"])
    out = capsys.readouterr().out
    assert stop.value.code == 1, out
    assert "\n| sample | FAIL | exit 1: error: no checkpoint at" in out
    assert all(f"\n| {part} | PASS | " in out for part in ("bench", "train", "sample"))
    assert "| train | PASS | 30 steps: val loss " in out and "0 recompiles after step 5" in out


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
