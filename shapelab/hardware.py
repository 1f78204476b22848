"""What this machine is fast at: the device and dtype 'auto' picks, autocast, and the peak FLOP/s of
MFU: a GPU's datasheet dense bf16 figure by its name, a CPU's torch matmul speed measured now."""

import importlib.util
import platform
import re
import time
from contextlib import nullcontext
from pathlib import Path

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# dense bf16 FLOP/s of one GPU (datasheets print twice this, with 2:4 sparsity); V100 / T4: fp16
GPU_BF16_PEAK = {
    "H100": 989e12, "H100 PCIe": 756e12, "H100 NVL": 835e12, "H200": 989e12, "H200 NVL": 835e12,
    "GH200": 989e12, "B200": 2250e12, "GB200": 2500e12, "A100": 312e12, "A800": 312e12,
    "A30": 165e12, "A40": 149.7e12, "A10": 125e12, "A10G": 70e12, "L40S": 362e12, "L40": 181e12,
    "L4": 121e12, "RTX 4090": 165e12, "RTX 3090": 71e12, "V100": 125e12, "V100 PCIe": 112e12,
    "V100S": 130e12, "T4": 65e12}
_cpu_peak_cache = {}


def pick_device(device):
    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    return "mps" if torch.backends.mps.is_available() else "cpu"


def auto_dtype(device_type):
    """bf16 where the device runs it natively; a CUDA GPU without it (T4, V100) takes fp16."""
    if device_type == "cuda":
        return "bfloat16" if torch.cuda.is_bf16_supported(including_emulation=False) else "float16"
    # a CPU without AMX or AVX512-BF16 emulates bf16 matmuls, far slower than fp32
    native = device_type == "cpu" and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return "bfloat16" if native else "float32"


def compiles_by_default(device_type):  # a GPU compiles through Triton; a CPU gains too little
    return device_type == "cuda" and importlib.util.find_spec("triton") is not None


def autocast(device_type, dtype):
    dtype = DTYPES.get(dtype, dtype)
    return nullcontext() if dtype == torch.float32 else torch.autocast(device_type, dtype=dtype)


def set_fp32_matmul_precision(device_type):  # TF32 tensor cores for fp32 matmuls on CUDA
    torch.set_float32_matmul_precision("high" if device_type == "cuda" else "highest")


def measure_cpu_peak_flops(size=1024, seconds=0.1):
    """(torch's matmul FLOP/s here, the share of the wall time this process's threads got), timed
    in the CPU time it got too: other programs cannot make the peak read low."""
    key = (size, torch.get_num_threads())
    if key not in _cpu_peak_cache:
        a = torch.randn(size, size, generator=torch.Generator().manual_seed(0))
        a, runs = a.to(DTYPES[auto_dtype("cpu")]), 0
        wall, cpu = time.perf_counter(), time.process_time()
        while runs < 5 or time.perf_counter() - wall < seconds:
            a @ a
            runs += 1
        wall, cpu = time.perf_counter() - wall, (time.process_time() - cpu) / key[1]
        _cpu_peak_cache[key] = 2 * size ** 3 * runs / min(wall, cpu or wall), min(1, cpu / wall)
    return _cpu_peak_cache[key]


def peak_flops(device_type):
    """(peak FLOP/s, what it is) for MFU on this device, or (None, why there is none)."""
    if device_type == "cpu":
        flops, share = measure_cpu_peak_flops()
        busy = f" (a busy machine: {100 * share:.0f}% of its time)" if share < 0.5 else ""
        return flops, f"CPU {auto_dtype('cpu')} matmul peak measured now: {flops / 1e12:.2f} " \
                      f"TFLOP/s{busy}"
    if device_type != "cuda":
        return None, f"no peak FLOP/s known for {device_type}"
    name = torch.cuda.get_device_name()
    words = set(name.upper().replace("-", " ").split())
    keys = [key for key in GPU_BF16_PEAK if set(key.upper().split()) <= words]  # L4 is not L40
    if not keys:
        return None, f"{name}: peak unknown, add it to GPU_BF16_PEAK in hardware.py"
    key = max(keys, key=len)  # the most specific: H200 NVL over H200
    return GPU_BF16_PEAK[key], f"{name} ({key}) bf16 peak {GPU_BF16_PEAK[key] / 1e12:.0f} TFLOP/s"


def machine_name():
    """The GPU, or the CPU with its bf16 units, as result files record where they were measured."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.findall(r"^model name\s*:\s*(.+)$", info, re.M) or [platform.machine()]
    units = [unit for flag, unit in (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16"))
             if flag in info] or ["AVX2 only" if "avx2" in info else "?"]
    return f"{model[0].strip()} ({', '.join(units)})"


def time_training_passes(model, x, y, autocast_ctx, device_type, speak=True):
    """Seconds of a forward-backward pass on (x, y), the second of two (the first allocates);
    nothing trained, the RNG put back: a run trains the same steps with or without it."""
    with torch.random.fork_rng(devices=[x.device] if device_type == "cuda" else []):
        for _ in range(2):
            start = time.perf_counter()
            with autocast_ctx:
                loss = model(x, y)[1]
            loss.backward()
            loss.item()  # waits for the device
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start
