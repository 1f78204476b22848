"""
The image tasks, degradations and metrics of "Rethinking the Shape Convention of an MLP" (Chen,
Lee, Liao, Shiu, 2025, arXiv:2510.01796), Table 3: an image in [0, 1] flattened to x (d_x) and a
target (d_out): a class prototype (mnist_classify), the clean image behind clamp(y + N(0, sigma^2),
0, 1) noise (*_denoise) or behind bicubic 2x downsampling (*_sr), on MNIST, Fashion-MNIST or
ImageNet-32. How each is trained is config/mlp_<task>.py's.

As the reference code makes them: bicubic without antialiasing or clamp; flips x2 = {none, both},
x4 = all four; psnr_batchmse the PSNR of each eval batch's mean MSE, weighted by batch size;
SSIM torchmetrics' default (Gaussian 11x11, sigma 1.5, reflect padding).
"""


from collections import defaultdict
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from shapelab.configurator import ConfigError


@dataclass(frozen=True)
class Task:
    name: str
    dataset_kind: str      # "28x28" (MNIST / Fashion-MNIST) or "imagenet32"
    degradation: str       # "none" | "noise" | "bicubic2x"
    target: str            # "clean" | "prototype"
    image_shape: tuple     # (C, H, W) of the target image

    @property
    def input_dim(self):   # d_x
        c, h, w = self.image_shape
        return c * h * w // 4 if self.degradation == "bicubic2x" else c * h * w

    @property
    def output_dim(self):  # d_out
        c, h, w = self.image_shape
        return c * h * w


TASKS = {t.name: t for t in [  # the paper's Table 3
    Task("mnist_classify", "28x28", "none", "prototype", (1, 28, 28)),
    Task("mnist_denoise", "28x28", "noise", "clean", (1, 28, 28)),
    Task("mnist_sr", "28x28", "bicubic2x", "clean", (1, 28, 28)),
    Task("imagenet32_denoise", "imagenet32", "noise", "clean", (3, 32, 32)),
    Task("imagenet32_sr", "imagenet32", "bicubic2x", "clean", (3, 32, 32)),
]}

# the trivial restorer each task's model must beat
BASELINE_NAMES = {"noise": "noisy input", "bicubic2x": "bicubic upsampling",
                  "none": "input image vs prototype"}


def get_task(name):
    if name not in TASKS:
        raise ConfigError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return TASKS[name]


