"""
All speed measurement: tokens/s and MFU of a training step, and decode tokens/s with and without
the KV cache, each shape as a ratio to the first one (the plain GPT) in the same run.

    python bench.py                                   # every shape of the CPU preset
    python bench.py --modes=eager --dtypes=bfloat16   # one column
    python bench.py --preset=gpu --batch_size=16      # the GPU preset's shapes
    python bench.py config/cea_shakespeare_char_wider.py config/cea_shakespeare_char_cea.py
    python bench.py --generate --dtypes=float32       # decoding, cached and uncached

Options: OPTIONS below, --batch_size and a preset's keys; --dtypes=auto is the device's native
bf16 or fp16, and fp32. The models take turns for a warm-up round and `rounds` rounds, so a
machine that gets busier slows all alike, and each keeps its best round. MFU = 3 x forward FLOPs
per token x tokens/s / the peak: a GPU's datasheet bf16 figure, a CPU's matmul speed measured in
this run. Generation exits 1 where the KV cache holds other bytes per token than
model.kv_cache_bytes_per_token() counts.
"""

import functools
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from model import KVCache
from shapelab.configurator import ConfigError, check_device, need, parse_overrides, usage_error
from shapelab.hardware import DTYPES, auto_dtype, autocast, machine_name, peak_flops, pick_device
from shapes import (BASELINE_KEYS, MATCHING_KEYS, baseline_of, build_model, dataset_vocab_size,
                    matched_shapes, model_keys, preset_settings, select_models, train_defaults)

# threads 0: torch's; new_tokens 0: fill the context; json: a path
OPTIONS = dict(steps=5, rounds=2, device="auto", dtypes="auto", modes="eager,compiled", threads=0,
               generate=False, prompt_tokens=16, new_tokens=0, json="")


def time_of(step):
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def best_of_rounds(steps, rounds, repeat=1):
    """{name: the least median seconds of `repeat` calls of its step, or None: out of GPU memory,
    tried no more}, the steps taking turns, after a round of warm-up."""
    best = dict.fromkeys(steps, float("inf"))
    for round_ in range(rounds + 1):
        for name, step in steps.items():
            if best[name] is None:
                continue
            try:
                took = statistics.median(time_of(step) for _ in range(repeat))
            except torch.OutOfMemoryError:
                took = None
            best[name] = took and min(best[name], took if round_ else float("inf"))
            print(f"  round {round_}/{rounds} {name}: "
                  + (f"{1000 * took:.0f} ms" if took else "out of memory"), flush=True)
    return best


def built(shapes, device):
    """{name: model}, each from seed 0."""
    models = {}
    for name, (model_type, args) in shapes.items():
        torch.manual_seed(0)
        models[name] = build_model(model_type, **args).to(device)
    return models


