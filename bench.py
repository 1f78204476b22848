"""
Speed of the models in this repo: tokens/s, ms/iter and MFU of a training step, for the
plain GPT and every mechanism at the same parameter budget, as ratios to the plain GPT.

    python bench.py                                    # all 10 shapes of compare.py's CPU preset,
                                                       # eager/compiled x bf16/fp32 (~25 min on 2 cores)
    python bench.py --modes=eager --dtypes=bfloat16    # one column, ~2 min
    python bench.py --preset=gpu --batch_size=16       # the GPU preset's shapes (12L/768 baseline)
    python bench.py --models=GPT --n_layer=6 --n_embd=384 --block_size=256   # one plain shape

The shapes are compose.matched_shapes of a baseline (the preset's, with any --key override:
n_layer, n_embd, n_head, block_size, ...). For each (mode, dtype) every model is built (and
compiled), warmed up, then timed in turn, `rounds` times: the models alternate, so a machine
that gets busier slows all of them alike, and each keeps its best round. Ratios are to the
plain GPT of the same (mode, dtype), measured in this run.

MFU (model FLOPs utilization) = achieved training FLOPs/s / peak FLOPs/s, where a
training step costs 3x the forward FLOPs that model.flops_per_token() counts.
- On a GPU the peak is the card's dense bf16 tensor-core peak, looked up by name.
- On a CPU there is no spec sheet we can trust for a cloud VM, so the peak is measured
  in the same run: the best bf16 matmul throughput of torch itself on large square
  matrices. MFU on a CPU therefore says "how close to torch's own best matmul speed".
  fp32 runs are scored against the same bf16 peak, so fp32 MFU shows what bf16 buys.

Speed is measured here and never in timed tests. Warm-up steps (and compilation) are
excluded; a round's figure is the median of its timed steps.
"""

import statistics
import time
from contextlib import nullcontext

import torch

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
    from configurator import build_model
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


if __name__ == "__main__":
    import sys
    from compare import BASELINE_KEYS, MATCHING_KEYS, baseline_of, preset_settings, select_models
    from compose import matched_shapes
    from configurator import ConfigError
    try:
        args = preset_settings(sys.argv[1:], keys=("dataset", "data_dir", "block_size", "batch_size", "models")
                               + BASELINE_KEYS + MATCHING_KEYS,
                               extra=dict(vocab_size=0, steps=5, rounds=2, device="auto", dtypes="bfloat16,float32",
                                          modes="eager,compiled", threads=0))  # vocab_size 0: the dataset's
        baseline = baseline_of(args)
        if args["vocab_size"]:
            baseline["vocab_size"] = args["vocab_size"]
        shapes = select_models(matched_shapes(baseline, **{k: args[k] for k in MATCHING_KEYS}), args["models"])
    except (ConfigError, ValueError) as e:
        raise SystemExit(f"error: {e}")
    if args["threads"]:
        torch.set_num_threads(args["threads"])
    device = args["device"] if args["device"] != "auto" else "cuda" if torch.cuda.is_available() else "cpu"
    dtypes = [getattr(torch, d) for d in args["dtypes"].split(",")]
    modes = [m == "compiled" for m in args["modes"].split(",")]
    print(f"benchmarking {len(shapes)} shapes at the budget of {baseline}, batch {args['batch_size']} on {device} "
          f"({torch.get_num_threads()} threads), {args['rounds']} alternating rounds of {args['steps']} steps")
    rows, peak_note = benchmark_shapes(shapes, args["batch_size"], device, dtypes, modes, args["steps"], args["rounds"])
    print(f"\nMFU against: {peak_note}\n")
    print(markdown_table(rows) + "\n")
    print("tokens/s as a ratio to the plain GPT of the same column (tokens/s, MFU):\n")
    print(ratio_table(rows))
