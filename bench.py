"""
All speed measurement of this repo: tokens/s, ms/iter and MFU of a training step, and decode
tokens/s of generation with and without the KV cache, as ratios to the first model measured in the
same run.

Two ways to say which models:

    # every mechanism at the plain GPT's budget (shapes.matched_shapes of a preset's baseline)
    python bench.py                                    # all 10 shapes of the CPU preset,
                                                       # eager/compiled x bf16/fp32 (bf16 only
                                                       # where native) (~25 min on 2 cores)
    python bench.py --modes=eager --dtypes=bfloat16    # one column, ~2 min
    python bench.py --preset=gpu --batch_size=16       # the GPU preset's shapes (12L/768 baseline)
    python bench.py --models=GPT,hourglass --n_layer=12 --n_head=12 --n_embd=768 --block_size=2048

    # the shapes of train.py config files, exactly as train.py builds them (ratios to the first)
    python bench.py config/cea_shakespeare_char_wider.py config/cea_shakespeare_char_cea.py \
        --modes=eager

    # generation instead of training: decode speed with and without the KV cache, and its size
    python bench.py --generate --dtypes=float32        # every shape of the CPU preset (~3 min)

Options of both: --batch_size (config files: the first file's by default), --steps, --rounds,
--modes=eager,compiled, --dtypes=auto (fp32, and the device's native bf16 or fp16 where it has
one: an emulated bf16, far slower than fp32, only when named), --device, --threads, --vocab_size
(0: the dataset's), --json=path (the rows as JSON too). The matched form also takes the preset keys
(n_layer, n_embd, n_head, block_size, the matching keys of shapes.py, --models=names).
Generation takes --prompt_tokens (16) and --new_tokens (0: fill the context,
block_size - prompt_tokens).

Training steps. For each (mode, dtype) every model is built (and compiled), warmed up, then timed
in turn, `rounds` times: the models alternate, so a machine that gets busier slows all of them
alike, and each keeps its best round. Ratios are to the first model of the same (mode, dtype)
(the first one that ran: a model that runs out of GPU memory gets OOM in its cells, its memory is
freed, and the run goes on). On CUDA, float32 runs on the TF32 tensor cores, as train.py trains.

MFU (model FLOPs utilization) = achieved training FLOPs/s / peak FLOPs/s, where a
training step costs 3x the forward FLOPs that model.flops_per_token() counts.
- On a GPU the peak is the card's dense bf16 tensor-core peak, looked up by name.
- On a CPU there is no spec sheet we can trust for a cloud VM, so the peak is measured
  in the same run (hardware.measure_cpu_peak_flops): the best matmul throughput of torch itself
  on large square matrices, in bf16 where the CPU has it natively (AMX, AVX512-BF16), else in
  fp32. MFU on a CPU therefore says "how close to torch's own best matmul speed"; every dtype
  is scored against that one peak.

Generation (--generate). Per shape and dtype, one sequence (batch 1, what sample.py does) of a
random prompt_tokens-token prompt, then new_tokens greedy tokens by model.generate, cached
(prefill the prompt, then one token per step) and uncached (the whole context recomputed for every
token); tokens/s = new tokens / seconds of the whole call (prefill included); models alternate
over `rounds` as above; eager only (a compiled decode loop recompiles as the cache grows). Also:
whether the two paths chose the same tokens, and the KV cache's bytes per token, measured (after
replaying the generated sequence through a model.KVCache, prefill then one token at a time: its
nbytes / positions stored) beside the accounting's model.kv_cache_bytes_per_token() at the dtype's
element size. The two must agree: a mismatch is marked (!) and the run exits with status 1.

Speed is measured here and never in timed tests. Warm-up steps (and compilation) are
excluded; a round's figure is the median of its timed steps.
"""

import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from model import KVCache
from shapelab.checkpoint import write_atomic
from shapelab.configurator import ConfigError, check_device, need, parse_overrides, usage_error
from shapelab.hardware import (auto_dtype, autocast, machine_name, peak_flops, pick_device,
                               set_fp32_matmul_precision)
