"""The training loop, checkpoints, sampling and configuration, from their command lines (run in
this process: the same arguments, exit status, stdout and stderr as a user's command)."""

import dataclasses
import math
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import ROOT, run_here
from shapelab.checkpoint import load_checkpoint, save_checkpoint
from shapelab.configurator import ConfigError, parse_overrides
from shapes import build_model, model_keys, train_defaults

TINY = ["--n_layer=2", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
        "--eval_iters=2", "--log_interval=1", "--dropout=0.1", "--dtype=float32",
        "--sample_tokens=0", "--warmup_iters=2", "--lr_decay_iters=8"]


def run(script, *args, check=True):
    """The script's command line in this process (conftest.run_here): train.py and sample.py as
    child processes, signals and all, are tests/test_edges.py's."""
    result = run_here(script, *args)
    if check and result.returncode != 0:
        raise AssertionError(f"{script} failed:\n{result.stdout}\n{result.stderr}")
    return result


def step_losses(out_dir):
    records = [json.loads(line)
               for line in (Path(out_dir) / "metrics.jsonl").read_text().splitlines()]
    return {r["iter"]: r["loss"] for r in records if "loss" in r}


def test_resume_gives_the_same_losses_as_an_uninterrupted_run(char_dataset, tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={whole}", "--max_iters=8",
        "--eval_interval=4")
    run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={part}", "--max_iters=4",
        "--eval_interval=4")
    assert load_checkpoint(part / "ckpt.pt")["iter_num"] == 4
    run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={part}", "--max_iters=8",
        "--eval_interval=4", "--init_from=resume")
    uninterrupted, resumed = step_losses(whole), step_losses(part)
    assert sorted(resumed) == list(range(8))
    for it in range(8):
        assert resumed[it] == uninterrupted[it], f"step {it}: {resumed[it]} != {uninterrupted[it]}"
    # and the final weights are identical too
    a, b = load_checkpoint(whole / "ckpt.pt"), load_checkpoint(part / "ckpt.pt")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_training_lowers_the_loss_and_sample_prints_text_from_the_checkpoint(
        char_dataset, tmp_path):
    out = tmp_path / "out"
    run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={out}", "--max_iters=60",
        "--eval_interval=60", "--learning_rate=1e-2", "--lr_decay_iters=60")
    records = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if "val_loss" in r]
    assert evals[-1]["val_loss"] < evals[0]["val_loss"] - 0.5
    assert all(r["tokens_per_s"] > 0 and r["mfu"] > 0 for r in records if "loss" in r)
    args = [f"--out_dir={out}", "--start=All:", "--num_samples=1", "--max_new_tokens=30"]
    greedy_1 = run("sample.py", *args, "--temperature=0").stdout
    greedy_2 = run("sample.py", *args, "--temperature=0", "--seed=99").stdout
    assert greedy_1 == greedy_2 and "All:" in greedy_1
    sampled = run("sample.py", *args, "--temperature=1.0", "--seed=3").stdout
    allowed = (set(json.loads((char_dataset / "meta.json").read_text())["chars"])
               | set("-()., 0123456789"))
    assert set(sampled.split("\n", 1)[1]) <= allowed | {"\n"}


def test_a_diverging_run_stops_and_says_at_which_step(char_dataset, tmp_path):
    result = run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={tmp_path / 'o'}",
                 "--max_iters=50", "--eval_interval=100", "--learning_rate=1e12", "--grad_clip=0.0",
                 "--warmup_iters=0", check=False)
    assert result.returncode != 0
    assert ("Training diverged" in result.stderr and "step " in result.stderr
            and "learning_rate" in result.stderr)


def test_train_rejects_unknown_keys_and_wrong_types():
    result = run("train.py", "--n_layr=2", check=False)
    assert result.returncode != 0 and "'n_layr'" in result.stderr and "n_layer" in result.stderr
    result = run("train.py", "--n_layer=2.5", check=False)
    assert result.returncode != 0 and "n_layer" in result.stderr and "int" in result.stderr


def test_missing_dataset_says_how_to_prepare_it(tmp_path):
    result = run("train.py", "--dataset=tinystories", f"--out_dir={tmp_path}", check=False)
    if (ROOT / "data/tinystories/train.bin").exists():
        pytest.skip("tinystories is prepared on this machine")
    assert result.returncode != 0 and "data/tinystories/prepare.py" in result.stderr


