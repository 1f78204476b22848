"""
Hourglass FFN: a GPT whose feed-forward sublayers are K narrow "wide-narrow-wide" MLPs in a row.

Paper: Feng-Ting Liao, Meng-Hsi Chen, Guan-Ting Yi, Da-shan Shiu (2026), "Revisiting the Shape
Convention of Transformer Language Models", arXiv:2602.06471. Reference code:
https://github.com/mtkresearch/Hourglass_LM. ("Hourglass" is the wide-narrow-wide MLP shape, not
Nawrot et al.'s sequence-shortening "Hourglass Transformer".)

The idea. Every standard transformer FFN is narrow-wide-narrow: it lifts the d-wide residual
stream to 4 d, applies a non-linearity and projects back; with SwiGLU that is 12 d^2 of a layer's
16 d^2, three quarters of the parameters. The paper turns the shape inside out: each FFN slot
becomes K small MLPs that first compress to a bottleneck d_h < d and then expand back, each with
its own norm and residual add. The FFN gets deeper (K non-linear steps per layer) and cheaper
(3 K d_h d), and the parameters saved buy a wider stream, i.e. more attention (4 d^2 per layer).
At 113M non-embedding parameters the paper goes from 768 wide (28M attention / 85M FFN) to 1032
wide with K = 4, d_h = 418 (51M / 62M) and gets a slightly lower validation loss.

Equations (numbered as in the paper):

    u   = z + Attn(norm(z))                                        (2)  attention, unchanged
    h_0 = u;   h_{i+1} = h_i + MLP_i(h_i),   i = 0..K-1,  z' = h_K  (3)  the hourglass FFN
    MLP_i(x) = W_u^(i) sigma(W_d^(i) norm(x))                      (4)  W_d: d_h x d, W_u: d x d_h
    MLP_i(x) = W_u^(i) (SiLU(W_d1^(i) xbar) * (W_d2^(i) xbar)),  xbar = norm(x)       (5)  SwiGLU
    parameters = L (4 d^2 + 3 K d_h d)                             (section 3.2)

The code: `HourglassFFN` is eq. (3)-(5), K model.FFNSublayer(d, d_h) in a row (their fused
`gate_up_proj` is W_d1 and W_d2, `out_proj` is W_u); `HourglassGPT` puts one in every FFN slot.
With K = 1 it builds the plain FFNSublayer, so K = 1 with d_h = 4 d IS the plain GPT (tested bit
for bit). `match_baseline` finds the shape at a plain GPT's budget (the paper's Tables 2-3);
`match_ffn_at_fixed_width` is its Table 1 mode. Deviations from the paper and the reference code,
the measured results and the tables: docs/hourglass.md; every row of Tables 1-3, reproduced:
experiments/hourglass_tables.py.

    python hourglass.py                              # 768/L12 baseline -> matched 1032/418/K4
    python hourglass.py --n_embd=192 --n_layer=4 --n_head=6 --vocab_size=84 --block_size=128
    python train.py config/hourglass_shakespeare_cpu.py       # train one (CPU)
"""

from dataclasses import dataclass, replace

import torch.nn as nn

from model import GPT, FFNSublayer, GPTConfig, LayerSpec, closest_size, meta_device, shape_counts

# ----------------------------------------------------------------------------------------
# The hourglass FFN sublayer


class HourglassFFN(nn.Module):
    """The FFN residual sublayer of eq. (3): h <- h + MLP_i(h) for i = 0..K-1. Each sub-block is
    FFNSublayer(d, d_h): its own RMSNorm, SwiGLU (W_d1, W_d2 fused in `gate_up_proj`, d -> 2 d_h;
    W_u in `out_proj`, d_h -> d) and residual add, eq. (4)-(5). It replaces the layer's own
    pre-FFN norm and residual, as in the reference code."""

    def __init__(self, dim, bottleneck_dim, n_sub_blocks, config: GPTConfig):
        super().__init__()
        self.sub_blocks = nn.ModuleList(  # K sub-blocks, each d -> d_h -> d
            FFNSublayer(dim, bottleneck_dim, config) for _ in range(n_sub_blocks))

    def forward(self, x):  # (B, T, d) -> (B, T, d)
        for sub_block in self.sub_blocks:
            x = sub_block(x)  # eq. (3): h_{i+1} = h_i + MLP_i(h_i); the bottleneck is (B, T, d_h)
        return x

    def flops_per_token(self, seq_len):
        return sum(sub_block.flops_per_token(seq_len) for sub_block in self.sub_blocks)


