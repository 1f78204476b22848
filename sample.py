"""
Generate text from a trained checkpoint (any model_type).

    python sample.py                                   # from out/ckpt.pt, 3 samples
    python sample.py --out_dir=out-hourglass --start="ROMEO:" --num_samples=5 --max_new_tokens=200
    python sample.py --start=FILE:prompt.txt --temperature=0.6 --top_k=50 --seed=7
    python sample.py --temperature=0                   # greedy: the same text every time

The tokenizer is the one the checkpoint was trained with (its meta.json, saved inside), and only
ids of that vocabulary are sampled (never a padded embedding's extra rows).
"""

import sys
from pathlib import Path

import torch

from shapelab.checkpoint import load_checkpoint
from shapelab.configurator import ConfigError, check_device, need, parse_overrides, usage_error
from shapelab.hardware import DTYPES, auto_dtype, autocast, pick_device
from shapelab.tokenizer import Tokenizer
from shapes import model_from_checkpoint

# -----------------------------------------------------------------------------------------
out_dir = "out"  # the folder with ckpt.pt
start = "\n"  # the prompt, or FILE:path/to/prompt.txt
num_samples = 3  # how many samples to draw from the one prompt
max_new_tokens = 500  # tokens generated per sample
temperature = 0.8  # 1.0: the model's distribution; < 1 sharper; 0: greedy
top_k = 200  # keep only the top_k most likely tokens; 0: no top-k (every token)
seed = 1337  # the sampling RNG: the same seed draws the same text
device = "auto"  # auto (cuda > mps > cpu), or cpu, cuda, cuda:1, mps
dtype = "auto"  # auto: bfloat16 where the device has it natively, else float16 (GPU), float32 (CPU)
# -----------------------------------------------------------------------------------------
try:  # every setting it cannot use is one line, exit status 2
    globals().update(parse_overrides(sys.argv[1:], {
        k: v for k, v in dict(globals()).items()
        if not k.startswith("_") and isinstance(v, (int, float, str))}))
    need(0 <= temperature < float("inf"), f"temperature={temperature}: use 0 (greedy) or more")
    need(top_k >= 0, f"top_k={top_k}: use 1 or more (0: all tokens)")
    need(dtype in ("auto", *DTYPES), f"dtype={dtype!r}: use one of auto, {', '.join(DTYPES)}")
    check_device(device)
    if start.startswith("FILE:"):
        start = Path(start[5:]).read_text(encoding="utf-8")
except (ConfigError, OSError, UnicodeDecodeError) as e:
    usage_error(e)

device = pick_device(device)
device_type = device.split(":")[0]
dtype = auto_dtype(device_type) if dtype == "auto" else dtype
torch.manual_seed(seed)

try:  # read to the CPU; then only the model moves
    source = Path(out_dir) / "ckpt.pt"
    checkpoint = load_checkpoint(source)
except FileNotFoundError as e:
    raise SystemExit(f"error: {e}") from None
checkpoint.pop("optimizer", None)  # never copied to the GPU
model = model_from_checkpoint(checkpoint, source).to(device).eval()
tokenizer = Tokenizer.of(checkpoint["meta"])  # the vocabulary it was trained with
print(f"{checkpoint['model_type']} from {source} (step {checkpoint['iter_num']}, "
      f"val loss {checkpoint['best_val_loss']:.4f}), {checkpoint['config']['dataset']}")

try:
    start_ids = tokenizer.encode(start)
except ValueError as e:  # a character the training text never had
    usage_error(f"--start: {e}")
if not start_ids:
    usage_error("--start is empty after tokenization: give at least one character")
x = torch.tensor([start_ids], dtype=torch.long, device=device)
generator = torch.Generator(device=device).manual_seed(seed)

with torch.no_grad(), autocast(device_type, dtype):
    for _ in range(num_samples):
        y = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k or None,
                           generator=generator, vocab_size=tokenizer.vocab_size)
        print(tokenizer.decode(y[0].tolist()))
        print("-" * 40, flush=True)