def test_configurator_checks_keys_and_types(tmp_path):
    defaults = dict(n_layer=6, learning_rate=1e-3, compile=False, device="auto", n_kv_head=None,
                    model_args={})
    got = parse_overrides(["--n_layer=4", "--learning_rate=1", "--device=cuda:1", "--n_kv_head=2",
                           "--model_args={'n_sub_blocks': 4}"], defaults)
    assert got == dict(n_layer=4, learning_rate=1.0, compile=False, device="cuda:1", n_kv_head=2,
                       model_args={"n_sub_blocks": 4})
    assert isinstance(got["learning_rate"], float)
    with pytest.raises(ConfigError, match="'n_layers'"):
        parse_overrides(["--n_layers=4"], defaults)
    with pytest.raises(ConfigError, match="compile"):
        parse_overrides(["--compile=1"], defaults)  # an int is not a bool
    with pytest.raises(ConfigError, match="n_layer"):
        parse_overrides(["--n_layer=True"], defaults)  # nor a bool an int
    with pytest.raises(ConfigError, match="--key=value|--n_layer=value"):
        parse_overrides(["--n_layer"], defaults)
    config_file = tmp_path / "c.py"
    config_file.write_text("n_layer = 3\nlearning_rate = 1e-6 ** 0.5\nbatchsize = 8\n")
    with pytest.raises(ConfigError, match="'batchsize'"):
        parse_overrides([str(config_file)], defaults)
    config_file.write_text("n_layer = 3\nlearning_rate = 1e-6 ** 0.5\n")
    assert parse_overrides([str(config_file), "--n_layer=5"], defaults)["n_layer"] == 5
    with pytest.raises(ConfigError, match="not found"):
        parse_overrides([str(tmp_path / "missing.py")], defaults)
    with pytest.raises(ConfigError, match="model_type"):
        build_model("transformer-xl")


@pytest.mark.parametrize("config_file", sorted(p for p in (ROOT / "config").glob("*.py")
                                                if not p.name.startswith(("mlp_", "compare_"))),
                         ids=lambda p: p.name)  # (mlp_*: test_train_mlp, compare_*: test_compare)
def test_every_config_file_loads_and_builds_its_model(config_file):
    defaults = train_defaults()
    cfg = parse_overrides([str(config_file)], defaults)
    meta = ROOT / "data" / cfg["dataset"] / "prepare.py"
    assert cfg["data_dir"] or meta.exists(), (
        f"{config_file.name}: no prepare script for dataset {cfg['dataset']}")
    vocab = {"shakespeare_char": 84}.get(cfg["dataset"], 50304)
    common = {k: cfg[k] for k in model_keys(cfg)}
    with torch.device("meta"):  # builds any size instantly, without memory
        model = build_model(cfg["model_type"], vocab_size=vocab, **common, **cfg["model_args"])
    assert model.param_counts()["total"] > 0


def test_train_defaults_are_every_setting_train_py_runs_with():
    """configurator.train_defaults reads train.py's settings without running it (bench.py reads
    config files through it): it must find every one, with the value train.py itself has."""
    header = (ROOT / "train.py").read_text().split("\nconfig_keys =")[0]
    namespace = {}
    exec(compile(header, "train.py", "exec"), namespace)
    executed = {k: v for k, v in namespace.items() if not k.startswith("_")
                and isinstance(v, (int, float, bool, str, dict, type(None)))}
    assert train_defaults() == executed
    # every model takes these from train.py's settings (derived from model.GPTConfig's fields)
    assert model_keys(executed) == ["block_size", "n_embd", "n_layer", "n_head", "n_kv_head",
                                    "head_dim", "ffn_hidden", "qk_norm", "tie_embeddings",
                                    "dropout"]


def test_every_config_file_named_in_the_code_and_the_docs_exists():
    """A command a reader copies from a docstring, a config comment or a doc must name a real
    config file."""
    sources = [*ROOT.glob("*.py"), *ROOT.glob("*.md"), *ROOT.glob("docs/*.md"),
               *ROOT.glob("config/*.py"), *ROOT.glob("experiments/*.py"), *ROOT.glob("data/*/*.py"),
               *ROOT.glob("data/*/*.md")]
    missing = {f"{path.relative_to(ROOT)}: {name}" for path in sources
               for name in re.findall(r"(?<![\w/])config/[\w.-]+\.py",
                                      path.read_text(encoding="utf-8"))
               if not (ROOT / name).is_file()}
    assert not missing, sorted(missing)


