"""
Image MLPs with a frozen random lift: hourglass (wide-narrow-wide) vs conventional blocks.

Paper: Meng-Hsi Chen, Yu-Ang Lee, Feng-Ting Liao, Da-shan Shiu (2025), "Rethinking the Shape
Convention of an MLP", arXiv:2510.01796. Reference code: https://github.com/mtkresearch/Hourglass_LM
(its hourglass_mlp/ folder). "Hourglass" is the wide-narrow-wide shape of one MLP block, not
Nawrot et al.'s sequence-downsampling Hourglass Transformer.

The idea. A residual MLP block adds a correction to its input: z <- z + W2 relu(W1 norm(z)). The
usual block is narrow-wide-narrow (skip at the small width, branch 4x wider). The paper flips it:
lift the image to a *wide* latent (d_z > d_x pixels) with a projection W_in that is random and
never trained, then let every block refine that wide vector through a *narrow* bottleneck
(d_h << d_z). A block costs 2 d_z d_h parameters, so a narrow d_h buys depth. On denoising, 2x
super-resolution and "generative classification" (map a digit to its class prototype) the paper
finds hourglass stacks on a better PSNR-vs-parameters Pareto front, and that freezing W_in costs
almost nothing (4.3); a frozen random W_in need not be stored (3.2): here it is a buffer rebuilt
from its seed.

Equations (paper numbering):

  (1)  x_{i+1} = x_i + W2 sigma(W1 norm(x_i))            conventional block, d_h > d_x   (2.2)
  (2)  z_0 = W_in x,         W_in in R^{d_z x d_x}        the lift (frozen random here)   (3.2)
  (3)  z_{i+1} = z_i + W2_i sigma(W1_i norm(z_i)),  W1_i in R^{d_h x d_z}, W2_i in R^{d_z x d_h}
  (4)  y_hat = W_out z_L     (+ a sigmoid, as the reference code: outputs in [0, 1])
  P = d_x d_z + 2 L d_z d_h + d_z d_out (3.3, plus W_out; the paper counts a frozen W_in too)

The code: `ResidualMLPBlock` is eq. (3), `InputProjection` eq. (2), `ImageMLP` the whole model;
the tasks and their degradations (noise, bicubic 2x, prototypes); PSNR and SSIM as the reference
code computes them. Every choice the paper leaves open (norm, sigma, the sigmoid, the noise clamp,
bicubic without antialiasing, SSIM's padding), with its source, the results and the commands:
docs/mlp_hourglass.md. Training: train_mlp.py; the paper's parameter rows:
experiments/mlp_hourglass_tables.py.
"""

import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from configurator import ConfigError  # the one error type for bad settings: a one-line message

# -----------------------------------------------------------------------------
# Model: Figure 1(b), eqs. (2)-(4)


SHAPES = ("hourglass", "conventional")
INPUT_PROJECTIONS = ("frozen", "learned", "identity", "none")


def check_shape(shape, latent_dim, hidden_dim):
    """Raise a clear error when (d_z, d_h) do not make the requested block shape."""
    if shape not in SHAPES:
        raise ConfigError(f"unknown shape {shape!r}; choose one of {SHAPES}")
    if shape == "hourglass" and not hidden_dim < latent_dim:
        raise ConfigError(f"a hourglass (wide-narrow-wide) block needs d_h < d_z, got hidden_dim="
                          f"{hidden_dim} >= latent_dim={latent_dim}. Lower --hidden_dim, raise "
                          f"--latent_dim, or use --shape=conventional for d_h > d_z.")
    if shape == "conventional" and not hidden_dim > latent_dim:
        raise ConfigError(f"a conventional (narrow-wide-narrow) block needs d_h > d_z, got "
                          f"hidden_dim={hidden_dim} <= latent_dim={latent_dim}. Raise "
                          f"--hidden_dim, or use --shape=hourglass for d_h < d_z.")


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


class InputProjection(nn.Module):
    """W_in (eq. 2), d_x -> d_z, uniform(+-1/sqrt(d_x)) from its own generator (seed). Frozen:
    a buffer rebuilt from the seed, never stored or trained. Learned: a parameter, same start."""

    def __init__(self, input_dim, latent_dim, seed=0, trainable=False):
        super().__init__()
        w = torch.empty(latent_dim, input_dim)
        if w.device.type != "meta":      # meta: counting only
            g = torch.Generator().manual_seed(seed)
            w = torch.rand(latent_dim, input_dim, generator=g, device="cpu") * 2 - 1
            w = (w * input_dim ** -0.5).to(w.device)  # uniform(+-1/sqrt(d_x))
        self.trainable = trainable
        if trainable:
            self.weight = nn.Parameter(w)
        else:
            self.register_buffer("weight", w, persistent=False)

    def forward(self, x):
        return F.linear(x, self.weight)


