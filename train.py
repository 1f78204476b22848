"""
The training loop of the shape lab, one flat script in nanoGPT's spirit.

    python train.py                                   # small char-level GPT on Shakespeare, CPU, ~6 minutes
    python train.py config/train_shakespeare_char_gpu.py   # a config file, then overrides:
    python train.py config/train_shakespeare_char_gpu.py --max_iters=2000 --compile=False
    torchrun --standalone --nproc_per_node=4 train.py config/train_gpt2_tinystories.py   # DDP

Every setting below can be set by a config file (plain Python assignments) or by
--key=value; an unknown key or a value of the wrong type stops with an error naming it.
`model_type` picks the file that builds the model (gpt = model.py, hourglass, lws, ...)
and `model_args` carries that mechanism's own arguments.

What it does, top to bottom: set up devices, precision and DDP; prepare the dataset if
it is missing (the small ones only); build the model or resume it; then loop: evaluate
and checkpoint every eval_interval steps, take one optimizer step (gradient accumulation,
clipping, warm-up + cosine learning rate), and log loss, ms/iter, tokens/s (all processes) and MFU
(per card: one process's FLOPs against one card's peak) to the console and to out_dir/metrics.jsonl
(plus `aux_loss` for a model that has an auxiliary loss, e.g. a MoE's balancing loss: its `aux_loss`
attribute after the forward pass). Between log steps the host never waits for the device: the loss
is read (and checked to be finite) only at log steps and evaluations, and the next batch is fetched
while the device computes. Under DDP the model is wrapped first and compiled second, so gradient
all-reduces overlap the backward pass. dtype=auto picks bfloat16 on a GPU with native bf16 (Ampere
or newer), float16 with a GradScaler on older ones (T4, V100), float32 on a CPU without native bf16. With
stop_val_loss > 0 it stops at the first evaluation that reaches that validation loss (to compare
models at equal loss, not equal steps). At the end it prints a short sample.

Resuming (init_from='resume') is exact, under torchrun too: the checkpoint holds the model, the
optimizer, float16's loss scale, the step, and every process's RNG states (its batch sampler's and torch's, for dropout),
each restored to its own process, so the losses after a resume equal those of a run that was never
interrupted (with the same number of processes). The model's shape and the vocabulary are the
checkpoint's: a shape key set to another value, or a dataset prepared again with another vocabulary,
is refused. Rows that metrics.jsonl holds for the steps a resume repeats are dropped.

What never happens silently: a scratch run into an out_dir that holds a run (ckpt.pt or metrics.jsonl)
refuses unless overwrite=True; an evaluation whose losses or weights are not finite is never saved
(the run stops and names the last good checkpoint, if any). A mistake in the settings ends the run
with one line naming the key; every key has a type (config_types for those whose default is None).
"""

import inspect
import json
import math
import os
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

from checkpoint import load_checkpoint, model_from_checkpoint, save_checkpoint
from configurator import MODEL_KEYS, ConfigError, build_model, parse_overrides
from hardware import auto_dtype, peak_flops, set_fp32_matmul_precision
from model import padded_vocab_size