def test_default_config_is_the_documented_cpu_job():
    assert (ROOT / "config/train_shakespeare_char.py").exists()
    defaults = train_defaults()
    cfg = parse_overrides([str(ROOT / "config/train_shakespeare_char.py")], defaults)
    assert cfg == defaults, "config/train_shakespeare_char.py should spell out train.py's defaults"


def test_save_checkpoint_is_atomic_when_the_writer_fails(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    save_checkpoint({"step": 1, "w": torch.ones(10)}, path)

    def dying_save(obj, f):
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt  # the process is stopped mid-write
    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint({"step": 2, "w": torch.zeros(10)}, path)
    assert load_checkpoint(path)["step"] == 1


def test_a_killed_save_never_leaves_a_corrupt_checkpoint(tmp_path):
    """SIGKILL a process that saves a large checkpoint over and over; the file must always load."""
    path = tmp_path / "ckpt.pt"
    writer = (f"import sys, torch; sys.path.insert(0, {str(ROOT)!r}); "
              f"from shapelab.checkpoint import save_checkpoint\ni = 0\nwhile True:\n    i += 1\n"
              f"    save_checkpoint({{'step': i, 'w': torch.full((2_000_000,), float(i))}}, "
              f"{str(path)!r})\n")
    for delay in (0.7, 1.0, 1.3):
        proc = subprocess.Popen([sys.executable, "-c", writer])
        deadline = time.time() + 30
        while not path.exists() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        state = load_checkpoint(path)
        assert torch.all(state["w"] == float(state["step"]))


def test_a_moe_run_logs_its_auxiliary_loss_as_its_own_column(char_dataset, tmp_path):
    """metrics.jsonl has `aux_loss` (the balancing term inside `loss`) for a MoE model; none for a
    plain GPT."""
    moe, plain = tmp_path / "moe", tmp_path / "plain"
    result = run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={moe}",
                 "--max_iters=3", "--eval_interval=3", "--model_type=cea", "--dropout=0.0",
                 "--model_args={'ffn_width_ratio': 4, 'outer_ratio': 1.0, 'n_experts': 2, "
                 "'expert_hidden': 16}")
    steps = [json.loads(l) for l in (moe / "metrics.jsonl").read_text().splitlines()
             if '"loss"' in l]
    assert len(steps) == 3 and all(0 < r["aux_loss"] < r["loss"] for r in steps)
    # 0.01 x the sum over 2 layers of E sum f P <= E = 2
    assert all(r["aux_loss"] <= 0.01 * 2 * 2 for r in steps)
    assert "(aux 0.0" in result.stdout
    run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={plain}", "--max_iters=2",
        "--eval_interval=2")
    assert not any("aux_loss" in l for l in (plain / "metrics.jsonl").read_text().splitlines())


def test_stop_val_loss_stops_at_the_first_evaluation_that_reaches_it_and_saves(
        char_dataset, tmp_path):
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    args = [*TINY, f"--data_dir={char_dataset}", "--max_iters=40", "--eval_interval=5",
            "--learning_rate=1e-2", "--lr_decay_iters=40"]
    run("train.py", *args, f"--out_dir={whole}")
    evals = [json.loads(l) for l in (whole / "metrics.jsonl").read_text().splitlines()
             if "val_loss" in l]
    target = evals[3]["val_loss"] + 1e-6  # reached at step 15 at the latest
    first = next(r["iter"] for r in evals if r["val_loss"] <= target)
    result = run("train.py", *args, f"--out_dir={stopped}", f"--stop_val_loss={target}")
    assert f"reached stop_val_loss={target}" in result.stdout and "stopping" in result.stdout
    ckpt = load_checkpoint(stopped / "ckpt.pt")
    assert ckpt["iter_num"] == first and ckpt["config"]["stop_val_loss"] == target
    records = [json.loads(l) for l in (stopped / "metrics.jsonl").read_text().splitlines()]
    assert max(r["iter"] for r in records) == first and records[-1]["stopped_at_val_loss"] <= target
    # off by default: the run goes to max_iters
    assert (load_checkpoint(whole / "ckpt.pt")["iter_num"] == 40
            and train_defaults()["stop_val_loss"] == 0.0)


