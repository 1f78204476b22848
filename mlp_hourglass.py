"""
Image MLPs with a frozen random lift: hourglass (wide-narrow-wide) vs conventional blocks.

Paper: "Rethinking the Shape Convention of an MLP", Meng-Hsi Chen, Yu-Ang Lee, Feng-Ting Liao,
Da-shan Shiu, 2025. Reference code: github.com/mtkresearch/Hourglass_LM.

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
The model, the tasks and the metrics. The data lives in data/mnist/ and data/imagenet32/ (their
prepare.py scripts), the training loop, sweep and Pareto plots in train_mlp.py.
- ImageMLP: W_in (frozen random = default nn.Linear init, not in the optimizer; or learned;
  or identity = copy x into the first d_x coordinates of z, zeros elsewhere; or none = z_0 = x),
  L residual blocks with BatchNorm1d(affine=False) as norm and ReLU as sigma, no biases anywhere,
  W_out + sigmoid. The block shape is checked: a hourglass with d_h >= d_z is an error.
- Tasks: mnist_classify (target = one prototype image per class, randomly chosen from the
  training split; PSNR against it plus nearest-prototype accuracy), mnist_denoise
  (clamp(y + N(0, 0.25^2), 0, 1)), mnist_sr (2x bicubic, 14x14 -> 28x28), imagenet32_denoise,
  imagenet32_sr (16x16x3 -> 32x32x3); flip augmentation codes (x2 / x4 enlarge the data set).
- Metrics: PSNR two ways - `psnr_batchmse` (the reference's convention: PSNR of each eval
  batch's MSE, averaged weighted by batch size; it depends on the eval batch size, which is the
  training batch size) and `psnr_per_image` (mean of every image's own PSNR) - and SSIM
  (Gaussian window 11x11, sigma 1.5, K1 = 0.01, K2 = 0.03, data range 1, Wang et al. 2004).
- The parameter formula, parameters by component (total / trainable), and the rows of the
  paper's Tables 1-2 and section 4.3 that check it.

Deviations from the paper, and why
----------------------------------
Those of the data are in data/mnist/prepare.py, those of training in train_mlp.py; this file's:
- Bicubic downsampling uses F.interpolate(mode="bicubic", antialias=True, align_corners=False).
  We checked it against PIL's BICUBIC resize (what torchvision's Resize does): max difference
  2e-5 on a 0-255 scale; antialias=False differs by up to ~98/255. The paper only says
  "bicubic", so we take the PIL-equivalent filter. The low-resolution input stays float and is
  clamped to [0, 1] (PIL on uint8 would round it to integers).
- Conventional models also get the frozen random W_in by default (with d_z of your choice,
  usually d_z = d_x). The paper's prose says conventional MLPs skip W_in, but its parameter
  counts (e.g. 37.77M for 3072/3075/L1) include a d_x x d_z matrix. input_proj="none" gives
  the prose version.
- Default shapes (d_z, d_h, L) for MNIST are ours (the paper gives only search ranges for
  MNIST); ImageNet-32 defaults to the paper's (3546, 270, 5). Default learning rates (1e-3
  MNIST, 5e-4 ImageNet-32) are single picks from inside the paper's lr grids.
- eq. (4) has no output nonlinearity in the paper's text; like the reference code we apply a
  sigmoid so that outputs lie in [0, 1], the range of the targets.
- Added: nearest-prototype accuracy for generative classification, SSIM with the 'valid'
  Gaussian window (no padding) averaged over channels (the paper does not say which SSIM
  variant it used), identity / none input projections for ablations.

Commands
--------
  python mlp_hourglass.py                       # paper parameter checks + the tasks' default shapes
  python mlp_hourglass.py --task=mnist_sr --latent_dim=1024 --hidden_dim=64 --n_blocks=8   # one shape
  python train_mlp.py train --task=mnist_denoise   # train one (prepares data/mnist/ if missing); see its docstring
"""

import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

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


