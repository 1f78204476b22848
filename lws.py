"""
Layer-wise scaling (LWS): every layer gets its own FFN width and number of heads.

Paper: Andrei Baroian, Kasper Notebomer (2025), "Crown, Frame, Reverse: Layer-Wise Scaling
Variants for LLM Pre-Training", arXiv:2509.06518; it builds on OpenELM's layer-wise scaling
(Mehta et al., 2024, arXiv:2404.14619).

The idea. Spend an isotropic model's budget unevenly: layer i's FFN multiplier beta_i and
attention multiplier alpha_i lie on lines between a few numbers. d = n_embd, N = n_layer:

    (1) ffn_hidden_i = beta_i * d
    (2) beta_i  = beta_start  + (beta_end  - beta_start)  * i / (N - 1)
    (3) n_head_i = alpha_i * d / head_dim
    (4) alpha_i = alpha_start + (alpha_end - alpha_start) * i / (N - 1)

VARIANTS (Table 2): vanilla (growing), framed (first and last layer at beta = 4, alpha = 1),
reverse (shrinking, framed), crown (small-large-small, framed); all beat the isotropic baseline
by a few percent (Table 3).

    python lws.py                               # the four variants' layers at the paper's 180M
"""

import math
from dataclasses import dataclass

import numpy as np

from model import GPT, GPTConfig, LayerSpec, shape_counts

# ----------------------------------------------------------------------------------------
# The schedule: eq. (1)-(4), computed and rounded as the reference code does


def layer_specs(n_embd, n_layer, ffn_scalars, qkv_scalars, framed=False, head_dim=64,
                group_size=1, ffn_multiple=256):
    """The model.LayerSpec of every layer, rounded as OpenELM rounds."""
    betas, alphas = interpolate(ffn_scalars, n_layer), interpolate(qkv_scalars, n_layer)
    if framed:  # the first and last layer at beta = 4, alpha = 1
        betas[0] = betas[-1] = 4.0
        alphas[0] = alphas[-1] = 1.0
    specs = []
    for beta, alpha in zip(betas, alphas):
        ffn_hidden = make_divisible(beta * n_embd, ffn_multiple)  # eq. (1)
        q_dim = make_divisible(alpha * n_embd, group_size * head_dim)  # eq. (3): whole KV groups
        n_head = q_dim // head_dim
        specs.append(LayerSpec(n_head=n_head, n_kv_head=n_head // group_size, head_dim=head_dim,
                               ffn_hidden=ffn_hidden))
    return specs


