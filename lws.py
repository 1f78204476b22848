"""
Layer-wise scaling (LWS): vanilla, framed, reverse and crown.

Paper: "Crown, Frame, Reverse: Layer-Wise Scaling Variants for LLM Pre-Training",
Andrei Baroian and Kasper Notebomer, 2025 (code: https://github.com/baroian/OLMo-custom).
It builds on the layer-wise scaling of OpenELM (Mehta et al., 2024; https://github.com/apple/corenet).

The idea
--------
A plain (isotropic) transformer gives every layer the same FFN width and the same number
of attention heads. Layer-wise scaling spends the same parameter budget unevenly: each
layer i gets its own FFN multiplier beta_i and attention multiplier alpha_i, read off a
straight line (or two) between a few numbers the user picks. The paper compares four
profiles at a fixed 180M budget (its Figure 3):

    vanilla   small first layers, growing linearly with depth (OpenELM)
    framed    vanilla, but the first and last layer at the full (baseline) size
    reverse   large first layers, shrinking with depth; framed
    crown     small - large - small, the maximum in the middle; framed

All four beat the equal-size isotropic 18-layer baseline by a few percent in validation
perplexity, and differ little from each other (its Table 3).

Equations (section 3.2; d = n_embd, d_h = head dim, N = n_layer, i = 0..N-1)
    (1) ffn_hidden_i = beta_i * d                      FFN width of layer i
    (2) beta_i  = beta_start  + (beta_end  - beta_start)  * i / (N - 1)
    (3) n_head_i = alpha_i * d / d_h                    query heads of layer i
    (4) alpha_i = alpha_start + (alpha_end - alpha_start) * i / (N - 1)
Reverse LWS is (2), (4) with start > end. Crown interpolates (2), (4) through three
values [start, middle, end]. Framing overwrites the first and last layer with the
baseline's beta = 4.0, alpha = 1.0.

What this file implements
-------------------------
The schedule formulas only. `layer_specs()` turns a schedule into a list of
model.LayerSpec (query heads, KV heads, head dim, FFN width per layer) and
`build_model()` feeds it to model.GPTConfig(layers=...): an LWS model IS model.GPT with
different layer sizes, nothing is subclassed. The rules are the reference code's
(github.com/baroian/OLMo-custom, olmo_core/nn/transformer/model.py), computed with the same
numpy calls so every multiplier is the same double (a test compares 3000 random schedules
with an independent re-implementation); they reproduce every row of the paper's Table 2:

    beta_i, alpha_i   two-point schedules (2), (4): np.linspace(start, end, N), then
                      round(x, 2) on each np.float64, i.e. numpy's rounding (as corenet's
                      OpenELM): 2.675 -> 2.68, where Python's round on a float gives 2.67
    crown             np.interp over the layer indices, not rounded; knots at layers
                      [0, ceil(N/2)-1, N-1] with [start, mid, end] for odd N; for even N at
                      [0, N/2-1, N/2, N-1] with [start, mid, mid, start]: the reference
                      ignores `end` there, so we refuse an even-depth crown with end != start
    framing           after interpolation beta_0 = beta_{N-1} = 4.0, alpha_0 = alpha_{N-1} = 1.0
    FFN width         make_divisible(beta_i * d, 256)
    query dim         make_divisible(alpha_i * d, group * d_h); n_head_i = q_dim / d_h
    KV heads          n_head_i / group   (group = query heads per KV head, 3 in the paper)

with make_divisible(v, D) = D if v < D, else v rounded to the nearest multiple of D,
plus D if that lost 10% of v or more (OpenELM's 0.9 guard, `rounded <= 0.9 v` as in
OLMo-custom and corenet's MLX OpenELM; corenet's math_utils writes `<`, which differs only
when the rounding loses exactly 10%).

A schedule is any list of numbers: two values are a line (vanilla, reverse, isotropic),
three are a crown, and a list of n_layer values is used as written (except for two
layers: two values always make a rounded line, as in the reference). `match_params()`
scales a shape's FFN multipliers until its non-embedding parameter count matches a
baseline's (the paper's way of comparing at a fixed budget).

Deviations from the paper, and why (each marked: the paper / the reference code / ours)
----------------------------------------------------------------------------------------
Schedules and rounding
- KV heads scale with the query heads (n_kv_i = n_head_i / group): the reference code
  (github.com/baroian/OLMo-custom passes the group count, and its attention divides). The
  paper's prose says the KV heads are "kept fixed"; that does not reproduce its own Table 2,
  the group rule does (every row, to 0.1M).
- Interpolation and rounding: the reference code's, bit for bit (above). An even-depth crown
  with end != start is refused (ours): the reference would silently use start for end.
- With plain multi-head attention (n_kv_head = n_head, group 1) the query dim is rounded to a
  multiple of head_dim; the reference code rounds to 2 head_dim when it has no KV heads set
  (ours: group 1 is the GQA rule with one query per KV head). The paper's models use GQA.
- `ffn_multiple` (256 in the paper and the reference code) is a parameter (ours): at the CPU
  scale (d = 128) a multiple of 256 would only allow widths 2d, 4d, 6d..., so those configs
  use 32. The frame values (4.0, 1.0: the reference's layer_freeze) are parameters too.
- Parameter matching (ours): `match_params()` scales only the FFN multipliers (not the frame,
  not alpha): FFN widths move in fine steps, head counts in coarse ones. The paper
  hand-picked its scalars; its rows are within 2% of each other, ours are matched closer.
Base model (the paper: OLMo-2 190M, built by OLMo-core's olmo2_190M in the reference code)
- Norm placement (ours): OLMo-2 normalises each sublayer's OUTPUT (x + norm(Attn(x)),
  "reordered norm"); model.py is pre-norm (x + Attn(norm(x))), the convention every
  mechanism in this repo shares. Not offered as an option.
- RoPE theta 500000 and RMSNorm eps 1e-6 (reference code): build_model takes `rope_theta` and
  `norm_eps`; PAPER_BASE and config/lws_*_180m.py set OLMo-2's values, the CPU configs keep
  model.py's 10000 and 1e-5 (ours: the CPU runs in docs/lws.md were made with them).
- QK-norm (the paper): RMSNorm over the full q and k projections (qk_norm="full"), as the
  reference code;
  no biases, SwiGLU, untied LM head, final RMSNorm: as the paper and the reference code.
- Init (ours): model.py's normal(0, 0.02) with out_proj at 0.02 / sqrt(2 L); OLMo-core's
  default (reference code) is a normal(0, 0.02) truncated at 3 std for every matrix and the
  embedding, with no depth scaling.
- Training (ours): train.py (AdamW, weight decay 0.1 on matrices and embeddings, betas
  (0.9, 0.95) in the 180M configs, cosine schedule, clip 1.0) on TinyStories (GPT-2 BPE,
  vocab 50257) or character-level Shakespeare on a CPU. The reference code: OLMo-core, AdamW
  lr 6e-4, betas (0.9, 0.95), weight decay 0.01 on everything but the embedding, clip 1.0,
  bf16, 13k steps of 384 x 1024 tokens = 5B DCLM tokens (the paper), GPT-NeoX/OLMo tokenizer
  (vocab 50279 padded to 50304). Numbers from the CPU runs are labelled so.

Run it
------
    python lws.py                       # the paper's shapes next to its Table 2
    python lws.py --scale=cpu           # the matched CPU shapes our Shakespeare configs use
    OMP_NUM_THREADS=1 python train.py config/lws_crown_shakespeare_char.py   # one CPU run (a few minutes)
    python train.py config/lws_crown_180m.py                 # the paper's Crown LWS shape, on a GPU
    python experiments/lws_layer_sizes.py [--scale=cpu]      # the per-layer bar chart (Figure 3)
    python bench.py config/lws_baseline_shakespeare_char.py config/lws_vanilla_shakespeare_char.py \
        config/lws_framed_shakespeare_char.py config/lws_reverse_shakespeare_char.py \
        config/lws_crown_shakespeare_char.py --dtypes=float32 --modes=eager   # tokens/s, ratio to the baseline
The write-up with the measured results is docs/lws.md.
"""