# -----------------------------------------------------------------------------------------
# default config: a 4-layer, 128-wide character-level GPT on Shakespeare, the shape that reached the
# lowest validation loss in ~6 minutes of a 2-core CPU (see README). Config files in config/ and
# --key=value override these.
# I/O
out_dir = "out"
eval_interval = 100  # evaluate and checkpoint every this many steps (and at the end)
eval_iters = 20  # batches per split in an evaluation (always the same batches)
log_interval = 50
init_from = "scratch"  # 'scratch' or 'resume' (from out_dir/ckpt.pt)
overwrite = False  # True: a scratch run may replace the run already in out_dir (otherwise it refuses)
sample_tokens = 300  # print a sample of this many tokens at the end (0: no sample)
stop_val_loss = 0.0  # > 0: stop (and save) at the first evaluation whose val loss is <= this; 0: off
# data
dataset = "shakespeare_char"  # data/<dataset>/{train,val}.bin and meta.json
data_dir = ""  # '' means data/<dataset>; or any folder holding train.bin, val.bin and meta.json
batch_size = 32  # sequences per micro-batch
block_size = 128  # context length
gradient_accumulation_steps = 1
# model
model_type = "gpt"  # gpt | hourglass | variable_width | cea | lws | composed (compose.py)
n_layer = 4
n_head = 4
n_kv_head = None  # None: plain multi-head attention
n_embd = 128
head_dim = None  # None: n_embd // n_head
ffn_hidden = None  # None: 4 * n_embd
qk_norm = ""  # '', 'head' or 'full'
tie_embeddings = True
dropout = 0.0
model_args = {}  # the mechanism's own arguments, e.g. {'bottleneck_dim': 128, 'n_sub_blocks': 4}
# optimizer: AdamW, weight decay on matrices only
learning_rate = 2e-3
max_iters = 1100
weight_decay = 0.1
beta1 = 0.9
beta2 = 0.99
grad_clip = 1.0  # 0: no clipping
# learning rate schedule: linear warm-up, then cosine decay to min_lr at lr_decay_iters
decay_lr = True
warmup_iters = 50
lr_decay_iters = 1100
min_lr = 2e-4
# system
device = "auto"  # auto (cuda > mps > cpu), or cpu, cuda, cuda:1, mps
dtype = "auto"  # auto, bfloat16, float16 (CUDA, with a GradScaler) or float32
compile = None  # None: on for CUDA, off for CPU and MPS (compiling costs ~40 s per model on a CPU)
seed = 1337
# -----------------------------------------------------------------------------------------
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (int, float, bool, str, dict, type(None)))]
config_types = dict(n_kv_head=int, head_dim=int, ffn_hidden=int, compile=bool)  # of the keys whose default is None
given_keys = set()  # the keys the config files and --key=value set
try:
    parse_overrides(sys.argv[1:], {k: globals()[k] for k in config_keys}, apply_to=globals(), types=config_types,
                    given=given_keys)
except ConfigError as e:
    raise SystemExit(f"error: {e}") from None
config = {k: globals()[k] for k in config_keys}  # what this run used, saved in the checkpoint
sys.stdout.reconfigure(line_buffering=True)  # progress lines show up at once, even through a pipe
# -----------------------------------------------------------------------------------------

# Resume: the model's shape is the checkpoint's. A shape key set on the command line or in a config file
# must agree with it (else the run would train one shape and save a config that names another).
if init_from not in ("scratch", "resume"):
    raise SystemExit(f"error: init_from={init_from!r}: use 'scratch' or 'resume'")
checkpoint = None
if init_from == "resume":
    try:
        checkpoint = load_checkpoint(Path(out_dir) / "ckpt.pt", map_location="cpu")
    except FileNotFoundError as e:
        raise SystemExit(f"error: {e}") from None
    saved_args = checkpoint["model_args"]
    saved = {"model_type": checkpoint["model_type"], **{k: saved_args[k] for k in MODEL_KEYS if k in saved_args}}
    clashes = [f"{k}={globals()[k]!r} (the checkpoint has {saved[k]!r})" for k in saved
               if k in given_keys and k not in model_args and globals()[k] != saved[k]]  # model_args has the last word
    if "model_args" in given_keys:
        clashes += [f"model_args[{k!r}]={v!r} (the checkpoint has {saved_args.get(k)!r})"
                    for k, v in model_args.items() if saved_args.get(k) != v]
    if clashes:
        raise SystemExit(f"error: resuming {Path(out_dir) / 'ckpt.pt'} with a different model: {'; '.join(clashes)}. "
                         f"Drop these settings to resume, or train the new shape into another --out_dir")
    globals().update(saved)  # block_size etc. as the checkpoint's model has them
    model_args = dict(checkpoint["config"].get("model_args", model_args))
    config.update(saved, model_args=model_args)

# Settings checked once, before anything is built
for key in ("batch_size", "block_size", "eval_interval", "log_interval", "eval_iters", "gradient_accumulation_steps"):
    if globals()[key] < 1:
        raise SystemExit(f"error: {key}={globals()[key]}: it must be 1 or more")
if max_iters < 0:
    raise SystemExit(f"error: max_iters={max_iters}: it must be 0 or more")
if dtype not in ("auto", "float32", "bfloat16", "float16"):
    raise SystemExit(f"error: dtype={dtype!r}: use one of auto, float32, bfloat16, float16")
