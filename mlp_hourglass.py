"""
Image MLPs behind a random lift, frozen or learned: hourglass (wide-narrow-wide) vs conventional.

Paper: Meng-Hsi Chen, Yu-Ang Lee, Feng-Ting Liao, Da-shan Shiu (2025), "Rethinking the Shape
Convention of an MLP", arXiv:2510.01796. Reference code: https://github.com/mtkresearch/Hourglass_LM
(its hourglass_mlp/ folder). "Hourglass" is the wide-narrow-wide shape of one MLP block, not
Nawrot et al.'s sequence-downsampling Hourglass Transformer.

The idea. A residual MLP block adds a correction to its input: z <- z + W2 relu(W1 norm(z)). The
usual block is narrow-wide-narrow (skip at the small width, branch 4x wider). The paper flips it:
lift the image to a *wide* latent (d_z > d_x pixels) with a random projection W_in - never
trained in section 3, trained from that random start by the reference code's scripts behind the
paper's figures - then let every block refine that wide vector through a *narrow* bottleneck
(d_h << d_z). A block costs 2 d_z d_h parameters, so a narrow d_h buys depth. On denoising, 2x
super-resolution and "generative classification" (map a digit to its class prototype) the paper
finds hourglass stacks on a better PSNR-vs-parameters Pareto front, and that freezing W_in costs
almost nothing (4.3); a frozen random W_in need not be stored (3.2): here it is a buffer rebuilt
from its seed. The conventional MLP of the figures has a learned square W_in (the reference's
conventional_w_Win); section 3's "injecting the input signal directly" is the image itself (no W_in,
d_z = d_x, the reference's conventional_wo_Win). Each shape's default input: INPUT_PROJECTIONS.

Equations (paper numbering):

  (1)  x_{i+1} = x_i + W2 sigma(W1 norm(x_i))            conventional block, d_h > d_x   (2.2)
  (2)  z_0 = W_in x,         W_in in R^{d_z x d_x}        the lift (frozen random here)   (3.2)
  (3)  z_{i+1} = z_i + W2_i sigma(W1_i norm(z_i)),  W1_i in R^{d_h x d_z}, W2_i in R^{d_z x d_h}
  (4)  y_hat = W_out z_L     (+ a sigmoid, as the reference code: outputs in [0, 1])
  P = d_x d_z + 2 L d_z d_h + d_z d_out (3.3, plus W_out; the paper counts a frozen W_in too)

The code: `ResidualMLPBlock` is eq. (3), `InputProjection` eq. (2) (`input_projection` picks what
feeds the blocks: the image, a frozen or learned W_in, zero padding), `ImageMLP` the whole model,
`image_mlp` builds it for a task, `param_formula` / `count_params` count it as the paper does.
Every choice the paper leaves open (norm, sigma, the sigmoid), with its source, the results and
the commands: docs/mlp_hourglass.md. The tasks, degradations and metrics: shapelab/image_tasks.py;
training: train_mlp.py; the paper's parameter rows: experiments/mlp_hourglass_tables.py.
"""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from shapelab.configurator import ConfigError  # the one error type for bad settings: one line

# -----------------------------------------------------------------------------
# Model: Figure 1(b), eqs. (2)-(4)


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
                 shape="hourglass", input_proj=None, w_in_seed=0):
        super().__init__()
        check_shape(shape, latent_dim, hidden_dim)
        if n_blocks < 1:
            raise ConfigError(f"n_blocks={n_blocks}: n_blocks (L) must be >= 1")
        input_proj = input_projection(input_proj, shape, latent_dim, input_dim)
        if input_proj == "direct" and latent_dim != input_dim:
            raise ConfigError(f"--input_proj=direct feeds x straight into the blocks, so it needs "
                              f"latent_dim == input_dim ({input_dim}); got {latent_dim}: zero-pad "
                              f"with --input_proj=zero_pad, or project with frozen_random/learned")
        if input_proj == "zero_pad" and latent_dim < input_dim:
            raise ConfigError(f"--input_proj=zero_pad pads x with zeros to d_z, so it needs "
                              f"latent_dim >= input_dim ({input_dim}); got {latent_dim}")
        if shape == "hourglass" and latent_dim <= input_dim:
            print(f"warning: hourglass with d_z={latent_dim} <= d_x={input_dim}: the paper lifts "
                  f"(d_z > d_x)", file=sys.stderr)
        self.input_dim, self.output_dim, self.latent_dim = input_dim, output_dim, latent_dim
        self.hidden_dim, self.n_blocks, self.shape = hidden_dim, n_blocks, shape  # d_h, L
        self.zero_pad = input_proj == "zero_pad"  # without a lift: [x, 0] or x itself
        self.lift = None
        if input_proj in ("frozen_random", "learned"):                   # W_in: d_x -> d_z, eq. (2)
            learned = input_proj == "learned"
            self.lift = InputProjection(input_dim, latent_dim, w_in_seed, trainable=learned)
        self.blocks = nn.ModuleList(ResidualMLPBlock(latent_dim, hidden_dim)
                                    for _ in range(n_blocks))
        self.out_proj = nn.Linear(latent_dim, output_dim, bias=False)    # W_out: d_z -> d_out

    def forward(self, x):                                     # x: (B, d_x)
        if self.lift is not None:
            z = self.lift(x).float()                          # (B, d_z)  eq. (2)
        elif self.zero_pad:
            z = F.pad(x.float(), (0, self.latent_dim - self.input_dim))  # (B, d_z) = [x, 0]
        else:
            z = x.float()                                     # (B, d_z = d_x)
        for block in self.blocks:
            z = block(z)                                      # (B, d_z)  eq. (3)
        return torch.sigmoid(self.out_proj(z).float())        # (B, d_out) eq. (4) + sigmoid

    @property
    def input_proj(self):
        """What feeds the blocks (INPUT_PROJECTIONS), read from the modules, never from a label:
        a lift whose weight is a trainable parameter of this model is learned, any other lift
        frozen. A lift swapped for a trainable one by hand (or frozen by hand) is named for what
        it is, in every report, checkpoint and sweep row that describes the model."""
        if self.lift is None:
            return "zero_pad" if self.zero_pad else "direct"
        w = self.lift.weight
        trained = w.requires_grad and any(p is w for p in self.parameters())
        return "learned" if trained else "frozen_random"


