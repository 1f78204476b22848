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


def add_gaussian_noise(clean, sigma, generator=None):
    """clamp(y + N(0, sigma^2), 0, 1) of clean (B, C, H, W) in [0, 1]."""
    noise = torch.randn(clean.shape, generator=generator, device=clean.device, dtype=clean.dtype)
    return (clean + sigma * noise).clamp(0.0, 1.0)


def bicubic_downsample(clean, factor=2, clamp=False):
    """(B, C, H, W) -> (B, C, H/f, W/f), bicubic: it overshoots [0, 1] near edges unless clamp."""
    b, c, h, w = clean.shape
    if h % factor or w % factor:
        raise ConfigError(f"image size {h}x{w} is not divisible by the SR factor {factor}")
    low = F.interpolate(clean, size=(h // factor, w // factor), mode="bicubic",
                        antialias=False, align_corners=False)
    return low.clamp(0.0, 1.0) if clamp else low


def bicubic_upsample(low, size):
    return F.interpolate(low, size=size, mode="bicubic", align_corners=False).clamp(0.0, 1.0)


def baseline_prediction(task, x):
    """The trivial restorer's output (B, d_out) for inputs x (B, d_x), as BASELINE_NAMES says."""
    if task.degradation != "bicubic2x":
        return x
    c, h, w = task.image_shape
    return bicubic_upsample(x.view(-1, c, h // 2, w // 2), (h, w)).flatten(1)


# flip augmentation as the reference code's: the training set enlarged n times, copy k flipped by
# FLIP_SETS[n][k] (0: none, 1: horizontal, 2: vertical, 3: both); x2 = {none, both}
FLIP_SETS = {1: (0,), 2: (0, 3), 4: (0, 1, 2, 3)}


def flips_of_copies(copies, flips):
    return torch.tensor(FLIP_SETS[flips], device=copies.device)[copies]


def flip_images(images, codes):
    out = images.clone()
    h = (codes == 1) | (codes == 3)
    v = (codes == 2) | (codes == 3)
    out[h] = out[h].flip(-1)
    out[v] = out[v].flip(-2)
    return out


def degrade(task, clean, generator, noise_sigma, clamp_sr_input=False):
    """The network input for a clean image batch (B, C, H, W)."""
    if task.degradation == "noise":
        return add_gaussian_noise(clean, noise_sigma, generator)
    if task.degradation == "bicubic2x":
        return bicubic_downsample(clean, 2, clamp=clamp_sr_input)
    return clean


def make_batch(task, images_u8, labels, prototypes, generator, noise_sigma, flip_codes=None,
               clamp_sr_input=False):
    """uint8 images (B, C, H, W) -> (x (B, d_x), target (B, d_out)) as float."""
    clean = images_u8.float() / 255.0                          # (B, C, H, W)
    if flip_codes is not None:
        clean = flip_images(clean, flip_codes)
    x = degrade(task, clean, generator, noise_sigma, clamp_sr_input).flatten(1)  # (B, d_x)
    target = prototypes[labels] if task.target == "prototype" else clean.flatten(1)  # (B, d_out)
    return x, target


def choose_prototypes(images, labels, n_classes=None, seed=42):
    """One seeded random training image per class (K, D): the classification targets."""
    n_classes = n_classes or int(labels.max()) + 1
    g = torch.Generator().manual_seed(seed)
    protos = []
    for c in range(n_classes):
        idx = torch.nonzero(labels == c).flatten()
        if len(idx) == 0:
            raise ConfigError(f"class {c} has no training image to serve as its prototype")
        pick = idx[torch.randint(len(idx), (1,), generator=g)]
        protos.append(images[pick].float().flatten() / 255.0)
    return torch.stack(protos)


def samples_png(task, x, pred, target, title):
    """A PNG (bytes) of a batch: a row of inputs, outputs and targets."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ch, h, w = task.image_shape
    n = x.shape[0]
    shown = x.float().cpu()
    if task.degradation == "bicubic2x":
        shown = F.interpolate(shown.view(n, ch, h // 2, w // 2), size=(h, w)).flatten(1)
    rows = [("input", shown), ("output", pred.float().cpu()), ("target", target.float().cpu())]
    gap = 2  # one picture, not 3n axes: each axes costs ~15 ms
    mosaic = torch.ones(3 * (h + gap) - gap, n * (w + gap) - gap, ch)
    for r, (_, images) in enumerate(rows):
        for j in range(n):
            mosaic[r * (h + gap):r * (h + gap) + h, j * (w + gap):j * (w + gap) + w] = (
                images[j].view(ch, h, w).permute(1, 2, 0).clamp(0, 1))
    mosaic = mosaic.numpy()
    fig, ax = plt.subplots(figsize=(n * 0.9, 3 * 0.95))
    ax.imshow(mosaic[..., 0] if ch == 1 else mosaic, cmap="gray" if ch == 1 else None,
              vmin=0, vmax=1, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([r * (h + gap) + h / 2 for r in range(3)], [name for name, _ in rows],
                  fontsize=8)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=60)
    plt.close(fig)
    return png.getvalue()


def psnr_from_mse(mse, data_range=1.0):
    """PSNR in dB; identical images give 100 dB, not inf."""
    mse = torch.as_tensor(mse, dtype=torch.float64).clamp_min(1e-10)
    return 10.0 * torch.log10(data_range ** 2 / mse)


def gaussian_taps(size=11, sigma=1.5):
    coords = torch.arange(size, dtype=torch.float64) - (size - 1) / 2
    g = torch.exp(-coords ** 2 / (2 * sigma ** 2))
    return g / g.sum()                                             # (size,), sums to 1


def ssim(x, y, data_range=None, window_size=11, sigma=1.5, k1=0.01, k2=0.03, valid=False):
    """Mean SSIM per image (B,) of x, y (B, C, H, W), as torchmetrics' defaults; valid=True (ours):
    only the windows inside the image (~0.25-0.3 higher on digits in a black border)."""
    x, y = x.double(), y.double()
    if min(x.shape[-2:]) < window_size:
        raise ConfigError(f"SSIM window {window_size} is larger than the image "
                          f"{tuple(x.shape[-2:])}")
    if data_range is None:
        data_range = max((x.max() - x.min()).item(), (y.max() - y.min()).item())
    if not valid:
        pad = (window_size // 2,) * 4
        x, y = F.pad(x, pad, mode="reflect"), F.pad(y, pad, mode="reflect")
    # the local means of x, y, x^2, y^2, xy: a separable window, a column pass then a row pass
    maps = torch.cat([x, y, x * x, y * y, x * y], dim=1)
    taps = gaussian_taps(window_size, sigma).to(x)
    n = maps.size(1)
    maps = F.conv2d(maps, taps.view(1, 1, -1, 1).expand(n, 1, -1, 1), groups=n)
    maps = F.conv2d(maps, taps.view(1, 1, 1, -1).expand(n, 1, 1, -1), groups=n)
    mu_x, mu_y, mean_xx, mean_yy, mean_xy = maps.chunk(5, dim=1)
    c1, c2 = (k1 * data_range) ** 2, (k2 * data_range) ** 2
    var_x, var_y = (mean_xx - mu_x ** 2).clamp_min(0), (mean_yy - mu_y ** 2).clamp_min(0)
    cov = mean_xy - mu_x * mu_y
    ssim_map = ((2 * mu_x * mu_y + c1) * (2 * cov + c2)) / (
        (mu_x ** 2 + mu_y ** 2 + c1) * (var_x + var_y + c2))
    return ssim_map.flatten(1).mean(1)  # (B,)


class MetricAccumulator:
    """Per-batch results summed: loss (the MSE over all pixels), both PSNRs, SSIM, accuracy."""

    def __init__(self):
        self.n, self.sq_err, self.psnr_batch_sum, self.psnr_image_sum = 0, 0.0, 0.0, 0.0
        self.ssim_sum, self.n_ssim, self.correct, self.n_acc = 0.0, 0, 0, 0

    def add(self, pred, target, image_shape=None, with_ssim=False, correct=None):
        pred, target = pred.float(), target.float()                 # (B, D)
        b = pred.shape[0]
        per_image_mse = ((pred - target) ** 2).mean(1).double()    # (B,)
        self.n += b
        self.sq_err += per_image_mse.sum().item()
        self.psnr_batch_sum += psnr_from_mse(per_image_mse.mean()).item() * b
        self.psnr_image_sum += psnr_from_mse(per_image_mse).sum().item()
        if with_ssim:
            pred_images, target_images = pred.view(b, *image_shape), target.view(b, *image_shape)
            self.ssim_sum += ssim(pred_images, target_images).sum().item()
            self.n_ssim += b
        if correct is not None:
            self.correct += int(correct.sum().item())
            self.n_acc += b

    def result(self):
        n = max(self.n, 1)
        out = {"n_images": self.n, "loss": self.sq_err / n,
               "psnr_batchmse": self.psnr_batch_sum / n, "psnr_per_image": self.psnr_image_sum / n}
        out.update({"ssim": self.ssim_sum / self.n_ssim} if self.n_ssim else {})
        out.update({"accuracy": self.correct / self.n_acc} if self.n_acc else {})
        return out
