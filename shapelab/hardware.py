"""What this machine is fast at: the device and dtype 'auto' picks, autocast, the peak FLOP/s of MFU
(a GPU's dense bf16 figure by name, half its datasheet's sparse one), the fastest CPU threads."""

import re
import time
from contextlib import nullcontext
from pathlib import Path

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
GPU_BF16_PEAK = {
    "H100": 989e12, "H100 PCIe": 756e12, "H100 NVL": 835e12, "H200": 989e12, "H200 NVL": 835e12,
    "GH200": 989e12, "B200": 2250e12, "GB200": 2500e12, "A100": 312e12, "A800": 312e12,
    "A30": 165e12, "A40": 149.7e12, "A10": 125e12, "A10G": 70e12, "L40S": 362e12, "L40": 181e12,
    "L4": 121e12, "RTX 4090": 165e12, "RTX 3090": 71e12, "V100": 125e12, "V100 PCIe": 112e12,
    "V100S": 130e12, "T4": 65e12}


def pick_device(device):
    if device != "auto":
        return device
    mps = torch.backends.mps.is_available()
    return "cuda" if torch.cuda.is_available() else "mps" if mps else "cpu"


def auto_dtype(device_type):
    """bf16 where it runs natively (a CPU emulating it is slower than fp32), else CUDA fp16."""
    if device_type == "cuda":
        return "bfloat16" if torch.cuda.is_bf16_supported(including_emulation=False) else "float16"
    native = device_type == "cpu" and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return "bfloat16" if native else "float32"


def autocast(device_type, dtype):
    dtype = DTYPES.get(dtype, dtype)
    return nullcontext() if dtype == torch.float32 else torch.autocast(device_type, dtype=dtype)


def peak_flops(device_type):
    """(peak FLOP/s, what it is) for MFU on this device, or (None, why there is none)."""
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
    model = re.findall(r"^model name\s*:\s*(.+)$", info, re.M) or ["unknown CPU"]
    units = [unit for flag, unit in (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16"))
             if flag in info] or ["AVX2 only" if "avx2" in info else "?"]
    return f"{model[0].strip()} ({', '.join(units)})"


def fastest_cpu_threads(model, x, y, autocast_ctx):
    """Sets the thread count (all, half, ..., 1) whose forward-backward pass is fastest now."""
    def seconds_a_pass(threads):
        torch.set_num_threads(threads)
        start = time.perf_counter()
        with autocast_ctx:
            model(x, y)[1].backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - start
    most = torch.get_num_threads()
    seconds_a_pass(most)  # the first pass allocates
    counts = {most >> k for k in range(most.bit_length())}
    torch.set_num_threads(min(counts, key=seconds_a_pass))
