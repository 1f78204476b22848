"""gpu_check.py: the CPU-safe form runs every part and prints the table; a failing part is reported
with its last error line while the rest goes on; no CUDA means one line, not a traceback."""

import re
import subprocess
import sys

import pytest
import torch
from conftest import ROOT

import gpu_check

PARTS = ["data", "bench", "train", "resume", "torchrun", "fp16", "sample"]


def table_rows(output):
    """{part: (result, figure)} of the final markdown table."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in PARTS:
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def test_every_part_runs_on_the_cpu_with_tiny_shapes_and_prints_the_table(char_dataset, tmp_path):
    out_dir = tmp_path / "check"
    proc = subprocess.run([sys.executable, "gpu_check.py", "--device=cpu", "--tiny",
                           f"--data_dir={char_dataset}", f"--out_dir={out_dir}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| part | result | figure | seconds |" in proc.stdout and "\ndevice: CPU" in proc.stdout
    rows = table_rows(proc.stdout)
    assert list(rows) == PARTS and all(result == "PASS" for result, _ in rows.values()), rows
    assert "tok/s" in rows["bench"][1] and "0 after step" in rows["train"][1]
    assert re.search(r"killed after the step-(\d+) checkpoint; resumed at step \1 ",
                     rows["resume"][1])
    assert "1 process" in rows["torchrun"][1]
    assert "float32 (float16 needs CUDA)" in rows["fp16"][1] and "50 tokens" in rows["sample"][1]
    for part in PARTS[1:]:  # every child's output is kept
        assert (out_dir / f"{part}.log").stat().st_size > 0
    assert (out_dir / "resume.log").read_text().count("(killed)") == 1


def test_a_failing_part_is_fail_with_its_last_error_line_and_the_rest_goes_on(
        char_dataset, tmp_path, capsys):
    # sample before train: there is no checkpoint to sample from
    with pytest.raises(SystemExit) as exit_info:
        gpu_check.main(["--device=cpu", "--tiny", "--parts=sample,data",
                        f"--data_dir={char_dataset}", f"--out_dir={tmp_path}"])
    assert exit_info.value.code == 1
    rows = table_rows(capsys.readouterr().out)
    assert rows["sample"][0] == "FAIL" and "exit 1: error: no checkpoint at" in rows["sample"][1]
    assert rows["data"][0] == "PASS"


def test_no_cuda_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match=r"^error: device='cuda', but this machine has no CUDA "
                                         r"GPU \(torch \S+ sees none\).*--tiny$"):
        gpu_check.main([])
    with pytest.raises(SystemExit, match="--parts: unknown"):
        gpu_check.main(["--parts=train,bogus"])


def test_recompiles_are_counted_after_the_warm_up_steps():
    log = ("step 0: train loss 4.2, val loss 4.2\n"
           "V1122 guards.py:5396] [0/1] [__recompiles] Recompiling function forward in "
           "model.py:390\n"
           "iter 0: loss 4.2\n"
           "iter 10: loss 3.9\n"
           "V1122 guards.py:5396] [0/2] [__recompiles] Recompiling function forward in "
           "model.py:390\n"
           "W1122 convert_frame.py] torch._dynamo hit config.recompile_limit (8)\n"
           "iter 20: loss 3.5\n")
    assert gpu_check.count_recompiles(log, 10) == (1, 2)
    quiet = log.split("iter 10")[0] + "iter 10: loss 3.9\niter 20: loss 3.5\n"
    assert gpu_check.count_recompiles(quiet, 10) == (1, 0)
    with pytest.raises(gpu_check.PartFailed, match="no log line for step 30"):
        gpu_check.count_recompiles(log, 30)
    assert gpu_check.error_line(
        "ok\nTraceback (most recent call last):\nValueError: bad\n  \n") == "ValueError: bad"