class ImageMLP(nn.Module):
    """x (B, d_x) in [0,1] -> W_in -> L residual blocks -> W_out -> sigmoid -> (B, d_out)."""

    def __init__(self, input_dim, output_dim, latent_dim, hidden_dim, n_blocks,
                 shape="hourglass", input_proj="frozen", w_in_seed=0):
        super().__init__()
        check_shape(shape, latent_dim, hidden_dim)
        if n_blocks < 1 or input_proj not in INPUT_PROJECTIONS:
            raise ConfigError(f"n_blocks={n_blocks}, input_proj={input_proj!r}: n_blocks (L) must "
                              f"be >= 1, input_proj one of {INPUT_PROJECTIONS}")
        if input_proj == "none" and latent_dim != input_dim:
            raise ConfigError(f"--input_proj=none feeds x straight into the blocks, so it needs "
                              f"latent_dim == input_dim ({input_dim}); got {latent_dim}: zero-pad "
                              f"with --input_proj=identity, or project with frozen/learned")
        if input_proj == "identity" and latent_dim < input_dim:
            raise ConfigError(f"--input_proj=identity zero-pads x to d_z, so it needs "
                              f"latent_dim >= input_dim ({input_dim}); got {latent_dim}")
        if shape == "hourglass" and latent_dim <= input_dim:
            print(f"warning: hourglass with d_z={latent_dim} <= d_x={input_dim}: the paper lifts "
                  f"(d_z > d_x)", file=sys.stderr)
        self.input_dim, self.output_dim, self.latent_dim = input_dim, output_dim, latent_dim
        self.hidden_dim, self.n_blocks, self.shape = hidden_dim, n_blocks, shape  # d_h, L
        self.input_proj = input_proj
        self.lift = None
        if input_proj in ("frozen", "learned"):                          # W_in: d_x -> d_z, eq. (2)
            learned = input_proj == "learned"
            self.lift = InputProjection(input_dim, latent_dim, w_in_seed, trainable=learned)
        self.blocks = nn.ModuleList(ResidualMLPBlock(latent_dim, hidden_dim)
                                    for _ in range(n_blocks))
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


def build_model(task_name, latent_dim=None, hidden_dim=None, n_blocks=None, shape="hourglass",
                input_proj="frozen", w_in_seed=0):
    """The ImageMLP for a task: d_x and d_out are the task's; d_z / d_h / L its defaults unless
    given (0 is given, and refused: a setting is never replaced by a default silently)."""
    task = get_task(task_name)
    pick = lambda value, default: default if value is None else value  # noqa: E731
    return ImageMLP(task.input_dim, task.output_dim, pick(latent_dim, task.latent_dim),
                    pick(hidden_dim, task.hidden_dim), pick(n_blocks, task.n_blocks), shape=shape,
                    input_proj=input_proj, w_in_seed=w_in_seed)


def param_formula(input_dim, latent_dim, hidden_dim, n_blocks, output_dim, input_proj="frozen"):
    """P = d_x d_z + 2 L d_z d_h + d_z d_out (3.3, plus W_out); a frozen W_in is not trainable."""
    w_in = input_dim * latent_dim if input_proj in ("frozen", "learned") else 0
    total = w_in + 2 * n_blocks * latent_dim * hidden_dim + latent_dim * output_dim
    trainable = total - (w_in if input_proj == "frozen" else 0)
    return {"total": total, "trainable": trainable}


def count_params(model):
    """Parameters of a built model, total and trainable, and by component. A frozen W_in is a
    buffer, not a parameter; it counts in the total (the paper's convention), not as trainable."""
    def n(params):
        return sum(p.numel() for p in params)
    w_in = model.lift.weight.numel() if model.lift is not None else 0
    return {
        "total": n(model.parameters()) + (w_in if model.input_proj == "frozen" else 0),
        "trainable": n(p for p in model.parameters() if p.requires_grad),
        "input_proj": w_in,
        "blocks": n(model.blocks.parameters()),
        "output_proj": n(model.out_proj.parameters()),
    }


