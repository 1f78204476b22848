"""
Train, evaluate and sweep the image MLPs of mlp_hourglass.py ("Rethinking the Shape Convention of
an MLP", Chen, Lee, Liao, Shiu 2025, arXiv:2510.01796): one model, a grid of hourglass and conventional shapes with
their PSNR-vs-parameters Pareto fronts (the paper's Figures 2-4), and frozen vs learned W_in
(section 4.3). The model, tasks and metrics are in mlp_hourglass.py; the data comes prepared
from data/mnist/prepare.py and data/imagenet32/prepare.py (this file runs them when the prepared
folder is missing). Write-up with the measured results: docs/mlp_hourglass.md.

    python train_mlp.py train --task=mnist_denoise               # default run, ~1-2 min on CPU
    python train_mlp.py train --task=mnist_sr --dataset=fashion_mnist --epochs=5
    python train_mlp.py train --task=mnist_classify              # generative classification + accuracy
    python train_mlp.py train --task=imagenet32_denoise --data_dir=/path/to/imagenet32   # GPU-sized
    python train_mlp.py sweep --task=mnist_denoise               # CPU-sized grid, CSV + Pareto PNGs
    python train_mlp.py pareto out/mlp_sweep_mnist_denoise/sweep.csv --params=trainable
    python train_mlp.py pareto out/mlp_sweep_mnist_denoise/sweep.csv --metric=test_ssim   # SSIM front
    python train_mlp.py compare_input_proj --task=mnist_denoise  # fixed vs learned W_in (4.3)
    python train_mlp.py compare_input_proj --task=mnist_denoise --latent_dims=1024,2048,4096 --epochs=10
    python train_mlp.py eval --ckpt=out/mlp_mnist_denoise/ckpt.pt
    python train_mlp.py prepare --dataset=fashion_mnist          # = python data/mnist/prepare.py --dataset=fashion_mnist

On a machine shared with other jobs add --num_threads=1: two OpenMP threads fighting other
processes for 2 cores were ~15x slower than one thread in our measurements. ImageNet-32 at the
paper's scale (1.28M images x 4 flips, 31M parameters) is a GPU job.

Data: --dataset = mnist (default for mnist_* tasks; offline it is the real 5k subset) | mnist5k |
fashion_mnist | imagenet32. The prepared arrays are read from data/mnist/, data/mnist/<dataset>/
or data/imagenet32/ (--prepared_dir to use another folder); if that folder has no meta.json, or
--data_dir (a folder of raw IDX / official npz files) differs from the one it was prepared from,
the prepare script runs first. The data source (meta.json's dataset / source) is printed and
saved in every data.json, metrics.json, checkpoint and sweep row.

Training: AdamW (torch defaults except lr) over the trainable parameters only (a frozen W_in is
a buffer, not a parameter), linear decay to 0 without warm-up, float32 (bf16 autocast only on
CUDA that supports it, or --dtype=bfloat16), optional torch.compile, a progress line, the best
checkpoint by validation loss (written atomically, with the data source it was trained on), test
metrics of the best model against the trivial baseline, a PNG grid of inputs / outputs / targets.
A run writes out/mlp_<task>/: data.json (the data source), metrics.json, history.csv,
samples.png, ckpt.pt. `eval` refuses a checkpoint whose recorded source differs from the
prepared data it would be scored on (--allow_other_data to do it anyway, with a warning).
A sweep row records the run's full setting (data source, train-set size, epochs, max_steps,
batch, flips, sigma, W_in, dtype, weight decay, eval interval); a resume skips only runs of the
same setting, and one sweep CSV holds one setting (another one is a clear error: use another
--out_dir). A run whose every validation loss is NaN writes a NaN row and the sweep goes on.

Where each training choice comes from (the paper = arXiv:2510.01796 / the reference code =
https://github.com/mtkresearch/Hourglass_LM, hourglass_mlp/ / ours)
-----------------------------------------------------------------------------------------------
- The paper (A.3.2): AdamW, a linear learning-rate schedule without warm-up, batch 128 (MNIST) /
  512 (ImageNet-32), the epochs, x4 flips for SR and ImageNet-32, test on the model with the
  lowest validation loss, 5 repeats x 4 learning rates.
- The reference code: AdamW over the requires_grad parameters with torch's defaults (weight decay
  0.01), decay to 0 (min_lr 0), fp32 (no autocast anywhere; the paper does not say), eval / test
  batch 128 for psnr_batchmse, training noise drawn afresh every time an image is seen.
- Ours: the decay is per optimizer step for every task (the reference steps per epoch on MNIST,
  per step on ImageNet-32); validation / test noise fixed by a seed so that runs are comparable
  (the reference redraws it at every evaluation); validation once per epoch (MNIST) or every
  1000 steps (ImageNet-32); default seed 0 (the reference: 42 + run id); the CPU sweep's grid,
  1 seed and lr 1e-3 (pass --seeds / --lrs; the Pareto plot then uses, per shape, the lr with
  the best mean validation loss and the mean test metric over seeds); bf16 autocast on CUDA.
- Ours: generative-classification prototypes are a seeded random training image per class (seed
  42; the paper: "randomly selected"; the reference takes the first image of each class in its
  shuffled train split).
"""

import argparse
import contextlib
import csv
import json
import math
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from checkpoint import save_checkpoint  # temp file + rename: a killed run never leaves a broken checkpoint
from mlp_hourglass import (BASELINE_NAMES, INPUT_PROJECTIONS, SHAPES, TASKS, ConfigError, MetricAccumulator,
                           bicubic_upsample, build_model, check_shape, choose_prototypes, count_params,
                           get_task, make_batch)

ROOT = Path(__file__).resolve().parent
EVAL_BATCH_SIZE = 128   # the reference code's eval / test loaders; psnr_batchmse depends on it
DATASETS = ("mnist", "mnist5k", "fashion_mnist", "imagenet32")
PREPARE_SCRIPTS = {"mnist": ROOT / "data" / "mnist" / "prepare.py", "mnist5k": ROOT / "data" / "mnist" / "prepare.py",
                   "fashion_mnist": ROOT / "data" / "mnist" / "prepare.py",
                   "imagenet32": ROOT / "data" / "imagenet32" / "prepare.py"}
PREPARED_DIRS = {"mnist": ROOT / "data" / "mnist", "mnist5k": ROOT / "data" / "mnist" / "mnist5k",
                 "fashion_mnist": ROOT / "data" / "mnist" / "fashion_mnist", "imagenet32": ROOT / "data" / "imagenet32"}

# -----------------------------------------------------------------------------
# Data: the prepared {train,val,test}.npz + meta.json of data/<name>/prepare.py