def one_line_error(result):
    """A user's mistake ends the run with a short message, never a traceback."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip()


def test_a_diverged_run_never_saves_its_nan_checkpoint(char_dataset, tmp_path):
    """With an evaluation every step, the first non-finite evaluation must not replace the good
    checkpoint, and the message names a checkpoint only if there is a good one."""
    out = tmp_path / "o"
    result = run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={out}",
                 "--max_iters=50", "--eval_interval=1", "--learning_rate=1e8", "--grad_clip=0.0",
                 "--warmup_iters=0", check=False)
    message = one_line_error(result)
    assert "Training diverged" in message
    ckpt = load_checkpoint(out / "ckpt.pt")
    assert all(torch.isfinite(v).all() for v in ckpt["model"].values())
    assert torch.isfinite(torch.tensor(ckpt["best_val_loss"]))
    assert ckpt["iter_num"] == 1  # lr 1e8: the evaluation at step 2 is the first non-finite one
    assert f"last good checkpoint is {out / 'ckpt.pt'} (step 1)" in message
    # with a long interval no checkpoint is ever saved: the message must not name one
    long = tmp_path / "long"
    result = run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={long}",
                 "--max_iters=50", "--eval_interval=100", "--learning_rate=1e8", "--grad_clip=0.0",
                 "--warmup_iters=0", check=False)
    assert not (long / "ckpt.pt").exists() and "ckpt.pt" not in one_line_error(result)


def test_a_scratch_run_never_replaces_a_previous_run_and_resume_leaves_no_duplicate_rows(
        char_dataset, tmp_path):
    out = tmp_path / "o"
    args = [*TINY, f"--data_dir={char_dataset}", f"--out_dir={out}", "--eval_interval=4"]
    run("train.py", *args, "--max_iters=4")
    before = (out / "ckpt.pt").read_bytes(), (out / "metrics.jsonl").read_text()
    message = one_line_error(run("train.py", *args, "--max_iters=4", "--seed=7", check=False))
    assert ("--init_from=resume" in message and "--overwrite=True" in message
            and "--out_dir" in message)
    assert len(message.splitlines()) == 1
    assert ((out / "ckpt.pt").read_bytes(), (out / "metrics.jsonl").read_text()) == before
    # an explicit overwrite starts a fresh metrics.jsonl: every step once
    run("train.py", *args, "--max_iters=4", "--overwrite=True")
    steps = [json.loads(l)["iter"] for l in (out / "metrics.jsonl").read_text().splitlines()
             if '"loss"' in l]
    assert steps == [0, 1, 2, 3]
    # a run killed after step 5, before its next checkpoint: the resume repeats steps 4 and 5
    # once only
    step4 = (out / "ckpt.pt").read_bytes()
    run("train.py", *args, "--max_iters=6", "--init_from=resume")
    (out / "ckpt.pt").write_bytes(step4)
    run("train.py", *args, "--max_iters=8", "--init_from=resume")
    records = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r["iter"] for r in records if "loss" in r]
    evals = [r["iter"] for r in records if "val_loss" in r]
    assert steps == list(range(8)) and evals == [0, 4, 8]
    whole = tmp_path / "whole"
    run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={whole}", "--eval_interval=4",
        "--max_iters=8")
    assert step_losses(out) == step_losses(whole)


def test_resume_refuses_a_shape_that_differs_from_the_checkpoint(char_dataset, tmp_path):
    out = tmp_path / "o"
    run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={out}", "--max_iters=2",
        "--eval_interval=2")
    for override in ("--n_layer=3", "--n_embd=64", "--model_type=lws", "--block_size=32"):
        message = one_line_error(run("train.py", *TINY, f"--data_dir={char_dataset}",
                                     f"--out_dir={out}", "--max_iters=4", "--init_from=resume",
                                     override, check=False))
        key = override[2:].split("=")[0]
        assert key in message and "checkpoint" in message, message
    assert load_checkpoint(out / "ckpt.pt")["iter_num"] == 2
    # without shape keys the checkpoint's shape is used, and the saved config says so
    run("train.py", f"--data_dir={char_dataset}", f"--out_dir={out}", "--max_iters=4",
        "--eval_interval=2", "--init_from=resume", "--dtype=float32", "--sample_tokens=0",
        "--eval_iters=2", "--batch_size=4")
    ckpt = load_checkpoint(out / "ckpt.pt")
    assert (ckpt["iter_num"] == 4 and ckpt["config"]["n_layer"] == 2
            and ckpt["config"]["block_size"] == 16)


def test_every_setting_has_a_type_even_when_its_default_is_none(char_dataset, tmp_path):
    for override, key in (("--compile=false", "compile"), ("--n_kv_head=two", "n_kv_head"),
                          ("--head_dim=1.5", "head_dim"), ("--ffn_hidden=True", "ffn_hidden"),
                          ("--n_layer=None", "n_layer")):
        message = one_line_error(run("train.py", *TINY, f"--data_dir={char_dataset}",
                                     f"--out_dir={tmp_path / key}", "--max_iters=0", override,
                                     check=False))
        assert f"{key}=" in message and len(message.splitlines()) == 1, message
    defaults = dict(compile=None, n_kv_head=None, n_layer=2)
    types = dict(compile=bool, n_kv_head=int)
    assert parse_overrides(["--compile=False", "--n_kv_head=1"], defaults, types=types) == dict(
        compile=False, n_kv_head=1, n_layer=2)
    assert parse_overrides(["--n_kv_head=None"], defaults, types=types)["n_kv_head"] is None
    with pytest.raises(ConfigError, match="compile"):
        parse_overrides(["--compile=false"], defaults, types=types)
    # train.py must declare a type for each None default
    with pytest.raises(ValueError, match="n_kv_head"):
        parse_overrides([], defaults, types=dict(compile=bool))


def test_the_checkpoint_keeps_its_vocabulary_for_sampling_and_resume(char_dataset, tmp_path):
    """After the dataset is re-prepared with another vocabulary, sample.py still decodes with the
    checkpoint's own, and a resume on the changed data is refused."""
    out = tmp_path / "o"
    run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={out}", "--max_iters=20",
        "--eval_interval=20", "--learning_rate=1e-2", "--lr_decay_iters=20")
    args = [f"--out_dir={out}", "--start=All:", "--num_samples=1", "--max_new_tokens=30",
            "--temperature=0"]
    before = run("sample.py", *args).stdout
    meta = json.loads((char_dataset / "meta.json").read_text())
    # same size, other ids
    (char_dataset / "meta.json").write_text(json.dumps(dict(meta, chars=meta["chars"][::-1])))
    assert run("sample.py", *args).stdout == before
    message = one_line_error(run("train.py", *TINY, f"--data_dir={char_dataset}",
                                 f"--out_dir={out}", "--max_iters=30", "--init_from=resume",
                                 check=False))
    assert "meta.json" in message and "vocabulary" in message
    for bad, key in (("--temperature=-1.0", "temperature"), ("--top_k=-5", "top_k"),
                     ("--num_samples=0", "num_samples")):
        message = one_line_error(run("sample.py", f"--out_dir={out}", bad, "--max_new_tokens=5",
                                     check=False))
        assert key in message and len(message.splitlines()) == 1, message


