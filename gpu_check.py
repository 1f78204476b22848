"""
The GPU check: what a first GPU user runs, once, to see that every CUDA path of this repo works
and how fast it is. One command, about 11 minutes on one H100 (most of it compiling):

    python gpu_check.py                          # every part, on the first CUDA GPU
    python gpu_check.py --parts=train,sample     # some of the parts
    python gpu_check.py --device=cpu --tiny      # every part on the CPU: tiny shapes, a few steps,
                                                 # float32, no compile (~1 min; the test runs this)

Each part runs the repo's own command lines as child processes (what a user would type), prints a
progress line, and ends PASS or FAIL; a failing part is reported with its last error line and the
rest goes on. At the end: one markdown table (part, result, figure, seconds) and the device, for
the README; the exit status is 1 if any part failed. The children's full output is in
out-gpu-check/<part>.log. Options: --out_dir (out-gpu-check), --data_dir (a prepared char dataset
instead of data/shakespeare_char), --train_iters (300), --bench_batch_size (8).

    data      data/shakespeare_char prepared (its prepare.py, if meta.json is missing)
    bench     bench.py on the GPU preset's ten shapes (shapes.py: 12 layers x 768 wide, context
              1024), compiled bf16 (fp16 on a card without native bf16), batch 8: tokens/s and MFU
              against the card's peak; a shape that runs out of memory fails the part (bench.py
              reports it as OOM and goes on). Most of this part is compiling the ten models.
    train     300 steps of config/train_shakespeare_char_gpu.py under TORCH_LOGS=recompiles: the
              validation loss falls, and nothing recompiles after the first log_interval steps
    resume    a run is killed (SIGKILL) right after its first checkpoint, then resumed: it must go
              on from the checkpoint's step, with the loss where the checkpoint left it
    torchrun  the same config under a 1-process torchrun (DDP, NCCL), compiled
    fp16      dtype=float16: the GradScaler path of cards without native bf16; the loss falls
    sample    sample.py from the train part's checkpoint (KV-cached generation)

TinyStories is not needed: everything but bench (which builds its shapes from random tokens) trains
on the character-level Shakespeare data. With --tiny the same parts run with tiny shapes on any
device; on a CPU the fp16 part trains in float32 (float16 training needs CUDA), which the table
says.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

from shapelab.checkpoint import load_checkpoint
from shapelab.configurator import ConfigError, check_device, parse_overrides
from shapelab.hardware import pick_device

ROOT = Path(__file__).resolve().parent
PARTS = ("data", "bench", "train", "resume", "torchrun", "fp16", "sample")
OPTIONS = dict(device="cuda", tiny=False, parts=",".join(PARTS), out_dir="out-gpu-check",
               data_dir="", train_iters=300, bench_batch_size=8)
TRAIN_CONFIG = "config/train_shakespeare_char_gpu.py"
# --tiny: a 2-layer, 32-wide model, a few steps, float32, eager (shapes and steps only; the parts
# are the same)
TINY_MODEL = ["--n_layer=2", "--n_head=2", "--n_embd=32", "--block_size=32", "--batch_size=8",
              "--dropout=0.0", "--learning_rate=1e-2", "--eval_iters=2", "--dtype=float32",
              "--compile=False"]
# (two config files: matching the preset's ten shapes takes longer than the whole tiny check should)
TINY_BENCH = ["config/train_shakespeare_char.py", "config/cea_shakespeare_char_cea.py",
              "--modes=eager", "--dtypes=float32"]


class PartFailed(Exception):
    """A part's check failed: the message is the table's figure."""


# ----------------------------------------------------------------------------------------
# Running the repo's commands and reading their output


def child_env(settings, **extra):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    if settings["tiny"]:
        env["OMP_NUM_THREADS"] = "1"  # tiny models run fastest on one thread
    return env


def run(settings, part, args, timeout, env=None):
    """Run `python args...` in the repo root; returns its stdout and stderr together (in order),
    also written to out_dir/<part>.log. A non-zero exit is a PartFailed with its last error line."""
    started = time.time()
    try:
        proc = subprocess.run([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout,
                              env=env or child_env(settings))
        output, returncode = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        output, returncode = ((e.stdout or b"").decode() if isinstance(e.stdout, bytes)
                              else (e.stdout or "")), None
    with open(Path(settings["out_dir"]) / f"{part}.log", "a") as log:
        log.write(f"$ python {' '.join(args)}\n{output}\n")
    if returncode is None:
        raise PartFailed(f"timed out after {time.time() - started:.0f} s: {last_line(output)}")
    if returncode != 0:
        raise PartFailed(f"exit {returncode}: {error_line(output)}")
    return output


def last_line(output):
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def error_line(output):
    """The line that says what went wrong: the last one naming an error, else the last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        if re.search(r"error|Error|Exception|Traceback|Killed", line):
            return line
    return lines[-1] if lines else "(no output)"