@dataclass
class ImageSplits:
    source: str                  # what was loaded, in words (printed and saved with the metrics)
    train: torch.Tensor          # (N, C, H, W) uint8
    train_labels: torch.Tensor   # (N,) int64
    val: torch.Tensor
    val_labels: torch.Tensor
    test: torch.Tensor
    test_labels: torch.Tensor
    dataset: str = ""            # meta.json's "dataset" (what actually loaded, e.g. mnist5k for --dataset=mnist offline)


def run_prepare(dataset, data_dir=None, prepared_dir=None, max_train_images=None):
    """Run data/<name>/prepare.py as a subprocess (data is never imported by a training file)."""
    cmd = [sys.executable, str(PREPARE_SCRIPTS[dataset])]
    if dataset != "imagenet32":
        cmd.append(f"--dataset={dataset}")
    if data_dir:
        cmd.append(f"--data_dir={data_dir}")
    if prepared_dir:
        cmd.append(f"--out_dir={prepared_dir}")
    if max_train_images and dataset == "imagenet32":
        cmd.append(f"--max_train_images={max_train_images}")
    print("preparing: " + " ".join(cmd[1:]))
    if subprocess.run(cmd).returncode != 0:
        raise ConfigError(f"preparing {dataset} failed (see the messages above): python {' '.join(cmd[1:])}")


def load_prepared(prepared_dir):
    """{train,val,test}.npz + meta.json in prepared_dir -> (ImageSplits, meta)."""
    prepared_dir = Path(prepared_dir)
    again = f"prepare it again (python train_mlp.py prepare --prepared_dir={prepared_dir} ...)"
    try:
        meta = json.loads((prepared_dir / "meta.json").read_text())
        source, _ = meta["source"], meta["image_shape"]  # both required
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{prepared_dir / 'meta.json'} is not a prepared data set's meta.json "
                          f"({type(e).__name__}: {e}): {again}") from None
    arrays = []
    for split in ("train", "val", "test"):
        try:
            with np.load(prepared_dir / f"{split}.npz") as f:
                arrays += [torch.from_numpy(f["images"]), torch.from_numpy(f["labels"]).long()]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            if isinstance(e, FileNotFoundError):
                raise
            raise ConfigError(f"{prepared_dir / (split + '.npz')} is damaged or truncated "
                              f"({type(e).__name__}: {e}): {again}") from None
    return ImageSplits(source, *arrays, dataset=meta.get("dataset", "")), meta


def load_data(task, dataset=None, data_dir=None, max_train_images=None, prepared_dir=None):
    """The prepared splits of dataset for task, preparing them first when needed."""
    dataset = dataset or ("mnist" if task.dataset_kind == "28x28" else "imagenet32")
    if dataset not in DATASETS:
        raise ConfigError(f"unknown dataset {dataset!r}; choose one of {DATASETS}")
    if (dataset == "imagenet32") != (task.dataset_kind == "imagenet32"):
        need = "imagenet32" if task.dataset_kind == "imagenet32" else "mnist, mnist5k or fashion_mnist"
        raise ConfigError(f"task {task.name} needs --dataset={need}, got {dataset!r}")
    prepared_dir = Path(prepared_dir) if prepared_dir else PREPARED_DIRS[dataset]
    meta_path = prepared_dir / "meta.json"
    if not meta_path.exists():
        print(f"{meta_path} is missing: preparing {dataset} now")
        run_prepare(dataset, data_dir, prepared_dir)
    elif data_dir and json.loads(meta_path.read_text()).get("data_dir") != os.path.abspath(data_dir):
        print(f"{prepared_dir} was not prepared from --data_dir={data_dir}: preparing it again")
        run_prepare(dataset, data_dir, prepared_dir)
    splits, meta = load_prepared(prepared_dir)
    if tuple(meta["image_shape"]) != task.image_shape:
        raise ConfigError(f"{prepared_dir} holds {tuple(meta['image_shape'])} images, task {task.name} "
                          f"needs {task.image_shape}")
    if max_train_images:
        splits.train, splits.train_labels = splits.train[:max_train_images], splits.train_labels[:max_train_images]
    print(f"data: {splits.source} (prepared in {prepared_dir}; {len(splits.train)} train images)")
    return splits

# -----------------------------------------------------------------------------
# Training


@dataclass
class TrainConfig:
    task: str = "mnist_denoise"
    dataset: str = None            # mnist | mnist5k | fashion_mnist | imagenet32 (default from task)
    data_dir: str = None           # raw IDX / official npz files to prepare from
    prepared_dir: str = None       # default: PREPARED_DIRS[dataset]
    max_train_images: int = None
    shape: str = "hourglass"
    input_proj: str = "frozen"
    latent_dim: int = None         # d_z (default from task)
    hidden_dim: int = None         # d_h
    n_blocks: int = None           # L
    epochs: float = None           # default: the paper's epochs for the task
    max_steps: int = None          # stop early (for quick runs and tests)
    batch_size: int = None
    lr: float = None
    weight_decay: float = 0.01     # torch's AdamW default
    flips: int = None              # 1, 2 or 4
    noise_sigma: float = 0.25
    eval_interval: int = None      # steps; 0 = once per epoch
    log_interval: int = 50
    seed: int = 0
    device: str = "auto"
    dtype: str = "auto"            # auto (float32 on CPU, bf16 on CUDA that has it) | bfloat16 | float32
    compile: bool = False
    num_threads: int = 0           # 0 = leave torch's default
    out_dir: str = None
    save_checkpoint: bool = True
    save_samples: bool = True
    quiet: bool = False