# Runs train.py under torchrun; after it, each process prints the threads it still has. Rank
# `FAIL_RANK` (if set) raises at its 6th optimizer step, as a rank that fails does. With
# SNAPSHOT_AT=<step>:<folder>, rank 0 copies its run folder there once that step's checkpoint is
# saved: the run as a stop right after that checkpoint leaves it.
RANK_LAUNCHER = r'''
import os, runpy, shutil, sys, torch
sys.path.insert(0, sys.argv[1])
sys.argv = sys.argv[2:]
if os.environ["RANK"] == "0" and os.environ.get("SNAPSHOT_AT"):
    from shapelab.run import RunDir
    step, folder = os.environ["SNAPSHOT_AT"].split(":", 1)
    real_save = RunDir.save
    def save(self, state):
        real_save(self, state)
        if state["iter_num"] == int(step):
            shutil.copytree(self.dir, folder, ignore=shutil.ignore_patterns("run.lock"))
    RunDir.save = save
if os.environ["RANK"] == os.environ.get("FAIL_RANK"):
    calls, real_step = [0], torch.optim.AdamW.step
    def step(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == 6:
            raise ValueError("this rank fails")
        return real_step(self, *args, **kwargs)
    torch.optim.AdamW.step = step
runpy.run_path(sys.argv[0], run_name="__main__")
threads = sorted(open(f"/proc/self/task/{t}/comm").read().strip()
                 for t in os.listdir("/proc/self/task"))
print(f"rank {os.environ['RANK']} ends with threads {threads}")
'''