if device.startswith("cuda") and not torch.cuda.is_available():
    raise SystemExit(f"error: device={device!r}, but this machine has no CUDA GPU (torch sees none): use "
                     f"--device=cpu or --device=auto")
if device == "mps" and not torch.backends.mps.is_available():
    raise SystemExit("error: device='mps', but MPS is not available here: use --device=cpu or --device=auto")

# A scratch run never replaces a previous run in out_dir by accident (every process checks, before DDP starts).
previous = [name for name in ("ckpt.pt", "metrics.jsonl") if (Path(out_dir) / name).exists()]
if init_from == "scratch" and previous and not overwrite:
    raise SystemExit(f"error: {out_dir} already holds a run ({', '.join(previous)}): continue it with --init_from=resume, "
                     f"train into another --out_dir, or pass --overwrite=True to replace it")

# DDP: torchrun sets RANK / LOCAL_RANK / WORLD_SIZE; otherwise this is a single process.
ddp = int(os.environ.get("RANK", -1)) != -1
if device == "auto":
    device = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
if ddp:
    init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")
    ddp_rank, ddp_local_rank, ddp_world_size = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    if device.startswith("cuda"):
        device = f"cuda:{ddp_local_rank}"
        torch.cuda.set_device(device)
    if gradient_accumulation_steps % ddp_world_size != 0:
        raise SystemExit(f"error: gradient_accumulation_steps={gradient_accumulation_steps} must be a multiple of the "
                         f"number of processes ({ddp_world_size}): it is split between them")
    gradient_accumulation_steps //= ddp_world_size
else:
    ddp_rank, ddp_world_size = 0, 1
master_process = ddp_rank == 0
device_type = device.split(":")[0]

if dtype == "auto":  # native bf16 only; T4 / V100 train in float16 with a GradScaler (hardware.py says why)
    dtype = auto_dtype(device_type)
if dtype == "float16" and device_type != "cuda":
    raise SystemExit("dtype='float16' needs a CUDA GPU (it trains with a GradScaler); use bfloat16 or float32")
if compile is None:
    compile = device_type == "cuda"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
autocast = nullcontext() if dtype == "float32" else torch.autocast(device_type=device_type, dtype=ptdtype)
torch.manual_seed(seed + ddp_rank)
set_fp32_matmul_precision(device_type)  # TF32 tensor cores for fp32 matmuls on CUDA
tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * block_size
out_dir = Path(out_dir)
if master_process:
    out_dir.mkdir(parents=True, exist_ok=True)
    if init_from == "scratch":  # a fresh run: nothing of an overwritten one stays
        for name in ("ckpt.pt", "metrics.jsonl"):
            (out_dir / name).unlink(missing_ok=True)
    print(f"device {device}, {dtype}, compile={compile}, {ddp_world_size} process(es), "
          f"{tokens_per_iter:,} tokens per iteration")

# -----------------------------------------------------------------------------------------
def check_data(data_dir):
    """meta.json and the two splits, checked once before training: one line naming the file if not usable."""
    path = data_dir / "meta.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SystemExit(f"error: {path} is not valid JSON ({e}): prepare the data again") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("vocab_size"), int) or meta.get("tokenizer") not in (
            "char", "gpt2") or (meta.get("tokenizer") == "char" and not (
            isinstance(meta.get("chars"), str) and len(meta["chars"]) == meta["vocab_size"])):
        raise SystemExit(f"error: {path} does not describe a tokenizer (it needs tokenizer 'char' with chars of "
                         f"vocab_size characters, or 'gpt2', and an integer vocab_size): prepare the data again")
    for split in ("train", "val"):
        bin_path = data_dir / f"{split}.bin"
        if not bin_path.exists():
            raise SystemExit(f"error: {bin_path} is missing: prepare the data again")
        size = bin_path.stat().st_size
        if size % 2:
            raise SystemExit(f"error: {bin_path} has {size} bytes, not a whole number of uint16 token ids: "
                             f"it is truncated or not a token file; prepare the data again")
        if size // 2 <= block_size:
            raise SystemExit(f"error: {bin_path} has {size // 2} tokens, fewer than block_size + 1 = {block_size + 1}")
        largest = int(np.memmap(bin_path, dtype=np.uint16, mode="r").max())
        if largest >= meta["vocab_size"]:
            raise SystemExit(f"error: {bin_path} holds token id {largest}, but {path} says vocab_size="
                             f"{meta['vocab_size']}: the files come from different preparations; prepare the data again")
    return meta


