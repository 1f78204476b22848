"""
Image MLPs behind a random lift, frozen or learned: hourglass (wide-narrow-wide) vs conventional.

Paper: Meng-Hsi Chen, Yu-Ang Lee, Feng-Ting Liao, Da-shan Shiu (2025), "Rethinking the Shape
Convention of an MLP", arXiv:2510.01796.

The idea. Lift the image to a wide latent (d_z > d_x) with a random W_in, then refine it with
residual blocks through a narrow bottleneck d_h << d_z: 2 d_z d_h parameters a block, so a
narrow d_h buys depth. The hourglass stacks sit on a better PSNR-vs-parameters front, and a
frozen W_in (a buffer rebuilt from its seed) costs almost nothing (4.3).

  (1)  x_{i+1} = x_i + W2 sigma(W1 norm(x_i))            conventional block, d_h > d_x   (2.2)
  (2)  z_0 = W_in x,         W_in in R^{d_z x d_x}        the lift                        (3.2)
  (3)  z_{i+1} = z_i + W2_i sigma(W1_i norm(z_i)),  W1_i in R^{d_h x d_z}, W2_i in R^{d_z x d_h}
  (4)  y_hat = W_out z_L     (+ a sigmoid, as the reference code: outputs in [0, 1])
  P = d_x d_z + 2 L d_z d_h + d_z d_out (3.3, plus W_out; the paper counts a frozen W_in too)

The tasks and metrics live in shapelab/image_tasks.py, training in train_mlp.py.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from shapelab.configurator import ConfigError


class ResidualMLPBlock(nn.Module):
    """z <- z + W2 relu(W1 norm(z)), norm a BatchNorm1d without affine, no biases."""

    def __init__(self, latent_dim, hidden_dim):
        super().__init__()
        self.norm = nn.BatchNorm1d(latent_dim, affine=False)
        self.fc1 = nn.Linear(latent_dim, hidden_dim, bias=False)  # W1: d_z -> d_h
        self.fc2 = nn.Linear(hidden_dim, latent_dim, bias=False)  # W2: d_h -> d_z

    def forward(self, z):
        h = F.relu(self.fc1(self.norm(z)))
        return z + self.fc2(h).float()  # eq. (3); the residual stream stays fp32


class InputProjection(nn.Module):
    """W_in, uniform(+-1/sqrt(d_x)) from its seed: frozen a buffer never stored, learned a
    parameter."""

    def __init__(self, input_dim, latent_dim, seed=0, trainable=False):
        super().__init__()
        w = torch.empty(latent_dim, input_dim)
        if w.device.type != "meta":
            g = torch.Generator().manual_seed(seed)
            w = torch.rand(latent_dim, input_dim, generator=g, device="cpu") * 2 - 1
            w = (w * input_dim ** -0.5).to(w.device)
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
                              f"latent_dim == input_dim ({input_dim}); got {latent_dim}")
        self.input_dim, self.output_dim, self.latent_dim = input_dim, output_dim, latent_dim
        self.hidden_dim, self.n_blocks, self.shape = hidden_dim, n_blocks, shape  # d_h, L
        self.lift = None  # 'direct': z_0 = x
        if input_proj != "direct":
            self.lift = InputProjection(input_dim, latent_dim, w_in_seed,
                                        trainable=input_proj == "learned")
        self.blocks = nn.ModuleList(ResidualMLPBlock(latent_dim, hidden_dim)
                                    for _ in range(n_blocks))
        self.out_proj = nn.Linear(latent_dim, output_dim, bias=False)  # W_out

    def forward(self, x):
        z = x.float() if self.lift is None else self.lift(x).float()  # eq. (2)
        for block in self.blocks:
            z = block(z)
        return torch.sigmoid(self.out_proj(z).float())  # eq. (4)

    @property
    def input_proj(self):
        """What feeds the blocks, read from the modules: a lift trained by hand is 'learned'."""
        if self.lift is None:
            return "direct"
        trained = any(p is self.lift.weight for p in self.parameters())
        return "learned" if trained and self.lift.weight.requires_grad else "frozen_random"


BLOCK_SHAPES = ("hourglass", "conventional")  # d_h < d_z | d_h > d_z
INPUT_PROJECTIONS = ("direct", "frozen_random", "learned")  # z_0 = x, W_in x frozen or learned


def input_projection(name, shape, latent_dim, input_dim):
    """`name`, or the shape's own: frozen for a hourglass, a conventional MLP's image itself
    (d_z = d_x) or a learned W_in."""
    if not name:
        if shape == "hourglass":
            return "frozen_random"
        return "direct" if latent_dim == input_dim else "learned"
    if name not in INPUT_PROJECTIONS:
        raise ConfigError(f"input_proj={name!r}: choose one of {', '.join(INPUT_PROJECTIONS)} "
                          f"(or leave it out: the shape's own)")
    return name


def check_shape(shape, latent_dim, hidden_dim):
    if shape not in BLOCK_SHAPES:
        raise ConfigError(f"unknown shape {shape!r}; choose one of {BLOCK_SHAPES}")
    if (hidden_dim < latent_dim) != (shape == "hourglass"):
        raise ConfigError(f"a {shape} block needs d_h {'<' if shape == 'hourglass' else '>'} d_z, "
                          f"got hidden_dim={hidden_dim}, latent_dim={latent_dim}: change one, or "
                          f"the shape")


def image_mlp(task, latent_dim, hidden_dim, n_blocks, shape="hourglass", input_proj=None,
              w_in_seed=0):
    """The ImageMLP of shape (d_z, d_h, L) for a task's d_x and d_out."""
    return ImageMLP(task.input_dim, task.output_dim, latent_dim, hidden_dim, n_blocks, shape=shape,
                    input_proj=input_proj, w_in_seed=w_in_seed)


def param_formula(input_dim, latent_dim, hidden_dim, n_blocks, output_dim, input_proj=None):
    """P (section 3.3, plus W_out): total, and trainable without a frozen W_in."""
    shape = "hourglass" if hidden_dim < latent_dim else "conventional"
    input_proj = input_projection(input_proj, shape, latent_dim, input_dim)
    w_in = 0 if input_proj == "direct" else input_dim * latent_dim
    total = w_in + 2 * n_blocks * latent_dim * hidden_dim + latent_dim * output_dim
    return {"total": total, "trainable": total - (w_in if input_proj == "frozen_random" else 0)}


def count_params(model):
    """A built model's parameters, total (a frozen W_in too, as the paper) and trainable, and
    by component."""
    w_in = 0 if model.lift is None else model.lift.weight.numel()
    blocks = sum(p.numel() for p in model.blocks.parameters())
    return {"total": w_in + blocks + model.out_proj.weight.numel(),
            "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "input_proj": w_in, "blocks": blocks, "output_proj": model.out_proj.weight.numel()}
