"""
The training loop of the shape lab: one flat script, read top to bottom, in nanoGPT's spirit.

    python train.py                                        # small char GPT on Shakespeare (CPU)
    python train.py config/train_shakespeare_char_gpu.py --max_iters=2000   # config, overrides
    torchrun --standalone --nproc_per_node=4 train.py config/train_gpt2_tinystories.py   # DDP

--help lists the settings; a bare --model_type=X is X at the budget of the GPT they describe.
"""

import gc
import importlib.util
import math
import os
import runpy
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed.nn  # noqa: F401 (imported before init_process_group, see the end)
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

from model import format_counts, padded_vocab_size, shape_report
from shapelab.configurator import ConfigError, check_train_settings, parse_overrides, usage_error
from shapelab.dataset import TokenFiles, find_dataset, ood_windows
from shapelab.hardware import auto_dtype, autocast, fastest_cpu_threads, peak_flops, pick_device
from shapelab.run import TimePlan, all_finite, start_run
from shapes import (build_model, check_model_settings, matched_model_args, model_from_checkpoint,
                    model_keys, print_model_types)

# -----------------------------------------------------------------------------------------------
# default config: a 4-layer, 128-wide character-level GPT on Shakespeare (minutes on a CPU)
# I/O
out_dir = "out"  # the run's folder: ckpt.pt, metrics.jsonl, the lock
eval_interval = 100  # evaluate and checkpoint every this many steps (and at the end)
eval_iters = 20  # batches per split in an evaluation (the same ones each time; 4 a minute)
log_interval = 50  # print and log the training loss every this many steps
init_from = "scratch"  # 'scratch' or 'resume' (from out_dir/ckpt.pt)
overwrite = False  # True: a scratch run deletes the run already in out_dir at its start
sample_tokens = 300  # tokens of the sample printed at the end (0: none)
eval_ood = ""  # '' (off), or other texts scored at each evaluation: data/<name> or a folder
# data
dataset = "shakespeare_char"  # data/<dataset>/{train,val}.bin and meta.json
data_dir = ""  # '' means data/<dataset>; or a folder with train.bin, val.bin, meta.json
batch_size = 32  # sequences per micro-batch
block_size = 128  # context length
gradient_accumulation_steps = 1  # micro-batches per optimizer step (shared by torchrun's)
# model
model_type = "gpt"  # gpt (model.py) or a mechanism (--help lists them)
n_layer = 4  # transformer layers
n_head = 4  # query heads per layer
n_kv_head = None  # key/value heads (GQA when < n_head); None: n_head
n_embd = 128  # width of the residual stream
head_dim = None  # width of one attention head; None: n_embd // n_head
ffn_hidden = None  # hidden width of the SwiGLU FFN; None: 4 * n_embd
qk_norm = ""  # RMSNorm on queries and keys: '' (off), 'head' (per head) or 'full'
tie_embeddings = True  # the LM head is the token embedding
dropout = 0.0
model_args = {}  # the mechanism's own, e.g. {'n_sub_blocks': 4}; {}: matched to this GPT
# optimizer: AdamW, weight decay on matrices only
learning_rate = 2e-3  # the peak learning rate, reached at the end of the warm-up
max_iters = 0  # training steps; 0: as many as fit in max_minutes on this machine
max_minutes = 5.0  # the time limit of a run whose max_iters is 0
weight_decay = 0.1
beta1 = 0.9
beta2 = 0.99
grad_clip = 1.0  # clip gradients at this norm (0: no clipping)
# learning rate schedule: linear warm-up, then cosine decay to min_lr at lr_decay_iters
decay_lr = True  # False: learning_rate throughout (no warm-up, no decay)
warmup_iters = 50  # steps of linear warm-up
lr_decay_iters = 0  # the step where the decay reaches min_lr (0: max_iters)
min_lr = 2e-4  # the learning rate at the end of the decay
# system
device = "auto"  # auto (cuda > mps > cpu), or cpu, cuda, cuda:1, mps
dtype = "auto"  # auto, bfloat16, float16 (CUDA, with a GradScaler) or float32
compile = None  # None: on for CUDA with Triton, off for CPU and MPS
seed = 1337  # the init, the batches (+ rank) and dropout
# -----------------------------------------------------------------------------------------------
config_keys = [k for k, v in globals().items() if not k.startswith("_")
               and isinstance(v, (int, float, bool, str, dict, type(None)))]
