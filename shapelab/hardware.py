"""
What this machine is fast at: the device `device='auto'` picks (every command: `pick_device`; the
settings it can use are configurator.check_device's), the precision `dtype='auto'` picks (train.py,
sample.py), the peak FLOP/s that MFU is measured against (train.py, bench.py; the model's FLOPs
are model.py's), and the CPU threads that train fastest now (`time_training_passes`, train.py).

- A GPU's peak is its datasheet's dense bf16 tensor-core figure, looked up by the card's name
  (`GPU_BF16_PEAK`: add yours if the log says "peak unknown").
- A CPU has no spec sheet to trust on a cloud VM, so its peak is measured: torch's own best
  matmul speed in the CPU's fastest dtype. A CPU's MFU says "how close to that".
- `machine_name()`: the card, or the CPU with its bf16 units, as result files record it.
- bf16 only where the hardware has it: T4 / V100 report bf16 as supported through emulation,
  which is slow and which torch.compile skips, so they take fp16 (with a GradScaler in train.py);
  a CPU without AMX / AVX512-BF16 emulates bf16 matmuls far slower than fp32, so it takes fp32.
- `compiles_by_default`: torch.compile where it pays and works without setting up: a GPU with
  Triton (Linux's CUDA wheels bring it; Windows' do not).
"""

import importlib.util
import platform
import re
import time
from contextlib import nullcontext
from pathlib import Path

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pick_device(device):
    """The device a setting names: 'auto' is the fastest one here (cuda, else mps, else cpu)."""
    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    return "mps" if torch.backends.mps.is_available() else "cpu"


def auto_dtype(device_type):
    """'bfloat16' where the device computes it natively, else 'float16' on CUDA, else 'float32'."""
    if device_type == "cuda":
        return "bfloat16" if torch.cuda.is_bf16_supported(including_emulation=False) else "float16"
    if device_type == "cpu":
        return "bfloat16" if cpu_matmul_dtype() == torch.bfloat16 else "float32"
    return "float32"


def compiles_by_default(device_type):
    """train.py's compile=None: on for a CUDA GPU whose torch has Triton (the compiler's GPU
    backend; PyTorch's Windows wheels come without it), off on a CPU (~40 s of compiling a model
    for a 5-minute run) and on MPS."""
    return device_type == "cuda" and importlib.util.find_spec("triton") is not None


def autocast(device_type, dtype):
    """The context every script runs its forward passes in: torch.autocast to `dtype` ('bfloat16',
    'float16' or a torch dtype), or nothing at all for float32 (the weights' own precision)."""
    dtype = DTYPES.get(dtype, dtype)
    if dtype == torch.float32:
        return nullcontext()
    return torch.autocast(device_type, dtype=dtype)


def fp32_matmul_precision(device_type):
    """torch's float32 matmul precision for a device: 'high' (TF32 tensor cores: inputs rounded to
    a 10-bit mantissa, fp32 accumulation) on CUDA, as nanoGPT sets it, so fp32 work there runs at
    tensor-core speed; 'highest' (IEEE fp32, torch's default) elsewhere."""
    return "high" if device_type == "cuda" else "highest"


def set_fp32_matmul_precision(device_type):
    """Apply fp32_matmul_precision (train.py and bench.py call this once at start-up)."""
    torch.set_float32_matmul_precision(fp32_matmul_precision(device_type))