def torchrun(data, out, *extra, launcher=None, env=None):
    prefix = [str(launcher), str(ROOT)] if launcher else []
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         *prefix, str(ROOT / "train.py"), *TINY, f"--data_dir={data}", f"--out_dir={out}",
         "--eval_interval=4", "--gradient_accumulation_steps=2", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


def test_ddp_resume_gives_the_same_losses_as_an_uninterrupted_ddp_run(char_dataset, tmp_path):
    """Two gloo processes: each rank's batch sampler and dropout RNG are saved and each rank gets
    its own back. At the end each process has destroyed its process group, gloo's threads joined
    (left to the interpreter's exit, they met "terminate called without an active exception").
    The resumed run starts from a copy of the uninterrupted run's folder as its step-4 checkpoint
    left it (one torchrun less than training a stopped run of its own)."""
    whole, part = tmp_path / "whole", tmp_path / "part"
    launcher = tmp_path / "ranks.py"
    launcher.write_text(RANK_LAUNCHER)
    for out, extra, env in ((whole, ["--max_iters=8"], {"SNAPSHOT_AT": f"4:{part}"}),
                            (part, ["--max_iters=8", "--init_from=resume"], {})):
        result = torchrun(char_dataset, out, *extra, launcher=launcher, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        ends = re.findall(r"rank \d ends with threads \[[^]]*\]", result.stdout)
        assert len(ends) == 2 and not any("gloo" in end for end in ends), ends
        if out == whole:  # (the copy: the steps before the checkpoint, none after)
            assert load_checkpoint(part / "ckpt.pt")["iter_num"] == 4
            assert sorted(step_losses(part)) == list(range(4))
    assert step_losses(part) == step_losses(whole) and sorted(step_losses(part)) == list(range(8))
    a, b = load_checkpoint(whole / "ckpt.pt"), load_checkpoint(part / "ckpt.pt")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_a_failing_ddp_rank_gets_its_traceback_and_rank_0_one_line(char_dataset, tmp_path):
    """Rank 1 fails at its 6th step; torchrun then stops rank 0 (SIGTERM). Rank 1's own error is
    shown; rank 0 says in one line that another process stopped and how to go on, with no
    traceback of its own, no "interrupted", and no wait."""
    launcher = tmp_path / "ranks.py"
    launcher.write_text(RANK_LAUNCHER)
    start = time.time()
    result = torchrun(char_dataset, tmp_path / "o", "--max_iters=100", launcher=launcher,
                      env={"FAIL_RANK": "1"})
    assert result.returncode != 0 and time.time() - start < 60
    assert "ValueError: this rank fails" in result.stderr
    rank0 = [line for line in result.stderr.splitlines() if line.startswith("[rank0]")]
    assert rank0 == [f"[rank0]: error: another process of this torchrun run stopped (its message "
                     f"is above): the last checkpoint is {tmp_path / 'o' / 'ckpt.pt'} (step 4); "
                     f"continue the run with: torchrun --standalone --nproc_per_node=2 "
                     f"{ROOT / 'train.py'} {' '.join(TINY)} --data_dir={char_dataset} "
                     f"--out_dir={tmp_path / 'o'} --eval_interval=4 "
                     f"--gradient_accumulation_steps=2 --max_iters=100 --init_from=resume"], rank0


def _spoil(data_dir, what):
    """Damage a prepared dataset one way."""
    meta = json.loads((data_dir / "meta.json").read_text())
    if what == "no meta":
        (data_dir / "meta.json").unlink()
    elif what == "bad json":
        (data_dir / "meta.json").write_text("{not json")
    elif what == "no chars":
        (data_dir / "meta.json").write_text(
            json.dumps({k: v for k, v in meta.items() if k != "chars"}))
    elif what == "odd size":
        with open(data_dir / "val.bin", "ab") as f:
            f.write(b"\0")
    elif what == "short split":  # a split prepared with only 16 tokens
        (data_dir / "val.bin").write_bytes((data_dir / "val.bin").read_bytes()[:2 * 16])
        meta["splits"]["val"]["tokens"] = 16
        (data_dir / "meta.json").write_text(json.dumps(meta))
    elif what == "even truncation":
        # cut short after prepare: an even length, so no odd byte shows it
        (data_dir / "train.bin").write_bytes((data_dir / "train.bin").read_bytes()[:2 * 1000])
    elif what == "duplicate chars":
        (data_dir / "meta.json").write_text(json.dumps(dict(meta, chars="a" + meta["chars"][1:])))
    elif what == "id too large":
        (data_dir / "meta.json").write_text(
            json.dumps(dict(meta, vocab_size=5, chars=meta["chars"][:5])))


# every mistake a user can make in a setting or in the data, and the one line it gets
BAD_INPUTS = [
    (["--batch_size=0"], None, "batch_size=0: it must be 1 or more"),
    (["--eval_interval=0"], None, "eval_interval=0: it must be 1 or more"),
    (["--log_interval=-1"], None, "log_interval=-1: it must be 1 or more"),
    (["--eval_iters=0"], None, "eval_iters=0: it must be 1 or more"),
    (["--gradient_accumulation_steps=0"], None,
     "gradient_accumulation_steps=0: it must be 1 or more"),
    (["--dtype=fp32"], None, "dtype='fp32': use one of auto, float32, bfloat16, float16"),
    (["--device=cuda"], None, "no CUDA GPU"),
    (["--init_from=restart"], None, "init_from='restart': use 'scratch' or 'resume'"),
    (["--compile=false"], None, "compile='false' is a str, but compile must be a bool"),
    (["--n_kv_head=two"], None, "n_kv_head='two' is a str, but n_kv_head must be a int"),
    (["--n_layr=2"], None, "Did you mean n_layer"),
    ([], "no meta", "is not prepared"),
    ([], "bad json", "meta.json is not valid JSON"),
    ([], "no chars", "meta.json does not describe a tokenizer"),
    ([], "odd size", "not a whole number of uint16"),
    ([], "short split", "fewer than block_size + 1"),
    ([], "even truncation", "holds 1,000 tokens, but"),
    ([], "duplicate chars", "meta.json does not describe a tokenizer"),
    ([], "id too large", "says vocab_size=5"),
]


@pytest.mark.parametrize("args,spoil,expected", BAD_INPUTS, ids=[b[2][:30] for b in BAD_INPUTS])
def test_a_bad_setting_or_dataset_gets_one_line_before_anything_is_built(
        char_dataset, tmp_path, args, spoil, expected):
    if expected == "no CUDA GPU" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    if spoil:
        _spoil(char_dataset, spoil)
    result = run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={tmp_path / 'o'}",
                 "--max_iters=2", *args, check=False)
    message = one_line_error(result)
    assert expected in message and len(message.splitlines()) == 1, message
    assert not (tmp_path / "o" / "ckpt.pt").exists() and "step 0" not in result.stdout