def baseline_prediction(task, x):
    """The trivial restorer's output (B, d_out) for inputs x (B, d_x), as BASELINE_NAMES says."""
    if task.degradation != "bicubic2x":
        return x
    c, h, w = task.image_shape
    up = F.interpolate(x.view(-1, c, h // 2, w // 2), size=(h, w), mode="bicubic",
                       align_corners=False)
    return up.clamp(0.0, 1.0).flatten(1)


# flip augmentation as the reference code's: the training set enlarged n times, copy k flipped by
# FLIP_SETS[n][k] (0: none, 1: horizontal, 2: vertical, 3: both); x2 = {none, both}
FLIP_SETS = {1: (0,), 2: (0, 3), 4: (0, 1, 2, 3)}


def flips_of_copies(copies, flips):
    return torch.tensor(FLIP_SETS[flips], device=copies.device)[copies]


def flip_images(images, codes):
    out = images.clone()
    horizontal, vertical = codes % 2 == 1, codes >= 2
    out[horizontal] = out[horizontal].flip(-1)
    out[vertical] = out[vertical].flip(-2)
    return out


def make_batch(task, images_u8, labels, prototypes, generator, noise_sigma, flip_codes=None):
    """uint8 images (B, C, H, W) -> (x (B, d_x), target (B, d_out)) as float."""
    clean = images_u8.float() / 255.0                          # (B, C, H, W)
    if flip_codes is not None:
        clean = flip_images(clean, flip_codes)
    if task.degradation == "noise":  # clamp(y + N(0, sigma^2), 0, 1)
        noise = torch.randn(clean.shape, generator=generator, device=clean.device)
        degraded = (clean + noise_sigma * noise).clamp(0.0, 1.0)
    elif task.degradation == "bicubic2x":  # unclamped: it overshoots [0, 1] near edges
        h, w = clean.shape[-2:]
        degraded = F.interpolate(clean, size=(h // 2, w // 2), mode="bicubic", antialias=False,
                                 align_corners=False)
    else:
        degraded = clean
    x = degraded.flatten(1)  # (B, d_x)
    target = prototypes[labels] if task.target == "prototype" else clean.flatten(1)  # (B, d_out)
    return x, target


def choose_prototypes(images, labels, seed=42):
    """One seeded random training image per class (K, D): the classification targets."""
    g = torch.Generator().manual_seed(seed)
    protos = []
    for c in range(int(labels.max()) + 1):
        idx = torch.nonzero(labels == c).flatten()
        if len(idx) == 0:
            raise ConfigError(f"class {c} has no training image to serve as its prototype")
        pick = idx[torch.randint(len(idx), (1,), generator=g)]
        protos.append(images[pick].float().flatten() / 255.0)
    return torch.stack(protos)


def psnr_from_mse(mse):
    """PSNR in dB of images in [0, 1]; identical images give 100 dB, not inf."""
    return -10.0 * torch.log10(torch.as_tensor(mse, dtype=torch.float64).clamp_min(1e-10))


def ssim(x, y):
    """Mean SSIM per image (B,) of x, y (B, C, H, W), as torchmetrics' defaults."""
    x, y = x.double(), y.double()
    data_range = max((x.max() - x.min()).item(), (y.max() - y.min()).item())
    x, y = F.pad(x, (5, 5, 5, 5), mode="reflect"), F.pad(y, (5, 5, 5, 5), mode="reflect")
    # the local means of x, y, x^2, y^2, xy: a separable 11-tap Gaussian (sigma 1.5), column
    # then row
    taps = torch.exp(-(torch.arange(11, dtype=torch.float64) - 5) ** 2 / (2 * 1.5 ** 2)).to(x)
    taps /= taps.sum()
    maps = torch.cat([x, y, x * x, y * y, x * y], dim=1)
    n = maps.size(1)
    maps = F.conv2d(maps, taps.view(1, 1, -1, 1).expand(n, 1, -1, 1), groups=n)
    maps = F.conv2d(maps, taps.view(1, 1, 1, -1).expand(n, 1, 1, -1), groups=n)
    mu_x, mu_y, mean_xx, mean_yy, mean_xy = maps.chunk(5, dim=1)
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    var_x, var_y = (mean_xx - mu_x ** 2).clamp_min(0), (mean_yy - mu_y ** 2).clamp_min(0)
    cov = mean_xy - mu_x * mu_y
    ssim_map = ((2 * mu_x * mu_y + c1) * (2 * cov + c2)) / (
        (mu_x ** 2 + mu_y ** 2 + c1) * (var_x + var_y + c2))
    return ssim_map.flatten(1).mean(1)  # (B,)


class MetricAccumulator:
    """Per-batch results summed: loss (the MSE over all pixels), both PSNRs, SSIM, accuracy."""

    def __init__(self):
        self.sums, self.counts = defaultdict(float), defaultdict(int)

    def add(self, pred, target, image_shape=None, with_ssim=False, correct=None):
        pred, target = pred.float(), target.float()                 # (B, D)
        b = pred.shape[0]
        per_image_mse = ((pred - target) ** 2).mean(1).double()    # (B,)
        found = {"loss": per_image_mse.sum(), "psnr_batchmse": psnr_from_mse(
            per_image_mse.mean()) * b, "psnr_per_image": psnr_from_mse(per_image_mse).sum()}
        if with_ssim:
            found["ssim"] = ssim(pred.view(b, *image_shape), target.view(b, *image_shape)).sum()
        if correct is not None:
            found["accuracy"] = correct.sum()
        for name, total in found.items():
            self.sums[name] += total.item()
            self.counts[name] += b

    def result(self):
        return {"n_images": self.counts["loss"],
                **{name: total / self.counts[name] for name, total in self.sums.items()}}