import math

import numpy as np
import torch

from model import GPT, GPTConfig, LayerSpec

# ----------------------------------------------------------------------------------------
# The paper's Table 2: (n_layer, fnn_scalar, qkv_scalar, framing, total M, non-embedding M).
# Base shape: OLMo-2 190M with d = 768, head dim 64, 12 query heads, 4 KV heads (group 3),
# untied LM head, vocab padded to 50304, QK-norm over the full q and k projections.

PAPER_BASE = dict(vocab_size=50304, n_embd=768, n_head=12, n_kv_head=4, head_dim=64,
                  qk_norm="full", tie_embeddings=False, rope_theta=500_000.0, norm_eps=1e-6)  # OLMo-2's theta, eps
PAPER_TABLE2 = {
    "Baseline 12L": (12, [4.0, 4.0], [1.0, 1.0], False, 181.1, 142.5),
    "Vanilla LWS 12L": (12, [2.0, 5.3], [0.5, 2.0], False, 178.8, 140.1),
    "Baseline 18L": (18, [2.5, 2.5], [0.75, 0.75], False, 183.5, 144.8),
    "Vanilla LWS 18L": (18, [1.0, 4.0], [0.5, 1.0], False, 179.7, 141.1),
    "Framed LWS": (18, [0.5, 4.0], [0.5, 1.0], True, 179.4, 140.7),
    "Reverse LWS": (18, [4.0, 0.5], [1.0, 0.5], True, 179.4, 140.7),
    "Crown LWS": (18, [0.5, 3.8, 0.5], [0.5, 1.0, 0.5], True, 181.9, 143.3),
}