def evaluations(output):
    """[(step, train loss, val loss)] of train.py's evaluations."""
    return [(int(s), float(t), float(v)) for s, t, v in
            re.findall(r"^step (\d+): train loss (\S+), val loss (\S+)$", output, flags=re.M)]


def check_loss_falls(output, by=0.1):
    """The last evaluation's val loss is at least `by` (10%) below the first's; returns both."""
    evals = evaluations(output)
    if len(evals) < 2:
        raise PartFailed(f"fewer than two evaluations in the output: {error_line(output)}")
    first, last = evals[0][2], evals[-1][2]
    if not last <= (1 - by) * first:  # (also catches nan)
        raise PartFailed(f"val loss {first:.3f} -> {last:.3f}: it did not fall by {100 * by:.0f}%")
    return first, last


def speed(output):
    """', 12 ms/iter, MFU 30.1%' from train.py's last log line (empty if it has none)."""
    lines = re.findall(r"^iter \d+(?:/\S+)?: .*$", output, flags=re.M)
    if not lines:
        return ""
    ms, mfu = re.search(r"(\d+) ms/iter", lines[-1]), re.search(r"MFU (\S+%)", lines[-1])
    return (f", {ms.group(1)} ms/iter" if ms else "") + (f", MFU {mfu.group(1)}" if mfu else "")


def count_recompiles(output, warm_up_step):
    """(recompiles before, recompiles after) train.py's log line of step warm_up_step, in an output
    of TORCH_LOGS=recompiles (before it: the first compiles, for evaluation and for training). A
    recompile limit that dynamo hit (it then runs the function eager) counts as one."""
    warm = re.search(rf"^iter {warm_up_step}(?:/\S+)?: ", output, flags=re.M)
    if warm is None:
        raise PartFailed(f"no log line for step {warm_up_step}: {error_line(output)}")
    recompiles = lambda text: len(re.findall(
        r"Recompiling function|hit config\.(?:recompile|cache_size)_limit", text))
    return recompiles(output[:warm.start()]), recompiles(output[warm.start():])


def train_args(settings, out_name, iters, eval_interval, extra=()):
    """train.py's arguments: the char GPU config, a short run into out_dir/out_name."""
    args = ["train.py", TRAIN_CONFIG, f"--device={settings['device']}",
            f"--out_dir={Path(settings['out_dir']) / out_name}", f"--max_iters={iters}",
            f"--lr_decay_iters={iters}", f"--eval_interval={eval_interval}", "--sample_tokens=0",
            "--overwrite=True"]
    if settings["data_dir"]:
        args.append(f"--data_dir={settings['data_dir']}")
    if settings["tiny"]:
        args += TINY_MODEL + [f"--log_interval={max(1, eval_interval // 2)}", "--warmup_iters=2"]
    else:
        args += ["--eval_iters=20", "--log_interval=10", f"--warmup_iters={min(100, iters // 5)}"]
    return args + list(extra)


# ----------------------------------------------------------------------------------------
# The parts: each returns its figure or raises PartFailed


