"""
Training speed of every shape: tokens/s and MFU of an optimizer step, each shape as a ratio to the
first one (the plain GPT) measured in the same run.

    python bench.py                                   # every shape of the CPU preset
    python bench.py --modes=eager --dtypes=bfloat16   # one column
    python bench.py --preset=gpu --batch_size=16      # the GPU preset's shapes
    python bench.py config/cea_shakespeare_char_wider.py config/cea_shakespeare_char_cea.py

--dtypes=auto is the device's native bf16 (else fp16) and fp32. The models take turns for a
warm-up round and `rounds` rounds, so a machine that gets busier slows all alike; each keeps its
best round. MFU = 3 x forward FLOPs/token x tokens/s / peak: a GPU's datasheet bf16 figure, a
CPU's matmul speed measured in this run.
"""

import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from shapelab.configurator import ConfigError, check_device, need, parse_overrides, usage_error
from shapelab.hardware import DTYPES, auto_dtype, autocast, machine_name, peak_flops, pick_device
from shapes import (BASELINE_KEYS, MATCHING_KEYS, baseline_of, build_model, dataset_vocab_size,
                    matched_shapes, model_keys, preset_settings, select_models, train_defaults)

# json: a path to write the rows to; OMP_NUM_THREADS sets the CPU threads
OPTIONS = dict(steps=5, rounds=2, device="auto", dtypes="auto", modes="eager,compiled", json="")


def best_of_rounds(steps, rounds, repeat):
    """{name: the least median seconds of `repeat` calls of its step, or None: out of memory},
    the steps taking turns after a round of warm-up."""
    best = dict.fromkeys(steps, float("inf"))
    for round_ in range(rounds + 1):
        for name, step in steps.items():
            if best[name] is None:
                continue
            times = []
            try:
                for _ in range(repeat):
                    start = time.perf_counter()
                    step()
                    times.append(time.perf_counter() - start)
            except torch.OutOfMemoryError:  # the table says OOM
                best[name] = None
                continue
            if round_:
                best[name] = min(best[name], statistics.median(times))
            print(f"  round {round_}/{rounds} {name}: {1000 * statistics.median(times):.0f} ms",
                  flush=True)
    return best


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


def benchmark_shapes(shapes, batch_size, device, dtypes, modes, steps=5, rounds=2):
    """(rows, what MFU is against): a row per (shape, mode, dtype) with tokens_per_s, ratio and
    mfu; a shape out of memory has oom=True and None for its figures."""
    peak, peak_note = peak_flops(device.split(":")[0])
    # one compiled graph per model and dtype, all sharing GPT.forward
    torch._dynamo.config.recompile_limit = max(8, 4 * len(shapes) * len(dtypes))
    rows = []
    for mode, dtype in itertools.product(modes, dtypes):
        models = {}
        for name, (model_type, args) in shapes.items():
            torch.manual_seed(0)
            models[name] = build_model(model_type, **args).to(device)
        best = best_of_rounds({name: training_step(
            torch.compile(model) if mode == "compiled" else model, batch_size, device, dtype)
            for name, model in models.items()}, rounds, steps)
        first = None
        for name, model in models.items():
            seconds = best[name]
            tokens_per_s = seconds and batch_size * model.config.block_size / seconds
            first = first or tokens_per_s
            rows.append(dict(
                model=name, mode=mode, dtype=dtype, oom=seconds is None, tokens_per_s=tokens_per_s,
                ratio=tokens_per_s and tokens_per_s / first,
                mfu=seconds and peak and model.estimate_mfu(tokens_per_s, peak)))
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


def config_shape(settings):
    """(model_type, model_args) of a train.py config file's settings, as train.py builds it."""
    vocab_size = dataset_vocab_size(settings["dataset"], settings["data_dir"])
    return settings["model_type"], dict(vocab_size=vocab_size, **settings["model_args"],
                                        **{k: settings[k] for k in model_keys(settings)})


def settings(argv):
    """The options, shapes, device and dtypes of a command line, every option checked."""
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
    for key, least in dict(steps=1, rounds=1, batch_size=1).items():
        need(args[key] >= least, f"{key}={args[key]}: it must be {least} or more")
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
    torch.backends.cuda.matmul.allow_tf32 = True  # TF32 tensor cores for fp32 matmuls
    print(f"benchmarking {len(shapes)} shapes, batch {args['batch_size']} on {device} "
          f"({torch.get_num_threads()} threads), {args['rounds']} rounds of {args['steps']} steps")
    rows, peak_note = benchmark_shapes(shapes, args["batch_size"], device, dtypes,
                                       args["modes"].split(","), args["steps"], args["rounds"])
    print(f"\nMFU against: {peak_note}\n\ntokens/s as a ratio to {next(iter(shapes))} in the "
          f"same column (tokens/s, MFU):\n\n{ratio_table(rows)}")
    if path := args["json"]:
        on = torch.cuda.get_device_name(device) if "cuda" in device else f"CPU ({device})"
        record = dict(rows=rows, peak=peak_note, device=on, machine=machine_name(),
                      threads=torch.get_num_threads(), batch_size=args["batch_size"])
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