# The five shapes our CPU comparison trains, in the spirit of the 18-layer rows above: the
# isotropic baseline, and the four variants before parameter matching (see cpu_shapes()).
CPU_BASE = dict(vocab_size=84, block_size=128, n_embd=128, n_head=8, n_kv_head=4, head_dim=16,
                qk_norm="full", tie_embeddings=False, ffn_multiple=32)
CPU_BASELINE = dict(n_layer=9, ffn_scalars=[2.5, 2.5], qkv_scalars=[0.75, 0.75], framed=False)
CPU_VARIANTS = {
    "vanilla": dict(n_layer=9, ffn_scalars=[1.0, 4.0], qkv_scalars=[0.5, 1.0], framed=False),
    "framed": dict(n_layer=9, ffn_scalars=[0.5, 4.0], qkv_scalars=[0.5, 1.0], framed=True),
    "reverse": dict(n_layer=9, ffn_scalars=[4.0, 0.5], qkv_scalars=[1.0, 0.5], framed=True),
    "crown": dict(n_layer=9, ffn_scalars=[0.5, 3.8, 0.5], qkv_scalars=[0.5, 1.0, 0.5], framed=True),
}


# ----------------------------------------------------------------------------------------
# Schedules


def make_divisible(value, divisor):
    """OpenELM's rounding: the nearest multiple of divisor (at least divisor), plus one
    more divisor if rounding down lost 10% of value or more (`<=`, as OLMo-custom)."""
    if value < divisor:
        return divisor
    rounded = int((value + divisor / 2) // divisor) * divisor
    if rounded <= 0.9 * value:  # the 0.9 guard
        rounded += divisor
    return rounded


def interpolate(values, n_layer):
    """Per-layer multipliers from a schedule (a list of numbers), computed as the reference does,
    to the last bit (the widths round at fixed thresholds, so one bit can move a layer a step):
    2 values: a line from the first to the last layer, eq. (2) / (4): np.linspace, then round(., 2)
      on each np.float64, which is numpy's rounding (x * 100 rounded half-even, / 100), as in
      corenet's OpenELM and OLMo-custom (Python's round on a float would give 2.67 for 2.675);
    3 values: crown, np.interp through [start, middle, end] (not rounded, as in the reference);
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
    if len(values) == 3 and n_layer > 3:
        start, middle, end = values
        if n_layer % 2:  # odd: one middle layer
            knots, knot_values = [0, math.ceil(n_layer / 2) - 1, n_layer - 1], [start, middle, end]
        else:  # even: the two middle layers both take the middle value, and the crown is symmetric
            if end != start:  # the reference uses [start, middle, middle, start]: it would drop `end`
                raise ValueError(f"crown {values} with an even n_layer={n_layer}: the reference code "
                                 f"(github.com/baroian/OLMo-custom) builds an even-depth crown symmetric from start "
                                 f"and middle only; give end == start, an odd depth, or one value per layer")
            knots, knot_values = [0, n_layer // 2 - 1, n_layer // 2, n_layer - 1], [start, middle, middle, start]
        return [float(v) for v in np.interp(np.arange(n_layer), knots, knot_values)]
    raise ValueError(f"schedule {values}: give 2 values (a line), 3 (a crown, for 4+ layers) or one per layer ({n_layer})")


def layer_multipliers(n_layer, ffn_scalars, qkv_scalars, framed=False, frame_ffn=4.0, frame_qkv=1.0):
    """(beta_i, alpha_i) for every layer, framing applied."""
    betas, alphas = interpolate(ffn_scalars, n_layer), interpolate(qkv_scalars, n_layer)
    if framed:  # first and last layer at the baseline size
        betas[0] = betas[-1] = frame_ffn
        alphas[0] = alphas[-1] = frame_qkv
    return betas, alphas


def layer_specs(n_embd, n_layer, ffn_scalars, qkv_scalars, framed=False, head_dim=64, group_size=1,
                ffn_multiple=256, frame_ffn=4.0, frame_qkv=1.0):
    """The list of model.LayerSpec of an LWS model: one (query heads, KV heads, head dim,
    FFN width) per layer."""
    betas, alphas = layer_multipliers(n_layer, ffn_scalars, qkv_scalars, framed, frame_ffn, frame_qkv)
    specs = []
    for beta, alpha in zip(betas, alphas):
        ffn_hidden = make_divisible(beta * n_embd, ffn_multiple)  # eq. (1)
        q_dim = make_divisible(alpha * n_embd, group_size * head_dim)  # eq. (3): a whole number of KV groups
        n_head = q_dim // head_dim
        specs.append(LayerSpec(n_head=n_head, n_kv_head=n_head // group_size, head_dim=head_dim,
                               ffn_hidden=ffn_hidden))
    return specs


# ----------------------------------------------------------------------------------------
# The model: model.GPT with per-layer shapes


def head_layout(n_embd, n_head, n_kv_head=None, head_dim=None):
    """(n_kv_head, head_dim) of the base shape a schedule scales: the group size n_head / n_kv_head
    must be whole (every layer keeps it), head_dim defaults to n_embd / n_head."""
    n_kv_head = n_kv_head or n_head
    if n_head % n_kv_head != 0:
        raise ValueError(f"n_head={n_head} is not a multiple of n_kv_head={n_kv_head}: the group size "
                         f"(query heads per KV head) must be a whole number, e.g. n_kv_head={n_head // 2 or 1}")
    if head_dim is None:
        if n_embd % n_head != 0:
            raise ValueError(f"n_embd={n_embd} is not divisible by n_head={n_head}: set head_dim explicitly")
        head_dim = n_embd // n_head
    return n_kv_head, head_dim


def build_model(vocab_size=84, block_size=256, n_layer=6, n_head=6, n_kv_head=None, n_embd=384, head_dim=None,
                ffn_hidden=None, qk_norm="", tie_embeddings=True, dropout=0.0,
                ffn_scalars=None, qkv_scalars=None, framed=False, ffn_multiple=256, frame_ffn=4.0, frame_qkv=1.0,
                rope_theta=10000.0, norm_eps=1e-5):
    """An LWS model. n_head / n_kv_head fix the group size (query heads per KV head) and,
    with n_embd, the head dim; the schedule (ffn_scalars = beta, qkv_scalars = alpha)
    sets every layer's FFN width and head counts. No schedule: the plain GPT. rope_theta and
    norm_eps default to model.py's; the paper's OLMo-2 base uses 500000 and 1e-6."""
    n_kv_head, head_dim = head_layout(n_embd, n_head, n_kv_head, head_dim)
    common = dict(vocab_size=vocab_size, block_size=block_size, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
                  n_kv_head=n_kv_head, head_dim=head_dim, ffn_hidden=ffn_hidden, qk_norm=qk_norm,
                  tie_embeddings=tie_embeddings, dropout=dropout, rope_theta=rope_theta, norm_eps=norm_eps)
    if ffn_scalars is None and qkv_scalars is None:
        return GPT(GPTConfig(**common))
    if ffn_scalars is None or qkv_scalars is None:
        raise ValueError("give both ffn_scalars (beta) and qkv_scalars (alpha), e.g. [4.0, 4.0] and [1.0, 1.0] "
                         "for the isotropic schedule")
    if ffn_hidden is not None:
        raise ValueError(f"ffn_hidden={ffn_hidden} conflicts with ffn_scalars: an LWS model's FFN widths come "
                         f"from the schedule; leave ffn_hidden=None")
    layers = layer_specs(n_embd, n_layer, ffn_scalars, qkv_scalars, framed, head_dim, n_head // n_kv_head,
                         ffn_multiple, frame_ffn, frame_qkv)
    return GPT(GPTConfig(**common, layers=layers))


def count_params(**model_args):
    """param_counts() of a model built on the meta device (instant, no memory)."""
    with torch.device("meta"):
        return build_model(**model_args).param_counts()


def match_params(baseline, variant, tolerance=1e-3):
    """Scale the FFN multipliers of `variant` (build_model kwargs) so its non-embedding
    parameter count is as close as the rounding allows to that of `baseline` (kwargs too).
    Returns (variant kwargs with scaled ffn_scalars, its non-embedding count)."""
    target = count_params(**baseline)["non_embedding"]

    def with_scale(s):
        return {**variant, "ffn_scalars": [round(v * s, 3) for v in variant["ffn_scalars"]]}

    def count(s):
        return count_params(**with_scale(s))["non_embedding"]

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


def paper_shapes(block_size=1024):
    """The seven shapes of the paper's Table 2, {name: build_model kwargs}."""
    return {name: dict(PAPER_BASE, block_size=block_size, n_layer=n_layer, ffn_scalars=fnn, qkv_scalars=qkv,
                       framed=framed)
            for name, (n_layer, fnn, qkv, framed, _, _) in PAPER_TABLE2.items()}


def cpu_shapes():
    """The five CPU shapes of our Shakespeare comparison, {name: build_model kwargs}: the
    isotropic baseline, and the four variants matched to its non-embedding count."""
    baseline = {**CPU_BASE, **CPU_BASELINE}
    matched = {name: match_params(baseline, {**CPU_BASE, **shape})[0] for name, shape in CPU_VARIANTS.items()}
    return {"baseline": baseline, **matched}


# ----------------------------------------------------------------------------------------
# The shape table


def shape_report(name, model, paper=None):
    specs = model.config.layers
    c = model.param_counts()
    digits = 1 if c["total"] > 1e7 else 4  # the paper's precision for its 180M rows
    lines = [f"{name}: {len(specs)} layers",
             "  FFN widths: " + str([s.ffn_hidden for s in specs]),
             "  query heads: " + str([s.n_head for s in specs]) + ", KV heads: " + str([s.n_kv_head for s in specs]),
             f"  params: total {c['total'] / 1e6:.{digits}f}M, non-embedding {c['non_embedding'] / 1e6:.{digits}f}M "
             f"(attention {c['attention'] / 1e6:.2f}M, FFN {c['ffn'] / 1e6:.2f}M), "
             f"forward FLOPs/token at T={model.config.block_size}: {model.flops_per_token() / 1e6:.1f}M"]
    if paper:
        lines.append(f"  paper Table 2: total {paper[0]:.1f}M, non-embedding {paper[1]:.1f}M")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    from configurator import parse_overrides
    args = parse_overrides(sys.argv[1:], dict(scale="paper"))
    if args["scale"] == "paper":
        for name, kwargs in paper_shapes().items():
            with torch.device("meta"):
                model = build_model(**kwargs)
            print(shape_report(name, model, PAPER_TABLE2[name][4:]))
    elif args["scale"] == "cpu":
        for name, kwargs in cpu_shapes().items():
            with torch.device("meta"):
                model = build_model(**kwargs)
            print(shape_report(name, model))
            print(f"  model_args = {{'ffn_scalars': {kwargs['ffn_scalars']}, 'qkv_scalars': "
                  f"{kwargs['qkv_scalars']}, 'framed': {kwargs['framed']}, 'ffn_multiple': {kwargs['ffn_multiple']}}}")
    else:
        raise SystemExit(f"--scale={args['scale']!r}: use paper or cpu")