def training_step(model, batch_size, device, dtype):
    """An optimizer step on random tokens."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = torch.randint(model.config.vocab_size, (2, batch_size, model.config.block_size),
                         device=device)

    def step():
        with autocast(device.split(":")[0], dtype):
            loss = model(x, y)[1]
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()  # waits for the device
    return step


def add_ratios(rows, key):
    """Each row's `ratio`: its key over the first row's that has one."""
    first = next((r[key] for r in rows if r[key]), None)
    for r in rows:
        r["ratio"] = r[key] and r[key] / first
    return rows


def benchmark_shapes(shapes, batch_size, device, dtypes, modes, steps=5, rounds=2):
    """(rows, what MFU is against): a row per (shape, mode, dtype) with ms_per_iter, tokens_per_s,
    ratio and mfu; one out of memory has oom=True and None for its figures."""
    peak, peak_note = peak_flops(device.split(":")[0])
    # one compiled graph per model and dtype, all sharing GPT.forward
    torch._dynamo.config.recompile_limit = max(8, 4 * len(shapes) * len(dtypes))
    rows = []
    for mode, dtype in itertools.product(modes, dtypes):
        models = built(shapes, device)
        best = best_of_rounds({name: training_step(
            torch.compile(model) if mode == "compiled" else model, batch_size, device, dtype)
            for name, model in models.items()}, rounds, steps)
        group = []
        for name, model in models.items():
            seconds = best[name]  # None: out of memory
            tokens_per_s = seconds and batch_size * model.config.block_size / seconds
            group.append(dict(
                model=name, mode=mode, dtype=dtype, oom=seconds is None,
                ms_per_iter=seconds and 1000 * seconds, tokens_per_s=tokens_per_s, ratio=None,
                mfu=seconds and peak and model.estimate_mfu(tokens_per_s, peak)))
        rows += add_ratios(group, "tokens_per_s")
        del models, model
        torch._dynamo.reset()
    return rows, peak_note


def ratio_table(rows):
    """A row per model, a column per (mode, dtype)."""
    cells = {"model": [f"{r['mode']} {r['dtype']}" for r in rows if r["model"] == rows[0]["model"]]}
    for r in rows:
        mfu = f", MFU {100 * r['mfu']:.1f}%" if r["mfu"] else ""
        cells.setdefault(r["model"], []).append(
            "OOM" if r["oom"] else f"{r['ratio']:.2f}x ({r['tokens_per_s']:,.0f} tok/s{mfu})")
    lines = [f"| {name} | " + " | ".join(row) + " |" for name, row in cells.items()]
    return "\n".join([lines[0], "|---|" + "---:|" * len(cells["model"]), *lines[1:]])


@torch.no_grad()
def measured_kv_bytes_per_token(model, prompt, new, dtype):
    """The bytes per position of a model.KVCache fed as generate feeds it `new` tokens: the prompt
    at once, then a token at a time."""
    cache = KVCache(model)
    with autocast(prompt.device.type, dtype):
        for ids in [prompt] + [prompt[:, :1]] * (new - 1):
            model(ids, cache=cache)
    return cache.nbytes / cache.length


def greedy(model, prompt, new, dtype, tokens, key):
    """Greedy decoding of `new` tokens, with the KV cache if key[1]; the tokens in tokens[key]."""
    with autocast(prompt.device.type, dtype):
        tokens[key] = model.generate(prompt, new, temperature=0, use_cache=key[1]).tolist()


def benchmark_generation(shapes, device, dtypes, prompt_tokens=16, new_tokens=0, rounds=2):
    """A row per (shape, dtype): greedy decode tokens/s (prefill included) with and without the
    cache, whether both chose the same tokens, the cache's bytes per token measured and counted."""
    rows = []
    for dtype in dtypes:
        models, steps, tokens, prompts = built(shapes, device), {}, {}, {}
        for name, model in models.items():
            prompt = torch.randint(model.config.vocab_size, (1, prompt_tokens), device=device)
            prompts[name] = prompt
            new = new_tokens or model.config.block_size - prompt_tokens
            for cached in (True, False):
                steps[name, cached] = functools.partial(greedy, model.eval(), prompt, new, dtype,
                                                        tokens, (name, cached))
        best, group = best_of_rounds(steps, rounds), []
        for name, model in models.items():
            new = len(tokens[name, True][0]) - prompt_tokens
            cached, uncached = best[name, True], best[name, False]
            group.append(dict(
                model=name, dtype=dtype, cached_tokens_per_s=new / cached,
                uncached_tokens_per_s=new / uncached, ratio=None, speedup=uncached / cached,
                same_tokens=tokens[name, True] == tokens[name, False],
                kv_measured=measured_kv_bytes_per_token(model, prompts[name], new, dtype),
                kv_counted=model.kv_cache_bytes_per_token(DTYPES[dtype].itemsize)))
        rows += add_ratios(group, "cached_tokens_per_s")
    return rows


