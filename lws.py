"""
Layer-wise scaling (LWS): every layer gets its own FFN width and its own number of heads.

Paper: "Crown, Frame, Reverse: Layer-Wise Scaling Variants for LLM Pre-Training", Andrei Baroian
and Kasper Notebomer, 2025, arXiv:2509.06518 (code: https://github.com/baroian/OLMo-custom).
It builds on the layer-wise scaling of OpenELM (Mehta et al., 2024, arXiv:2404.14619; code:
https://github.com/apple/corenet).

A plain (isotropic) transformer gives every layer the same FFN width and head count. LWS spends
the same parameter budget unevenly: layer i gets an FFN multiplier beta_i and an attention
multiplier alpha_i, read off a straight line (or two) between a few numbers the user picks.
Section 3.2, with d = n_embd, N = n_layer, i = 0..N-1:

    (1) ffn_hidden_i = beta_i * d                                    FFN width of layer i
    (2) beta_i  = beta_start  + (beta_end  - beta_start)  * i / (N - 1)
    (3) n_head_i = alpha_i * d / head_dim                            query heads of layer i
    (4) alpha_i = alpha_start + (alpha_end - alpha_start) * i / (N - 1)

The four profiles the paper compares at 180M parameters (VARIANTS; its Figure 3 and Table 2):
    vanilla   small first layers, growing with depth (OpenELM): start < end
    framed    vanilla, but the first and last layer at the baseline's beta = 4, alpha = 1
    reverse   large first layers, shrinking with depth (start > end); framed
    crown     small - large - small: (2), (4) through three values [start, middle, end]; framed
All four beat the isotropic 18-layer baseline by a few percent in validation perplexity and
differ little from each other (Table 3).

In code: `layer_specs` is (1), (3), rounded to whole FFN widths and heads (OpenELM's
`make_divisible`; KV heads = query heads / group), one model.LayerSpec per layer, from the
multipliers of `layer_multipliers` (the frame) and `interpolate` ((2), (4), the crown).
LWSConfig runs them; the model is model.GPT with those per-layer shapes (LWSGPT adds nothing).
`match_params` scales a variant's beta until its parameter count matches a baseline's. The
rounding rules and every deviation from the paper (one table): docs/lws.md. Table 2 and the CPU
shapes: experiments/lws_tables.py.

    python lws.py                               # the four variants' layers at the paper's 180M
    python experiments/lws_tables.py            # every Table 2 row next to the paper's counts
    OMP_NUM_THREADS=1 python train.py config/lws_crown_shakespeare_char.py    # minutes on a CPU
    python train.py config/lws_crown_180m.py    # the paper's Crown LWS shape, on a GPU
"""

import math
from dataclasses import dataclass

import numpy as np

from model import GPT, GPTConfig, LayerSpec, meta_device, shape_counts

# ----------------------------------------------------------------------------------------
# The schedule: eq. (1)-(4), computed and rounded as the reference code does


def layer_specs(n_embd, n_layer, ffn_scalars, qkv_scalars, framed=False, head_dim=64,
                group_size=1, ffn_multiple=256, frame_ffn=4.0, frame_qkv=1.0):
    """The model.LayerSpec of every layer: (query heads, KV heads, head dim, FFN width)."""
    betas, alphas = layer_multipliers(n_layer, ffn_scalars, qkv_scalars, framed, frame_ffn,
                                      frame_qkv)
    specs = []
    for beta, alpha in zip(betas, alphas):
        ffn_hidden = make_divisible(beta * n_embd, ffn_multiple)  # eq. (1)
        q_dim = make_divisible(alpha * n_embd, group_size * head_dim)  # eq. (3): whole KV groups
        n_head = q_dim // head_dim
        specs.append(LayerSpec(n_head=n_head, n_kv_head=n_head // group_size, head_dim=head_dim,
                               ffn_hidden=ffn_hidden))
    return specs


def layer_multipliers(n_layer, ffn_scalars, qkv_scalars, framed=False, frame_ffn=4.0,
                      frame_qkv=1.0):
    """(beta_i, alpha_i) for every layer, framing applied."""
    betas, alphas = interpolate(ffn_scalars, n_layer), interpolate(qkv_scalars, n_layer)
    if framed:  # first and last layer back at the baseline's size (the reference's layer_freeze)
        betas[0] = betas[-1] = frame_ffn
        alphas[0] = alphas[-1] = frame_qkv
    return betas, alphas


