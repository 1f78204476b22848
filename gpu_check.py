"""
The GPU check: what a first GPU user runs once, to see that every CUDA path of this repo works and
how fast it is (about 10 minutes on one H100, most of it compiling).

    python gpu_check.py                          # every part, on the first CUDA GPU
    python gpu_check.py --parts=train,sample     # some of the parts
    python gpu_check.py --device=cpu --tiny      # every part on the CPU, with tiny shapes

Each part runs the repo's commands as a user types them and ends PASS or FAIL (with the error
line), and the rest goes on; then a table of the parts, and exit status 1 if one failed. The
commands' output is in out-gpu-check/<part>.log.

    bench     bench.py on the GPU preset's shapes, compiled, native bf16 (else fp16): no OOM
    train     train.py under TORCH_LOGS=recompiles: the loss falls, no recompile after warm-up
    torchrun  a 1-process torchrun (DDP, NCCL) in float16, the GradScaler path: the loss falls
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

from shapelab.configurator import ConfigError, check_device, need, parse_overrides, usage_error
from shapelab.hardware import auto_dtype, pick_device

ROOT = Path(__file__).resolve().parent
PARTS = ("bench", "train", "torchrun", "sample")
OPTIONS = dict(device="cuda", tiny=False, parts=",".join(PARTS), out_dir="out-gpu-check",
               data_dir="")
TINY_SHAPE = "--n_layer=2 --n_head=2 --n_embd=32 --block_size=32 --batch_size=8".split()
TINY_TRAINING = ("--dropout=0.0 --learning_rate=1e-2 --eval_iters=2 --dtype=float32 "
                 "--compile=False --warmup_iters=2 --log_interval=5").split()


class PartFailed(Exception):
    """A part's check failed; the message is its figure."""


def error_line(output):  # a traceback or an error message ends with its line
    return (output.strip() or "(no output)").splitlines()[-1]


def run(config, part, args, **env):
    """The output of `python args` in the repo root, kept in out_dir/<part>.log too; a command
    that fails is a PartFailed."""
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env={**os.environ, **env})
    (config["out_dir"] / f"{part}.log").write_text(f"$ python {' '.join(args)}\n{proc.stdout}")
    if proc.returncode:
        raise PartFailed(f"exit {proc.returncode}: {error_line(proc.stdout)}")
    return proc.stdout


def train_args(config, name, iters, *extra):
    sizes = (TINY_SHAPE + TINY_TRAINING if config["tiny"]
             else ["--eval_iters=20", "--log_interval=10"])
    return ["train.py", "config/train_shakespeare_char_gpu.py", f"--device={config['device']}",
            f"--out_dir={config['out_dir'] / name}", f"--max_iters={iters}",
            f"--lr_decay_iters={iters}", f"--eval_interval={10 if config['tiny'] else 50}",
            "--sample_tokens=0", "--overwrite=True", f"--data_dir={config['data_dir']}",
            *sizes, *extra]  # data_dir '': train.py prepares data/shakespeare_char


def loss_falls(output):
    """'val loss first -> last' of train.py's evaluations (10% down at least)."""
    losses = re.findall(r"^step \d+: train loss \S+, val loss (\S+)$", output, re.M)
    if len(losses) < 2 or not float(losses[-1]) <= 0.9 * float(losses[0]):
        raise PartFailed(f"val loss {losses}: it did not fall by 10%; {error_line(output)}")
    return f"val loss {losses[0]} -> {losses[-1]}"


def recompiles_after(output, step):
    """The recompiles TORCH_LOGS=recompiles reports after train.py's log line of `step` (before
    it: the first compiles), a recompile limit hit counted as one."""
    after = output.partition(f"\niter {step}/")[2]
    return len(re.findall(r"Recompiling function|hit config\.recompile_limit", after))


def check_bench(config):
    if config["tiny"]:
        shapes = ["--models=GPT,hourglass", *TINY_SHAPE, "--modes=eager", "--dtypes=float32",
                  "--steps=1"]
    else:
        shapes = ["--preset=gpu", "--modes=compiled", "--batch_size=8", "--steps=3",
                  f"--dtypes={auto_dtype('cuda')}"]
    run(config, "bench", ["bench.py", *shapes, f"--device={config['device']}", "--rounds=1",
                          f"--json={config['out_dir'] / 'bench.json'}"])
    rows = json.loads((config["out_dir"] / "bench.json").read_text())["rows"]
    if any(r["oom"] for r in rows):
        raise PartFailed(f"out of memory: {[r['model'] for r in rows if r['oom']]}")
    mfu = f", MFU {100 * rows[0]['mfu']:.1f}%" if rows[0]["mfu"] else ""
    return f"{rows[0]['model']} {rows[0]['tokens_per_s']:,.0f} tok/s{mfu}"


def check_train(config):
    iters, step = (30, 5) if config["tiny"] else (300, 10)
    output = run(config, "train", train_args(config, "train", iters), TORCH_LOGS="recompiles")
    if after := recompiles_after(output, step):
        raise PartFailed(f"{after} recompile(s) after step {step}")
    return f"{iters} steps: {loss_falls(output)}; 0 recompiles after step {step}"


def check_torchrun(config):
    dtype = "float16" if config["device"].startswith("cuda") else "float32"  # float16 needs CUDA
    iters = 20 if config["tiny"] else 100
    output = run(config, "torchrun", ["-m", "torch.distributed.run", "--standalone",
                                      "--nproc_per_node=1",
                                      *train_args(config, "torchrun", iters, f"--dtype={dtype}")])
    return f"1 process, {dtype}: {loss_falls(output)}"


def check_sample(config):
    output = run(config, "sample", ["sample.py", f"--out_dir={config['out_dir'] / 'train'}",
                                    f"--device={config['device']}", "--num_samples=1",
                                    *["--dtype=float32"] * config["tiny"]])
    return repr(" ".join(output.split())[-40:])


def main(argv):
    try:
        config = parse_overrides(["--tiny=True" if a == "--tiny" else a for a in argv], OPTIONS)
        need(set(config["parts"].split(",")) <= set(PARTS),
             f"--parts: unknown in {config['parts']!r}; choose from {', '.join(PARTS)}")
        check_device(config["device"])
    except ConfigError as e:
        usage_error(f"{e}; the CPU-safe form of this check: python gpu_check.py --device=cpu "
                    f"--tiny")
    config.update(device=pick_device(config["device"]), out_dir=Path(config["out_dir"]).resolve(),
                  data_dir=config["data_dir"] and Path(config["data_dir"]).resolve())
    config["out_dir"].mkdir(parents=True, exist_ok=True)
    on = (f"{torch.cuda.get_device_name(config['device'])}, CUDA {torch.version.cuda}"
          if config["device"].startswith("cuda") else "CPU") + f", torch {torch.__version__}"
    print(f"GPU check on {on}: {config['parts']}", flush=True)
    table = ["| part | result | figure | seconds |", "|---|---|---|---:|"]
    for part in config["parts"].split(","):
        start = time.time()
        try:
            result, figure = "PASS", globals()[f"check_{part}"](config)
        except (Exception, SystemExit) as e:  # a bug in a check is a FAIL too
            result, figure = "FAIL", str(e) if isinstance(e, PartFailed) else repr(e)
        print(f"[{part}] {result}: {figure}", flush=True)
        table.append(f"| {part} | {result} | {figure.replace('|', '/')} | "
                     f"{time.time() - start:.0f} |")
    print("\n" + "\n".join(table) + f"\n\ndevice: {on}")
    sys.exit(any("| FAIL |" in row for row in table))


if __name__ == "__main__":
    main(sys.argv[1:])