@dataclass
class HourglassConfig(GPTConfig):
    """GPTConfig plus K and d_h: every layer's LayerSpec.ffn_hidden (the hidden size of each SwiGLU
    in its FFN slot) is d_h, the bottleneck of its sub-blocks. With neither bottleneck given, d_h
    is a plain FFN's W (ffn_hidden or 4 n_embd): K = 1 is then the plain GPT."""

    n_sub_blocks: int = 1  # K, sub-blocks per FFN slot
    bottleneck_dim: int | None = None  # d_h
    bottleneck_ratio: float | None = None  # or d_h = round(ratio * n_embd)

    def __post_init__(self):
        assert self.n_sub_blocks >= 1, f"n_sub_blocks={self.n_sub_blocks}: it needs K >= 1"
        assert self.bottleneck_dim is None or self.bottleneck_ratio is None, (
            f"give d_h either as bottleneck_dim={self.bottleneck_dim} or as bottleneck_ratio="
            f"{self.bottleneck_ratio}, not both")
        if self.bottleneck_ratio is not None:
            self.bottleneck_dim = max(1, round(self.bottleneck_ratio * self.n_embd))
        d_h, per_layer = self.bottleneck_dim, bool(self.layers)  # (explicit layers: their own)
        if d_h is not None:
            assert self.ffn_hidden in (None, d_h), (
                f"ffn_hidden={self.ffn_hidden} and bottleneck_dim={d_h} disagree: in an hourglass "
                f"model each sub-block's hidden size is d_h, so leave ffn_hidden unset")
            assert d_h >= 1, f"bottleneck_dim={d_h} must be >= 1"
        super().__post_init__()
        if d_h is not None and not per_layer:
            self.layers = [replace(s, ffn_hidden=d_h) for s in self.layers]


class HourglassGPT(GPT):
    """The plain GPT with every FFN sublayer an HourglassFFN (attention unchanged, eq. 2)."""

    def make_ffn(self, layer_idx, spec: LayerSpec) -> nn.Module:
        d, n_sub_blocks = self.config.n_embd, self.config.n_sub_blocks  # K
        if n_sub_blocks == 1:  # the plain FFN sublayer itself (names, init order), as in compose.py
            return FFNSublayer(d, spec.ffn_hidden, self.config)
        return HourglassFFN(d, spec.ffn_hidden, n_sub_blocks, self.config)  # each SwiGLU's d_h


# ----------------------------------------------------------------------------------------
# Parameter matching (the paper's Tables 1-3)