# data: uint16 token ids in data/<dataset>/{train,val}.bin, read through a memmap.
data_dir = Path(data_dir) if data_dir else Path(__file__).resolve().parent / "data" / dataset
if not (data_dir / "meta.json").exists():  # prepare.py writes meta.json last: without it the data is not ready
    prepare = data_dir / "prepare.py"
    if dataset in ("shakespeare_char", "shakespeare") and prepare.exists():  # the small ones: prepared here
        if master_process:
            print(f"{data_dir / 'meta.json'} is missing: preparing the data now (python {prepare})")
            if subprocess.run([sys.executable, str(prepare)]).returncode != 0:
                raise SystemExit(f"error: python {prepare} failed (its message is above)")
    else:  # every process stops with the same line (under torchrun too)
        hint = f"run: python {prepare}" if prepare.exists() else f"there is no {prepare}; known datasets are in data/"
        raise SystemExit(f"error: dataset {dataset!r} is not prepared ({data_dir / 'meta.json'} is missing): {hint}")
if ddp:
    torch.distributed.barrier()  # rank 0 may have been preparing the data
meta = check_data(data_dir)
vocab_size = meta["vocab_size"]
VOCAB_FIELDS = ("tokenizer", "vocab_size", "chars")  # what decides which id is which token
if checkpoint is not None and "meta" in checkpoint:
    saved_vocab = {k: checkpoint["meta"].get(k) for k in VOCAB_FIELDS}
    if saved_vocab != {k: meta.get(k) for k in VOCAB_FIELDS}:
        raise SystemExit(f"error: {data_dir / 'meta.json'} has another vocabulary than the checkpoint's "
                         f"({meta.get('tokenizer')}, {meta.get('vocab_size')} tokens now; {saved_vocab['tokenizer']}, "
                         f"{saved_vocab['vocab_size']} tokens in {out_dir / 'ckpt.pt'}): the data was prepared again "
                         f"differently. Resume on the data it was trained on, or train from scratch")


def get_batch(split, generator):
    """batch_size random windows of block_size + 1 tokens: inputs and next-token targets."""
    # a fresh memmap each call avoids a memory leak of np.memmap (as nanoGPT notes)
    data = np.memmap(data_dir / f"{split}.bin", dtype=np.uint16, mode="r")
    if len(data) <= block_size:
        raise SystemExit(f"{split}.bin has {len(data)} tokens, fewer than block_size={block_size} + 1")
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    x = torch.from_numpy(np.stack([data[i:i + block_size] for i in ix]).astype(np.int64))
    y = torch.from_numpy(np.stack([data[i + 1:i + 1 + block_size] for i in ix]).astype(np.int64))
    if device_type == "cuda":
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)


# The batch sampler has its own RNG so its state can be saved and restored exactly.
train_sampler = torch.Generator().manual_seed(seed + ddp_rank)
pending_batch_state = None  # the sampler state the batch fetched ahead was drawn from


def fetch_train_batch():
    """The next training batch, fetched ahead while the device still computes (nanoGPT's order). The sampler
    state it was drawn from is kept: a checkpoint saves that one, so a resume draws this same batch again."""
    global pending_batch_state
    pending_batch_state = train_sampler.get_state()
    return get_batch("train", train_sampler)