def resolve_config(cfg):
    """Fill the task defaults into the Nones and check the combination."""
    task = get_task(cfg.task)
    cfg = replace(cfg)
    for name in ("latent_dim", "hidden_dim", "n_blocks", "epochs", "batch_size", "lr", "flips", "eval_interval"):
        if getattr(cfg, name) is None:
            setattr(cfg, name, getattr(task, name))
    for name in ("latent_dim", "hidden_dim", "n_blocks", "batch_size", "log_interval"):
        if getattr(cfg, name) < 1:  # never replaced by a default, never recorded as something else
            raise ConfigError(f"--{name}={getattr(cfg, name)}: it must be 1 or more")
    if not cfg.epochs > 0:
        raise ConfigError(f"--epochs={cfg.epochs}: it must be more than 0 (a fraction is fine)")
    if not cfg.lr > 0 or cfg.num_threads < 0 or (cfg.max_steps or 0) < 0:
        raise ConfigError(f"--lr={cfg.lr}, --num_threads={cfg.num_threads}, --max_steps="
                          f"{cfg.max_steps}: lr must be > 0, the others 0 (off) or more")
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device={cfg.device}: this machine has no CUDA GPU (torch "
                          f"{torch.__version__}); use --device=cpu or auto")
    if cfg.data_dir and not os.path.isdir(cfg.data_dir):
        raise ConfigError(f"--data_dir={cfg.data_dir}: no such folder (the raw files to prepare "
                          f"from); leave it out to use the prepared data")
    if cfg.flips not in (1, 2, 4):
        raise ConfigError(f"--flips must be 1, 2 or 4, got {cfg.flips}")
    if cfg.flips > 1 and task.target == "prototype":
        raise ConfigError("flip augmentation is not defined for generative classification (the target "
                          "prototype would not flip with the input); use --flips=1")
    if cfg.device == "auto":
        cfg.device = "cuda" if torch.cuda.is_available() else "cpu"
    if cfg.dtype == "auto":
        cuda_bf16 = cfg.device.startswith("cuda") and torch.cuda.is_bf16_supported()
        cfg.dtype = "bfloat16" if cuda_bf16 else "float32"   # CPU: fp32 (bf16 matmuls crawl without AMX)
    if cfg.dtype not in ("bfloat16", "float32"):
        raise ConfigError(f"--dtype must be bfloat16 or float32, got {cfg.dtype!r}")
    if cfg.out_dir is None:
        cfg.out_dir = os.path.join("out", f"mlp_{cfg.task}")
    check_shape(cfg.shape, cfg.latent_dim, cfg.hidden_dim)
    return cfg


def autocast_ctx(cfg):
    if cfg.dtype == "bfloat16":
        return torch.autocast(device_type="cuda" if cfg.device.startswith("cuda") else "cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def model_from_config(cfg):
    return build_model(cfg.task, cfg.latent_dim, cfg.hidden_dim, cfg.n_blocks, shape=cfg.shape,
                       input_proj=cfg.input_proj, w_in_seed=cfg.seed)   # W_in is regenerated from the seed


def make_optimizer(model, cfg):
    """AdamW over the trainable parameters only: a frozen W_in is not in the optimizer, so neither
    the update nor the decoupled weight decay can touch it."""
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr,
                             weight_decay=cfg.weight_decay)