def build_model(task_name, latent_dim=None, hidden_dim=None, n_blocks=None, shape="hourglass",
                input_proj="frozen"):
    """The ImageMLP for a task; d_x and d_out come from the task, d_z / d_h / L default to its defaults."""
    task = get_task(task_name)
    return ImageMLP(task.input_dim, task.output_dim, latent_dim or task.latent_dim,
                    hidden_dim or task.hidden_dim, n_blocks or task.n_blocks, shape=shape, input_proj=input_proj)


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
    Task("mnist_classify", "28x28", "none", "prototype", (1, 28, 28), 50, 128, 1, 1e-3, 2048, 128, 4, 0),
    Task("mnist_denoise", "28x28", "noise", "clean", (1, 28, 28), 30, 128, 1, 1e-3, 2048, 128, 4, 0),
    Task("mnist_sr", "28x28", "bicubic2x", "clean", (1, 28, 28), 50, 128, 4, 1e-3, 2048, 128, 4, 0),
    Task("imagenet32_denoise", "imagenet32", "noise", "clean", (3, 32, 32), 2, 512, 4, 5e-4, 3546, 270, 5, 1000),
    Task("imagenet32_sr", "imagenet32", "bicubic2x", "clean", (3, 32, 32), 2, 512, 4, 5e-4, 3546, 270, 5, 1000),
]}

# the trivial restorer each task's model must beat
BASELINE_NAMES = {"noise": "noisy input", "bicubic2x": "bicubic upsampling", "none": "input image vs prototype"}


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
# The shape table: the paper's parameter checks and any shape's parameters by component


def param_checks():
    """One line per paper row: our count of the built model next to the paper's number."""
    lines = ["Parameter checks against the paper (P = d_x d_z + 2 L d_z d_h + d_z d_out):"]
    for name, dx, dout, dz, dh, L, paper_total, paper_trainable in PAPER_PARAM_ROWS:
        shape = "hourglass" if dh < dz else "conventional"
        with torch.device("meta"):                       # count without allocating 30M floats
            p = count_params(ImageMLP(dx, dout, dz, dh, L, shape=shape, input_proj="frozen"))
        line = (f"  {name:52s} d_z={dz} d_h={dh} L={L}: total {p['total'] / 1e6:.2f}M (paper {paper_total}M), "
                f"trainable with frozen W_in {p['trainable'] / 1e6:.2f}M")
        if paper_trainable:
            line += f" (paper {paper_trainable}M)"
        lines.append(line)
    return "\n".join(lines)


def shape_table(rows):
    """rows: (task name, d_z, d_h, L, input_proj) -> a markdown table of parameters by component
    and forward matmul FLOPs per image (2 x multiply-adds)."""
    out = ["| task | shape | d_x | d_z | d_h | L | d_out | W_in | blocks | W_out | total | trainable | GFLOPs/image |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for task_name, dz, dh, L, input_proj in rows:
        task = get_task(task_name)
        shape = "hourglass" if dh < dz else "conventional"
        with torch.device("meta"):
            p = count_params(build_model(task_name, dz, dh, L, shape=shape, input_proj=input_proj))
        flops = 2 * p["total"]                           # one multiply-add per weight and image
        out.append(f"| {task_name} | {shape} | {task.input_dim} | {dz} | {dh} | {L} | {task.output_dim} | "
                   f"{p['input_proj'] / 1e6:.2f}M | {p['blocks'] / 1e6:.2f}M | {p['output_proj'] / 1e6:.2f}M | "
                   f"{p['total'] / 1e6:.2f}M | {p['trainable'] / 1e6:.2f}M | {flops / 1e9:.4f} |")
    return "\n".join(out)


if __name__ == "__main__":
    from configurator import parse_overrides
    argv = [a for a in sys.argv[1:] if a != "params"]    # `python mlp_hourglass.py params` still works
    try:
        args = parse_overrides(argv, dict(task="", latent_dim=0, hidden_dim=0, n_blocks=0, input_proj="frozen"))
        if args["task"]:        # one shape: the task's defaults with the given overrides
            task = get_task(args["task"])
            print(shape_table([(task.name, args["latent_dim"] or task.latent_dim, args["hidden_dim"] or task.hidden_dim,
                                args["n_blocks"] or task.n_blocks, args["input_proj"])]))
        else:
            print(param_checks())
            print("\nEach task's default shape (W_in frozen: in the total, not trainable):")
            print(shape_table([(t.name, t.latent_dim, t.hidden_dim, t.n_blocks, "frozen") for t in TASKS.values()]))
    except ValueError as e:     # ConfigError of this file or of configurator.py
        raise SystemExit(f"error: {e}")