def check_data(settings):
    data_dir = (Path(settings["data_dir"]) if settings["data_dir"]
                else ROOT / "data" / "shakespeare_char")
    if not (data_dir / "meta.json").exists():
        if settings["data_dir"]:
            raise PartFailed(f"{data_dir / 'meta.json'} is missing")
        print("  preparing data/shakespeare_char (python data/shakespeare_char/prepare.py)",
              flush=True)
        run(settings, "data", ["data/shakespeare_char/prepare.py"], timeout=300)
    meta = json.loads((data_dir / "meta.json").read_text())
    tokens = (data_dir / "train.bin").stat().st_size // 2
    return f"{tokens:,} train tokens, vocabulary {meta['vocab_size']}"


def check_bench(settings):
    json_path = Path(settings["out_dir"]) / "bench.json"
    common = [f"--device={settings['device']}", "--steps=1" if settings["tiny"] else "--steps=3",
              "--rounds=1", f"--json={json_path}"]
    if settings["tiny"]:
        args = ["bench.py", *TINY_BENCH, "--batch_size=2", *common]
    else:
        native_bf16 = not settings["device"].startswith("cuda") or torch.cuda.is_bf16_supported(
            including_emulation=False)  # else fp16, as train.py picks on such a card
        args = ["bench.py", "--preset=gpu", "--modes=compiled",
                f"--dtypes={'bfloat16' if native_bf16 else 'float16'}",
                f"--batch_size={settings['bench_batch_size']}", *common]
    # (an H100 took ~380 s for the ten shapes, most of it compiling them: 25-70 s each)
    output = run(settings, "bench", args, timeout=120 if settings["tiny"] else 720)
    table = output[output.rfind("| model |"):].strip()
    print("\n".join("  " + line for line in table.splitlines()), flush=True)
    rows = json.loads(json_path.read_text())["rows"]
    ran = [r for r in rows if not r["oom"]]
    if not ran:
        raise PartFailed("every shape ran out of memory")
    first = ran[0]
    mfu = (f", MFU {100 * first['mfu']:.1f}%" if first["mfu"] is not None
           else ", MFU n/a (the card's peak is unknown)")
    slowest, fastest = min(ran, key=lambda r: r["ratio"]), max(ran, key=lambda r: r["ratio"])
    figure = (f"{first['model']} {first['tokens_per_s']:,.0f} tok/s{mfu}; {len(ran)} shapes "
              f"{slowest['ratio']:.2f}x ({slowest['model']}) to "
              f"{fastest['ratio']:.2f}x ({fastest['model']})")
    out_of_memory = [r["model"] for r in rows if r["oom"]]
    if out_of_memory:
        raise PartFailed(f"OOM: {', '.join(out_of_memory)}; {figure}")
    return figure


def check_train(settings):
    iters = 30 if settings["tiny"] else settings["train_iters"]
    args = train_args(settings, "train", iters, eval_interval=10 if settings["tiny"] else 100)
    log_interval = int(next(a for a in reversed(args) if a.startswith("--log_interval="))[15:])
    output = run(settings, "train", args, timeout=90 if settings["tiny"] else 240,
                 env=child_env(settings, TORCH_LOGS="recompiles"))
    first, last = check_loss_falls(output)
    before, after = count_recompiles(output, log_interval)
    if after:
        raise PartFailed(f"{after} recompile(s) after step {log_interval} "
                         f"(see {settings['out_dir']}/train.log)")
    return (f"{iters} steps: val loss {first:.3f} -> {last:.3f}{speed(output)}; "
            f"recompiles: {before} in warm-up, 0 after step {log_interval}")


