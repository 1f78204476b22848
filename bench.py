"""
Speed of the models in this repo: tokens/s, ms/iter and MFU of a training step.

    python bench.py                                   # default shape, CPU: eager/compiled x bf16/fp32
    python bench.py --n_layer=12 --n_embd=768 --block_size=1024 --batch_size=8   # any shape

MFU (model FLOPs utilization) = achieved training FLOPs/s / peak FLOPs/s, where a
training step costs 3x the forward FLOPs that model.flops_per_token() counts.
- On a GPU the peak is the card's dense bf16 tensor-core peak, looked up by name.
- On a CPU there is no spec sheet we can trust for a cloud VM, so the peak is measured
  in the same run: the best bf16 matmul throughput of torch itself on large square
  matrices. MFU on a CPU therefore says "how close to torch's own best matmul speed".
  fp32 runs are scored against the same bf16 peak, so fp32 MFU shows what bf16 buys.

Speed is measured here and never in timed tests. Warm-up steps (and compilation) are
excluded; the figure is the median of the timed steps.
"""

import statistics
import time
from contextlib import nullcontext

import torch

# Dense bf16 tensor-core peaks in FLOP/s (no sparsity), matched against the device name.
GPU_BF16_PEAK = [
    ("H200", 989e12), ("H100 NVL", 835e12), ("H100 PCIe", 756e12), ("H100", 989e12),
    ("GH200", 989e12), ("B200", 2250e12), ("A100", 312e12), ("A10G", 70e12), ("A10", 125e12),
    ("L40S", 362e12), ("L4", 121e12), ("RTX 4090", 165e12), ("RTX 3090", 71e12),
    ("V100", 125e12), ("T4", 65e12),  # V100 and T4 have no bf16: their fp16 peak
]

_cpu_peak_cache = {}


def measure_cpu_peak_flops(size=2048, seconds=0.5):
    """Best bf16 matmul FLOP/s torch reaches on this CPU (with all its threads)."""
    key = (size, torch.get_num_threads())
    if key not in _cpu_peak_cache:
        generator = torch.Generator().manual_seed(0)  # leave the global RNG alone (exact resume)
        a, b = (torch.randn(size, size, dtype=torch.bfloat16, generator=generator) for _ in range(2))
        a @ b  # warm-up
        best, start = float("inf"), time.perf_counter()
        while time.perf_counter() - start < seconds:
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
        _cpu_peak_cache[key] = 2 * size ** 3 / best
    return _cpu_peak_cache[key]


def peak_flops(device_type):
    """(peak FLOP/s, description) for MFU on this device, or (None, reason)."""
    if device_type == "cuda":
        name = torch.cuda.get_device_name()
        for key, flops in GPU_BF16_PEAK:
            if key in name:
                return flops, f"{name} bf16 peak {flops / 1e12:.0f} TFLOP/s"
        return None, f"{name}: peak unknown, add it to GPU_BF16_PEAK in bench.py"
    if device_type == "cpu":
        flops = measure_cpu_peak_flops()
        return flops, f"CPU bf16 matmul peak measured now: {flops / 1e12:.2f} TFLOP/s"
    return None, f"no peak FLOP/s known for {device_type}"


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


def benchmark(model_args, batch_size, device, dtypes, compiled_modes, steps=10, model_type="gpt"):
    """Rows of dicts: one per (compile mode, dtype) for one model shape."""
    from configurator import build_model
    device_type = device.split(":")[0]
    peak, peak_note = peak_flops(device_type)
    rows = []
    for compiled in compiled_modes:
        for dtype in dtypes:
            torch.manual_seed(0)
            model = build_model(model_type, **model_args).to(device)
            flops_per_token = model.flops_per_token(model_args["block_size"])
            runner = torch.compile(model) if compiled else model
            warmup = 3 if compiled else 2
            t0 = time.perf_counter()
            seconds = time_training_steps(runner, batch_size, model_args["block_size"], model_args["vocab_size"],
                                          device, dtype, steps=steps, warmup=warmup)
            tokens_per_s = batch_size * model_args["block_size"] / seconds
            rows.append(dict(model=model_type, mode="compiled" if compiled else "eager",
                             dtype=str(dtype).replace("torch.", ""), ms_per_iter=1000 * seconds,
                             tokens_per_s=tokens_per_s,
                             mfu=3 * flops_per_token * tokens_per_s / peak if peak else None,
                             wall_s=time.perf_counter() - t0))
            print(f"  {rows[-1]['model']} {rows[-1]['mode']} {rows[-1]['dtype']}: {rows[-1]['ms_per_iter']:.0f} ms/iter, "
                  f"{tokens_per_s:,.0f} tok/s", flush=True)
            del model, runner
    return rows, peak_note


def markdown_table(rows):
    lines = ["| model | mode | dtype | ms/iter | tokens/s | MFU |", "|---|---|---|---:|---:|---:|"]
    for r in rows:
        mfu = f"{100 * r['mfu']:.1f}%" if r["mfu"] is not None else "n/a"
        lines.append(f"| {r['model']} | {r['mode']} | {r['dtype']} | {r['ms_per_iter']:.0f} | {r['tokens_per_s']:,.0f} | {mfu} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    from configurator import parse_overrides
    args = parse_overrides(sys.argv[1:], dict(
        n_layer=6, n_embd=384, n_head=6, block_size=256, vocab_size=84, batch_size=32, steps=10,
        device="auto", dtypes="bfloat16,float32", modes="eager,compiled"))
    device = args.pop("device")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    batch_size, steps = args.pop("batch_size"), args.pop("steps")
    dtypes = [getattr(torch, d) for d in args.pop("dtypes").split(",")]
    modes = [m == "compiled" for m in args.pop("modes").split(",")]
    print(f"benchmarking {args} batch {batch_size} on {device} with {torch.get_num_threads()} threads")
    rows, peak_note = benchmark(args, batch_size, device, dtypes, modes, steps=steps)
    print(f"\nMFU against: {peak_note}\n")
    print(markdown_table(rows))