def test_help_prints_the_docstring_and_every_setting(tmp_path):
    for script in ("train.py", "train_mlp.py"):
        run = run_here(script, "--help", cwd=tmp_path)
        assert run.returncode == 0 and "--batch_size=" in run.stdout, run.stderr
        assert "top to bottom" in run.stdout and not (tmp_path / "out").exists()


def test_help_says_what_each_setting_means_and_lists_every_model_type(tmp_path):
    """Beside each default, --help prints the comment next to it in the script; train.py explains
    every setting, and its --help names every model type with the model_args it takes."""
    from shapes import MODELS, model_classes
    for script in ("train.py", "sample.py", "train_mlp.py"):
        settings = (ROOT / script).read_text().split("\n# ----")[1]  # the block of defaults
        comments = dict(re.findall(r"^(\w+) = .*?  # (.*)$", settings, flags=re.M))
        shown = run_here(script, "--help")
        assert shown.returncode == 0, shown.stderr
        flat = " ".join(shown.stdout.split())  # (long meanings are wrapped)
        for key, comment in comments.items():
            assert f"--{key}=" in flat and " ".join(comment.split()) in flat, (script, key)
        if script != "train_mlp.py":  # (train.py and sample.py: every setting has its comment)
            keys = set(re.findall(r"^  --(\w+)=", shown.stdout, flags=re.M))
            assert keys and keys <= set(comments), keys - set(comments)
        if script == "train.py":
            assert "the peak learning rate" in comments["learning_rate"]
            assert set(train_defaults()) <= set(comments), set(train_defaults()) - set(comments)
            types = " ".join(shown.stdout.split("model types")[1].split())
            gpt_fields = {f.name for f in dataclasses.fields(model_classes("gpt")[1])}
            for name, (model_cls, _, _) in MODELS.items():  # each with its config's own fields
                own = [f.name for f in dataclasses.fields(model_classes(name)[1])
                       if f.init and f.name not in gpt_fields]
                file = f"{model_cls.__module__}.py"
                assert f" {name} ({file}) {', '.join(own) or '(none'}" in types, name