# -----------------------------------------------------------------------------
# Tasks and degradations


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
    Task("mnist_classify", "28x28", "none", "prototype", (1, 28, 28), 50, 128, 1, 1e-3,
         2048, 128, 4, 0),
    Task("mnist_denoise", "28x28", "noise", "clean", (1, 28, 28), 30, 128, 1, 1e-3,
         2048, 128, 4, 0),
    Task("mnist_sr", "28x28", "bicubic2x", "clean", (1, 28, 28), 50, 128, 4, 1e-3,
         2048, 128, 4, 0),
    Task("imagenet32_denoise", "imagenet32", "noise", "clean", (3, 32, 32), 2, 512, 4, 5e-4,
         3546, 270, 5, 1000),
    Task("imagenet32_sr", "imagenet32", "bicubic2x", "clean", (3, 32, 32), 2, 512, 4, 5e-4,
         3546, 270, 5, 1000),
]}

# the trivial restorer each task's model must beat
BASELINE_NAMES = {"noise": "noisy input", "bicubic2x": "bicubic upsampling",
                  "none": "input image vs prototype"}


def get_task(name):
    if name not in TASKS:
        raise ConfigError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return TASKS[name]


def add_gaussian_noise(clean, sigma, generator=None):
    """Denoising input: clamp(y + N(0, sigma^2), 0, 1). clean: (B, C, H, W) in [0, 1]."""
    noise = torch.randn(clean.shape, generator=generator, device=clean.device, dtype=clean.dtype)
    return (clean + sigma * noise).clamp(0.0, 1.0)


def bicubic_downsample(clean, factor=2, antialias=False):
    """Super-resolution input: (B, C, H, W) -> (B, C, H/f, W/f), bicubic, clamped to [0, 1].
    antialias=False as the reference code's F.interpolate; antialias=True (ours) is PIL's resize."""
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


def make_batch(task, images_u8, labels, prototypes, generator=None, noise_sigma=0.25,
               flip_codes=None):
    """uint8 images (B, C, H, W) -> (x (B, d_x), target (B, d_out)) as float in [0, 1]."""
    clean = images_u8.float() / 255.0                          # (B, C, H, W)
    if flip_codes is not None:
        clean = flip_images(clean, flip_codes)
    x = degrade(task, clean, generator, noise_sigma).flatten(1)  # (B, d_x)
    target = prototypes[labels] if task.target == "prototype" else clean.flatten(1)  # (B, d_out)
    return x, target


def choose_prototypes(images, labels, n_classes=None, seed=42):
    """Generative classification targets: one randomly chosen training image per class -> (K, D)."""
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


def ssim(x, y, data_range=None, window_size=11, sigma=1.5, k1=0.01, k2=0.03, valid=False):
    """Mean SSIM per image (Wang et al. 2004), as the reference code computes it: torchmetrics'
    structural_similarity_index_measure with its defaults - Gaussian 11x11 window, sigma 1.5,
    the image reflect-padded by 5 so the SSIM map covers every pixel, the map averaged over all
    of it, variances clamped at 0, and data_range None = the larger value range of x and y in
    this call. valid=True is ours: no padding, only the windows inside the image (the central
    18x18 of 28x28; on digits inside a black border it reads ~0.25-0.3 higher).
    x, y: (B, C, H, W) -> (B,)."""
    x, y = x.double(), y.double()
    if min(x.shape[-2:]) < window_size:
        raise ConfigError(f"SSIM window {window_size} is larger than the image "
                          f"{tuple(x.shape[-2:])}")
    if data_range is None:
        data_range = max((x.max() - x.min()).item(), (y.max() - y.min()).item())
    if not valid:
        pad = (window_size // 2,) * 4
        x, y = F.pad(x, pad, mode="reflect"), F.pad(y, pad, mode="reflect")
    channels = x.size(1)
    window = gaussian_window(window_size, sigma).to(x)[None, None].expand(channels, 1, -1, -1)
    blur = lambda t: F.conv2d(t, window, groups=channels)  # noqa: E731  local Gaussian mean
    c1, c2 = (k1 * data_range) ** 2, (k2 * data_range) ** 2
    mu_x, mu_y = blur(x), blur(y)
    var_x, var_y = (blur(x * x) - mu_x ** 2).clamp_min(0), (blur(y * y) - mu_y ** 2).clamp_min(0)
    cov = blur(x * y) - mu_x * mu_y
    ssim_map = ((2 * mu_x * mu_y + c1) * (2 * cov + c2)) / (
        (mu_x ** 2 + mu_y ** 2 + c1) * (var_x + var_y + c2))
    return ssim_map.flatten(1).mean(1)  # (B,)


class MetricAccumulator:
    """Collects per-batch results; psnr_batchmse = reference convention, psnr_per_image = mean of
    per-image PSNRs; loss = mean squared error over all pixels."""

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