script_start = time.monotonic()  # a time limit counts from here
given_keys = set()  # the keys the command line sets
try:  # every setting checked (one line, exit status 2) before anything is built or removed
    defaults = {k: globals()[k] for k in config_keys}
    config = parse_overrides(sys.argv[1:], defaults, given=given_keys,
                             types=dict(n_kv_head=int, head_dim=int, ffn_hidden=int, compile=bool),
                             more_help=lambda: print_model_types(defaults))
    check_train_settings(config)
    check_model_settings(config)
except ConfigError as e:
    usage_error(e)
MODEL_KEYS = model_keys(config)  # block_size, n_layer, ...: what every model takes
sys.stdout.reconfigure(line_buffering=True)  # progress lines show up at once, even piped
# what keeps the run safe: shapelab/run.py
run, checkpoint, config = start_run(config, given_keys, MODEL_KEYS)
globals().update(config)
if max_iters == 0:  # a timed run's minutes go to training: at most 4 eval batches a minute
    eval_iters = max(1, min(eval_iters, int(4 * max_minutes)))
# -----------------------------------------------------------------------------------------------

ddp = int(os.environ.get("RANK", -1)) != -1  # is this a torchrun run?
device = pick_device(device)
if ddp:
    init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")
    ddp_rank, ddp_local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    ddp_world_size = int(os.environ["WORLD_SIZE"])
    if device.startswith("cuda"):
        device = f"cuda:{ddp_local_rank}"
        torch.cuda.set_device(device)
    gradient_accumulation_steps //= ddp_world_size
else:
    ddp_rank, ddp_world_size = 0, 1
master_process = ddp_rank == 0
device_type = device.split(":")[0]
dtype = auto_dtype(device_type) if dtype == "auto" else dtype
if compile is None:  # a GPU compiles through Triton; a CPU gains too little
    compile = device_type == "cuda" and importlib.util.find_spec("triton") is not None
autocast_ctx = autocast(device_type, dtype)
torch.manual_seed(seed + ddp_rank)
if device_type == "cuda":
    torch.set_float32_matmul_precision("high")  # TF32 tensor cores for fp32 matmuls
tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * block_size
if master_process:
    print(f"device {device}, {dtype}, compile={compile}, {ddp_world_size} process(es), "
          f"{tokens_per_iter:,} tokens per iteration")

# -----------------------------------------------------------------------------------------------
# data: uint16 token ids in data/<dataset>/{train,val}.bin, opened once for the whole run
data_dir = find_dataset(dataset, data_dir, may_prepare=master_process)
if ddp:
    torch.distributed.barrier()  # rank 0 may have been preparing the data
token_files = TokenFiles(data_dir, block_size, checkpoint and (checkpoint["meta"], run.ckpt))
meta = token_files.meta
vocab_size = meta["vocab_size"]
ood_batches, ood_sha256 = (ood_windows(eval_ood, meta, block_size) if eval_ood and master_process
                           else ({}, {}))


def get_batch(split, generator):
    data = token_files.tokens(split)
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    x = torch.from_numpy(np.stack([data[i:i + block_size] for i in ix]).astype(np.int64))
    y = torch.from_numpy(np.stack([data[i + 1:i + 1 + block_size] for i in ix]).astype(np.int64))
    if device_type == "cuda":  # pinned memory: the copy to the GPU runs while it computes
        x, y = x.pin_memory(), y.pin_memory()
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


def step_sampler(step):
    """The RNG of a step's batches and dropout, seeded by the step: a resume needs no RNG state."""
    torch.manual_seed(seed + 1000 * step + ddp_rank)  # (fewer than 1000 processes)
    return torch.Generator().manual_seed(seed + 1000 * step + ddp_rank)


# -----------------------------------------------------------------------------------------------
# model and optimizer
iter_num, best_val_loss, val_loss, elapsed_before, tokens_before = 0, math.inf, math.nan, 0.0, 0
if init_from == "scratch":
    # GPT-2's 50257 ids get 50304 rows (tensor-core friendly), the padding never sampled
    baseline = {"vocab_size": padded_vocab_size(vocab_size, multiple=64),
                **{k: config[k] for k in MODEL_KEYS}}
    if model_args:
        model_args = {**baseline, **model_args}
    else:  # a bare --model_type=X: X's own shape at this GPT's budget
        model_args = matched_model_args(model_type, baseline)
    model = build_model(model_type, **model_args)
    if master_process:  # every setting, the data and the model checked: a run begins here
        run.remove_previous_run()
        if model_type != "gpt":
            print(shape_report(model, model_args, baseline, matched=not config["model_args"]))