# -----------------------------------------------------------------------------------------
# model and optimizer
iter_num, best_val_loss, elapsed_before = 0, float("inf"), 0.0
last_good_step = None  # the step of the checkpoint in out_dir, once one is saved (or resumed from)
# GPT-2's 50257 ids get an embedding and head of 50304 rows (a multiple of 64: tensor-core friendly
# matmuls); the padding ids never occur as targets and are never sampled. A character vocabulary stays as it is.
# (A resume builds the checkpoint's model, with the vocabulary size it was trained with.)
model_vocab_size = padded_vocab_size(vocab_size, multiple=64)
common_args = dict(vocab_size=model_vocab_size, **{k: config[k] for k in MODEL_KEYS})
if init_from == "scratch":
    model_args = {**common_args, **model_args}
    try:
        model = build_model(model_type, **model_args)
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None
elif init_from == "resume":
    model_args = checkpoint["model_args"]  # loaded (and checked) at start-up
    model = model_from_checkpoint(checkpoint)
    iter_num, best_val_loss = checkpoint["iter_num"], checkpoint["best_val_loss"]
    last_good_step = iter_num
    elapsed_before = checkpoint["elapsed_s"]  # wall-clock time keeps counting across resumes
    # each process gets its own sampler and torch RNG states back (a checkpoint from before they were
    # saved per process has rank 0's alone)
    saved_states = checkpoint["rng"].get("ranks", [checkpoint["rng"]])
    if ddp_rank < len(saved_states):
        own = saved_states[ddp_rank]
        train_sampler.set_state(own["sampler"])
        torch.set_rng_state(own["torch"])
        if device_type == "cuda" and "cuda" in own:
            torch.cuda.set_rng_state(own["cuda"])
    else:  # more processes than saved: a fresh stream of its own, not another rank's batches
        train_sampler.manual_seed(seed + ddp_rank + 7919 * iter_num)
        torch.manual_seed(seed + ddp_rank + 7919 * iter_num)
    if master_process:
        print(f"resuming {model_type} from {out_dir / 'ckpt.pt'} at step {iter_num}")
        if len(saved_states) != ddp_world_size:
            print(f"note: the checkpoint holds the RNG states of {len(saved_states)} process(es), this run has "
                  f"{ddp_world_size}: it continues, but not exactly as the saved run would have")
        # the steps after the checkpoint are trained again: drop their rows (a killed run may have logged them)
        metrics = out_dir / "metrics.jsonl"
        if metrics.exists():
            rows = [line for line in metrics.read_text().splitlines() if line.strip()]
            kept = [line for line in rows if json.loads(line)["iter"] < iter_num
                    or (json.loads(line)["iter"] == iter_num and "loss" not in json.loads(line))]
            if len(kept) < len(rows):
                tmp = metrics.with_name("metrics.jsonl.tmp")
                tmp.write_text("".join(line + "\n" for line in kept))
                os.replace(tmp, metrics)
else:
    raise SystemExit(f"init_from={init_from!r}: use 'scratch' or 'resume'")
model.to(device)
counts = model.param_counts()
if master_process:
    print(f"{model_type}: " + ", ".join(f"{k} {v / 1e6:.2f}M" for k, v in counts.items() if v))

decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]  # matrices and embeddings
no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]  # norm gains
optimizer = torch.optim.AdamW(
    [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
    lr=learning_rate, betas=(beta1, beta2), fused=device_type == "cuda")
scaler = torch.amp.GradScaler(device_type, enabled=dtype == "float16")
if checkpoint is not None:
    optimizer.load_state_dict(checkpoint["optimizer"])  # (moves its state to the parameters' device)
    if checkpoint.get("scaler"):  # a float16 run's loss scale goes on from where it was ({} when saved without one)
        scaler.load_state_dict(checkpoint["scaler"])  # (a no-op unless this run is float16 too)
checkpoint = None  # free memory

raw_model = model  # the plain module: what we save, sample from and count FLOPs of
if ddp:  # the only buffers are constant RoPE tables: nothing to sync before each forward
    # (torch 2.13 renamed broadcast_buffers to forward_sync_buffers; older versions know only the first)
    no_sync = "forward_sync_buffers" if "forward_sync_buffers" in inspect.signature(DDP).parameters \
        else "broadcast_buffers"
    model = ddp_model = DDP(model, device_ids=[ddp_local_rank] if device_type == "cuda" else None,
                            **{no_sync: False})
# Compile after wrapping in DDP (PyTorch's DDP notes): the compiler then splits the graph at DDP's gradient
# buckets, so each bucket's all-reduce overlaps the rest of the backward pass.
if compile:
    if master_process:
        print("compiling the model (takes a minute)...")
    model = torch.compile(model)
# evaluation runs on rank 0 alone, so it must not go through DDP (a compiled no_grad forward is a graph of
# its own anyway, so compiling the plain model for it costs no more than the recompile it would need)
eval_model = (torch.compile(raw_model) if compile else raw_model) if ddp else model


@torch.no_grad()
def estimate_loss():
    """Mean loss over eval_iters batches per split - the same batches at every evaluation."""
    eval_model.eval()
    out = {}
    for split in ("train", "val"):
        generator = torch.Generator().manual_seed(seed + (1 if split == "train" else 2))
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            x, y = get_batch(split, generator)
            with autocast:
                _, loss = eval_model(x, y)
            losses[k] = loss.item()
        out[split] = losses.mean().item()
    eval_model.train()
    return out


def get_lr(it):
    """Linear warm-up for warmup_iters, then cosine decay to min_lr at lr_decay_iters."""
    if not decay_lr:
        return learning_rate
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    progress = (it - warmup_iters) / max(1, lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (learning_rate - min_lr)


def rng_states():
    """This process's RNG states: its batch sampler's and torch's (dropout), and CUDA's on a GPU."""
    states = {"sampler": pending_batch_state, "torch": torch.get_rng_state()}
    if device_type == "cuda":
        states["cuda"] = torch.cuda.get_rng_state()
    return states


def stop_diverged(what):
    """End a diverged run with one message that names the last good checkpoint, if there is one."""
    if last_good_step is not None and (out_dir / "ckpt.pt").exists():
        good = f"The last good checkpoint is {out_dir / 'ckpt.pt'} (step {last_good_step})."
    else:
        good = "No good checkpoint was saved (only finite losses and weights are ever saved)."
    raise SystemExit(f"step {iter_num}: {what}. Training diverged; try a lower learning_rate (now {learning_rate}), "
                     f"more warmup_iters (now {warmup_iters}), grad_clip=1.0, or dtype='bfloat16' instead of "
                     f"float16. {good}")


def log_metrics(record):
    with open(out_dir / "metrics.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")


# -----------------------------------------------------------------------------------------
# training loop
peak, peak_note = peak_flops(device_type) if master_process else (None, "")
if master_process:
    print(f"MFU is measured against: {peak_note}")
start_iter = iter_num
run_start = time.time() - elapsed_before
t0, steps_timed = time.time(), 0  # the last point where the host waited for the device, and the steps since
x, y = fetch_train_batch()
while True:
    lr = get_lr(iter_num)
    for group in optimizer.param_groups:
        group["lr"] = lr

    # evaluate and save (not again right after a resume: that state was just saved)
    eval_step = (iter_num % eval_interval == 0 or iter_num == max_iters) and not (
        init_from == "resume" and iter_num == start_iter)
    reached_target = False  # stop_val_loss reached at this evaluation
    diverged = ""  # why the evaluation found the model diverged, if it did
    if eval_step:  # every process's RNG states, for the checkpoint (the evaluation draws nothing from them)
        rank_states = [rng_states()]
        if ddp:
            rank_states = [None] * ddp_world_size
            torch.distributed.all_gather_object(rank_states, rng_states())
    if master_process and eval_step:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        log_metrics(dict(iter=iter_num, tokens=iter_num * tokens_per_iter, train_loss=losses["train"],
                         val_loss=losses["val"], elapsed_s=round(time.time() - run_start, 2)))
        finite = math.isfinite(losses["train"]) and math.isfinite(losses["val"]) and all(
            bool(torch.isfinite(p).all()) for p in raw_model.parameters())
        if not finite:  # never save a diverged model over the last good checkpoint
            diverged = f"the evaluation's losses are {losses['train']} (train) and {losses['val']} (val)"
        else:
            best_val_loss = min(best_val_loss, losses["val"])
            reached_target = stop_val_loss > 0 and losses["val"] <= stop_val_loss
        if finite and (iter_num > 0 or reached_target):
            rng = dict(rank_states[0], ranks=rank_states)  # rank 0's at the top level, as before
            save_checkpoint(dict(model=raw_model.state_dict(), optimizer=optimizer.state_dict(),
                                 scaler=scaler.state_dict(), model_type=model_type, model_args=model_args, iter_num=iter_num,
                                 best_val_loss=best_val_loss, config=config, rng=rng, meta=meta,
                                 elapsed_s=time.time() - run_start), out_dir / "ckpt.pt")
            last_good_step = iter_num
            print(f"saved checkpoint to {out_dir / 'ckpt.pt'}")
        if reached_target:
            print(f"step {iter_num}: val loss {losses['val']:.4f} reached stop_val_loss={stop_val_loss}: "
                  f"stopping (the checkpoint of this step is {out_dir / 'ckpt.pt'})")
            log_metrics(dict(iter=iter_num, tokens=iter_num * tokens_per_iter, stopped_at_val_loss=losses["val"],
                             stop_val_loss=stop_val_loss))
    if eval_step:  # do not count the evaluation in the step time
        t0, steps_timed = time.time(), 0
    if ddp and eval_step:  # every process stops together
        flag = torch.tensor([float(reached_target), float(bool(diverged))], device=device)
        torch.distributed.broadcast(flag, src=0)
        reached_target = bool(flag[0].item())
        diverged = diverged or ("the evaluation on rank 0 was not finite" if flag[1].item() else "")
    if diverged:
        stop_diverged(diverged)
    if iter_num >= max_iters or reached_target:
        break

    # one optimizer step, accumulating gradients over micro-batches. Nothing here waits for the device: the
    # host queues the work and fetches the next batch meanwhile; it syncs only at log steps (loss.item()).
    for micro_step in range(gradient_accumulation_steps):
        if ddp:  # average gradients across processes only on the last micro-step
            ddp_model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1
        with autocast:
            _, loss = model(x, y)
            loss = loss / gradient_accumulation_steps
        x, y = fetch_train_batch()  # the next micro-batch, while the device runs this forward pass
        scaler.scale(loss).backward()
    if grad_clip > 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)  # (with float16 the scaler itself checks for inf gradients: one sync per step)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    steps_timed += 1

    # log steps only (every process): the loss comes to the host, is checked, and timed over the steps since
    # the last sync. A non-finite loss in between is caught here or by the next evaluation, which never saves it.
    if iter_num % log_interval == 0:
        lossf = loss.item() * gradient_accumulation_steps  # the last micro-batch's loss
        if not math.isfinite(lossf):
            stop_diverged(f"the loss is {lossf}")
        t1 = time.time()
        dt, t0, steps_timed = (t1 - t0) / steps_timed, t1, 0  # seconds per iteration
    if master_process and iter_num % log_interval == 0:
        aux = getattr(raw_model, "aux_loss", None)  # the auxiliary term inside that loss (e.g. MoE balancing), if any
        tokens_per_s = tokens_per_iter / dt  # all processes together
        # MFU is per card: one process's share of the tokens (fwd + bwd FLOPs) against one card's peak
        mfu = raw_model.estimate_mfu(tokens_per_s / ddp_world_size, peak, block_size) if peak else None
        mfu_text = f", MFU {100 * mfu:.1f}% per card" if mfu is not None else ""
        aux_text = f" (aux {aux.item():.4f})" if aux is not None else ""
        print(f"iter {iter_num}: loss {lossf:.4f}{aux_text}, lr {lr:.2e}, {dt * 1000:.0f} ms/iter, "
              f"{tokens_per_s:,.0f} tok/s{mfu_text}")
        record = dict(iter=iter_num, loss=lossf, lr=lr, ms_per_iter=round(dt * 1000, 2),
                      tokens_per_s=round(tokens_per_s), mfu=mfu, elapsed_s=round(time.time() - run_start, 2))
        if aux is not None:
            record["aux_loss"] = aux.item()  # `loss` includes it; loss - aux_loss is the LM loss
        log_metrics(record)
    iter_num += 1

if master_process:
    print(f"done: {iter_num} steps in {time.time() - run_start:.0f} s (all sessions), best val loss {best_val_loss:.4f}")
    if sample_tokens > 0:
        from tokenizer import Tokenizer
        tok = Tokenizer.char(meta["chars"]) if meta["tokenizer"] == "char" else Tokenizer.gpt2()  # the run's own
        raw_model.eval()
        start = torch.tensor([tok.encode("\n")], device=device)
        with autocast:
            ids = raw_model.generate(start, sample_tokens, temperature=0.8, top_k=200, vocab_size=vocab_size)
        print("-" * 40 + "\n" + tok.decode(ids[0].tolist()) + "\n" + "-" * 40)
if ddp:
    torch.distributed.barrier()  # let rank 0 finish its evaluation and sample first
    destroy_process_group()