# Dense bf16 tensor-core peaks in FLOP/s of one GPU (no 2:4 sparsity), by model name. NVIDIA's
# datasheets print the sparse figure (twice these) with an asterisk; each row gives the source.
# V100 and T4 have no bf16: their fp16 peak (train.py uses fp16 there).
GPU_BF16_PEAK = {
    # nvidia.com/en-us/data-center/h100 and /h200: SXM 1,979, PCIe 1,513, NVL 1,671 TFLOPS sparse
    "H100": 989e12, "H100 PCIe": 756e12, "H100 NVL": 835e12,  # plain "H100 80GB HBM3" is the SXM
    # GH200 Grace Hopper datasheet: 1,979 sparse
    "H200": 989e12, "H200 NVL": 835e12, "GH200": 989e12,
    # HGX B200 / GB200 NVL72 datasheets, per GPU: FP16/BF16 4.5 and 5 PFLOPS sparse
    "B200": 2250e12, "GB200": 2500e12,
    # A100: 624 sparse, SXM and PCIe
    "A100": 312e12, "A800": 312e12, "A30": 165e12, "A40": 149.7e12, "A10": 125e12,
    "A10G": 70e12,  # AWS's A10 variant: no NVIDIA datasheet; the commonly measured figure
    # L40S / L40 / L4 datasheets: 733 / 362 / 242 sparse
    "L40S": 362e12, "L40": 181e12, "L4": 121e12,
    "RTX 4090": 165e12, "RTX 3090": 71e12,  # Ada / Ampere GA102 whitepapers, fp32 accumulation
    # V100 / T4 datasheets (fp16)
    "V100": 125e12, "V100 PCIe": 112e12, "V100S": 130e12, "T4": 65e12,
}


def name_words(name):
    """'NVIDIA A100-SXM4-80GB' -> {'NVIDIA', 'A100', 'SXM4', '80GB'}: the whole words of a name."""
    return set(name.upper().replace("-", " ").replace("_", " ").split())


def gpu_bf16_peak(device_name):
    """(table key, peak FLOP/s) for a torch.cuda.get_device_name(), or (None, None). A key matches
    when all its words are whole words of the name (so 'L4' is not 'L40', 'B200' not 'GB200'); the
    key with the most words wins ('H200 NVL' over 'H200')."""
    words = name_words(device_name)
    matches = [key for key in GPU_BF16_PEAK if name_words(key) <= words]
    if not matches:
        return None, None
    key = max(matches, key=lambda k: len(name_words(k)))
    return key, GPU_BF16_PEAK[key]


_cpu_peak_cache = {}


def cpu_matmul_dtype():
    """bf16 where the CPU multiplies it natively (AMX, AVX512-BF16), else fp32: without hardware
    support torch emulates bf16 matmuls at a small fraction of the fp32 speed."""
    return torch.bfloat16 if torch.ops.mkldnn._is_mkldnn_bf16_supported() else torch.float32