def interpolate(values, n_layer):
    """The multiplier of every layer from a schedule (a list of numbers), as the reference code
    computes it, to the last bit (widths round at fixed thresholds: one bit can move a step):
    2 values: a line, eq. (2) / (4): np.linspace, then round(., 2) on each np.float64, which is
      numpy's rounding (2.675 -> 2.68; Python's round on a float gives 2.67), as corenet's OpenELM;
    3 values: the crown, np.interp through [start, middle, end], not rounded;
    n_layer values: used as written."""
    values = [float(v) for v in values]
    if any(not v > 0 for v in values):
        raise ValueError(f"schedule {values}: every multiplier must be > 0")
    if n_layer == 1 and len(values) != 1:
        raise ValueError(f"a 1-layer model takes a schedule of one value, got {values}")
    if len(values) == 2:  # eq. (2), (4)
        return [float(round(v, 2)) for v in np.linspace(values[0], values[1], num=n_layer)]
    if len(values) == n_layer:
        return values
    if len(values) == 3 and n_layer > 3:  # the crown: two lines, meeting in the middle
        start, middle, end = values
        if n_layer % 2:  # odd N: one middle layer, at ceil(N / 2) - 1
            knots, knot_values = [0, math.ceil(n_layer / 2) - 1, n_layer - 1], values
        else:  # even N: the two middle layers both take `middle`; the reference drops `end`
            if end != start:
                raise ValueError(
                    f"crown {values} with an even n_layer={n_layer}: the reference code "
                    f"(github.com/baroian/OLMo-custom) builds an even-depth crown symmetric from "
                    f"start and middle only; give end == start, an odd depth, or one value per "
                    f"layer")
            knots = [0, n_layer // 2 - 1, n_layer // 2, n_layer - 1]
            knot_values = [start, middle, middle, start]
        return [float(v) for v in np.interp(np.arange(n_layer), knots, knot_values)]
    raise ValueError(f"schedule {values}: give 2 values (a line), 3 (a crown, for 4+ layers) or "
                     f"one per layer ({n_layer})")


def make_divisible(value, divisor):
    """OpenELM's rounding: the nearest multiple of divisor (at least divisor), plus one more
    divisor if rounding down lost 10% of value or more (`<=`, as OLMo-custom)."""
    if value < divisor:
        return divisor
    rounded = int((value + divisor / 2) // divisor) * divisor
    if rounded <= 0.9 * value:  # the 0.9 guard
        rounded += divisor
    return rounded


# The paper's four profiles: its 18-layer schedules of Table 2 (fnn_scalar beta, qkv_scalar alpha)
VARIANTS = {
    "vanilla": dict(ffn_scalars=[1.0, 4.0], qkv_scalars=[0.5, 1.0], framed=False),
    "framed": dict(ffn_scalars=[0.5, 4.0], qkv_scalars=[0.5, 1.0], framed=True),
    "reverse": dict(ffn_scalars=[4.0, 0.5], qkv_scalars=[1.0, 0.5], framed=True),
    "crown": dict(ffn_scalars=[0.5, 3.8, 0.5], qkv_scalars=[0.5, 1.0, 0.5], framed=True),
}


# ----------------------------------------------------------------------------------------
# The model: model.GPT with the schedule's per-layer shapes


@dataclass
class LWSConfig(GPTConfig):
    """n_head / n_kv_head fix the group size (query heads per KV head, kept in every layer) and,
    with n_embd, the head_dim every layer keeps (unless given); the schedule sets each layer's FFN
    width and heads. No schedule: exactly the plain GPT."""

    ffn_scalars: list[float] | None = None  # beta, eq. (2): 2 values a line, 3 a crown, 1 a layer
    qkv_scalars: list[float] | None = None  # alpha, eq. (4), the same way
    framed: bool = False  # first and last layer at (frame_ffn, frame_qkv)
    ffn_multiple: int = 256  # FFN widths are multiples of this (the paper's 256)
    frame_ffn: float = 4.0  # the frame's beta: the isotropic baseline's 4 d
    frame_qkv: float = 1.0  # the frame's alpha: the baseline's d / head_dim heads

    def __post_init__(self):
        if self.ffn_scalars is not None or self.qkv_scalars is not None:
            assert self.ffn_scalars is not None and self.qkv_scalars is not None, (
                "give both ffn_scalars (beta) and qkv_scalars (alpha), e.g. [4.0, 4.0] and "
                "[1.0, 1.0] for the isotropic schedule")
            assert self.ffn_hidden is None, (
                f"ffn_hidden={self.ffn_hidden} conflicts with ffn_scalars: an LWS model's FFN "
                f"widths come from the schedule; leave ffn_hidden=None")
            assert not self.layers, "layers: an LWS model builds them from the schedule"
            for key in ("n_embd", "n_head", "ffn_multiple"):  # (before any division)
                assert getattr(self, key) >= 1, f"{key}={getattr(self, key)} must be >= 1"
            self.n_kv_head, self.head_dim = head_layout(self.n_embd, self.n_head, self.n_kv_head,
                                                        self.head_dim)
            self.layers = layer_specs(self.n_embd, self.n_layer, self.ffn_scalars,
                                      self.qkv_scalars, self.framed, self.head_dim,
                                      self.n_head // self.n_kv_head, self.ffn_multiple,
                                      self.frame_ffn, self.frame_qkv)
        super().__post_init__()  # (keeps the layers set here)


class LWSGPT(GPT):
    """model.GPT as it is: its blocks already take one LayerSpec each, so layer-wise scaling
    needs no new module, and an isotropic schedule gives the plain GPT's weights and logits."""


def head_layout(n_embd, n_head, n_kv_head=None, head_dim=None):
    """(n_kv_head, head_dim) of the base shape a schedule scales: the group size n_head / n_kv_head
    must be whole (every layer keeps it); head_dim defaults to n_embd / n_head."""
    n_kv_head = n_kv_head or n_head
    if n_head % n_kv_head != 0:
        raise ValueError(f"n_head={n_head} is not a multiple of n_kv_head={n_kv_head}: the group "
                         f"size (query heads per KV head) must be a whole number, e.g. "
                         f"n_kv_head={n_head // 2 or 1}")
    if head_dim is None:
        if n_embd % n_head != 0:
            raise ValueError(f"n_embd={n_embd} is not divisible by n_head={n_head}: set head_dim "
                             f"explicitly")
        head_dim = n_embd // n_head
    return n_kv_head, head_dim


# ----------------------------------------------------------------------------------------
# Matching a variant's parameters to a baseline's (ours: the paper hand-picked its scalars)


def match_params(baseline, variant, tolerance=1e-3):
    """Scale the FFN multipliers of `variant` (LWSConfig keyword arguments) so its non-embedding
    parameter count is as close as the rounding allows to that of `baseline` (kwargs too). Only
    beta moves: FFN widths move in fine steps, head counts in coarse ones; the frame stays.
    Returns (variant kwargs with scaled ffn_scalars, its non-embedding count)."""
    target = shape_counts(LWSGPT, LWSConfig(**baseline))["non_embedding"]

    def with_scale(s):
        return {**variant, "ffn_scalars": [round(v * s, 3) for v in variant["ffn_scalars"]]}

    def count(s):
        return shape_counts(LWSGPT, LWSConfig(**with_scale(s)))["non_embedding"]

    lo, hi = 0.0, 1.0
    while count(hi) < target:  # the count only grows with the scale
        hi *= 2
        if hi > 1e4:
            raise ValueError("cannot reach the baseline's parameter count by widening the FFNs")
    while hi - lo > tolerance:  # bisection: count(lo) < target <= count(hi)
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if count(mid) < target else (lo, mid)
    best = min((lo, hi), key=lambda s: abs(count(s) - target))
    return with_scale(best), count(best)


def matched_args(baseline, variant="vanilla"):
    """What a bare `--model_type=lws` trains: OpenELM's schedule (`vanilla`), its FFN multipliers
    scaled so the model has the budget of the plain GPT that `baseline` describes (match_params).
    FFN widths round to OpenELM's 256 where the model is wide enough for that to be fine (d >=
    512), else to 32."""
    base = {k: v for k, v in baseline.items() if k != "ffn_hidden"}
    ffn_multiple = 256 if base.get("n_embd", GPTConfig.n_embd) >= 512 else 32
    return match_params(base, {**base, **VARIANTS[variant], "ffn_multiple": ffn_multiple})[0]


if __name__ == "__main__":
    import sys

    from model import default_args, describe
    from shapelab.configurator import ConfigError, build, parse_overrides, usage_error

    olmo2_190m = dict(vocab_size=50304, block_size=1024, n_layer=18, n_embd=768, n_head=12,
                      n_kv_head=4, head_dim=64, qk_norm="full", tie_embeddings=False,
                      rope_theta=500_000.0, norm_eps=1e-6)  # the paper's base, 18 layers
    try:  # --key=value sets any LWSConfig field; a schedule given prints that one only
        args = parse_overrides(sys.argv[1:], {**default_args(LWSConfig), **olmo2_190m})
        given = args["ffn_scalars"] is not None or args["qkv_scalars"] is not None
        schedules = {"given": {}} if given else VARIANTS
        for name, schedule in schedules.items():
            with meta_device():  # shapes and counts only: any size, instantly
                model = build("lws", LWSGPT, LWSConfig, **{**args, **schedule})
            c = model.config
            print(f"{name}: ffn_scalars {c.ffn_scalars}, qkv_scalars {c.qkv_scalars}, "
                  f"framed {c.framed}")
            print(describe(model) + "\n")
    except ConfigError as e:
        usage_error(e)