@pytest.mark.parametrize("model_type", ["hourglass", "variable_width", "cea", "lws", "composed"])
def test_a_bare_model_type_builds_that_mechanism_matched_to_the_gpt(model_type):
    """--model_type=X without model_args is X's own shape (compare.py's matching) within 10% of
    the budget of the GPT the other settings describe, and not that GPT under another name."""
    from shapes import matched_model_args

    baseline = dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128)
    args = matched_model_args(model_type, baseline)
    with torch.device("meta"):
        gpt, model = build_model("gpt", **baseline), build_model(model_type, **args)
    assert abs(model.budget() / gpt.budget() - 1) < 0.10
    differs = [k for k in args if baseline.get(k) != args[k]]
    assert differs, f"{model_type}: the plain GPT's settings"
    assert model.state_dict().keys() != gpt.state_dict().keys() or model.config.layers != (
        gpt.config.layers)


def test_train_py_prints_the_shape_of_a_bare_model_type_and_saves_it(char_dataset, tmp_path):
    out = tmp_path / "out"
    result = run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={out}",
                 "--n_embd=128", "--n_head=4", "--max_iters=1", "--eval_interval=1",
                 "--model_type=hourglass")
    assert "HourglassGPT matched to the GPT of these settings" in result.stdout
    assert "budget (non-embedding parameters):" in result.stdout and "the GPT's" in result.stdout
    saved = load_checkpoint(out / "ckpt.pt")["model_args"]
    assert saved["n_sub_blocks"] == 4 and saved["bottleneck_dim"] < saved["n_embd"]


def test_under_a_time_limit_the_learning_rate_is_the_schedule_over_the_planned_length(
        char_dataset, tmp_path, monkeypatch):
    """get_lr reads the step and the planned length, nothing of the plan: every logged rate of a
    time-limited run is nanoGPT's warm-up + cosine over the max_iters the plan had at that step
    (its checkpoint's decisions), the warm-up shortened to a fifth of a short plan. (The run's
    monotonic clock advances 10 ms at each reading: the same run on a busy machine.)"""
    from shapelab.run import read_jsonl

    readings = iter(range(10 ** 9))
    monkeypatch.setattr(time, "monotonic", lambda: 0.01 * next(readings))
    out = tmp_path / "o"
    run("train.py", *TINY, f"--data_dir={char_dataset}", f"--out_dir={out}", "--max_iters=0",
        "--max_minutes=0.05", "--lr_decay_iters=0", "--warmup_iters=10", "--eval_interval=5")
    monkeypatch.undo()
    decisions = load_checkpoint(out / "ckpt.pt")["time_plan"]["decisions"]
    peak, floor = train_defaults()["learning_rate"], train_defaults()["min_lr"]

    def expected(step):
        length = [planned for at, planned, _ in decisions if at <= step][-1]
        warmup = min(10, length // 5)
        if step < warmup:
            return peak * (step + 1) / (warmup + 1)
        ratio = min(1.0, (step - warmup) / (length - warmup))
        return floor + 0.5 * (1 + math.cos(math.pi * ratio)) * (peak - floor)
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "lr" in r]
    assert len(rows) >= 20 and len(decisions) >= 2 and decisions[0][0] == 0
    for r in rows:
        assert r["lr"] == pytest.approx(expected(r["iter"]), rel=1e-9), r
