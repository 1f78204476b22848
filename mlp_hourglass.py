"""
Image MLPs with a frozen random lift: hourglass (wide-narrow-wide) vs conventional blocks.

Paper: "Rethinking the Shape Convention of an MLP", Meng-Hsi Chen, Yu-Ang Lee, Feng-Ting Liao,
Da-shan Shiu, 2025 (arXiv:2510.01796). Reference code: https://github.com/mtkresearch/Hourglass_LM
(its hourglass_mlp/ folder: run.py, utils/model.py, utils/ds.py, utils/train_eval.py).
"Hourglass" means the wide-narrow-wide shape of one MLP block (skip at the wide width, branch
through a narrow bottleneck), NOT Nawrot et al.'s sequence-downsampling Hourglass Transformer.

The idea, for a learner
-----------------------
A residual MLP block adds a correction to its input: z <- z + W2 relu(W1 norm(z)). The usual
block is narrow-wide-narrow (skip at the small width d_z, branch expands to d_h = 4 d_z). The
paper flips it: lift the image to a *wide* latent (d_z > d_x pixels) with a projection W_in that
is random and never trained, then let every block refine that wide vector through a *narrow*
bottleneck (d_h << d_z). A block costs 2 d_z d_h parameters, so a narrow d_h buys depth. On
denoising, 2x super-resolution and "generative classification" (map a digit to its class
prototype) the paper finds hourglass stacks on a better PSNR-vs-parameters Pareto front, and
that freezing W_in at its random init costs almost nothing (4.3). A frozen random W_in need not
be stored (3.2): here it is a buffer rebuilt from its seed, never a parameter or in a checkpoint.

Equations (paper numbering)
---------------------------
  (1)  x_{i+1} = x_i + W2 sigma(W1 norm(x_i))            conventional block, d_h > d_x
  (2)  z_0 = W_in x,         W_in in R^{d_z x d_x}        input-to-latent lift (frozen random here)
  (3)  z_{i+1} = z_i + W2_i sigma(W1_i norm(z_i)),  W1_i in R^{d_h x d_z}, W2_i in R^{d_z x d_h}
  (4)  y_hat = W_out z_L     (+ a sigmoid, as the reference code: outputs in [0, 1])
  P = d_x d_z + 2 L d_z d_h + d_z d_out (section 3.3 plus W_out); the paper's tables count the
  frozen W_in in "Params" (conventional rows too), so count_params gives total and trainable.

Here: the model (ImageMLP; W_in frozen | learned | identity = [x, 0] | none = x), the tasks
(mnist_classify: map to a per-class prototype, + nearest-prototype accuracy; *_denoise; *_sr;
flips), PSNR (per eval batch `psnr_batchmse`, per image `psnr_per_image`), SSIM (Gaussian 11x11,
sigma 1.5, Wang et al. 2004). Data: data/*/prepare.py; training, sweeps: train_mlp.py.

Where each choice comes from (the paper / the reference code above / ours)
---------------------------------------------------------------------------
Data choices are in data/mnist/prepare.py, training choices in train_mlp.py; this file's:
- The paper: eqs. (1)-(4), the parameter count, the tasks, sigma 0.25, 2x bicubic, flips, W_in
  fixed at its random init (section 3.2), hourglass d_z > d_x / d_h < d_z, conventional d_h > d_z.
- The reference code: norm = BatchNorm1d(affine=False), sigma = ReLU, no biases (the paper
  writes only "norm" and "sigma"); the sigmoid on W_out (eq. 4 has none); W_in's distribution
  uniform(+-1/sqrt(d_x)) (nn.Linear's default init there); the noise clamp to [0, 1] (the paper
  says only "adding Gaussian noise"): it moves the noisy-input baseline on MNIST-5k test from
  12.04 to 14.85 dB, so our PSNRs are not comparable with an unclamped reading; `psnr_batchmse`
  (torchmetrics PSNR per eval batch, weighted by batch size); identity W_in (its I_Win; fixed here).
- Ours: W_in drawn from its own generator seeded by w_in_seed (the reference: the global RNG),
  a buffer outside state_dict; a learned W_in starts from the same matrix and neither touches the
  global RNG, so frozen and learned runs share their block init. Old checkpoints still load.
- Ours: bicubic = F.interpolate(bicubic, antialias=True), within 2e-5 (0-255 scale) of PIL's
  resize (antialias=False: up to ~98/255; the paper says "bicubic"); low-res input float in [0, 1].
- Ours: conventional models also get the frozen random W_in by default (the paper's prose skips
  it, but its counts, e.g. 37.77M for 3072/3075/L1, include it); input_proj="none" is the prose
  version (the reference's wo_Win also drops W_out; ours keeps it).
- Ours: default MNIST shapes (the paper gives only ranges; ImageNet-32's 3546/270/5 is the
  paper's), lrs 1e-3 / 5e-4 (single picks from its grids), nearest-prototype accuracy, SSIM on
  'valid' windows averaged over channels (vs torchmetrics 1.9's, which the reference calls: 0.002).

`python mlp_hourglass.py` prints the paper's parameter checks and the tasks' default shapes;
`python mlp_hourglass.py --task=mnist_sr --latent_dim=1024 --hidden_dim=64 --n_blocks=8` one shape.
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
        raise ConfigError(f"a hourglass (wide-narrow-wide) block needs d_h < d_z, got hidden_dim={hidden_dim} >= "
                          f"latent_dim={latent_dim}. Lower --hidden_dim, raise --latent_dim, or use "
                          f"--shape=conventional for d_h > d_z.")
    if shape == "conventional" and not hidden_dim > latent_dim:
        raise ConfigError(f"a conventional (narrow-wide-narrow) block needs d_h > d_z, got hidden_dim={hidden_dim} "
                          f"<= latent_dim={latent_dim}. Raise --hidden_dim, or use --shape=hourglass for d_h < d_z.")


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
    """W_in (eq. 2), d_x -> d_z, uniform(+-1/sqrt(d_x)) drawn from its own generator (seed).
    Frozen: a non-persistent buffer - regenerated from the seed, never stored, never a
    parameter (cannot be unfrozen by accident). Learned: a parameter with the same start."""

    def __init__(self, input_dim, latent_dim, seed=0, trainable=False):
        super().__init__()
        w = torch.empty(latent_dim, input_dim)
        if w.device.type != "meta":      # meta: counting only
            g = torch.Generator().manual_seed(seed)
            w = ((torch.rand(latent_dim, input_dim, generator=g, device="cpu") * 2 - 1) * input_dim ** -0.5).to(w.device)
        self.trainable = trainable
        if trainable:
            self.weight = nn.Parameter(w)
        else:
            self.register_buffer("weight", w, persistent=False)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if not self.trainable and prefix + "weight" in state_dict:   # an old checkpoint stored it: it wins
            self.weight = state_dict.pop(prefix + "weight").to(self.weight, copy=True)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, x):
        return F.linear(x, self.weight)


class ImageMLP(nn.Module):
    """x (B, d_x) in [0,1] -> W_in -> L residual blocks -> W_out -> sigmoid -> (B, d_out)."""

    def __init__(self, input_dim, output_dim, latent_dim, hidden_dim, n_blocks,
                 shape="hourglass", input_proj="frozen", w_in_seed=0):
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
            print(f"warning: hourglass with d_z={latent_dim} <= d_x={input_dim}: the paper lifts (d_z > d_x)", file=sys.stderr)
        self.input_dim, self.output_dim = input_dim, output_dim          # d_x, d_out
        self.latent_dim, self.hidden_dim, self.n_blocks = latent_dim, hidden_dim, n_blocks  # d_z, d_h, L
        self.shape, self.input_proj = shape, input_proj
        self.lift = None
        if input_proj in ("frozen", "learned"):                          # W_in: d_x -> d_z, eq. (2)
            self.lift = InputProjection(input_dim, latent_dim, w_in_seed, trainable=input_proj == "learned")
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
                input_proj="frozen", w_in_seed=0):
    """The ImageMLP for a task; d_x and d_out come from the task, d_z / d_h / L default to its defaults."""
    task = get_task(task_name)
    return ImageMLP(task.input_dim, task.output_dim, latent_dim or task.latent_dim, hidden_dim or task.hidden_dim,
                    n_blocks or task.n_blocks, shape=shape, input_proj=input_proj, w_in_seed=w_in_seed)


def param_formula(input_dim, latent_dim, hidden_dim, n_blocks, output_dim, input_proj="frozen"):
    """P = d_x d_z + 2 L d_z d_h + d_z d_out (section 3.3 plus W_out); W_in frozen -> not trainable."""
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
            self.ssim_sum += ssim(pred.view(b, *image_shape), target.view(b, *image_shape)).sum().item()
            self.n_ssim += b
        if correct is not None:
            self.correct += int(correct.sum().item())
            self.n_acc += b

    def result(self):
        n = max(self.n, 1)
        out = {"n_images": self.n, "loss": self.sq_err / n, "psnr_batchmse": self.psnr_batch_sum / n,
               "psnr_per_image": self.psnr_image_sum / n}
        out.update({"ssim": self.ssim_sum / self.n_ssim} if self.n_ssim else {})
        out.update({"accuracy": self.correct / self.n_acc} if self.n_acc else {})
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
        lines.append(f"  {name:52s} d_z={dz} d_h={dh} L={L}: total {p['total'] / 1e6:.2f}M (paper {paper_total}M), "
                     f"trainable with frozen W_in {p['trainable'] / 1e6:.2f}M"
                     + (f" (paper {paper_trainable}M)" if paper_trainable else ""))
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