@torch.no_grad()
def evaluate(model, task, images, labels, prototypes, cfg, with_ssim=False, seed=1234, baseline=False):
    """Metrics on a split. Degraded inputs are reproducible (seeded noise). baseline=True scores
    the trivial restorer instead of the model: the noisy input (denoise), bicubic upsampling (SR),
    the input image itself (classification)."""
    was_training = model.training
    model.eval()
    device = cfg.device
    g = torch.Generator(device=device).manual_seed(seed)
    acc = MetricAccumulator()
    protos = prototypes.to(device) if prototypes is not None else None
    for i in range(0, len(images), EVAL_BATCH_SIZE):
        imgs = images[i:i + EVAL_BATCH_SIZE].to(device)
        labs = labels[i:i + EVAL_BATCH_SIZE].to(device)
        x, target = make_batch(task, imgs, labs, protos, g, cfg.noise_sigma)
        if baseline:
            if task.degradation == "bicubic2x":
                c, h, w = task.image_shape
                pred = bicubic_upsample(x.view(-1, c, h // 2, w // 2), (h, w)).flatten(1)
            else:
                pred = x
        else:
            with autocast_ctx(cfg):
                pred = model(x)
        correct = None
        if task.target == "prototype":
            nearest = torch.cdist(pred.float(), protos).argmin(1)     # nearest prototype, (B,)
            correct = nearest == labs
        acc.add(pred, target, task.image_shape, with_ssim, correct)
    model.train(was_training)
    return acc.result()


def load_checkpoint(path, device="cpu"):
    """-> (model, config, checkpoint dict). Only tensors and plain values: weights_only=True."""
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as e:  # a truncated or foreign file: torch raises several kinds
        raise ConfigError(f"{path} is not a readable checkpoint (truncated or not a torch file: "
                          f"{type(e).__name__}); train one with python train_mlp.py train") from None
    known = {f.name for f in fields(TrainConfig)}
    if not isinstance(ckpt.get("config"), dict) or not set(ckpt["config"]) <= known:
        raise ConfigError(f"{path} is not a checkpoint of train_mlp.py (an LM checkpoint of "
                          f"train.py? sample it with sample.py)")
    cfg = TrainConfig(**ckpt["config"])
    model = model_from_config(cfg)
    model.load_state_dict(ckpt["model"])
    return model.to(device), cfg, ckpt


def check_data_source(ckpt, data, ckpt_path, allow_other=False):
    """Refuse to score a checkpoint on another data source than the one it was trained on (the
    prepared folder of a --dataset can change: full MNIST online, the 5k subset offline...).
    Checkpoints written before the source was recorded get a warning."""
    trained = (ckpt.get("data") or {}).get("source")
    if trained is None:
        print(f"warning: {ckpt_path} does not record the data it was trained on (written before checkpoints "
              f"recorded it); scoring it on {data.source!r} without being able to check", file=sys.stderr)
    elif trained != data.source:
        msg = (f"{ckpt_path} was trained on {trained!r}, but the prepared data now is {data.source!r}")
        if not allow_other:
            raise ConfigError(msg + ". Prepare the training source again (python train_mlp.py prepare ...) or pass "
                              "--prepared_dir=<folder holding it>; --allow_other_data scores it on this data anyway.")
        print(f"warning: {msg} (--allow_other_data)", file=sys.stderr)


def save_sample_grid(task, x, pred, target, path, title="", n=8):
    """PNG with rows: input, output, target (first n images)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    c, h, w = task.image_shape
    n = min(n, x.shape[0])
    xi = x[:n].float().cpu()
    if task.degradation == "bicubic2x":   # show the low-res input at full size (nearest)
        xi = F.interpolate(xi.view(n, c, h // 2, w // 2), size=(h, w), mode="nearest").flatten(1)
    rows = [("input", xi), ("output", pred[:n].float().cpu()), ("target", target[:n].float().cpu())]
    fig, axes = plt.subplots(3, n, figsize=(n * 0.9, 3 * 0.95))
    for r, (name, imgs) in enumerate(rows):
        for j in range(n):
            ax = axes[r, j]
            img = imgs[j].view(c, h, w).permute(1, 2, 0).clamp(0, 1).numpy()
            ax.imshow(img[..., 0] if c == 1 else img, cmap="gray" if c == 1 else None, vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel(name, fontsize=8)
    if title:
        fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=60)
    plt.close(fig)


def train(cfg, data=None):
    """Train one model; returns a dict of results (also written to cfg.out_dir unless disabled)."""
    cfg = resolve_config(cfg)
    task = get_task(cfg.task)
    say = (lambda *a: None) if cfg.quiet else print
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    if data is None:
        data = load_data(task, cfg.dataset, cfg.data_dir, cfg.max_train_images, cfg.prepared_dir)
    prototypes = choose_prototypes(data.train, data.train_labels) if task.target == "prototype" else None

    torch.manual_seed(cfg.seed)                       # fixes W_in (frozen or not) and the block init
    model = model_from_config(cfg).to(cfg.device)
    params = count_params(model)
    say(f"model: {cfg.shape} d_z={cfg.latent_dim} d_h={cfg.hidden_dim} L={cfg.n_blocks} W_in={cfg.input_proj} | "
        f"params total {params['total']:,} trainable {params['trainable']:,}")
    optimizer = make_optimizer(model, cfg)
    fwd = torch.compile(model) if cfg.compile else model

    n_train = len(data.train)
    steps_per_epoch = (n_train * cfg.flips) // cfg.batch_size
    if steps_per_epoch == 0:
        raise ConfigError(f"{n_train} training images x {cfg.flips} flips is less than one batch of {cfg.batch_size}")
    total_steps = max(1, int(round(cfg.epochs * steps_per_epoch)))
    if cfg.max_steps:
        total_steps = min(total_steps, cfg.max_steps)
    eval_interval = cfg.eval_interval or steps_per_epoch
    gen = torch.Generator(device=cfg.device).manual_seed(cfg.seed + 1)   # training noise
    order_rng = torch.Generator().manual_seed(cfg.seed + 2)              # data order
    protos_dev = prototypes.to(cfg.device) if prototypes is not None else None

    data_record = {"dataset": data.dataset, "source": data.source, "n_train": n_train}
    if cfg.save_checkpoint or cfg.save_samples:
        os.makedirs(cfg.out_dir, exist_ok=True)
        with open(os.path.join(cfg.out_dir, "data.json"), "w") as f:     # what this out_dir was trained on
            json.dump(data_record, f, indent=2)
    history, best = [], {"val_loss": float("inf"), "step": 0, "state": None}
    val_psnr, order, t0, t_last, loss_sum, n_loss = float("nan"), None, time.time(), time.time(), 0.0, 0
    model.train()
    train_images = data.train.to(cfg.device)  # uint8, once: no copy per step (a GPU holds 50k easily)
    train_labels = data.train_labels.to(cfg.device)
    for step in range(total_steps):
        pos = step % steps_per_epoch
        if pos == 0:     # new epoch: shuffle (image, flip) pairs; the data set is enlarged x flips
            order = torch.randperm(n_train * cfg.flips, generator=order_rng)
        idx = order[pos * cfg.batch_size:(pos + 1) * cfg.batch_size]
        rows = (idx % n_train).to(cfg.device)
        imgs, labs = train_images[rows], train_labels[rows]  # (B, C, H, W) uint8, (B,)
        flip_codes = (idx // n_train).to(cfg.device) if cfg.flips > 1 else None
        x, target = make_batch(task, imgs, labs, protos_dev, gen, cfg.noise_sigma, flip_codes)
        lr = cfg.lr * (1.0 - step / total_steps)                         # linear decay to 0, no warm-up
        for group in optimizer.param_groups:
            group["lr"] = lr
        with autocast_ctx(cfg):
            pred = fwd(x)                                                # (B, d_out)
        loss = F.mse_loss(pred.float(), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_sum += loss.detach()  # no host sync per step: read at evaluations only
        n_loss += 1

        last = step + 1 == total_steps
        if (step + 1) % eval_interval == 0 or last:
            val = evaluate(fwd, task, data.val, data.val_labels, prototypes, cfg, seed=cfg.seed + 1000)
            val_psnr = val["psnr_batchmse"]
            history.append({"step": step + 1, "epoch": (step + 1) / steps_per_epoch, "lr": lr,
                            "train_loss": float(loss_sum) / max(n_loss, 1), "val_loss": val["loss"],
                            "val_psnr_batchmse": val_psnr, "val_psnr_per_image": val["psnr_per_image"],
                            "time_s": time.time() - t0})
            loss_sum, n_loss = 0.0, 0
            if val["loss"] < best["val_loss"]:
                best = {"val_loss": val["loss"], "step": step + 1,
                        "state": {k: v.detach().clone() for k, v in model.state_dict().items()}}
                if cfg.save_checkpoint:
                    save_checkpoint({"model": best["state"], "config": asdict(cfg), "step": step + 1,
                                     "val_loss": val["loss"], "prototypes": prototypes, "data": data_record},
                                    os.path.join(cfg.out_dir, "ckpt.pt"))
        if (step + 1) % cfg.log_interval == 0 or last:
            now = time.time()
            its = cfg.log_interval / max(now - t_last, 1e-9) if not last else (step + 1) / max(now - t0, 1e-9)
            t_last = now
            val_str = "--" if math.isnan(val_psnr) else f"{val_psnr:.2f} dB"
            left = (total_steps - step - 1) * (now - t0) / (step + 1) / 60
            say(f"step {step + 1}/{total_steps} | loss {loss.item():.5f} | val psnr {val_str} | "
                f"lr {lr:.2e} | {its:.1f} it/s | ~{left:.1f} min to go")
    train_time = time.time() - t0

    if best["state"] is None:     # every validation loss was NaN (diverged): NaN metrics, no exception
        say("warning: every validation loss was NaN (the run diverged); its test metrics are NaN")
        test = {k: float("nan") for k in ("loss", "psnr_batchmse", "psnr_per_image", "ssim")}
        test.update({"n_images": len(data.test)}, **({"accuracy": float("nan")} if task.target == "prototype" else {}))
        best["val_loss"] = float("nan")
    else:
        model.load_state_dict(best["state"])     # test the model with the lowest validation loss
        test = evaluate(model, task, data.test, data.test_labels, prototypes, cfg, with_ssim=True, seed=cfg.seed + 2000)
    base = evaluate(model, task, data.test, data.test_labels, prototypes, cfg, with_ssim=True,
                    seed=cfg.seed + 2000, baseline=True)
    result = {"task": cfg.task, "data": data.source, "dataset": data.dataset, "config": asdict(cfg), "params": params,
              "steps": total_steps, "best_step": best["step"], "best_val_loss": best["val_loss"],
              "train_time_s": train_time, "it_per_s": total_steps / max(train_time, 1e-9),
              "test": test, "baseline": base,
              "baseline_name": BASELINE_NAMES[task.degradation]}
    say(f"test ({len(data.test)} images): psnr_batchmse {test['psnr_batchmse']:.2f} dB, psnr_per_image "
        f"{test['psnr_per_image']:.2f} dB, ssim {test['ssim']:.4f}"
        + (f", nearest-prototype accuracy {test['accuracy']:.4f}" if "accuracy" in test else "")
        + f" | {result['baseline_name']}: {base['psnr_batchmse']:.2f} dB, ssim {base['ssim']:.4f} | "
          f"{train_time:.0f}s")
    if cfg.save_checkpoint or cfg.save_samples:
        with open(os.path.join(cfg.out_dir, "metrics.json"), "w") as f:
            json.dump(result, f, indent=2)
        write_csv(os.path.join(cfg.out_dir, "history.csv"), history)
    if cfg.save_samples:
        g = torch.Generator(device=cfg.device).manual_seed(cfg.seed + 2000)
        model.eval()
        x, target = make_batch(task, data.test[:8].to(cfg.device), data.test_labels[:8].to(cfg.device),
                               protos_dev, g, cfg.noise_sigma)
        with torch.no_grad(), autocast_ctx(cfg):
            pred = model(x)
        save_sample_grid(task, x, pred, target, os.path.join(cfg.out_dir, "samples.png"),
                         title=f"{cfg.task} {cfg.shape} ({cfg.latent_dim},{cfg.hidden_dim},{cfg.n_blocks}) "
                               f"test PSNR {test['psnr_batchmse']:.2f} dB")
    result["history"] = history
    result["model"] = model          # the best model (by validation loss), for callers and tests
    return result


def write_csv(path, rows):
    if not rows:
        return
    keys = list(rows[0].keys())
    for r in rows[1:]:
        keys += [k for k in r if k not in keys]
    tmp = f"{path}.tmp.{os.getpid()}"  # whole or not at all: a full disk or a kill tears nothing
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)

# -----------------------------------------------------------------------------
# Sweep and Pareto fronts (Figures 2-4)


# the run's setting: every sweep row records it, the resume check keys on it, and one CSV holds one setting
SETTING_FIELDS = ["task", "data_source", "n_train", "epochs", "max_steps", "batch_size", "flips", "noise_sigma",
                  "input_proj", "dtype", "weight_decay", "eval_interval"]
SWEEP_FIELDS = SETTING_FIELDS + ["shape", "latent_dim", "hidden_dim", "n_blocks", "lr", "seed", "params_total",
                "params_trainable", "val_loss", "test_psnr_batchmse", "test_psnr_per_image", "test_ssim",
                "test_accuracy", "baseline_psnr_batchmse", "steps", "train_time_s"]


def _canon(v):
    """A setting value as the CSV holds it (30 and 30.0 alike, None as '')."""
    if v is None or v == "":
        return ""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return repr(float(v))
    try:
        return repr(float(v))
    except ValueError:
        return str(v)


def sweep_setting(cfg, data):
    """{field: canonical string} of everything but the shape, lr and seed that changes a run's result."""
    raw = {"data_source": data.source, "n_train": len(data.train)}
    raw.update({k: getattr(cfg, k) for k in SETTING_FIELDS if k not in raw})
    return {k: _canon(raw[k]) for k in SETTING_FIELDS}


def run_key(row):
    """A sweep row's identity: the shape, lr, seed and the full setting."""
    return ((row["shape"], int(row["latent_dim"]), int(row["hidden_dim"]), int(row["n_blocks"]), float(row["lr"]),
             int(row["seed"])) + tuple(_canon(row[k]) for k in SETTING_FIELDS))


def check_one_setting(rows, csv_path, setting=None):
    """Raise a clear error when the rows of a sweep CSV (and `setting`, the one about to run) are not
    all one setting: a Pareto front must not mix them, and a resume must not count another setting's
    runs as done."""
    old = [r for r in rows if any(k not in r for k in SETTING_FIELDS)]
    if old:
        raise ConfigError(f"{csv_path} was written before sweep rows recorded their setting (data, steps, "
                          f"batch, flips, sigma, W_in, dtype...), so its runs cannot be matched to this one. "
                          f"Use another --out_dir, or delete it to start over.")
    settings = {tuple(_canon(r[k]) for k in SETTING_FIELDS) for r in rows}
    if setting is not None:
        settings.add(tuple(setting[k] for k in SETTING_FIELDS))
    if len(settings) > 1:
        diffs = [f"{k}: " + " vs ".join(sorted({s[i] or "-" for s in settings}))
                 for i, k in enumerate(SETTING_FIELDS) if len({s[i] for s in settings}) > 1]
        raise ConfigError(f"{csv_path} holds runs of another setting ({'; '.join(diffs)}); one sweep CSV holds "
                          f"one setting. Use another --out_dir for this one (or delete the CSV to start over).")


def sweep_grid(hg_latent, hg_hidden, hg_blocks, conv_latent, conv_hidden, conv_blocks):
    """All valid (shape, d_z, d_h, L); combinations with the wrong shape are skipped."""
    grid = []
    for shape, latents, hiddens, blocks in (("hourglass", hg_latent, hg_hidden, hg_blocks),
                                            ("conventional", conv_latent, conv_hidden, conv_blocks)):
        for dz in latents:
            for dh in hiddens:
                for L in blocks:
                    try:
                        check_shape(shape, dz, dh)
                    except ValueError:
                        continue
                    grid.append((shape, dz, dh, L))
    return grid


def pareto_front(points):
    """points: list of (params, psnr, ...) -> the ones no other point beats with fewer-or-equal params."""
    front, best = [], -float("inf")
    for p in sorted((p for p in points if math.isfinite(p[1])), key=lambda t: (t[0], -t[1])):   # NaN: diverged
        if p[1] > best:
            front.append(p)
            best = p[1]
    return front


def aggregate_sweep(rows, metric="test_psnr_batchmse"):
    """Per (shape, d_z, d_h, L): the lr with the best mean val loss, mean metric over its seeds."""
    by_arch = {}
    for r in rows:
        key = (r["shape"], int(r["latent_dim"]), int(r["hidden_dim"]), int(r["n_blocks"]))
        by_arch.setdefault(key, {}).setdefault(float(r["lr"]), []).append(r)
    out = []
    for (shape, dz, dh, L), by_lr in sorted(by_arch.items()):
        def mean_val(kv):      # a diverged lr (NaN val loss) is never the pick, unless all are
            m = np.mean([float(r["val_loss"]) for r in kv[1]])
            return m if math.isfinite(m) else float("inf")
        lr, runs = min(by_lr.items(), key=mean_val)
        vals = [float(r[metric]) for r in runs]
        out.append({"shape": shape, "latent_dim": dz, "hidden_dim": dh, "n_blocks": L, "lr": lr,
                    "params_total": int(runs[0]["params_total"]), "params_trainable": int(runs[0]["params_trainable"]),
                    metric: float(np.mean(vals)), metric + "_std": float(np.std(vals)), "n_seeds": len(vals)})
    return out


def plot_pareto(rows, path, metric="test_psnr_batchmse", title="", params_key="params_total", baseline=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    agg = aggregate_sweep(rows, metric)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    colors = {"hourglass": "tab:red", "conventional": "tab:blue"}
    labels = {"hourglass": "hourglass (wide-narrow-wide)", "conventional": "conventional (narrow-wide-narrow)"}
    for shape in SHAPES:
        pts = [(a[params_key], a[metric], a["latent_dim"], a["hidden_dim"], a["n_blocks"]) for a in agg
               if a["shape"] == shape and math.isfinite(a[metric])]       # a diverged (NaN) run is no point
        if not pts:
            continue
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, alpha=0.35, color=colors[shape])
        front = pareto_front(pts)
        ax.plot([p[0] for p in front], [p[1] for p in front], "-o", ms=4, color=colors[shape], label=labels[shape])
        for p in front:
            ax.annotate(f"{p[2]}/{p[3]}/L{p[4]}", (p[0], p[1]), fontsize=6, xytext=(3, -8),
                        textcoords="offset points", color=colors[shape])
    if baseline is not None:
        ax.axhline(baseline[1], color="gray", ls="--", lw=1, label=baseline[0])
    if any(math.isfinite(a[metric]) for a in agg):
        ax.set_xscale("log")
    else:
        ax.text(0.5, 0.5, "no finite result: every run diverged (NaN)", ha="center", transform=ax.transAxes)
    ax.set_xlabel("parameters (" + ("total, incl. W_in" if params_key == "params_total" else "trainable") + ")")
    ax.set_ylabel(metric.replace("test_", "test ").replace("_", " ") + (" (dB)" if "psnr" in metric else ""))
    ax.grid(alpha=0.3, which="both")
    if ax.get_legend_handles_labels()[0]:  # nothing to name when every run diverged
        ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def read_csv(path):
    """The rows of a sweep CSV; a torn last row (a run killed while an older version wrote it)
    is dropped with a warning, so the next sweep reruns that one run."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if rows and (None in rows[-1].values() or None in rows[-1]):
        print(f"warning: {path}: its last row is incomplete (a torn write); dropped, that run "
              f"will run again", file=sys.stderr)
        rows = rows[:-1]
        if rows:  # rewritten (atomically) so that the next row is not appended to the torn one
            write_csv(path, rows)
        else:
            os.remove(path)
    return rows


def run_sweep(args):
    base = resolve_config(config_from_args(args))     # task defaults filled in (epochs, batch, ...)
    task = get_task(base.task)
    grid = sweep_grid(args.hg_latent, args.hg_hidden, args.hg_blocks, args.conv_latent, args.conv_hidden, args.conv_blocks)
    out_dir = args.out_dir or os.path.join("out", f"mlp_sweep_{base.task}")
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, "sweep.csv")
    if base.num_threads:
        torch.set_num_threads(base.num_threads)
    data = load_data(task, base.dataset, base.data_dir, base.max_train_images, base.prepared_dir)
    setting = sweep_setting(base, data)
    existing = read_csv(csv_path) if os.path.exists(csv_path) else []
    check_one_setting(existing, csv_path, setting)       # resume only runs of this very setting
    done = {run_key(r) for r in existing}
    # seed by seed: a sweep stopped early still holds every shape and lr of its first seeds
    runs = [(g, lr, s) for s in args.seeds for g in grid for lr in args.lrs]
    print(f"sweep: {len(grid)} shapes x {len(args.lrs)} lr x {len(args.seeds)} seeds = {len(runs)} runs "
          f"({len(done)} already in {csv_path})")
    t0, ran, todo = time.time(), 0, sum(1 for g, lr, s in runs if run_key({
        **setting, "shape": g[0], "latent_dim": g[1], "hidden_dim": g[2], "n_blocks": g[3],
        "lr": lr, "seed": s}) not in done)
    for i, ((shape, dz, dh, L), lr, seed) in enumerate(runs):
        if run_key({**setting, "shape": shape, "latent_dim": dz, "hidden_dim": dh, "n_blocks": L, "lr": lr,
                    "seed": seed}) in done:
            continue
        cfg = replace(base, shape=shape, latent_dim=dz, hidden_dim=dh, n_blocks=L, lr=lr, seed=seed,
                      save_checkpoint=False, save_samples=False, quiet=not args.verbose)
        res = train(cfg, data)
        row = {**setting, "shape": shape, "latent_dim": dz, "hidden_dim": dh, "n_blocks": L, "lr": lr, "seed": seed,
               "params_total": res["params"]["total"], "params_trainable": res["params"]["trainable"],
               "val_loss": res["best_val_loss"], "test_psnr_batchmse": res["test"]["psnr_batchmse"],
               "test_psnr_per_image": res["test"]["psnr_per_image"], "test_ssim": res["test"]["ssim"],
               "test_accuracy": res["test"].get("accuracy", ""), "baseline_psnr_batchmse": res["baseline"]["psnr_batchmse"],
               "steps": res["steps"], "train_time_s": round(res["train_time_s"], 1)}
        new_file = not os.path.exists(csv_path)
        with open(csv_path, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=SWEEP_FIELDS)
            if new_file:
                w.writeheader()
            w.writerow(row)
        ran += 1
        left = (time.time() - t0) / ran * (todo - ran) / 60
        print(f"[{i + 1}/{len(runs)}] {shape:12s} d_z={dz:5d} d_h={dh:5d} L={L:2d} lr={lr:g} "
              f"seed={seed} | params {row['params_total'] / 1e6:6.2f}M | test psnr "
              f"{row['test_psnr_batchmse']:.2f} dB ssim {row['test_ssim']:.4f} | "
              f"{row['train_time_s']:.0f}s, ~{left:.0f} min to go", flush=True)
    rows = read_csv(csv_path)
    finish_sweep(rows, out_dir, base, data.source)


def finish_sweep(rows, out_dir, base, source=""):
    """pareto.csv, pareto.png (x = total params), pareto_trainable.png, pareto_ssim.png."""
    agg = aggregate_sweep(rows)
    write_csv(os.path.join(out_dir, "pareto.csv"), agg)
    png = os.path.join(out_dir, "pareto.png")
    baseline = None
    if rows and rows[0].get("baseline_psnr_batchmse"):
        name = BASELINE_NAMES[get_task(base.task).degradation]
        baseline = (f"baseline: {name}", float(rows[0]["baseline_psnr_batchmse"]))
    title = (f"{base.task}: {source}\nepochs={base.epochs}, max_steps={base.max_steps}, batch {base.batch_size}, "
             f"flips {base.flips}, W_in={base.input_proj}, {base.dtype}")
    plot_pareto(rows, png, title=title, baseline=baseline)
    plot_pareto(rows, png.replace(".png", "_trainable.png"), title=title, baseline=baseline,
                params_key="params_trainable")
    plot_pareto(rows, png.replace(".png", "_ssim.png"), metric="test_ssim", title=title)
    for shape in SHAPES:
        pts = [(a["params_total"], a["test_psnr_batchmse"], a["latent_dim"], a["hidden_dim"], a["n_blocks"])
               for a in agg if a["shape"] == shape]
        print(f"{shape} Pareto front: " + ", ".join(f"{p[0] / 1e6:.2f}M ({p[2]}/{p[3]}/L{p[4]}) {p[1]:.2f} dB"
                                                     for p in pareto_front(pts)))
    print(f"wrote {os.path.join(out_dir, 'sweep.csv')}, {os.path.join(out_dir, 'pareto.csv')}, {png} "
          f"(x = total params, the paper's convention), pareto_trainable.png (x = trainable params), pareto_ssim.png")

# -----------------------------------------------------------------------------
# Section 4.3: fixed (frozen random) vs learned W_in


def compare_input_proj(args):
    """Each W_in variant at each d_z (--latent_dims; default the one --latent_dim), same seed: the
    same initial W_in and blocks. Writes compare.json, compare.csv and compare_input_proj.png."""
    base = config_from_args(args)
    out_dir = args.out_dir or os.path.join("out", f"mlp_compare_input_proj_{base.task}")
    os.makedirs(out_dir, exist_ok=True)
    base = resolve_config(replace(base, out_dir=out_dir))
    latents = args.latent_dims or [base.latent_dim]
    for dz in latents:
        check_shape(base.shape, dz, base.hidden_dim)
    if base.num_threads:
        torch.set_num_threads(base.num_threads)
    data = load_data(get_task(base.task), base.dataset, base.data_dir, base.max_train_images, base.prepared_dir)
    results, grid = {}, []
    for dz in latents:
        for variant in args.variants:
            print(f"--- d_z = {dz}, W_in = {variant}")
            sub = variant if len(latents) == 1 else f"dz{dz}_{variant}"
            cfg = replace(base, latent_dim=dz, input_proj=variant, out_dir=os.path.join(out_dir, sub),
                          save_checkpoint=False)
            r = results[(dz, variant)] = train(cfg, data)
            grid.append({"latent_dim": dz, "hidden_dim": base.hidden_dim, "n_blocks": base.n_blocks,
                         "input_proj": variant, "params_total": r["params"]["total"],
                         "params_trainable": r["params"]["trainable"], "best_val_loss": r["best_val_loss"],
                         "test_psnr_batchmse": r["test"]["psnr_batchmse"],
                         "test_psnr_per_image": r["test"]["psnr_per_image"], "test_ssim": r["test"]["ssim"],
                         "steps": r["steps"], "train_time_s": round(r["train_time_s"], 1)})
    setting = {k: v for k, v in sweep_setting(base, data).items() if k != "input_proj"}   # W_in varies here
    summary = {"data": data.source, "dataset": data.dataset, "setting": setting, "grid": grid}
    if len(latents) == 1:       # one d_z: the variants by name, as before
        summary.update({v: {"params": r["params"], "test": r["test"], "best_val_loss": r["best_val_loss"],
                            "train_time_s": r["train_time_s"]} for (_, v), r in results.items()})
    with open(os.path.join(out_dir, "compare.json"), "w") as f:
        json.dump(summary, f, indent=2)
    write_csv(os.path.join(out_dir, "compare.csv"), grid)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    if len(latents) == 1:       # validation curves of the variants
        for (_, v), r in results.items():
            h = r["history"]
            ax.plot([e["epoch"] for e in h], [e["val_psnr_batchmse"] for e in h], "-o", ms=3,
                    label=f"W_in {v}: {r['params']['trainable'] / 1e6:.2f}M trainable / {r['params']['total'] / 1e6:.2f}M")
        ax.set_xlabel("epoch")
        ax.set_ylabel("val PSNR (dB, batch-MSE)")
    else:                       # test PSNR against d_z, one line per variant (section 4.3 across d_z)
        for v in args.variants:
            pts = [g for g in grid if g["input_proj"] == v]
            ax.plot([g["latent_dim"] for g in pts], [g["test_psnr_batchmse"] for g in pts], "-o", ms=4, label=f"W_in {v}")
        ax.set_xlabel("d_z (latent width)")
        ax.set_ylabel("test PSNR (dB, batch-MSE)")
    ax.set_title(f"{base.task} {base.shape} d_h={base.hidden_dim} L={base.n_blocks}, {base.dtype}\n{data.source}", fontsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "compare_input_proj.png"), dpi=90)
    plt.close(fig)
    print("d_z    W_in     params(trainable/total)   test psnr_batchmse  psnr_per_image  ssim")
    for g in grid:
        print(f"{g['latent_dim']:5d}  {g['input_proj']:8s} {g['params_trainable'] / 1e6:7.2f}M / {g['params_total'] / 1e6:6.2f}M   "
              f"{g['test_psnr_batchmse']:8.2f} dB       {g['test_psnr_per_image']:6.2f} dB     {g['test_ssim']:.4f}")
    print(f"wrote {out_dir}/compare.json, compare.csv and compare_input_proj.png")

# -----------------------------------------------------------------------------
# Command line


def _ints(s):
    return [int(v) for v in s.split(",") if v]


def _floats(s):
    return [float(v) for v in s.split(",") if v]


def _bool(s):
    if s.lower() in ("1", "true", "yes"):
        return True
    if s.lower() in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {s!r}")


def add_data_args(p):
    p.add_argument("--data_dir", default=None,
                   help="folder with raw IDX files (MNIST/Fashion) or ImageNet-32 npz files to prepare from")
    p.add_argument("--prepared_dir", default=None,
                   help="folder with the prepared {train,val,test}.npz + meta.json (default: data/mnist/, "
                        "data/mnist/<dataset>/ or data/imagenet32/)")


def add_train_args(p):
    d = TrainConfig()
    p.add_argument("--task", default=d.task, choices=sorted(TASKS))
    p.add_argument("--dataset", default=None, choices=DATASETS,
                   help="default: mnist for mnist_* tasks (the 5k subset offline), imagenet32 otherwise")
    add_data_args(p)
    p.add_argument("--max_train_images", type=int, default=None)
    p.add_argument("--shape", default=d.shape, choices=SHAPES)
    p.add_argument("--input_proj", default=d.input_proj, choices=INPUT_PROJECTIONS, help="W_in (eq. 2)")
    p.add_argument("--latent_dim", type=int, default=None, help="d_z, the skip-connection width")
    p.add_argument("--hidden_dim", type=int, default=None, help="d_h, the residual-branch width")
    p.add_argument("--n_blocks", type=int, default=None, help="L, the number of residual blocks")
    p.add_argument("--epochs", type=float, default=None, help="default: the paper's epochs for the task")
    p.add_argument("--max_steps", type=int, default=None)
    p.add_argument("--batch_size", type=int, default=None)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--weight_decay", type=float, default=d.weight_decay)
    p.add_argument("--flips", type=int, default=None, choices=[1, 2, 4])
    p.add_argument("--noise_sigma", type=float, default=d.noise_sigma)
    p.add_argument("--eval_interval", type=int, default=None, help="steps; 0 = once per epoch")
    p.add_argument("--log_interval", type=int, default=d.log_interval)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--device", default=d.device)
    p.add_argument("--dtype", default=d.dtype, choices=["auto", "bfloat16", "float32"])
    p.add_argument("--compile", type=_bool, default=d.compile, nargs="?", const=True)
    p.add_argument("--num_threads", type=int, default=d.num_threads)
    p.add_argument("--out_dir", default=None)


def config_from_args(args):
    names = {f.name for f in fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in vars(args).items() if k in names})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    add_train_args(sub.add_parser("train", help="train one model"))
    p = sub.add_parser("sweep", help="grid over (d_z, d_h, L) for both shapes -> CSV + Pareto PNG")
    add_train_args(p)
    p.add_argument("--hg_latent", type=_ints, default=[1024, 2048], help="hourglass d_z values")
    p.add_argument("--hg_hidden", type=_ints, default=[16, 64, 256, 512], help="hourglass d_h values")
    p.add_argument("--hg_blocks", type=_ints, default=[2, 4], help="hourglass L values")
    p.add_argument("--conv_latent", type=_ints, default=[784], help="conventional d_z values")
    p.add_argument("--conv_hidden", type=_ints, default=[1024, 2048, 3072], help="conventional d_h values")
    p.add_argument("--conv_blocks", type=_ints, default=[1, 2], help="conventional L values")
    p.add_argument("--lrs", type=_floats, default=[1e-3])
    p.add_argument("--seeds", type=_ints, default=[0])
    p.add_argument("--verbose", action="store_true", help="print every run's progress lines")
    p = sub.add_parser("pareto", help="re-plot the Pareto fronts of a sweep CSV")
    p.add_argument("csv")
    p.add_argument("--out", default=None)
    p.add_argument("--title", default="")
    p.add_argument("--task", default="mnist_denoise", choices=sorted(TASKS), help="names the baseline line")
    p.add_argument("--params", default="total", choices=["total", "trainable"], help="x axis")
    p.add_argument("--metric", default="test_psnr_batchmse", help="y axis",
                   choices=["test_psnr_batchmse", "test_psnr_per_image", "test_ssim", "test_accuracy"])
    p = sub.add_parser("compare_input_proj", help="section 4.3: frozen random vs learned W_in")
    add_train_args(p)
    p.add_argument("--variants", type=lambda s: s.split(","), default=["frozen", "learned"])
    p.add_argument("--latent_dims", type=_ints, default=None, help="several d_z values (default: --latent_dim)")
    p = sub.add_parser("eval", help="test metrics of a checkpoint")
    p.add_argument("--ckpt", required=True)
    add_data_args(p)
    p.add_argument("--allow_other_data", action="store_true",
                   help="score the checkpoint even if the prepared data is not the source it was trained on")
    p.add_argument("--device", default="auto")
    p = sub.add_parser("prepare", help="prepare a data set (runs data/<name>/prepare.py)")
    p.add_argument("--dataset", default="mnist", choices=DATASETS)
    add_data_args(p)
    p.add_argument("--max_train_images", type=int, default=None, help="imagenet32 only: keep the first N")
    args = parser.parse_args(argv)
    try:
        run_command(args)
    except (ConfigError, FileNotFoundError) as e:  # one line, no traceback
        sys.exit(f"error: {e}")


def run_command(args):
    if args.command == "train":
        train(config_from_args(args))
    elif args.command == "sweep":
        run_sweep(args)
    elif args.command == "pareto":
        rows = read_csv(args.csv)
        if rows and any(k not in rows[0] for k in SETTING_FIELDS):
            print(f"warning: {args.csv} does not record its runs' setting (an older sweep); plotting it as is",
                  file=sys.stderr)
        else:
            check_one_setting(rows, args.csv)
        suffix = "" if args.metric == "test_psnr_batchmse" else "_" + args.metric.replace("test_", "")
        out = args.out or os.path.join(os.path.dirname(args.csv), f"pareto{suffix}.png")
        if args.metric == "test_accuracy" and not any(r.get("test_accuracy") for r in rows):
            raise ConfigError(f"{args.csv} has no test_accuracy (only generative classification reports it)")
        baseline = None
        if rows and rows[0].get("baseline_psnr_batchmse") and args.metric == "test_psnr_batchmse":
            baseline = (f"baseline: {BASELINE_NAMES[get_task(args.task).degradation]}",
                        float(rows[0]["baseline_psnr_batchmse"]))
        plot_pareto(rows, out, metric=args.metric, title=args.title, baseline=baseline,
                    params_key="params_" + args.params)
        print(f"wrote {out}")
    elif args.command == "compare_input_proj":
        compare_input_proj(args)
    elif args.command == "eval":
        device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
        model, cfg, ckpt = load_checkpoint(args.ckpt, device)
        cfg = replace(cfg, device=device, data_dir=args.data_dir or cfg.data_dir,
                      prepared_dir=args.prepared_dir or cfg.prepared_dir)
        task = get_task(cfg.task)
        data = load_data(task, cfg.dataset, cfg.data_dir, cfg.max_train_images, cfg.prepared_dir)
        check_data_source(ckpt, data, args.ckpt, args.allow_other_data)
        protos = ckpt.get("prototypes")
        test = evaluate(model, task, data.test, data.test_labels, protos, cfg, with_ssim=True, seed=cfg.seed + 2000)
        print(json.dumps({"checkpoint": args.ckpt, "step": ckpt["step"], "data": data.source, "test": test}, indent=2))
    elif args.command == "prepare":
        run_prepare(args.dataset, args.data_dir, args.prepared_dir, args.max_train_images)


if __name__ == "__main__":
    main()