def generation_table(rows):
    lines = ["| model | dtype | cached tok/s | uncached tok/s | speed-up | cached vs first "
             "| same tokens | KV bytes/token measured | KV bytes/token counted |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        mismatch = "" if r["kv_measured"] == r["kv_counted"] else " (!)"
        lines.append(f"| {r['model']} | {r['dtype']} | {r['cached_tokens_per_s']:,.0f} | "
                     f"{r['uncached_tokens_per_s']:,.0f} | {r['speedup']:.2f}x | "
                     f"{r['ratio']:.2f}x | {'yes' if r['same_tokens'] else 'no'} | "
                     f"{r['kv_measured']:,.0f}{mismatch} | {r['kv_counted']:,} |")
    return "\n".join(lines)


def config_shape(settings):
    """(model_type, model_args) of a train.py config file's settings, as train.py builds it."""
    vocab_size = dataset_vocab_size(settings["dataset"], settings["data_dir"])
    return settings["model_type"], dict(vocab_size=vocab_size, **settings["model_args"],
                                        **{k: settings[k] for k in model_keys(settings)})


def settings(argv):
    """The options, shapes, device and dtypes of a command line, every option checked."""
    argv = ["--generate=True" if a == "--generate" else a for a in argv]
    files = [a for a in argv if not a.startswith("--")]
    if files:
        args = parse_overrides([a for a in argv if a.startswith("--")], dict(OPTIONS, batch_size=0))
        runs = {Path(path).stem: parse_overrides([path], train_defaults()) for path in files}
        shapes = {name: config_shape(run) for name, run in runs.items()}
        args["batch_size"] = args["batch_size"] or next(iter(runs.values()))["batch_size"]
    else:
        args = preset_settings(argv, keys=("dataset", "data_dir", "block_size", "batch_size",
                                           "models") + BASELINE_KEYS + MATCHING_KEYS, extra=OPTIONS)
        shapes = matched_shapes(baseline_of(args), **{k: args[k] for k in MATCHING_KEYS},
                                models=select_models(args["models"]))
    need(set(args["modes"].split(",")) <= {"eager", "compiled"},
         f"modes={args['modes']!r}: a comma-separated list of eager, compiled")
    for key, least in dict(steps=1, rounds=1, prompt_tokens=1, batch_size=1, threads=0).items():
        need(args[key] >= least, f"{key}={args[key]}: it must be {least} or more")
    block_size = min(model_args["block_size"] for _, model_args in shapes.values())
    need(not args["generate"] or args["prompt_tokens"] + max(args["new_tokens"], 1) <= block_size,
         f"prompt_tokens={args['prompt_tokens']} + new_tokens={args['new_tokens']} must fit in "
         f"block_size={block_size}")
    check_device(args["device"])
    device = pick_device(args["device"])
    dtypes = args["dtypes"].split(",")
    if dtypes == ["auto"]:  # what train.py's dtype=auto picks, and fp32
        dtypes = list(dict.fromkeys([auto_dtype(device.split(":")[0]), "float32"]))
    need(set(dtypes) <= DTYPES.keys(), f"dtypes={args['dtypes']!r}: auto, or a comma-separated "
                                       f"list of {', '.join(DTYPES)}")
    return args, shapes, device, dtypes


def main(argv):
    try:
        args, shapes, device, dtypes = settings(argv)
    except (ConfigError, ValueError) as e:  # ValueError: a shape that cannot be matched
        usage_error(e)
    torch.set_num_threads(args["threads"] or torch.get_num_threads())
    torch.backends.cuda.matmul.allow_tf32 = True  # TF32 tensor cores for fp32 matmuls
    if args["generate"]:
        rows = benchmark_generation(shapes, device, dtypes, args["prompt_tokens"],
                                    args["new_tokens"], args["rounds"])
        print(f"\ngreedy generation, batch 1, a {args['prompt_tokens']}-token prompt:\n\n"
              + generation_table(rows))
        record = dict(rows=rows)
    else:
        print(f"benchmarking {len(shapes)} shapes, batch {args['batch_size']} on {device} "
              f"({torch.get_num_threads()} threads), {args['rounds']} rounds of {args['steps']} "
              f"steps")
        rows, peak_note = benchmark_shapes(shapes, args["batch_size"], device, dtypes,
                                           args["modes"].split(","), args["steps"], args["rounds"])
        print(f"\nMFU against: {peak_note}\n\ntokens/s as a ratio to {next(iter(shapes))} in the "
              f"same column (tokens/s, MFU):\n\n{ratio_table(rows)}")
        on = torch.cuda.get_device_name(device) if "cuda" in device else f"CPU ({device})"
        record = dict(rows=rows, peak=peak_note, device=on, machine=machine_name(),
                      threads=torch.get_num_threads(), batch_size=args["batch_size"],
                      steps=args["steps"], rounds=args["rounds"])
    if path := args["json"]:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(record, indent=1))
    if any(r.get("kv_measured") != r.get("kv_counted") for r in rows):
        raise SystemExit("error: the measured KV cache differs from "
                         "model.kv_cache_bytes_per_token() (!)")


if __name__ == "__main__":
    main(sys.argv[1:])
