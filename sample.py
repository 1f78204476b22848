"""
Generate text from a trained checkpoint.

    python sample.py                                   # from out/ckpt.pt, 3 samples
    python sample.py --out_dir=out-hourglass --start="ROMEO:" --num_samples=5 --max_new_tokens=200
    python sample.py --start=FILE:prompt.txt --temperature=0.6 --top_k=50 --seed=7
    python sample.py --temperature=0                   # greedy: the same text every time

Works for every model_type: the checkpoint names the file that builds its model, and holds the
dataset's meta.json from training time, which names the tokenizer (characters or GPT-2 BPE) used to
encode and decode - so re-preparing the data later cannot garble the text (a checkpoint older than
that falls back to the meta.json on disk). Only ids of that vocabulary are ever sampled: a GPT-2
model's embedding is padded to 50304 rows for the GPU, and the padding ids are never drawn.

--top_k=K keeps the K most likely tokens at each step; --top_k=0 keeps every token (no top-k).
--temperature=0 is greedy. A negative temperature or top_k is refused.

The checkpoint is read into CPU memory and only the model moves to the device (the optimizer
state it also holds is dropped unread).
"""

import sys
from contextlib import nullcontext
from pathlib import Path

import torch

from checkpoint import load_checkpoint, model_from_checkpoint
from configurator import ConfigError, parse_overrides
from hardware import auto_dtype
from tokenizer import Tokenizer, load_tokenizer

# -----------------------------------------------------------------------------------------
out_dir = "out"  # the folder with ckpt.pt
start = "\n"  # the prompt, or FILE:path/to/prompt.txt
num_samples = 3
max_new_tokens = 500
temperature = 0.8  # 1.0: the model's distribution; < 1 sharper; 0: greedy
top_k = 200  # keep only the top_k most likely tokens; 0: no top-k (every token)
seed = 1337
device = "auto"
dtype = "auto"  # auto: bfloat16 where the device has it natively; else float16 on a GPU, float32 on a CPU
# -----------------------------------------------------------------------------------------
try:
    parse_overrides(sys.argv[1:], {k: v for k, v in dict(globals()).items() if not k.startswith("_")
                                   and isinstance(v, (int, float, str))}, apply_to=globals())
except ConfigError as e:
    raise SystemExit(f"error: {e}") from None
for bad, why in ((temperature < 0, f"temperature={temperature}: use 0 (greedy) or more"),
                 (top_k < 0, f"top_k={top_k}: use 1 or more (0: all tokens)"),
                 (num_samples < 1, f"num_samples={num_samples}: use 1 or more"),
                 (max_new_tokens < 0, f"max_new_tokens={max_new_tokens}: use 0 or more")):
    if bad:
        raise SystemExit(f"error: {why}")

if device == "auto":
    device = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
device_type = device.split(":")[0]
if dtype == "auto":  # native bf16 only: T4 / V100 emulate it slowly and sample in float16
    dtype = auto_dtype(device_type)
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
autocast = nullcontext() if dtype == "float32" else torch.autocast(device_type=device_type, dtype=ptdtype)
torch.manual_seed(seed)

try:
    checkpoint = load_checkpoint(Path(out_dir) / "ckpt.pt", map_location="cpu")  # then only the model moves
except FileNotFoundError as e:
    raise SystemExit(f"error: {e}") from None
checkpoint.pop("optimizer", None)  # not needed to sample: never copied to the GPU
model = model_from_checkpoint(checkpoint).to(device).eval()
dataset = checkpoint["config"]["dataset"]
data_dir = checkpoint["config"]["data_dir"] or Path(__file__).resolve().parent / "data" / dataset
meta = checkpoint.get("meta")  # the vocabulary the model was trained with (older checkpoints: the one on disk)
tokenizer = (Tokenizer.char(meta["chars"]) if meta["tokenizer"] == "char" else Tokenizer.gpt2()) if meta \
    else load_tokenizer(data_dir)
print(f"{checkpoint['model_type']} from {out_dir}/ckpt.pt (step {checkpoint['iter_num']}, "
      f"val loss {checkpoint['best_val_loss']:.4f}), {dataset}")

if start.startswith("FILE:"):
    start = Path(start[5:]).read_text(encoding="utf-8")
start_ids = tokenizer.encode(start)
if not start_ids:
    raise SystemExit("--start is empty after tokenization: give at least one character")
x = torch.tensor([start_ids], dtype=torch.long, device=device)
generator = torch.Generator(device=device).manual_seed(seed)

with torch.no_grad(), autocast:
    for _ in range(num_samples):
        # vocab_size: the tokenizer's real vocabulary, so a padded embedding's extra ids are never sampled
        y = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k or None, generator=generator,
                           vocab_size=tokenizer.vocab_size)
        print(tokenizer.decode(y[0].tolist()))
        print("-" * 40)