def check_resume(settings):
    every = 10 if settings["tiny"] else 50
    # 1. start a long run, and kill it (SIGKILL: no clean-up) once its first checkpoint is saved
    args = train_args(settings, "resume", 10 * every, eval_interval=every)
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=child_env(settings))
    timer = threading.Timer(90 if settings["tiny"] else 150, proc.kill)
    timer.start()
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("saved checkpoint"):
            proc.kill()  # (SIGKILL; on Windows TerminateProcess, exit status 1)
            break
    proc.stdout.close()
    killed = proc.wait() == (1 if os.name == "nt" else -signal.SIGKILL)
    timer.cancel()
    first_run = "".join(lines)
    with open(Path(settings["out_dir"]) / "resume.log", "a") as log:
        log.write(f"$ python {' '.join(args)}\n{first_run}\n(killed)\n")
    ckpt = Path(settings["out_dir"]) / "resume" / "ckpt.pt"
    if not killed or not ckpt.exists():
        raise PartFailed(f"the run ended before its first checkpoint: {error_line(first_run)}")
    # (it may have gone on a little)
    saved_step = load_checkpoint(ckpt, map_location="cpu")["iter_num"]
    # 2. resume, for `every` more steps: it must go on from the checkpoint's step
    output = run(settings, "resume",
                 args + ["--init_from=resume", f"--max_iters={saved_step + every}"],
                 timeout=90 if settings["tiny"] else 150)
    resumed = re.search(r"resuming \S+ from .+ at step (\d+)", output)
    if resumed is None or int(resumed.group(1)) != saved_step:
        raise PartFailed(f"killed with the step-{saved_step} checkpoint on disk, but the resume "
                         f"says: {resumed.group(0) if resumed else error_line(output)}")
    first_step = re.search(r"^iter (\d+)(?:/\S+)?: loss ([^\s,]+)", output, flags=re.M)
    if first_step is None or int(first_step.group(1)) != saved_step:
        raise PartFailed(f"the resumed run's first log line is "
                         f"{first_step.group(0) if first_step else 'missing'} "
                         f"(the checkpoint is step {saved_step})")
    start_loss, resumed_loss = evaluations(first_run)[0][2], float(first_step.group(2))
    if not resumed_loss < start_loss:
        raise PartFailed(f"the resumed loss {resumed_loss:.3f} is not below the fresh model's "
                         f"{start_loss:.3f}")
    if not re.search(rf"^done: {saved_step + every} steps", output, flags=re.M):
        raise PartFailed(f"the resumed run did not reach step {saved_step + every}: "
                         f"{error_line(output)}")
    return (f"killed after the step-{saved_step} checkpoint; resumed at step {saved_step} "
            f"with loss {resumed_loss:.3f} (fresh: {start_loss:.3f}), ran to {saved_step + every}")


def check_torchrun(settings):
    iters = 20 if settings["tiny"] else 100
    args = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
            *train_args(settings, "torchrun", iters, eval_interval=10 if settings["tiny"] else 50)]
    output = run(settings, "torchrun", args, timeout=90 if settings["tiny"] else 150)
    if "1 process(es)" not in output:
        raise PartFailed(f"train.py did not report 1 process: {error_line(output)}")
    first, last = check_loss_falls(output)
    return f"1 process, {iters} steps: val loss {first:.3f} -> {last:.3f}{speed(output)}"


def check_fp16(settings):
    iters = 20 if settings["tiny"] else 100
    on_cuda = settings["device"].startswith("cuda")
    dtype = "--dtype=float16" if on_cuda else "--dtype=float32"  # float16 training needs CUDA
    output = run(settings, "fp16",
                 train_args(settings, "fp16", iters, eval_interval=10 if settings["tiny"] else 50,
                            extra=[dtype]), timeout=90 if settings["tiny"] else 150)
    if on_cuda and "float16" not in output.split("tokens per iteration")[0]:
        raise PartFailed(f"train.py did not train in float16: {error_line(output)}")
    first, last = check_loss_falls(output)
    what = "float16 + GradScaler" if on_cuda else "float32 (float16 needs CUDA)"
    return f"{what}, {iters} steps: val loss {first:.3f} -> {last:.3f}{speed(output)}"


