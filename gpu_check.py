"""
The GPU check: what a first GPU user runs once, to see that every CUDA path of this repo works and
how fast it is (about 11 minutes on one H100, most of it compiling).

    python gpu_check.py                          # every part, on the first CUDA GPU
    python gpu_check.py --parts=train,sample     # some of the parts
    python gpu_check.py --device=cpu --tiny      # every part on the CPU, tiny shapes (~1 min)

Each part runs the repo's own commands as a user types them and ends PASS or FAIL, a FAIL with its
last error line, and the rest goes on. Then a markdown table of the parts, and exit status 1 if
one failed; every command's output is in out-gpu-check/<part>.log. Options: --out_dir, --data_dir
(a prepared char dataset), --train_iters (300), --bench_batch_size (8).

    data      data/shakespeare_char prepared
    bench     bench.py on the GPU preset's shapes, compiled, native bf16 (else fp16): no OOM
    train     train.py under TORCH_LOGS=recompiles: the loss falls, no recompile after warm-up
    resume    a run killed (SIGKILL) after its first checkpoint goes on from the checkpoint's step
    torchrun  a 1-process torchrun (DDP, NCCL): the loss falls
    fp16      dtype=float16, the GradScaler path: the loss falls (float32 on a CPU)
    sample    sample.py from the train part's checkpoint
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import torch

from shapelab.checkpoint import load_checkpoint
from shapelab.configurator import ConfigError, check_device, need, parse_overrides, usage_error
from shapelab.hardware import auto_dtype, pick_device

ROOT = Path(__file__).resolve().parent
PARTS = ("data", "bench", "train", "resume", "torchrun", "fp16", "sample")
OPTIONS = dict(device="cuda", tiny=False, parts=",".join(PARTS), out_dir="out-gpu-check",
               data_dir="", train_iters=300, bench_batch_size=8)
TINY_MODEL = ["--n_layer=2", "--n_head=2", "--n_embd=32", "--block_size=32", "--batch_size=8",
              "--dropout=0.0", "--learning_rate=1e-2", "--eval_iters=2", "--dtype=float32",
              "--compile=False", "--warmup_iters=2", "--log_interval=5"]


class PartFailed(Exception):
    """A part's check failed: the message is the table's figure."""


def error_line(output):
    """The last line naming an error, else the last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()] or ["(no output)"]
    return next((line for line in reversed(lines) if re.search(r"[Ee]rror|Traceback|Killed",
                                                                line)), lines[-1])