from shapes import build_model, model_keys, train_defaults
from shapes import (BASELINE_KEYS, MATCHING_KEYS, baseline_of, dataset_vocab_size, matched_shapes,
                    preset_settings, select_models)


def prepare_device(device):
    """On CUDA, fp32 matmuls run on the TF32 tensor cores (train.py's setting), so an fp32 column
    measures what fp32 training costs there, not the several times slower IEEE path."""
    set_fp32_matmul_precision(device.split(":")[0])


def free_memory(device_type):
    gc.collect()
    if device_type == "cuda":
        torch.cuda.empty_cache()


def unless_out_of_memory(device_type, fn, *args, **kwargs):
    """fn(*args, **kwargs), or None if the device ran out of memory; then the memory is freed and
    the caller goes on with the next model."""
    try:
        return fn(*args, **kwargs)
    except torch.OutOfMemoryError:  # (torch.cuda.OutOfMemoryError is the same class)
        pass
    except RuntimeError as e:  # the same, raised inside torch.compile and wrapped by it
        if "out of memory" not in str(e):
            raise
    free_memory(device_type)  # after the except block: the tensors its traceback held are gone
    return None


def synchronize(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_training_steps(model, batch_size, block_size, vocab_size, device, dtype, steps=10,
                        warmup=3):
    """Median seconds per optimizer step of forward + backward + AdamW on random tokens."""
    ctx = autocast(device.split(":")[0], dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(vocab_size, (batch_size, block_size), device=device)
    y = torch.randint(vocab_size, (batch_size, block_size), device=device)
    times = []
    for step in range(warmup + steps):
        synchronize(device)
        t0 = time.perf_counter()
        with ctx:
            _, loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()  # waits for the device
        if step >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def benchmark_shapes(shapes, batch_size, device, dtypes, compiled_modes, steps=5, rounds=2):
    """shapes: {name: (model_type, model_args)}. Rows of dicts, one per (name, mode, dtype),
    with ms_per_iter, tokens_per_s, mfu, and `ratio` = tokens/s over the first shape's; a shape
    that ran out of memory has oom=True and None for the figures."""
    device_type = device.split(":")[0]
    prepare_device(device)
    peak, peak_note = peak_flops(device_type)
    if any(compiled_modes):
        # many models share GPT.forward: let dynamo keep one compiled graph per model and dtype
        # instead of falling back to eager after the default 8 (recompile_limit, once
        # cache_size_limit)
        import torch._dynamo.config as dynamo_config
        key = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
        setattr(dynamo_config, key, max(getattr(dynamo_config, key), 4 * len(shapes) * len(dtypes)))
    rows, progress = [], Progress(len(compiled_modes) * len(dtypes) * rounds * len(shapes))
    for compiled in compiled_modes:
        mode = "compiled" if compiled else "eager"
        for dtype in dtypes:
            runners, best, out_of_memory = {}, {}, set()
            for name, (model_type, model_args) in shapes.items():
                torch.manual_seed(0)
                model = unless_out_of_memory(
                    device_type, lambda: build_model(model_type, **model_args).to(device))
                if model is None:
                    out_of_memory.add(name)
                    print(f"  {name}: out of memory building the model", flush=True)
                    continue
                runners[name] = (model, torch.compile(model) if compiled else model, model_args)
            try:
                time_rounds(runners, best, out_of_memory, rounds, batch_size, device, dtype, mode,
                            steps, compiled, progress)
            except KeyboardInterrupt:  # Ctrl-C: keep what was measured
                rows += group_rows(shapes, runners, best, out_of_memory, mode, dtype, batch_size,
                                   peak)
                raise Interrupted(rows, peak_note) from None
            rows += group_rows(shapes, runners, best, out_of_memory, mode, dtype, batch_size, peak)
            del runners
            if compiled:
                torch._dynamo.reset()  # drop the compiled graphs of this group (and what they hold)
            free_memory(device_type)
    return rows, peak_note


class Interrupted(Exception):
    """Ctrl-C during a benchmark: the rows measured so far (a shape not yet timed has none)."""

    def __init__(self, rows, peak_note):
        super().__init__("interrupted")
        self.rows, self.peak_note = rows, peak_note


class Progress:
    """'[k/N, ~M min to go]' for the progress lines: measurements done, and the time left at the
    average pace so far (the first round also compiles, so the first guesses run long)."""

    def __init__(self, total):
        self.total, self.done, self.start = total, 0, time.perf_counter()

    def tick(self):
        self.done += 1
        left = (time.perf_counter() - self.start) / self.done * (self.total - self.done)
        return f"[{self.done}/{self.total}, ~{left / 60:.1f} min to go]"


def time_rounds(runners, best, out_of_memory, rounds, batch_size, device, dtype, mode, steps,
                compiled, progress):
    """Alternate the models for `rounds` rounds; the first round also warms up / compiles. Keeps
    each model's best seconds per step in `best`; a model out of memory is dropped from runners."""
    device_type = device.split(":")[0]
    for round_ in range(rounds):
        for name, (model, runner, args) in list(runners.items()):
            t0 = time.perf_counter()
            seconds = unless_out_of_memory(
                device_type, time_training_steps, runner, batch_size, args["block_size"],
                args["vocab_size"], device, dtype, steps=steps,
                warmup=(3 if compiled else 2) if round_ == 0 else 1)
            what = f"  round {round_ + 1}/{rounds} {name} {mode} {str(dtype)[6:]}"
            if seconds is None:  # out of memory: drop the model (and its gradients) and go on
                out_of_memory.add(name)
                del runners[name], model, runner
                free_memory(device_type)
                print(f"{what}: out of memory {progress.tick()}", flush=True)
                continue
            best[name] = min(best.get(name, float("inf")), seconds)
            print(f"{what}: {1000 * seconds:.0f} ms/iter ({time.perf_counter() - t0:.0f} s) "
                  f"{progress.tick()}", flush=True)


def group_rows(shapes, runners, best, out_of_memory, mode, dtype, batch_size, peak):
    """One row per shape of a (mode, dtype) group; ratio = tokens/s over the first timed shape's."""
    rows, first = [], None
    for name, (model_type, model_args) in shapes.items():
        row = dict(model=name, mode=mode, dtype=str(dtype).replace("torch.", ""),
                   oom=name in out_of_memory, ms_per_iter=None, tokens_per_s=None, ratio=None,
                   mfu=None)
        if name in runners and name in best:
            model = runners[name][0]
            tokens_per_s = batch_size * model_args["block_size"] / best[name]
            first = first or tokens_per_s
            row.update(ms_per_iter=1000 * best[name], tokens_per_s=tokens_per_s,
                       ratio=tokens_per_s / first,
                       mfu=model.estimate_mfu(tokens_per_s, peak, model_args["block_size"])
                       if peak else None)
        rows.append(row)
    return rows


def markdown_table(rows):
    ratio = "ratio" in rows[0] and len({r["model"] for r in rows}) > 1
    lines = ["| model | mode | dtype | ms/iter | tokens/s |" + (" vs first |" if ratio else "")
             + " MFU |",
             "|---|---|---|---:|---:|" + ("---:|" if ratio else "") + "---:|"]
    for r in rows:
        if r.get("oom"):
            lines.append(f"| {r['model']} | {r['mode']} | {r['dtype']} | OOM | OOM |"
                         + (" OOM |" if ratio else "") + " OOM |")
            continue
        mfu = f"{100 * r['mfu']:.1f}%" if r["mfu"] is not None else "n/a"
        lines.append(f"| {r['model']} | {r['mode']} | {r['dtype']} | {r['ms_per_iter']:.0f} | "
                     f"{r['tokens_per_s']:,.0f} |"
                     + (f" {r['ratio']:.2f}x |" if ratio else "") + f" {mfu} |")
    return "\n".join(lines)


def ratio_table(rows):
    """One row per model, one column per (mode, dtype): tokens/s as a ratio to the first model
    (the plain GPT), with the MFU under it."""
    columns = list(dict.fromkeys((r["mode"], r["dtype"]) for r in rows))
    cell = {(r["model"], r["mode"], r["dtype"]): r for r in rows}
    lines = ["| model | " + " | ".join(f"{m} {d}" for m, d in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for name in dict.fromkeys(r["model"] for r in rows):
        cells = []
        for m, d in columns:
            r = cell[(name, m, d)]
            if r.get("oom"):
                cells.append("OOM")
                continue
            mfu = f", MFU {100 * r['mfu']:.1f}%" if r["mfu"] is not None else ""
            cells.append(f"{r['ratio']:.2f}x ({r['tokens_per_s']:,.0f} tok/s{mfu})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# Generation: decode speed with and without the KV cache, and the cache's size


def time_generation(model, prompt, new_tokens, device, dtype, use_cache):
    """(seconds, ids) of one greedy model.generate call: the prompt (B, P) and new_tokens more."""
    with autocast(device.split(":")[0], dtype):
        synchronize(device)
        t0 = time.perf_counter()
        ids = model.generate(prompt, new_tokens, temperature=0, use_cache=use_cache)
        synchronize(device)
    return time.perf_counter() - t0, ids


@torch.no_grad()
def measured_kv_bytes_per_token(model, ids, prompt_len, device, dtype):
    """Replay a generated sequence ids (B, S) as generation feeds it (the prompt as one prefill,
    then one token per step) through a model.KVCache; return its nbytes per position stored per
    sequence."""
    cache = KVCache(model)
    with autocast(device.split(":")[0], dtype):
        model(ids[:, :prompt_len], cache=cache)
        for t in range(prompt_len, ids.size(1) - 1):  # the last token was sampled, never fed
            model(ids[:, t:t + 1], cache=cache)
    return cache.nbytes / (ids.size(0) * cache.length)


def benchmark_generation(shapes, device, dtypes, prompt_tokens=16, new_tokens=0, rounds=2):
    """Rows of dicts, one per (name, dtype): cached and uncached decode tokens/s, the speed-up,
    whether both chose the same tokens, and KV-cache bytes/token measured and counted."""
    device_type = device.split(":")[0]
    prepare_device(device)
    rows = []
    for dtype in dtypes:
        models, best, out_of_memory = {}, {}, set()
        element_size = torch.empty(0, dtype=dtype).element_size()
        for name, (model_type, model_args) in shapes.items():
            torch.manual_seed(0)
            new = new_tokens or model_args["block_size"] - prompt_tokens
            if prompt_tokens < 1 or new < 1 or prompt_tokens + new > model_args["block_size"]:
                raise ValueError(f"{name}: prompt_tokens={prompt_tokens} + new_tokens={new} "
                                 f"must fit block_size={model_args['block_size']} "
                                 "(past it the cache is rebuilt)")
            model = unless_out_of_memory(
                device_type, lambda: build_model(model_type, **model_args).to(device).eval())
            if model is None:
                out_of_memory.add(name)
                continue
            generator = torch.Generator().manual_seed(0)
            prompt = torch.randint(model_args["vocab_size"], (1, prompt_tokens),
                                   generator=generator).to(device)
            models[name] = (model, prompt, new)
        for round_ in range(max(rounds, 1) + 1):  # round 0 warms up
            for name, (model, prompt, new) in list(models.items()):
                timed = unless_out_of_memory(device_type, lambda: [
                    time_generation(model, prompt, new, device, dtype, c) for c in (True, False)])
                if timed is None:
                    out_of_memory.add(name)
                    del models[name], model
                    free_memory(device_type)
                    continue
                (cached_s, cached_ids), (uncached_s, uncached_ids) = timed
                if round_ > 0:
                    previous = best.get(name, (float("inf"), float("inf")))
                    best[name] = (min(previous[0], cached_s), min(previous[1], uncached_s),
                                  cached_ids, uncached_ids)
                    print(f"  round {round_}/{rounds} {name} {str(dtype)[6:]}: "
                          f"{new / cached_s:,.0f} tok/s cached, {new / uncached_s:,.0f} uncached",
                          flush=True)
        first = None
        for name in shapes:
            row = dict(model=name, dtype=str(dtype).replace("torch.", ""),
                       oom=name in out_of_memory)
            if name in models:
                model, prompt, new = models[name]
                cached_s, uncached_s, cached_ids, uncached_ids = best[name]
                cached, uncached = new / cached_s, new / uncached_s
                first = first or cached
                row.update(new_tokens=new, cached_tokens_per_s=cached,
                           uncached_tokens_per_s=uncached, speedup=cached / uncached,
                           ratio=cached / first, same_tokens=torch.equal(cached_ids, uncached_ids),
                           kv_measured=measured_kv_bytes_per_token(
                               model, cached_ids, prompt.size(1), device, dtype),
                           kv_counted=model.kv_cache_bytes_per_token(element_size))
            rows.append(row)
        del models
        free_memory(device_type)
    return rows


def generation_table(rows):
    lines = ["| model | dtype | cached tok/s | uncached tok/s | speed-up | cached vs first "
             "| same tokens | KV bytes/token measured | KV bytes/token counted |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        if r["oom"]:
            lines.append(f"| {r['model']} | {r['dtype']} |" + " OOM |" * 7)
            continue
        mismatch = "" if r["kv_measured"] == r["kv_counted"] else " (!)"
        lines.append(f"| {r['model']} | {r['dtype']} | {r['cached_tokens_per_s']:,.0f} | "
                     f"{r['uncached_tokens_per_s']:,.0f} | {r['speedup']:.2f}x | "
                     f"{r['ratio']:.2f}x | {'yes' if r['same_tokens'] else 'no'} | "
                     f"{r['kv_measured']:,.0f}{mismatch} | {r['kv_counted']:,} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# Command line


def config_shapes(paths, vocab_size=0):
    """{file name: (model_type, model_args)} of train.py config files, built as train.py builds
    them (train.py's defaults, the file on top; vocab_size 0: the dataset's), and the first file's
    batch size."""
    shapes, defaults = {}, train_defaults()
    for path in paths:
        settings = parse_overrides([path], defaults)
        vocab = vocab_size or dataset_vocab_size(settings["dataset"], settings["data_dir"])
        common = {k: settings[k] for k in model_keys(settings)}
        model_args = dict(vocab_size=vocab, **common, **settings["model_args"])
        shapes[Path(path).stem] = (settings["model_type"], model_args)
    return shapes, parse_overrides([paths[0]], defaults)["batch_size"]


OPTIONS = dict(vocab_size=0, steps=5, rounds=2, device="auto", dtypes="auto",
               modes="eager,compiled", threads=0, generate=False, prompt_tokens=16, new_tokens=0,
               json="")
# vocab_size 0: the dataset's; json: also write the rows to this file (gpu_check.py reads them)


def main(argv):
    argv = ["--generate=True" if a == "--generate" else a for a in argv]
    files = [a for a in argv if not a.startswith("--")]
    try:
        if files:  # the shapes of train.py config files, as ratios to the first
            args = parse_overrides([a for a in argv if a.startswith("--")],
                                   dict(OPTIONS, batch_size=0))
            check_options(args, batch_size_zero_ok=True)
            shapes, batch_size = config_shapes(files, args["vocab_size"])
            args["batch_size"] = args["batch_size"] or batch_size
            what = f"{len(shapes)} config files"
        else:  # every mechanism at a preset's matched budget
            args = preset_settings(
                argv, keys=("dataset", "data_dir", "block_size", "batch_size", "models")
                + BASELINE_KEYS + MATCHING_KEYS, extra=OPTIONS)
            check_options(args)
            baseline = baseline_of(args)
            if args["vocab_size"]:
                baseline["vocab_size"] = args["vocab_size"]
            matching = {k: args[k] for k in MATCHING_KEYS}
            shapes = matched_shapes(baseline, **matching, models=select_models(args["models"]))
            what = f"{len(shapes)} shapes at the budget of {baseline}"
    except (ConfigError, ValueError) as e:
        usage_error(e)
    if args["threads"]:
        torch.set_num_threads(args["threads"])
    device = pick_device(args["device"])  # auto: cuda > mps > cpu
    names = args["dtypes"].split(",")
    if names == ["auto"]:  # what the device computes natively (train.py's dtype=auto), and fp32
        names = list(dict.fromkeys([auto_dtype(device.split(":")[0]), "float32"]))
    dtypes = [getattr(torch, d) for d in names]
    if args["generate"]:
        print(f"generation speed of {what} on {device} ({torch.get_num_threads()} threads): "
              f"batch 1, a {args['prompt_tokens']}-token prompt, greedy, eager, best of "
              f"{args['rounds']} alternating rounds")
        try:
            rows = benchmark_generation(shapes, device, dtypes, args["prompt_tokens"],
                                        args["new_tokens"], args["rounds"])
        except ValueError as e:
            raise SystemExit(f"error: {e}")
        print("\n" + generation_table(rows))
        write_json(args["json"], rows=rows)
        if any(not r["oom"] and r["kv_measured"] != r["kv_counted"] for r in rows):
            raise SystemExit("error: the measured KV cache differs from "
                             "model.kv_cache_bytes_per_token() (!)")
        return
    modes = [m == "compiled" for m in args["modes"].split(",")]
    print(f"benchmarking {what}, batch {args['batch_size']} on {device} "
          f"({torch.get_num_threads()} threads), {args['rounds']} alternating rounds of "
          f"{args['steps']} steps")
    try:
        rows, peak_note = benchmark_shapes(shapes, args["batch_size"], device, dtypes, modes,
                                           args["steps"], args["rounds"])
    except Interrupted as stop:  # Ctrl-C: print what was measured, then one line
        rows, peak_note = stop.rows, stop.peak_note
        if any(r["tokens_per_s"] for r in rows):
            print(f"\nMFU against: {peak_note}\n\n" + markdown_table(rows))
        raise SystemExit("interrupted: the table above holds what was measured so far"
                         if any(r["tokens_per_s"] for r in rows)
                         else "interrupted before any shape was timed")
    print(f"\nMFU against: {peak_note}\n")
    print(markdown_table(rows) + "\n")
    print(f"tokens/s as a ratio to {next(iter(shapes))} in the same column (tokens/s, MFU):\n")
    print(ratio_table(rows))
    write_json(args["json"], rows=rows, peak=peak_note, device=device_name(device),
               machine=machine_name(), threads=torch.get_num_threads(),
               batch_size=args["batch_size"], steps=args["steps"], rounds=args["rounds"])


def check_options(args, batch_size_zero_ok=False):
    """Every option a benchmark cannot use is one line naming it and what it takes (before any
    shape is matched or built). batch_size 0 means the first config file's, for config files."""
    modes, dtypes = args["modes"].split(","), args["dtypes"].split(",")
    need(set(modes) <= {"eager", "compiled"},
         f"modes={args['modes']!r}: a comma-separated list of eager, compiled")
    need(dtypes == ["auto"] or set(dtypes) <= {"float32", "bfloat16", "float16"},
         f"dtypes={args['dtypes']!r}: auto, or a comma-separated list of float32, bfloat16, "
         f"float16")
    for key in ("steps", "rounds", "prompt_tokens"):
        need(args[key] >= 1, f"{key}={args[key]}: it must be 1 or more")
    for key in ("threads", "new_tokens", "vocab_size"):
        need(args[key] >= 0, f"{key}={args[key]}: it must be 0 or more (0: the default)")
    need(args["batch_size"] >= (0 if batch_size_zero_ok else 1),
         f"batch_size={args['batch_size']}: too small")
    check_device(args["device"])


def device_name(device):
    return torch.cuda.get_device_name(device) if device.startswith("cuda") else f"CPU ({device})"


def write_json(path, **what):
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(what, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
