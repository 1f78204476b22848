"""
All speed measurement of this repo: tokens/s, ms/iter and MFU of a training step, as ratios to
the first model measured in the same run.

Two ways to say which models:

    # every mechanism at the plain GPT's budget (compose.matched_shapes of a preset's baseline)
    python bench.py                                    # all 10 shapes of the CPU preset,
                                                       # eager/compiled x bf16/fp32 (~25 min on 2 cores)
    python bench.py --modes=eager --dtypes=bfloat16    # one column, ~2 min
    python bench.py --preset=gpu --batch_size=16       # the GPU preset's shapes (12L/768 baseline)
    python bench.py --models=GPT,hourglass --n_layer=12 --n_head=12 --n_embd=768 --block_size=2048

    # the shapes of train.py config files, exactly as train.py builds them (ratios to the first)
    python bench.py config/cea_shakespeare_char_wider.py config/cea_shakespeare_char_cea.py --modes=eager

Options of both: --batch_size (config files: the first file's by default), --steps, --rounds,
--modes=eager,compiled, --dtypes=bfloat16,float32, --device, --threads, --vocab_size (0: the
dataset's). The matched form also takes the preset keys (n_layer, n_embd, n_head, block_size, the
matching keys of compose.py, --models=names).

For each (mode, dtype) every model is built (and compiled), warmed up, then timed in turn,
`rounds` times: the models alternate, so a machine that gets busier slows all of them alike, and
each keeps its best round. Ratios are to the first model of the same (mode, dtype).

MFU (model FLOPs utilization) = achieved training FLOPs/s / peak FLOPs/s, where a
training step costs 3x the forward FLOPs that model.flops_per_token() counts.
- On a GPU the peak is the card's dense bf16 tensor-core peak, looked up by name.
- On a CPU there is no spec sheet we can trust for a cloud VM, so the peak is measured
  in the same run (model.measure_cpu_peak_flops): the best matmul throughput of torch itself
  on large square matrices, in bf16 where the CPU has it natively (AMX, AVX512-BF16), else in
  fp32. MFU on a CPU therefore says "how close to torch's own best matmul speed"; every dtype
  is scored against that one peak.

Speed is measured here and never in timed tests. Warm-up steps (and compilation) are
excluded; a round's figure is the median of its timed steps.
"""

import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from compose import (BASELINE_KEYS, MATCHING_KEYS, baseline_of, dataset_vocab_size, matched_shapes, preset_settings,
                     select_models)
from configurator import MODEL_KEYS, ConfigError, build_model, parse_overrides, train_defaults
from model import peak_flops


def time_training_steps(model, batch_size, block_size, vocab_size, device, dtype, steps=10, warmup=3):
    """Median seconds per optimizer step of forward + backward + AdamW on random tokens."""
    ctx = torch.autocast(device.split(":")[0], dtype=dtype) if dtype != torch.float32 else nullcontext()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(vocab_size, (batch_size, block_size), device=device)
    y = torch.randint(vocab_size, (batch_size, block_size), device=device)
    times = []
    for step in range(warmup + steps):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
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
    with ms_per_iter, tokens_per_s, mfu, and `ratio` = tokens/s over the first shape's."""
    device_type = device.split(":")[0]
    peak, peak_note = peak_flops(device_type)
    if any(compiled_modes):  # many models share GPT.forward: let dynamo keep one compiled graph per model
        # and dtype instead of falling back to eager after the default 8 (recompile_limit, once cache_size_limit)
        import torch._dynamo.config as dynamo_config
        key = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
        setattr(dynamo_config, key, max(getattr(dynamo_config, key), 4 * len(shapes) * len(dtypes)))
    rows = []
    for compiled in compiled_modes:
        mode = "compiled" if compiled else "eager"
        for dtype in dtypes:
            runners, best = {}, {}
            for name, (model_type, model_args) in shapes.items():
                torch.manual_seed(0)
                model = build_model(model_type, **model_args).to(device)
                runners[name] = (model, torch.compile(model) if compiled else model, model_args)
            for round_ in range(rounds):  # alternate the models; the first round also warms up / compiles
                for name, (model, runner, args) in runners.items():
                    t0 = time.perf_counter()
                    seconds = time_training_steps(runner, batch_size, args["block_size"], args["vocab_size"], device,
                                                  dtype, steps=steps, warmup=(3 if compiled else 2) if round_ == 0 else 1)
                    best[name] = min(best.get(name, float("inf")), seconds)
                    print(f"  round {round_ + 1}/{rounds} {name} {mode} {str(dtype)[6:]}: {1000 * seconds:.0f} ms/iter "
                          f"({time.perf_counter() - t0:.0f} s)", flush=True)
            first = None
            for name, (model, runner, args) in runners.items():
                tokens_per_s = batch_size * args["block_size"] / best[name]
                first = first or tokens_per_s
                rows.append(dict(model=name, mode=mode, dtype=str(dtype).replace("torch.", ""),
                                 ms_per_iter=1000 * best[name], tokens_per_s=tokens_per_s, ratio=tokens_per_s / first,
                                 mfu=3 * model.flops_per_token(args["block_size"]) * tokens_per_s / peak if peak else None))
            del runners
            if compiled:
                torch._dynamo.reset()  # drop the compiled graphs of this group (and what they hold)
            if device_type == "cuda":
                torch.cuda.empty_cache()
    return rows, peak_note


