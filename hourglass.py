"""
Hourglass FFN: a GPT whose FFN slots are K narrow wide-narrow-wide MLPs in a row.

Paper: Feng-Ting Liao, Meng-Hsi Chen, Guan-Ting Yi, Da-shan Shiu (2026), "Revisiting the Shape
Convention of Transformer Language Models", arXiv:2602.06471.

The idea. Turn the FFN (d -> 4 d -> d, 12 d^2 of a layer's 16 d^2) inside out: K small MLPs
d -> d_h -> d, each with its own norm and residual. The parameters saved buy a wider stream: at
113M, 768 wide becomes 1032 wide with K = 4, d_h = 418, at a slightly lower loss.

    u   = z + Attn(norm(z))                                        (2)  attention, unchanged
    h_0 = u;   h_{i+1} = h_i + MLP_i(h_i),   i = 0..K-1,  z' = h_K  (3)
    MLP_i(x) = W_u^(i) sigma(W_d^(i) norm(x))                      (4)  W_d: d_h x d, W_u: d x d_h
    MLP_i(x) = W_u^(i) (SiLU(W_d1^(i) xbar) * (W_d2^(i) xbar)),  xbar = norm(x)       (5)
    parameters = L (4 d^2 + 3 K d_h d)                             (section 3.2)

Each MLP_i is a model.FFNSublayer(d, d_h); K = 1 with d_h = 4 d is the plain GPT.
`match_baseline` is the paper's Tables 2-3 (a budget), `match_ffn_at_fixed_width` its Table 1.

    python hourglass.py                              # 768/L12 baseline -> matched 1032/418/K4
"""

from dataclasses import dataclass

import torch.nn as nn

from model import GPT, FFNSublayer, GPTConfig, LayerSpec, closest_size, meta_device, shape_counts


class HourglassFFN(nn.Module):
    """K sub-blocks FFNSublayer(d, d_h), each with its own norm and residual."""

    def __init__(self, dim, bottleneck_dim, n_sub_blocks, config: GPTConfig):
        super().__init__()
        self.sub_blocks = nn.ModuleList(
            FFNSublayer(dim, bottleneck_dim, config) for _ in range(n_sub_blocks))

    def forward(self, x):
        for sub_block in self.sub_blocks:
            x = sub_block(x)  # eq. (3)
        return x


@dataclass
class HourglassConfig(GPTConfig):
    """Every layer's ffn_hidden is d_h; no bottleneck given, d_h is the plain FFN's width."""

    n_sub_blocks: int = 1  # K
    bottleneck_dim: int | None = None  # d_h

    def __post_init__(self):
        assert self.n_sub_blocks >= 1, f"n_sub_blocks={self.n_sub_blocks}: it needs K >= 1"
        assert self.bottleneck_dim is None or self.ffn_hidden in (None, self.bottleneck_dim), (
            f"ffn_hidden={self.ffn_hidden} and bottleneck_dim={self.bottleneck_dim} disagree: "
            f"leave ffn_hidden unset")
        self.ffn_hidden = self.bottleneck_dim or self.ffn_hidden
        super().__post_init__()


class HourglassGPT(GPT):
    """The plain GPT with every FFN sublayer an HourglassFFN."""

    def make_ffn(self, layer_idx, spec: LayerSpec) -> nn.Module:
        d, n_sub_blocks = self.config.n_embd, self.config.n_sub_blocks
        if n_sub_blocks == 1:  # the plain sublayer itself: same names, same init order
            return FFNSublayer(d, spec.ffn_hidden, self.config)
        return HourglassFFN(d, spec.ffn_hidden, n_sub_blocks, self.config)


def match_baseline(baseline_args, n_sub_blocks, bottleneck_ratio, n_layer=None, tolerance=0.005):
    """HourglassConfig keywords at the baseline's budget: the closest d (a multiple of 2 n_head)
    at d_h = ratio d, then the closest d_h."""
    target = shape_counts(GPT, GPTConfig(**baseline_args))["budget"]
    step = 2 * baseline_args.get("n_head", GPTConfig.n_head)
    drop = ("n_embd", "ffn_hidden", "head_dim", "n_layer")
    common = {k: v for k, v in baseline_args.items() if k not in drop}
    common.update(n_layer=n_layer or baseline_args.get("n_layer", GPTConfig.n_layer),
                  n_sub_blocks=n_sub_blocks)

    def count(d, d_h):
        config = HourglassConfig(**dict(common, block_size=2), n_embd=d, bottleneck_dim=d_h)
        return shape_counts(HourglassGPT, config)["budget"]

    d = step * closest_size(lambda n: count(step * n, max(1, round(bottleneck_ratio * step * n))),
                            target)
    d_h = closest_size(lambda d_h: count(d, d_h), target)
    if abs(count(d, d_h) - target) > tolerance * target:
        raise ValueError(f"no hourglass shape with K={n_sub_blocks}, d_h/d~{bottleneck_ratio} "
                         f"comes within {tolerance:.1%} of the baseline's {target:,} parameters; "
                         f"try a smaller ratio, K or L")
    return dict(common, n_embd=d, bottleneck_dim=d_h)


def match_ffn_at_fixed_width(baseline_args, n_sub_blocks):
    """Table 1: the baseline's d kept, d_h matching its FFN matrices (614 to 307 for K = 5-10)."""
    target = shape_counts(HourglassGPT, HourglassConfig(**baseline_args))["ffn"]
    args = {k: v for k, v in baseline_args.items() if k != "ffn_hidden"}
    args.update(n_embd=baseline_args.get("n_embd", GPTConfig.n_embd), n_sub_blocks=n_sub_blocks)

    def ffn(d_h):
        config = HourglassConfig(**dict(args, block_size=2), bottleneck_dim=d_h)
        return shape_counts(HourglassGPT, config)["ffn"]

    return dict(args, bottleneck_dim=closest_size(ffn, target))


def matched_args(baseline_args):
    """A bare --model_type=hourglass: K = 4, d_h ~ 0.4 d (the paper's Table 3 shape), matched."""
    return match_baseline(baseline_args, n_sub_blocks=4, bottleneck_ratio=0.4)


if __name__ == "__main__":
    import sys

    from model import describe
    from shapelab.configurator import ConfigError, parse_overrides, usage_error

    try:  # the paper's 113M baseline by default
        args = parse_overrides(sys.argv[1:], dict(
            n_layer=12, n_head=12, n_embd=768, vocab_size=50304, block_size=2048,
            n_sub_blocks=4, bottleneck_ratio=0.4))
        n_sub_blocks, ratio = args.pop("n_sub_blocks"), args.pop("bottleneck_ratio")
        matched = match_baseline(args, n_sub_blocks, ratio)
    except (ConfigError, ValueError) as e:
        usage_error(e)
    with meta_device():
        plain, hourglass = GPT(GPTConfig(**args)), HourglassGPT(HourglassConfig(**matched))
    print(f"plain GPT {args}\n{describe(plain)}\n\nhourglass {matched}\n{describe(hourglass)}")
    print(f"budget: plain {plain.budget():,}, hourglass {hourglass.budget():,} "
          f"({hourglass.budget() / plain.budget() - 1:+.3%})")