def check_sample(settings):
    new_tokens = 50 if settings["tiny"] else 300
    args = ["sample.py", f"--out_dir={Path(settings['out_dir']) / 'train'}",
            f"--device={settings['device']}", "--num_samples=1", f"--max_new_tokens={new_tokens}",
            "--seed=1"]
    if settings["tiny"]:
        args.append("--dtype=float32")
    started = time.time()
    output = run(settings, "sample", args, timeout=60 if settings["tiny"] else 120)
    seconds = time.time() - started
    text = output.split("\n", 1)[1].rsplit("-" * 40, 1)[0] if "\n" in output else ""
    if len(text.strip()) == 0:
        raise PartFailed(f"no text sampled: {error_line(output)}")
    shown = " ".join(text.split())[:40]
    return f"{new_tokens} tokens in {seconds:.1f} s (start-up included): {shown!r}"


CHECKS = dict(data=check_data, bench=check_bench, train=check_train, resume=check_resume,
              torchrun=check_torchrun, fp16=check_fp16, sample=check_sample)


# ----------------------------------------------------------------------------------------
# The table


def device_description(device):
    if not device.startswith("cuda"):
        return f"CPU ({os.cpu_count()} cores), torch {torch.__version__}"
    driver = ""
    try:
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20).stdout.split("\n")[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return (f"{torch.cuda.get_device_name(device)}, torch {torch.__version__} "
            f"(CUDA {torch.version.cuda})" + (f", driver {driver}" if driver else ""))


def results_table(results):
    """results: [(part, result, figure, seconds)] -> markdown."""
    lines = ["| part | result | figure | seconds |", "|---|---|---|---:|"]
    for part, result, figure, seconds in results:
        lines.append(f"| {part} | {result} | {figure.replace('|', '/')} | {seconds:.0f} |")
    return "\n".join(lines)


def main(argv):
    argv = [f"{a}=True" if a in ("--tiny",) else a for a in argv]
    try:
        settings = parse_overrides(argv, OPTIONS)
        parts = [p.strip() for p in settings["parts"].split(",") if p.strip()]
        unknown = [p for p in parts if p not in CHECKS]
        if unknown:
            raise ConfigError(f"--parts: unknown {unknown}; choose from {', '.join(PARTS)}")
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None
    try:
        check_device(settings["device"])
    except ConfigError as e:
        raise SystemExit(f"error: {e}; the CPU-safe form of this check: python gpu_check.py "
                         f"--device=cpu --tiny") from None
    device = settings["device"] = pick_device(settings["device"])  # (what the parts run on)
    out_dir = Path(settings["out_dir"]).resolve()  # the children run in the repo root
    settings.update(out_dir=str(out_dir), data_dir=str(Path(settings["data_dir"]).resolve())
                    if settings["data_dir"] else "")
    out_dir.mkdir(parents=True, exist_ok=True)
    for log in out_dir.glob("*.log"):
        log.unlink()
    description = device_description(device)
    print(f"GPU check on {description}{' (tiny shapes)' if settings['tiny'] else ''}: "
          f"{', '.join(parts)}", flush=True)
    results, check_started = [], time.time()
    for part in parts:
        print(f"[{part}] ...", flush=True)
        started = time.time()
        try:
            result, figure = "PASS", CHECKS[part](settings)
        except PartFailed as e:
            result, figure = "FAIL", str(e)
        except (Exception, SystemExit) as e:
            # a bug in the check itself: reported like a failure, the rest goes on
            result, figure = "FAIL", f"{type(e).__name__}: {e}"
        seconds = time.time() - started
        results.append((part, result, figure, seconds))
        print(f"[{part}] {result} ({seconds:.0f} s): {figure}", flush=True)
    print(f"\nGPU check, {time.time() - check_started:.0f} s in all"
          f"{', tiny shapes' if settings['tiny'] else ''}:\n")
    print(results_table(results))
    print(f"\ndevice: {description}")
    failed = [part for part, result, _, _ in results if result == "FAIL"]
    if failed:
        print(f"failed: {', '.join(failed)} (logs: {out_dir}/<part>.log)")
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