def match_baseline(baseline_args, n_sub_blocks, bottleneck_ratio, n_layer=None, tolerance=0.005):
    """The hourglass shape with the baseline's parameter budget (GPT.budget(): attention + FFN +
    norm gains, no embeddings). Keeps the baseline's heads (and KV heads, qk_norm, vocab); n_layer
    defaults to the baseline's. Step 1: with d_h = round(ratio d), the d (a multiple of 2 n_head:
    heads divide it and the head size is even for RoPE) whose count is closest; step 2: the d_h at
    that d whose count is closest (searched: the count grows with d_h). Returns HourglassConfig
    keywords (bottleneck_dim set); a ValueError when the result is more than `tolerance` off."""
    target = shape_counts(GPT, GPTConfig(**baseline_args))["budget"]
    step = 2 * baseline_args.get("n_head", GPTConfig.n_head)
    drop = ("n_embd", "ffn_hidden", "head_dim", "n_layer")
    common = {k: v for k, v in baseline_args.items() if k not in drop}
    common.update(n_layer=n_layer or baseline_args.get("n_layer", GPTConfig.n_layer),
                  n_sub_blocks=n_sub_blocks)

    def count(d, d_h):  # the budget of L uniform layers, from 1- and 2-layer models (fast)
        one, two = (shape_counts(HourglassGPT, HourglassConfig(**dict(
            common, n_layer=n, block_size=2), n_embd=d, bottleneck_dim=d_h))["budget"]
            for n in (1, 2))
        return one + (common["n_layer"] - 1) * (two - one)

    # step 1: start near the multi-head estimate L d^2 (4 + 3 K ratio) = target, walk while closer
    estimate = (target / (common["n_layer"] * (4 + 3 * n_sub_blocks * bottleneck_ratio))) ** 0.5
    error = lambda d: abs(count(d, max(1, round(bottleneck_ratio * d))) - target)  # noqa: E731
    best_d = max(step, step * round(estimate / step))
    best_err = error(best_d)
    for direction in (step, -step):
        d = best_d + direction
        while d >= step and (err := error(d)) < best_err:
            best_d, best_err = d, err
            d += direction
    # step 2: at that d, the d_h whose count is closest (the count grows with d_h)
    d_h = closest_size(lambda d_h: count(best_d, d_h), target)
    got = count(best_d, d_h)
    if abs(got - target) > tolerance * target:
        raise ValueError(f"no hourglass shape with K={n_sub_blocks}, d_h/d~{bottleneck_ratio} and "
                         f"L={common['n_layer']} comes within {tolerance:.1%} of the baseline's "
                         f"{target:,} parameters (best: d={best_d}, d_h={d_h}, {got:,}); try a "
                         f"smaller ratio, K or L")
    return dict(common, n_embd=best_d, bottleneck_dim=d_h)


def match_ffn_at_fixed_width(baseline_args, n_sub_blocks):
    """The paper's Table 1 mode: the baseline's d, L and heads stay (so the attention is the same);
    d_h is chosen so the K sub-blocks' FFN matrices (3 K d_h d per layer) come closest to the
    baseline's FFN matrices (the K norm gains are not matched, as in Table 1). Against 768/3072/L12
    this gives d_h = 614, 512, 384, 307 for K = 5, 6, 8, 10. Returns HourglassConfig keywords."""
    target = shape_counts(HourglassGPT, HourglassConfig(**baseline_args))["ffn"]
    args = {k: v for k, v in baseline_args.items() if k != "ffn_hidden"}
    args.update(n_embd=baseline_args.get("n_embd", GPTConfig.n_embd), n_sub_blocks=n_sub_blocks)
    def ffn(d_h):
        config = HourglassConfig(**dict(args, block_size=2), bottleneck_dim=d_h)
        return shape_counts(HourglassGPT, config)["ffn"]

    return dict(args, bottleneck_dim=closest_size(ffn, target))


def matched_args(baseline_args):
    """What a bare `--model_type=hourglass` trains: K = 4 sub-blocks with d_h ~ 0.4 d (the shape the
    paper carries to its Table 3) at the budget of the plain GPT that baseline_args describe."""
    return match_baseline(baseline_args, n_sub_blocks=4, bottleneck_ratio=0.4)


if __name__ == "__main__":
    import sys

    from model import describe
    from shapelab.configurator import ConfigError, parse_overrides, usage_error

    try:  # a plain GPT baseline (the paper's 113M by default), and K and d_h / d to match it with
        args = parse_overrides(sys.argv[1:], dict(
            n_layer=12, n_head=12, n_embd=768, vocab_size=50304, block_size=2048,
            n_sub_blocks=4, bottleneck_ratio=0.4))
        n_sub_blocks, ratio = args.pop("n_sub_blocks"), args.pop("bottleneck_ratio")
        matched = match_baseline(args, n_sub_blocks, ratio)
    except (ConfigError, ValueError) as e:
        usage_error(e)
    with meta_device():
        plain, hourglass = GPT(GPTConfig(**args)), HourglassGPT(HourglassConfig(**matched))
    print(f"plain GPT {args}\n{describe(plain)}\n")
    d, d_h = matched["n_embd"], matched["bottleneck_dim"]
    print(f"hourglass K={n_sub_blocks}, d_h/d ~ {ratio}: d={d}, d_h={d_h} ({d_h / d:.3f} d)\n"
          f"{describe(hourglass)}")
    print(f"budget: plain {plain.budget():,}, hourglass {hourglass.budget():,} "
          f"({hourglass.budget() / plain.budget() - 1:+.3%})")