def markdown_table(rows):
    ratio = "ratio" in rows[0] and len({r["model"] for r in rows}) > 1
    lines = ["| model | mode | dtype | ms/iter | tokens/s |" + (" vs first |" if ratio else "") + " MFU |",
             "|---|---|---|---:|---:|" + ("---:|" if ratio else "") + "---:|"]
    for r in rows:
        mfu = f"{100 * r['mfu']:.1f}%" if r["mfu"] is not None else "n/a"
        lines.append(f"| {r['model']} | {r['mode']} | {r['dtype']} | {r['ms_per_iter']:.0f} | {r['tokens_per_s']:,.0f} |"
                     + (f" {r['ratio']:.2f}x |" if ratio else "") + f" {mfu} |")
    return "\n".join(lines)


def ratio_table(rows):
    """One row per model, one column per (mode, dtype): tokens/s as a ratio to the first model
    (the plain GPT), with the MFU under it."""
    columns = list(dict.fromkeys((r["mode"], r["dtype"]) for r in rows))
    cell = {(r["model"], r["mode"], r["dtype"]): r for r in rows}
    lines = ["| model | " + " | ".join(f"{m} {d}" for m, d in columns) + " |", "|---|" + "---:|" * len(columns)]
    for name in dict.fromkeys(r["model"] for r in rows):
        cells = []
        for m, d in columns:
            r = cell[(name, m, d)]
            mfu = f", MFU {100 * r['mfu']:.1f}%" if r["mfu"] is not None else ""
            cells.append(f"{r['ratio']:.2f}x ({r['tokens_per_s']:,.0f} tok/s{mfu})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def config_shapes(paths, vocab_size=0):
    """{file name: (model_type, model_args)} of train.py config files, built as train.py builds them
    (train.py's defaults, the file on top; vocab_size 0: the dataset's), and the first file's batch size."""
    shapes, defaults = {}, train_defaults()
    for path in paths:
        settings = parse_overrides([path], defaults)
        vocab = vocab_size or dataset_vocab_size(settings["dataset"], settings["data_dir"])
        model_args = dict(vocab_size=vocab, **{k: settings[k] for k in MODEL_KEYS}, **settings["model_args"])
        shapes[Path(path).stem] = (settings["model_type"], model_args)
    return shapes, parse_overrides([paths[0]], defaults)["batch_size"]


OPTIONS = dict(vocab_size=0, steps=5, rounds=2, device="auto", dtypes="bfloat16,float32", modes="eager,compiled",
               threads=0)  # vocab_size 0: the dataset's


def main(argv):
    files = [a for a in argv if not a.startswith("--")]
    try:
        if files:  # the shapes of train.py config files, as ratios to the first
            args = parse_overrides([a for a in argv if a.startswith("--")], dict(OPTIONS, batch_size=0))
            shapes, batch_size = config_shapes(files, args["vocab_size"])
            args["batch_size"] = args["batch_size"] or batch_size
            what = f"{len(shapes)} config files"
        else:  # every mechanism at a preset's matched budget
            args = preset_settings(argv, keys=("dataset", "data_dir", "block_size", "batch_size", "models")
                                   + BASELINE_KEYS + MATCHING_KEYS, extra=OPTIONS)
            baseline = baseline_of(args)
            if args["vocab_size"]:
                baseline["vocab_size"] = args["vocab_size"]
            shapes = select_models(matched_shapes(baseline, **{k: args[k] for k in MATCHING_KEYS}), args["models"])
            what = f"{len(shapes)} shapes at the budget of {baseline}"
    except (ConfigError, ValueError) as e:
        raise SystemExit(f"error: {e}")
    if args["threads"]:
        torch.set_num_threads(args["threads"])
    device = args["device"] if args["device"] != "auto" else "cuda" if torch.cuda.is_available() else "cpu"
    dtypes = [getattr(torch, d) for d in args["dtypes"].split(",")]
    modes = [m == "compiled" for m in args["modes"].split(",")]
    print(f"benchmarking {what}, batch {args['batch_size']} on {device} ({torch.get_num_threads()} threads), "
          f"{args['rounds']} alternating rounds of {args['steps']} steps")
    rows, peak_note = benchmark_shapes(shapes, args["batch_size"], device, dtypes, modes, args["steps"], args["rounds"])
    print(f"\nMFU against: {peak_note}\n")
    print(markdown_table(rows) + "\n")
    print(f"tokens/s as a ratio to {next(iter(shapes))} in the same column (tokens/s, MFU):\n")
    print(ratio_table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
