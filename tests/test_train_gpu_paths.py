"""train.py's and sample.py's GPU code paths, checked on a CPU.

No GPU here, so each test runs the real script with what a GPU run would differ in faked
(tests/gpu_fakes.py: torch.cuda's answers, torch.compile, torch.load's device, the peak FLOP/s) and
records what the script did: which device the checkpoint was mapped to, which dtype dtype=auto
picked, what was compiled, how often the training step made the host wait, what MFU it logged."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT, run_here
from gpu_fakes import fake
from shapelab.checkpoint import load_checkpoint
from shapes import build_model, model_keys

TINY = ["--n_layer=2", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
        "--eval_iters=2", "--log_interval=1", "--dropout=0.1", "--dtype=float32",
        "--sample_tokens=0", "--warmup_iters=2", "--lr_decay_iters=8"]

# torchrun's processes: each applies the patches named in $PATCHES (tests/gpu_fakes.py), then
# runs the script as `python <script> args...` would; their report goes to $REPORT at the end.
LAUNCHER = r'''
import atexit, json, os, runpy, sys
root, tests, script = sys.argv[1:4]
sys.path[:0] = [root, tests]
from gpu_fakes import fake
report = {}
atexit.register(lambda: open(os.environ["REPORT"], "w").write(json.dumps(report)))
fake(os.environ["PATCHES"].split(","), report, script, setattr)
sys.argv = [script, *sys.argv[4:]]
runpy.run_path(script, run_name="__main__")
'''


def launch(script, *args, patches=(), nproc=0, check=True, workdir):
    """Run `python <script> args` in this process (conftest.run_here: the script's start is not
    what these tests check), or under torchrun with nproc processes (through LAUNCHER), with the
    GPU fakes `patches`; return (CompletedProcess, the report of what the script did)."""
    if not nproc:
        report = {}
        with pytest.MonkeyPatch.context() as patch:
            fake(patches, report, str(ROOT / script), patch.setattr)
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # (a module's fixture comes before conftest's one thread)
            try:
                result = run_here(script, *args)
            finally:
                torch.set_num_threads(threads)
    else:
        launcher, path = workdir / "launch.py", workdir / "report.json"
        launcher.write_text(LAUNCHER)
        env = {**os.environ, "PATCHES": ",".join(patches), "REPORT": str(path),
               "OMP_NUM_THREADS": "1"}
        result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                 f"--nproc_per_node={nproc}", str(launcher), str(ROOT),
                                 str(ROOT / "tests"), str(ROOT / script), *map(str, args)],
                                cwd=ROOT, capture_output=True, text=True, timeout=180, env=env)
        report = json.loads(path.read_text()) if path.exists() else {}
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result, report


@pytest.fixture(scope="module")
def gpt2_run(tmp_path_factory):
    """One tiny run on a dataset in the GPT-2 BPE format (uint16 ids below 50257, meta.json saying
    gpt2), with its closing sample: (data_dir, out_dir, the launcher's report). Later tests resume
    and sample it."""
    root = tmp_path_factory.mktemp("gpt2")
    data_dir, out = root / "data", root / "out"
    data_dir.mkdir()
    rng = np.random.default_rng(0)
    splits = {}
    for split, n in (("train", 4000), ("val", 600)):
        ids = rng.integers(0, 300, n).astype(np.uint16)
        ids[::97] = 50256  # <|endoftext|>, the largest id
        ids.tofile(data_dir / f"{split}.bin")
        splits[split] = {"tokens": n, "max_id": 50256}
    (data_dir / "meta.json").write_text(json.dumps({"tokenizer": "gpt2", "vocab_size": 50257,
                                                    "source": "test", "splits": splits}))
    _, report = launch("train.py", *TINY, "--n_embd=16", f"--data_dir={data_dir}",
                       f"--out_dir={out}", "--max_iters=2", "--eval_interval=2",
                       "--sample_tokens=40", patches=("sample_vocab", "scaler"), workdir=root)
    return data_dir, out, report


def test_gpt2_vocabulary_is_padded_and_the_padding_ids_are_never_sampled(gpt2_run):
    _, out, report = gpt2_run
    ckpt = load_checkpoint(out / "ckpt.pt")
    assert (ckpt["model_args"]["vocab_size"] == 50304
            and ckpt["model"]["tok_emb.weight"].shape[0] == 50304)
    assert ckpt["meta"]["vocab_size"] == 50257
    assert report["generate_vocab_size"] == 50257 and report["largest_sampled_id"] < 50257, report
    # sample.py passes it as well
    assert "vocab_size=tokenizer.vocab_size" in (ROOT / "sample.py").read_text()


def test_sample_on_a_gpu_maps_the_checkpoint_to_the_cpu_moves_only_the_model_and_fp16_on_a_t4(
        gpt2_run, tmp_path):
    """On a GPU, sample.py must not put the optimizer state (or anything but the model) on the
    device: the checkpoint is read to the CPU and only the model is moved. On a T4 (bf16 only
    emulated) dtype=auto is float16."""
    _, out, _ = gpt2_run
    _, report = launch("sample.py", f"--out_dir={out}", "--device=cuda",
                       patches=("fake_cuda", "load", "stop_after_load"), workdir=tmp_path)
    assert report["map_location"] == ["cpu"] and report["devices"] == ["cpu"], report
    assert report["has_optimizer"] is False and report["dtype"] == "float16", report


def test_train_dtype_auto_picks_float16_where_bf16_is_only_emulated(tmp_path):
    """A T4 / V100 reports bf16 support through emulation; dtype=auto must choose
    float16 (+ GradScaler)."""
    result, _ = launch("train.py", "--device=cuda", "--dataset=no_such_dataset",
                       f"--out_dir={tmp_path / 'o'}", patches=("fake_cuda",), check=False,
                       workdir=tmp_path)
    assert "device cuda, float16," in result.stdout, result.stdout + result.stderr


def test_a_resume_loads_to_the_cpu_and_no_training_step_syncs_between_log_steps(
        gpt2_run, tmp_path):
    """The resume (train.py's, and compare.py's, which runs train.py) reads the checkpoint to the
    CPU, so the RNG states it restores are CPU ByteTensors as torch.set_rng_state requires, and a
    float16 run's loss scale (the GradScaler's state) is saved and restored. Between log steps
    train.py never calls .item(), .tolist(), bool(), float(), .cpu()... on a tensor: on a GPU each
    would make the host wait for the device every step."""
    data_dir, out, _ = gpt2_run
    _, report = launch("train.py", *TINY, "--n_embd=16", f"--data_dir={data_dir}",
                       f"--out_dir={out}", "--init_from=resume", "--max_iters=10",
                       "--eval_interval=100", "--log_interval=4",
                       patches=("load", "count_syncs", "scaler"), workdir=tmp_path)
    assert report["map_location"] == ["cpu"] and report["rng_state"], report
    assert all(state == ["cpu", "torch.uint8"] for state in report["rng_state"]), report  # (the
    # resume's, and the timed passes' at the start, which put torch's state back as it was)
    assert report["scaler_loaded"] == [{"scale": 512.0, "growth_factor": 2.0,
                                        "backoff_factor": 0.5, "growth_interval": 2000,
                                        "_growth_tracker": 7}], report
    # syncs[k]: from the end of the k-th optimizer step before to the end of this one
    syncs = report["syncs_per_step"]
    assert len(syncs) == 9, syncs  # steps 2..9, then the final evaluation
    # log steps are 4 and 8 (k = 2, 6): their loss.item() lands in syncs[3] and syncs[7]; every
    # other step is quiet
    assert [syncs[k] for k in (1, 2, 4, 5, 6)] == [0] * 5, syncs
    assert syncs[3] > 0 and syncs[7] > 0, syncs  # the counter does see the log steps


def test_ddp_with_torchrun_on_cpu_compiles_after_wrapping_and_logs_mfu_per_card(
        char_dataset, tmp_path):
    """Two processes with the gloo backend train and save one checkpoint. torch.compile gets the DDP
    module (so all-reduce overlaps backward), and the MFU in metrics.jsonl is one process's FLOPs
    per second against one card's peak (the 1-process definition), while tokens/s counts both
    processes."""
    out = tmp_path / "ddp"
    result, report = launch("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={out}",
                            "--max_iters=4", "--eval_interval=4", "--gradient_accumulation_steps=2",
                            "--compile=True", patches=("compile", "peak"), nproc=2,
                            workdir=tmp_path)
    assert "2 process(es)" in result.stdout
    ckpt = load_checkpoint(out / "ckpt.pt")
    assert ckpt["iter_num"] == 4
    # (both processes write the one report; either compiled the DDP module first, then the plain
    # one for eval)
    assert report["compiled"] == ["DistributedDataParallel", "GPT"], report
    keys = ("vocab_size", *model_keys(ckpt["model_args"]))
    model = build_model("gpt", **{k: ckpt["model_args"][k] for k in keys})
    flops_per_token = 3 * model.flops_per_token(16)
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()
             if '"loss"' in line]
    assert len(steps) == 4
    for r in steps:
        assert r["mfu"] == pytest.approx(flops_per_token * r["tokens_per_s"] / 2 / 1e12,
                                         rel=1e-3), r
    assert "per card" in result.stdout


def test_a_missing_dataset_under_torchrun_is_one_line(tmp_path):
    if (ROOT / "data/tinystories/meta.json").exists():
        pytest.skip("tinystories is prepared on this machine")
    result, _ = launch("train.py", "--dataset=tinystories", f"--out_dir={tmp_path / 'o'}",
                       "--device=cpu", "--gradient_accumulation_steps=2", nproc=2, check=False,
                       workdir=tmp_path)
    assert result.returncode != 0
    # what follows is torchrun's own report of the failed process
    ours = result.stderr.split("Traceback")[0]
    assert ("FileNotFoundError" not in result.stderr
            and "File \"" not in ours.replace(str(ROOT / "train.py"), ""))
    line = (f"error: dataset 'tinystories' is not prepared "
            f"({ROOT / 'data/tinystories/meta.json'} is missing): "
            f"run: python {ROOT / 'data/tinystories/prepare.py'}")
    # the same one line from each process (they may interleave)
    assert ours.count(line) == 2, result.stderr


def test_compile_is_on_by_default_only_on_a_cuda_gpu_whose_torch_has_triton(monkeypatch):
    """PyTorch's Windows wheels come without Triton, torch.compile's GPU backend: a Windows laptop
    with an NVIDIA GPU trains uncompiled by default instead of failing at its first step."""
    import importlib.util

    from shapelab import hardware
    real_find_spec = importlib.util.find_spec
    for triton in (real_find_spec("json"), None):  # (any module's spec stands for Triton's)
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: (
            triton if name == "triton" else real_find_spec(name, *args)))
        assert hardware.compiles_by_default("cuda") is (triton is not None)
        assert not hardware.compiles_by_default("cpu") and not hardware.compiles_by_default("mps")