def interpolate(values, n_layer):
    """Every layer's multiplier as the reference code computes it: 2 values a line, eq. (2)
    rounded by numpy; 3 the crown."""
    values = [float(v) for v in values]
    if any(not v > 0 for v in values):
        raise ValueError(f"schedule {values}: every multiplier must be > 0")
    if len(values) == 2:  # eq. (2), (4)
        return [float(round(v, 2)) for v in np.linspace(values[0], values[1], num=n_layer)]
    if len(values) == 3:
        start, middle, end = values
        if n_layer % 2:
            knots, knot_values = [0, math.ceil(n_layer / 2) - 1, n_layer - 1], values
        else:  # the two middle layers both take `middle`; the reference drops `end`
            if end != start:
                raise ValueError(f"crown {values} with an even n_layer={n_layer}: the reference "
                                 f"code's is symmetric; give end == start or an odd depth")
            knots = [0, n_layer // 2 - 1, n_layer // 2, n_layer - 1]
            knot_values = [start, middle, middle, start]
        return [float(v) for v in np.interp(np.arange(n_layer), knots, knot_values)]
    raise ValueError(f"schedule {values}: give 2 values (a line) or 3 (a crown)")


def make_divisible(value, divisor):
    """OpenELM's rounding: the nearest multiple of divisor, one more if that lost 10% or more."""
    if value < divisor:
        return divisor
    rounded = int((value + divisor / 2) // divisor) * divisor
    if rounded <= 0.9 * value:
        rounded += divisor
    return rounded


# The paper's 18-layer schedules of Table 2
VARIANTS = {
    "vanilla": dict(ffn_scalars=[1.0, 4.0], qkv_scalars=[0.5, 1.0], framed=False),
    "framed": dict(ffn_scalars=[0.5, 4.0], qkv_scalars=[0.5, 1.0], framed=True),
    "reverse": dict(ffn_scalars=[4.0, 0.5], qkv_scalars=[1.0, 0.5], framed=True),
    "crown": dict(ffn_scalars=[0.5, 3.8, 0.5], qkv_scalars=[0.5, 1.0, 0.5], framed=True),
}


@dataclass
class LWSConfig(GPTConfig):
    """The schedule sets each layer's FFN width and heads; n_head / n_kv_head fix the group size
    and head_dim. No schedule: the plain GPT."""

    ffn_scalars: list[float] | None = None  # beta, eq. (2)
    qkv_scalars: list[float] | None = None  # alpha, eq. (4)
    framed: bool = False  # first and last layer at beta = 4, alpha = 1
    ffn_multiple: int = 256

    def __post_init__(self):
        if self.ffn_scalars is not None or self.qkv_scalars is not None:
            assert self.ffn_scalars is not None and self.qkv_scalars is not None, (
                "give both ffn_scalars (beta) and qkv_scalars (alpha), e.g. [4.0, 4.0] and "
                "[1.0, 1.0] for the isotropic schedule")
            assert self.ffn_hidden is None, (
                f"ffn_hidden={self.ffn_hidden}: the schedule sets the FFN widths; leave it unset")
            base = self.uniform_layer()
            assert base.n_head % base.n_kv_head == 0, (
                f"n_head={self.n_head} must be a multiple of n_kv_head={self.n_kv_head}")
            self.n_kv_head, self.head_dim = base.n_kv_head, base.head_dim
            self.layers = layer_specs(self.n_embd, self.n_layer, self.ffn_scalars,
                                      self.qkv_scalars, self.framed, self.head_dim,
                                      self.n_head // self.n_kv_head, self.ffn_multiple)
        super().__post_init__()


class LWSGPT(GPT):
    """model.GPT as it is: its blocks already take one LayerSpec each."""


def match_params(baseline, variant, tolerance=1e-3):
    """(variant, its count) with only beta scaled, to the baseline's non-embedding count."""
    target = shape_counts(LWSGPT, LWSConfig(**baseline))["non_embedding"]

    def with_scale(s):
        return {**variant, "ffn_scalars": [round(v * s, 3) for v in variant["ffn_scalars"]]}

    def count(s):
        return shape_counts(LWSGPT, LWSConfig(**with_scale(s)))["non_embedding"]

    lo, hi = 0.0, 1.0
    while count(hi) < target:
        hi *= 2
    while hi - lo > tolerance:  # bisection
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if count(mid) < target else (lo, mid)
    best = min((lo, hi), key=lambda s: abs(count(s) - target))
    return with_scale(best), count(best)


def matched_args(baseline, variant="vanilla"):
    """A bare --model_type=lws: OpenELM's vanilla schedule at the baseline's budget, FFN widths
    multiples of 256 from d = 512, else of 32."""
    base = {k: v for k, v in baseline.items() if k != "ffn_hidden"}
    ffn_multiple = 256 if base.get("n_embd", GPTConfig.n_embd) >= 512 else 32
    return match_params(base, {**base, **VARIANTS[variant], "ffn_multiple": ffn_multiple})[0]


if __name__ == "__main__":
    from model import describe, model_from_command_line

    olmo2_190m = dict(vocab_size=50304, block_size=1024, n_layer=18, n_embd=768, n_head=12,
                      n_kv_head=4, head_dim=64, qk_norm="full", tie_embeddings=False,
                      rope_theta=500_000.0, norm_eps=1e-6)  # the paper's base, 18 layers
    for name, schedule in VARIANTS.items():
        model = model_from_command_line("lws", LWSGPT, LWSConfig, **olmo2_190m, **schedule)
        c = model.config
        print(f"{name}: ffn_scalars {c.ffn_scalars}, qkv_scalars {c.qkv_scalars}, framed "
              f"{c.framed}\n{describe(model)}\n")