def run(c, part, args, **env):
    """The output of `python args` in the repo root, also kept in out_dir/<part>.log; a command
    that fails or runs past 10 minutes is a PartFailed with its last error line."""
    try:
        proc = subprocess.run([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=600,
                              env=dict(os.environ, PYTHONUNBUFFERED="1", **env))
    except subprocess.TimeoutExpired:
        raise PartFailed(f"python {args[0]} ran past 10 minutes") from None
    with open(Path(c["out_dir"]) / f"{part}.log", "a") as log:
        log.write(f"$ python {' '.join(args)}\n{proc.stdout}\n")
    if proc.returncode:
        raise PartFailed(f"exit {proc.returncode}: {error_line(proc.stdout)}")
    return proc.stdout


def train_args(c, name, iters, *extra):
    every = 10 if c["tiny"] else 50
    return ["train.py", "config/train_shakespeare_char_gpu.py", f"--device={c['device']}",
            f"--out_dir={Path(c['out_dir']) / name}", f"--max_iters={iters}",
            f"--lr_decay_iters={iters}", f"--eval_interval={every}", "--sample_tokens=0",
            "--overwrite=True", *([f"--data_dir={c['data_dir']}"] if c["data_dir"] else []),
            *(TINY_MODEL if c["tiny"] else ["--eval_iters=20", "--log_interval=10"]), *extra]


def loss_falls(output):
    """'val loss first -> last' of train.py's evaluations, the last 10% below the first."""
    losses = [float(v) for v in re.findall(r"^step \d+: train loss \S+, val loss (\S+)$", output,
                                           re.M)]
    if len(losses) < 2 or not losses[-1] <= 0.9 * losses[0]:
        raise PartFailed(f"val loss {losses}: it did not fall by 10%; {error_line(output)}")
    return f"val loss {losses[0]:.3f} -> {losses[-1]:.3f}"


def recompiles_after(output, step):
    """The recompiles TORCH_LOGS=recompiles reports after train.py's log line of `step` (before
    it: compiling for training and evaluation), a recompile limit hit counted as one."""
    warm = re.search(rf"^iter {step}/", output, re.M)
    if warm is None:
        raise PartFailed(f"no log line for step {step}: {error_line(output)}")
    return len(re.findall(r"Recompiling function|hit config\.recompile_limit",
                          output[warm.start():]))


def check_data(c):
    folder = Path(c["data_dir"] or ROOT / "data" / "shakespeare_char")
    if not (folder / "meta.json").exists():
        run(c, "data", ["data/shakespeare_char/prepare.py"])
    return f"vocabulary {json.loads((folder / 'meta.json').read_text())['vocab_size']}"


def check_bench(c):
    record = Path(c["out_dir"]) / "bench.json"
    if c["tiny"]:  # two config files: matching the preset's shapes takes longer than this check
        shapes = ["config/train_shakespeare_char.py", "config/cea_shakespeare_char_cea.py",
                  "--modes=eager", "--dtypes=float32", "--batch_size=2", "--steps=1"]
    else:
        shapes = ["--preset=gpu", "--modes=compiled", f"--dtypes={auto_dtype('cuda')}",
                  f"--batch_size={c['bench_batch_size']}", "--steps=3"]
    run(c, "bench", ["bench.py", *shapes, f"--device={c['device']}", "--rounds=1",
                     f"--json={record}"])
    rows = json.loads(record.read_text())["rows"]
    first = next((r for r in rows if not r["oom"]), None)
    if first is None or any(r["oom"] for r in rows):
        raise PartFailed(f"out of memory: {', '.join(r['model'] for r in rows if r['oom'])}")
    mfu = f"MFU {100 * first['mfu']:.1f}%" if first["mfu"] else "MFU n/a (the peak is unknown)"
    return (f"{first['model']} {first['tokens_per_s']:,.0f} tok/s, {mfu}; {len(rows)} shapes "
            f"{min(r['ratio'] for r in rows):.2f}x to {max(r['ratio'] for r in rows):.2f}x")


def check_train(c):
    iters = 30 if c["tiny"] else c["train_iters"]
    output = run(c, "train", train_args(c, "train", iters), TORCH_LOGS="recompiles")
    step = 5 if c["tiny"] else 10
    if after := recompiles_after(output, step):
        raise PartFailed(f"{after} recompile(s) after step {step}")
    return f"{iters} steps: {loss_falls(output)}; 0 recompiles after step {step}"


def check_resume(c):
    every = 10 if c["tiny"] else 50
    args = train_args(c, "resume", 10 * every)
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    first_run = ""
    for line in proc.stdout:
        first_run += line
        if line.startswith("saved checkpoint"):
            proc.kill()  # SIGKILL: no clean-up
            break
    proc.wait()
    (Path(c["out_dir"]) / "resume.log").write_text(f"{first_run}(killed)\n")
    ckpt = Path(c["out_dir"]) / "resume" / "ckpt.pt"
    if not ckpt.exists():
        raise PartFailed(f"the run ended before its first checkpoint: {error_line(first_run)}")
    saved = load_checkpoint(ckpt)["iter_num"]
    output = run(c, "resume", [*args, "--init_from=resume", f"--max_iters={saved + every}"])
    resumed = re.search(r"^iter (\d+)/\S+: loss ([\d.]+)", output, re.M)
    fresh = float(re.search(r"val loss ([\d.]+)", first_run)[1])
    if not (resumed and int(resumed[1]) == saved and float(resumed[2]) < fresh):
        raise PartFailed(f"killed at step {saved}, resumed: {resumed and resumed[0]}")
    return f"killed after the step-{saved} checkpoint; resumed at step {saved}, loss {resumed[2]}"


def check_torchrun(c):
    args = train_args(c, "torchrun", 20 if c["tiny"] else 100)
    output = run(c, "torchrun", ["-m", "torch.distributed.run", "--standalone",
                                 "--nproc_per_node=1", *args])
    if "1 process(es)" not in output:
        raise PartFailed(f"train.py did not report 1 process: {error_line(output)}")
    return f"1 process: {loss_falls(output)}"


def check_fp16(c):
    dtype = "float16" if c["device"].startswith("cuda") else "float32"  # float16 needs CUDA
    output = run(c, "fp16", train_args(c, "fp16", 20 if c["tiny"] else 100, f"--dtype={dtype}"))
    return f"{dtype}: {loss_falls(output)}"


def check_sample(c):
    new = 50 if c["tiny"] else 300
    start = time.time()
    args = ["sample.py", f"--out_dir={Path(c['out_dir']) / 'train'}", f"--device={c['device']}",
            "--num_samples=1", "--seed=1", f"--max_new_tokens={new}"]
    output = run(c, "sample", args + (["--dtype=float32"] if c["tiny"] else []))
    text = " ".join(output.split("\n", 1)[-1].split())[:40]
    return f"{new} tokens in {time.time() - start:.1f} s: {text!r}"


def main(argv):
    argv = ["--tiny=True" if a == "--tiny" else a for a in argv]
    try:
        c = parse_overrides(argv, OPTIONS)
        parts = c["parts"].split(",")
        need(set(parts) <= set(PARTS), f"--parts: unknown {sorted(set(parts) - set(PARTS))}; "
                                       f"choose from {', '.join(PARTS)}")
        check_device(c["device"])
    except ConfigError as e:
        usage_error(f"{e}; the CPU-safe form of this check: python gpu_check.py --device=cpu "
                    f"--tiny")
    c["device"] = pick_device(c["device"])
    if c["tiny"]:
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny models run fastest on one thread
    c["out_dir"] = str(Path(c["out_dir"]).resolve())  # the commands run in the repo root
    c["data_dir"] = c["data_dir"] and str(Path(c["data_dir"]).resolve())
    Path(c["out_dir"]).mkdir(parents=True, exist_ok=True)
    for log in Path(c["out_dir"]).glob("*.log"):
        log.unlink()
    on = (f"{torch.cuda.get_device_name(c['device'])}, CUDA {torch.version.cuda}"
          if c["device"].startswith("cuda") else "CPU") + f", torch {torch.__version__}"
    print(f"GPU check on {on}: {', '.join(parts)}", flush=True)
    table = ["| part | result | figure | seconds |", "|---|---|---|---:|"]
    for part in parts:
        start = time.time()
        try:
            result, figure = "PASS", globals()[f"check_{part}"](c)
        except Exception as e:  # a bug in a check is a FAIL too: the rest goes on
            result, figure = "FAIL", str(e) if isinstance(e, PartFailed) else repr(e)
        print(f"[{part}] {result}: {figure}", flush=True)
        figure = figure.replace("|", "/")
        table.append(f"| {part} | {result} | {figure} | {time.time() - start:.0f} |")
    print("\n" + "\n".join(table) + f"\n\ndevice: {on}")
    if any("| FAIL |" in row for row in table):
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