# -----------------------------------------------------------------------------
# What feeds the blocks and which shapes they take: the settings and their checks


BLOCK_SHAPES = ("hourglass", "conventional")  # wide-narrow-wide (d_h < d_z) | narrow-wide-narrow
# what feeds the blocks (z_0):
#   direct         the image itself, z_0 = x (no W_in; d_z = d_x): the paper's conventional baseline
#   frozen_random  z_0 = W_in x, W_in random and never trained (eq. 2): the paper's lift
#   learned        z_0 = W_in x, W_in trained, from the same random start (section 4.3)
#   zero_pad       z_0 = [x, 0] (d_z >= d_x; the reference's identity W_in, I_Win, kept fixed)
INPUT_PROJECTIONS = ("direct", "frozen_random", "learned", "zero_pad")


def input_projection(name, shape, latent_dim, input_dim):
    """The input projection a model of this shape uses: `name` ('' or None = the shape's own,
    else one of INPUT_PROJECTIONS). A hourglass's own is the
    frozen random lift (section 3's); a conventional MLP's is the image itself when d_z = d_x
    (section 3: "injecting the input signal directly"), else a learned W_in (the
    reference code's conventional MLP for super-resolution, d_x = 196 -> d_z = 784)."""
    if not name:
        if shape == "hourglass":
            return "frozen_random"
        return "direct" if latent_dim == input_dim else "learned"
    if name not in INPUT_PROJECTIONS:
        raise ConfigError(f"input_proj={name!r}: choose one of {', '.join(INPUT_PROJECTIONS)} "
                          f"(or leave it out: the shape's own)")
    return name


def check_shape(shape, latent_dim, hidden_dim):
    """Raise a clear error when (d_z, d_h) do not make the requested block shape."""
    if shape not in BLOCK_SHAPES:
        raise ConfigError(f"unknown shape {shape!r}; choose one of {BLOCK_SHAPES}")
    if shape == "hourglass" and not hidden_dim < latent_dim:
        raise ConfigError(f"a hourglass (wide-narrow-wide) block needs d_h < d_z, got hidden_dim="
                          f"{hidden_dim} >= latent_dim={latent_dim}. Lower --hidden_dim, raise "
                          f"--latent_dim, or use --shape=conventional for d_h > d_z.")
    if shape == "conventional" and not hidden_dim > latent_dim:
        raise ConfigError(f"a conventional (narrow-wide-narrow) block needs d_h > d_z, got "
                          f"hidden_dim={hidden_dim} <= latent_dim={latent_dim}. Raise "
                          f"--hidden_dim, or use --shape=hourglass for d_h < d_z.")


# -----------------------------------------------------------------------------
# One model for a task, and its parameters counted as the paper counts them (section 3.3)


def image_mlp(task, latent_dim, hidden_dim, n_blocks, shape="hourglass", input_proj=None,
              w_in_seed=0):
    """The ImageMLP of shape (d_z, d_h, L) for a task: d_x and d_out are the task's (an
    image_tasks.Task, or anything with input_dim and output_dim); input_proj None: the shape's."""
    return ImageMLP(task.input_dim, task.output_dim, latent_dim, hidden_dim, n_blocks, shape=shape,
                    input_proj=input_proj, w_in_seed=w_in_seed)


def param_formula(input_dim, latent_dim, hidden_dim, n_blocks, output_dim, input_proj=None):
    """P = d_x d_z + 2 L d_z d_h + d_z d_out (3.3, plus W_out); a frozen W_in is not trainable,
    a direct or zero-padded input has none. input_proj None: the shape's own (d_h < d_z:
    hourglass)."""
    shape = "hourglass" if hidden_dim < latent_dim else "conventional"
    input_proj = input_projection(input_proj, shape, latent_dim, input_dim)
    w_in = input_dim * latent_dim if input_proj in ("frozen_random", "learned") else 0
    total = w_in + 2 * n_blocks * latent_dim * hidden_dim + latent_dim * output_dim
    trainable = total - (w_in if input_proj == "frozen_random" else 0)
    return {"total": total, "trainable": trainable}


def count_params(model):
    """Parameters of a built model, total and trainable, and by component. A frozen W_in is a
    buffer, not a parameter; it counts in the total (the paper's convention), not as trainable.
    What W_in is comes from the module itself, as model.input_proj reads it: a lift swapped for a
    trainable one by hand is counted once, as a parameter."""
    def n(params):
        return sum(p.numel() for p in params)
    w_in = model.lift.weight.numel() if model.lift is not None else 0
    frozen = model.lift is not None and all(p is not model.lift.weight for p in model.parameters())
    return {
        "total": n(model.parameters()) + (w_in if frozen else 0),
        "trainable": n(p for p in model.parameters() if p.requires_grad),
        "input_proj": w_in,
        "blocks": n(model.blocks.parameters()),
        "output_proj": n(model.out_proj.parameters()),
    }