else:
    model_args = checkpoint["model_args"]
    model = model_from_checkpoint(checkpoint, run.ckpt)
    iter_num, best_val_loss, val_loss, elapsed_before, tokens_before = (checkpoint[k] for k in (
        "iter_num", "best_val_loss", "val_loss", "elapsed_s", "tokens"))
    if master_process:
        print(f"resuming {model_type} from {run.ckpt} at step {iter_num}")
        run.drop_repeated_metrics(iter_num)
model.to(device)
if master_process:
    print(f"{model_type}: {format_counts(model.param_counts())}")

decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]  # matrices
no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]  # norm gains
optimizer = torch.optim.AdamW(
    [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
    lr=learning_rate, betas=(beta1, beta2), fused=device_type == "cuda")
scaler = torch.amp.GradScaler(device_type, enabled=dtype == "float16")
if checkpoint is not None:
    optimizer.load_state_dict(checkpoint["optimizer"])
    scaler.load_state_dict(checkpoint["scaler"])

raw_model = model  # the plain module: what we save and sample from
if ddp:  # the only buffers are constant RoPE tables: nothing to sync
    model = ddp_model = DDP(model, device_ids=[ddp_local_rank] if device_type == "cuda" else None,
                            forward_sync_buffers=False)
if compile:  # after DDP, so the compiler overlaps each gradient bucket's all-reduce
    model = torch.compile(model)


@torch.no_grad()
def estimate_loss():
    """Mean loss over eval_iters batches per split - the same batches at every evaluation."""
    model.eval()
    out = {}
    for split in ("train", "val"):
        generator = torch.Generator().manual_seed(seed + (1 if split == "train" else 2))
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            x, y = get_batch(split, generator)
            with autocast_ctx:
                _, loss = model(x, y)
            losses[k] = loss.item()
        out[split] = losses.mean().item()
    out["ood"] = {}  # fixed windows of other texts (rank 0 only)
    for name, ids in ood_batches.items():
        with autocast_ctx:
            _, loss = raw_model(ids[:, :-1].to(device), ids[:, 1:].to(device))
        out["ood"][name] = loss.item()
    model.train()
    return out


def get_lr(it):
    """Linear warm-up, then cosine decay to min_lr at lr_decay_iters (0: max_iters)."""
    if not decay_lr:
        return learning_rate
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    decay_end = lr_decay_iters or max_iters
    if it >= decay_end:
        return min_lr
    decay_ratio = (it - warmup_iters) / (decay_end - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # from 1 down to 0
    return min_lr + coeff * (learning_rate - min_lr)


run_start = script_start - elapsed_before  # wall-clock time counts across resumes
time_plan = (TimePlan(max_minutes, run_start, checkpoint and checkpoint["time_plan"], device)
             if max_iters == 0 else None)
checkpoint = None  # free memory
if ood_sha256:  # which texts the OOD losses are of
    run.log(dict(iter=iter_num, ood_texts=ood_sha256))

# -----------------------------------------------------------------------------------------------
# training loop
to_try = f"a lower learning_rate (now {learning_rate}) or more warmup_iters (now {warmup_iters})"
if device_type == "cpu":  # beside other busy programs fewer threads can train faster
    fastest_cpu_threads(raw_model, *get_batch("train", torch.Generator()), autocast_ctx)
    if master_process:
        print(f"CPU threads: {torch.get_num_threads()}, the fastest now")
peak, _ = peak_flops(device_type)
start_iter = iter_num
eval_s = 0.0  # the last evaluation's seconds (with its save)
t0, steps_timed = time.monotonic(), 0
sampler = step_sampler(iter_num)
x, y = get_batch("train", sampler)
while True:
    if time_plan:
        max_iters = time_plan.max_iters
        warmup_iters = min(config["warmup_iters"], max_iters // 5 or config["warmup_iters"])
    tokens = tokens_before + (iter_num - start_iter) * tokens_per_iter
    lr = get_lr(iter_num)
    for group in optimizer.param_groups:
        group["lr"] = lr

    # evaluate and save (not right after a resume: that state was just saved); every process
    # scores the same batches, so all stop together
    if (iter_num % eval_interval == 0 or iter_num == max_iters) and not (
            init_from == "resume" and iter_num == start_iter):
        eval_start = time.monotonic()
        losses = estimate_loss()
        val_loss, ood = losses["val"], losses["ood"]
        if not (math.isfinite(losses["train"] + val_loss) and all_finite(raw_model)):
            raise run.diverged(iter_num, f"the evaluation's losses are {losses['train']}, "
                               f"{val_loss} (val)", to_try)  # never saved over the last good one
        best_val_loss = min(best_val_loss, val_loss)
        if master_process:
            ood_loss = ood and sum(ood.values()) / len(ood)
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {val_loss:.4f}"
                  + (f", OOD loss {ood_loss:.4f}" if ood else ""))
            run.log(dict(iter=iter_num, tokens=tokens, train_loss=losses["train"],
                         val_loss=val_loss, elapsed_s=round(time.monotonic() - run_start, 2),
                         **(dict(ood_loss=ood_loss, ood=ood) if ood else {})))
        if master_process and iter_num > 0:
            run.save(dict(
                model=raw_model.state_dict(), optimizer=optimizer.state_dict(),
                scaler=scaler.state_dict(), model_type=model_type, model_args=model_args,
                iter_num=iter_num, best_val_loss=best_val_loss, config=config,
                meta=meta, elapsed_s=time.monotonic() - run_start,
                tokens=tokens, val_loss=val_loss, time_plan=time_plan and time_plan.state_dict()))
            print(f"saved checkpoint to {run.ckpt}")
        eval_s = time.monotonic() - eval_start
        t0, steps_timed = time.monotonic(), 0  # the step time leaves the evaluation out
    if max_iters and iter_num >= max_iters:
        break

    # one optimizer step, gradients accumulated over micro-batches; nothing here waits for the GPU
    for micro_step in range(gradient_accumulation_steps):
        if ddp:  # average gradients across processes only on the last micro-step
            ddp_model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1
        with autocast_ctx:
            _, loss = model(x, y)
            loss = loss / gradient_accumulation_steps
        if micro_step == gradient_accumulation_steps - 1:
            sampler = step_sampler(iter_num + 1)
        x, y = get_batch("train", sampler)  # the next batch, while the device computes
        scaler.scale(loss).backward()
    if grad_clip > 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    steps_timed += 1

    log_step = iter_num % log_interval == 0 or not max_iters  # (a time limit not planned yet)
    if log_step or (time_plan and iter_num >= time_plan.next_plan):  # every process
        lossf = loss.item() * gradient_accumulation_steps
        if not math.isfinite(lossf):
            raise run.diverged(iter_num, f"the loss is {lossf}", to_try)
        t1 = time.monotonic()
        dt, t0, steps_timed = (t1 - t0) / steps_timed, t1, 0  # seconds per iteration
        if time_plan:
            time_plan.plan(iter_num, dt, eval_s, eval_interval)
    if master_process and log_step:
        tokens_per_s = tokens_per_iter / dt
        mfu = peak and raw_model.estimate_mfu(tokens_per_s / ddp_world_size, peak, block_size)
        minutes_left = (max_iters - iter_num) * (dt + eval_s / eval_interval) / 60
        to_go = f", ~{minutes_left:.1f} min to go" if max_iters else ""
        print(f"iter {iter_num}/{max_iters or '?'}: loss {lossf:.4f}, lr {lr:.2e}, "
              f"{dt * 1000:.0f} ms/iter, {tokens_per_s:,.0f} tok/s"
              + (f", MFU {100 * mfu:.1f}%" if mfu else "") + to_go)
        run.log(dict(iter=iter_num, loss=lossf, lr=lr, ms_per_iter=round(dt * 1000, 2),
                     tokens_per_s=round(tokens_per_s), mfu=mfu,
                     elapsed_s=round(time.monotonic() - run_start, 2)))
    iter_num += 1

if master_process:
    minutes = (time.monotonic() - run_start) / 60
    print(f"done: {iter_num} steps, {tokens / 1e6:.2f}M tokens, {minutes:.1f} min (all sessions); "
          f"val loss {val_loss:.4f} (best {best_val_loss:.4f})")
    if sample_tokens > 0:  # sample.py on ckpt.pt, in this process: no second torch import
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # the run is saved: a signal ends the sample
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.argv = ["sample.py", "--num_samples=1", f"--out_dir={out_dir}",
                    f"--max_new_tokens={sample_tokens}", f"--device={device}"]
        runpy.run_path(Path(__file__).with_name("sample.py"), run_name="__main__")
if ddp:
    torch.distributed.barrier()  # let rank 0 finish its sample first
    del model, ddp_model  # the process group goes now: at exit gloo's threads meet terminate
    gc.collect()
    destroy_process_group()