def machine_name():
    """The GPU's name, or the CPU's model name with its bf16 units (AMX, AVX512-BF16; "AVX2
    only": no native bf16), as a result file records where it was measured."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:  # (macOS, Windows)
        return platform.processor() or platform.machine()
    model = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
    flags = set((re.search(r"^flags\s*:\s*(.+)$", info, re.M) or [None, ""])[1].split())
    units = [name for flag, name in (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16"))
             if flag in flags] or (["AVX2 only"] if "avx2" in flags else [])
    return f"{model[1].strip() if model else platform.machine()} ({', '.join(units) or '?'})"


def measure_cpu_peak_flops(size=1024, seconds=0.1, min_runs=5):
    """(best matmul FLOP/s torch reaches on this CPU with all its threads in its fastest dtype,
    the share of the wall time this process's threads got). A cloud VM has no spec sheet to
    trust, so a CPU's MFU says "how close to torch's own best matmul speed". The speed is also
    taken from the CPU time the process got (per thread), and the higher one kept: other programs
    that take the cores stretch the wall clock, not the work, so a busy machine cannot make the
    peak read low (and MFU above 100%). The best of `seconds` of runs (at least `min_runs`): on
    an AMD EPYC with 1 and 2 threads the best of 0.1 s fell within the spread of 0.25-s and 0.5-s
    measurements (about 3%), and every command that logs MFU pays for it at its start."""
    dtype, threads = cpu_matmul_dtype(), torch.get_num_threads()
    key = (size, dtype, threads)
    if key not in _cpu_peak_cache:
        generator = torch.Generator().manual_seed(0)  # leave the global RNG alone (exact resume)
        a, b = (torch.randn(size, size, dtype=dtype, generator=generator) for _ in range(2))
        a @ b  # warm-up
        best, runs, start, cpu = float("inf"), 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - start < seconds or runs < min_runs:
            t0 = time.perf_counter()
            a @ b
            best, runs = min(best, time.perf_counter() - t0), runs + 1
        wall, cpu = time.perf_counter() - start, (time.process_time() - cpu) / threads
        per_run = min(best, cpu / runs if cpu > 0 else best)  # (a coarse CPU clock may read 0)
        _cpu_peak_cache[key] = 2 * size ** 3 / per_run, min(1.0, cpu / wall)
    return _cpu_peak_cache[key]


def peak_flops(device_type):
    """(peak FLOP/s, description) for MFU on this device, or (None, reason)."""
    if device_type == "cuda":
        name = torch.cuda.get_device_name()
        key, flops = gpu_bf16_peak(name)
        if flops is None:
            return None, f"{name}: peak unknown, add it to GPU_BF16_PEAK in hardware.py"
        return flops, f"{name} ({key}) bf16 peak {flops / 1e12:.0f} TFLOP/s"
    if device_type == "cpu":
        flops, share = measure_cpu_peak_flops()
        dtype = str(cpu_matmul_dtype()).replace("torch.", "")
        busy = (f" (a busy machine: this process got {100 * share:.0f}% of its threads' time; "
                f"timed in the CPU time it got)" if share < 0.5 else "")
        return flops, f"CPU {dtype} matmul peak measured now: {flops / 1e12:.2f} TFLOP/s{busy}"
    return None, f"no peak FLOP/s known for {device_type}"


def training_step_timer(model, x, y, autocast_ctx, device_type):
    """A function that times one forward and backward pass of `model` on the batch (x, y), in
    seconds, and changes nothing a run keeps: no update, the gradients dropped, torch's RNG
    states (dropout's) put back - a run with and without the timing trains the same steps."""
    def time_one_pass():
        rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state() if device_type == "cuda" else None
        start = time.perf_counter()
        with autocast_ctx:
            _, loss = model(x, y)
        loss.backward()
        if device_type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        model.zero_grad(set_to_none=True)
        torch.set_rng_state(rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state(cuda_rng)
        return seconds
    return time_one_pass


def fastest_threads(time_one_pass, passes=2):
    """CPU: the number of threads that trains fastest on this machine as it is, set with
    torch.set_num_threads, and its seconds a pass. Other programs may hold some of the cores:
    then torch's threads wait on each other, and fewer threads train faster (2 cores beside two
    busy programs: 625 ms a step on one thread, 802 ms on two). So each count from 1 up to
    torch's default (powers of two, and the default) is timed after an untimed warm-up pass: the
    best of `passes` passes, or one pass where it is already slower than a count before it. A
    count whose threads got less than half their cores' time (the CPU time this process got)
    ends the search: the cores are taken, and more threads would only wait (on a machine whose
    cores are all taken, one pass on two threads took four times one on one).
    Returns (threads, seconds a pass, {threads: seconds})."""
    most = torch.get_num_threads()
    counts = sorted({most} | {2 ** k for k in range(most.bit_length()) if 2 ** k < most})
    torch.set_num_threads(1)
    time_one_pass()  # (the first pass allocates)
    timings = {}
    for threads in counts:
        torch.set_num_threads(threads)
        cpu = time.process_time()
        timings[threads] = time_one_pass()
        share = (time.process_time() - cpu) / (threads * timings[threads])
        for _ in range(passes - 1):
            if timings[threads] <= min(timings.values()):
                timings[threads] = min(timings[threads], time_one_pass())
        if share < 0.5:
            break
    best = min(timings, key=timings.get)
    torch.set_num_threads(best)
    return best, timings[best], timings


def time_training_passes(model, x, y, autocast_ctx, device_type, speak=True):
    """Seconds of one forward and backward pass of `model` on the batch (x, y), timed on this
    machine as it is (training_step_timer: nothing trained, no RNG drawn). A CPU takes the number
    of threads that is fastest now (fastest_threads), and says so in one line where `speak`; a
    GPU's first pass (compiling, allocating) is not timed."""
    time_one_pass = training_step_timer(model, x, y, autocast_ctx, device_type)
    if device_type == "cpu":
        threads, seconds, timings = fastest_threads(time_one_pass)
        if speak:
            print(f"CPU threads: {threads}, the fastest here now (a forward-backward pass: "
                  + ", ".join(f"{1000 * s:.0f} ms on {n}" for n, s in timings.items()) + ")")
        return seconds
    time_one_pass()
    return min(time_one_pass(), time_one_pass())
