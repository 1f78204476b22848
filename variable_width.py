"""
The ><former: a transformer whose layers have different widths on one wide residual stream.

Paper: Zhaofeng Wu, Oliver Sieberling, Shawn Tan, Rameswar Panda, Yury Polyanskiy, Yoon Kim
(2026), "Variable-Width Transformers", arXiv:2606.18246.

The idea. Layer l gets its own width w_l: wide, narrow at ~3/4 of the depth, wide again. At
equal parameters (~w_l^2) the attention FLOPs and KV cache (~w_l) shrink. The layers share one
stream R of width D = max(d, max_l w_l); each coordinate keeps its last writer's value:

    x^l = B^l(f^l(x^{l-1})) + f^l(x^{l-1})                                           (sec. 2)
    [f^l(x^{l-1})]_i = [x^{l'}]_i,   l' = max{ l~ < l : d_l~ >= i }                     (1)

Appendix A: the bottleneck layer l* = r_l L gets d_l* = r_d d, widths are geometric on each side
with equal ends d_1 = d_L = d_bar, and the parameters match the constant width d (K = 4 + 3E):

    d_l = d_bar c_l,   c_l = (a^-)^(l-1) for l <= l*,   (a^-)^(l*-1) (a^+)^(l-l*) after
    a^+ = (a^-)^(-(l*-1)/(L-l*))                                          (d_1 = d_L)
    K d_bar^2 S2(a^-) - W_end(d_bar) = L K d^2,   S2 = sum_l c_l^2        (parameter match)
    W_end(d_bar) = 1{d_bar > d} (3 + E) d_bar (d_bar - d)   (first QKV, last W_2: unused parts)
    b(a^-) = d_bar(a^-) (a^-)^(l*-1) = r_d d                (bisection on a^-)

The constant schedule is exactly model.GPT.

    python variable_width.py                     # the paper's 200M shape: widths, params, FLOPs
"""

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from model import GPT, AttentionSublayer, FFNSublayer, GPTConfig, LayerSpec, RMSNorm


class VariableWidthGPT(GPT):
    """model.GPT whose layer l is a Block of width w_l on the first w_l coordinates of R."""

    def __init__(self, config: "VariableWidthConfig"):
        super().__init__(config)
        d, widths = config.n_embd, config.layer_widths
        self.stream_width = max([d] + widths)  # D
        self.final_width = max(widths[-1], d)
        if self.final_width != d:
            self.norm_f = RMSNorm(self.final_width, config.norm_eps)

    def make_attention(self, layer_idx, spec):
        return AttentionSublayer(self.config.layer_widths[layer_idx], spec, self.config)

    def make_ffn(self, layer_idx, spec):
        return FFNSublayer(self.config.layer_widths[layer_idx], spec.ffn_hidden, self.config)

    def init_weights(self):
        """model.GPT's init, layer l's matrices times sqrt(d / w_l): Var[W] ~ 1 / fan_in."""
        super().init_weights()
        with torch.no_grad():
            for block, w in zip(self.blocks, self.config.layer_widths):
                for p in block.parameters():
                    if self.config.scale_init_by_width and p.dim() >= 2:
                        p.mul_(math.sqrt(self.config.n_embd / w))

    def stream_input(self, idx):
        """R_0 = [embedding, zeros], (B, T, D)."""
        return F.pad(self.embed(idx), (0, self.stream_width - self.config.n_embd))

    def layer_step(self, l, R):
        w = self.config.layer_widths[l]
        out = self.blocks[l](R[..., :w])  # x^l = B^l(f^l) + f^l, f^l of eq. (1)
        # torch.cat, not an in-place write, which would clobber what RMSNorm saved for backward
        return out if w == R.size(-1) else torch.cat((out, R[..., w:]), dim=-1)

    def head_input(self, R):
        return self.norm_f(R[..., :self.final_width])[..., :self.config.n_embd]

    def forward(self, idx, targets=None):
        R = self.stream_input(idx)
        for l in range(len(self.blocks)):
            R = self.layer_step(l, R)
        return self.logits_and_loss(self.head_input(R), targets)

    def endpoint_params(self):
        """Appendix A's W_end: the first layer's columns on the zero padding, the rows past d of
        the last out_proj (the last W_2)."""
        d, widths = self.config.n_embd, self.config.layer_widths
        first = self.blocks[0].attn.attn.qkv_proj  # W_q, W_k, W_v read R_0's zero padding
        last = [m for name, m in self.blocks[-1].named_modules() if name.endswith("out_proj")][-1]
        return first.out_features * max(widths[0] - d, 0) + last.in_features * max(
            widths[-1] - d, 0)


# ----------------------------------------------------------------------------------------
# Configuration


@dataclass
class VariableWidthConfig(GPTConfig):
    layer_widths: list[int] = field(default_factory=list)  # w_l; empty: solved from the schedule
    width_schedule: str = "x"  # or 'constant'
    bottleneck_layer_ratio: float = 0.75  # r_l
    bottleneck_width_ratio: float = 0.3  # r_d
    width_multiple: int = 32  # solved widths: multiples of this and of 2 n_head
    hidden_multiple: int = 1  # layer l's FFN hidden round(ffn_hidden w_l / d), a multiple of this
    scale_init_by_width: bool = True

    def __post_init__(self):
        d, n_head = self.n_embd, self.n_head
        self.n_kv_head, self.ffn_hidden = self.n_kv_head or n_head, self.ffn_hidden or 4 * d
        assert self.head_dim is None or self.head_dim * n_head == d, (
            f"head_dim={self.head_dim}: a ><former's head_dim is w_l / n_head; leave it unset")
        ffn_width_ratio, end_ratios = self.solver_ratios()
        self.layer_widths = list(self.layer_widths) or solve_widths(
            self.width_schedule, self.n_layer, d, self.bottleneck_layer_ratio,
            self.bottleneck_width_ratio, math.lcm(self.width_multiple, 2 * n_head),
            ffn_width_ratio, self.n_kv_head / n_head, end_ratios)[0]
        assert len(self.layer_widths) == self.n_layer, (
            f"{len(self.layer_widths)} layer_widths for n_layer={self.n_layer}: give one per layer")
        for i, w in enumerate(self.layer_widths):
            assert w >= 1 and w % (2 * n_head) == 0, (
                f"layer {i}: width {w} must be a positive multiple of 2 * n_head = {2 * n_head}")
        m = self.hidden_multiple
        self.layers = [LayerSpec(n_head, self.n_kv_head, w // n_head,
                                 max(m, m * round(self.ffn_hidden * w / d / m)))
                       for w in self.layer_widths]
        super().__post_init__()

    def solver_ratios(self):
        """Appendix A's E (FFN parameters per w_l^2, over 3) and W_end's (e_in, e_out) per unit
        of width (None: the first QKV's and the last W_2's)."""
        return self.ffn_hidden / self.n_embd, None


# ----------------------------------------------------------------------------------------
# Appendix A: width schedules parameter-matched to the constant width d


def shape_factors(n_layer, bottleneck_layer, rate):
    """c_l(a^-), d_l = d_bar c_l, for the 1-indexed bottleneck layer l*."""
    L, k = n_layer, bottleneck_layer
    rate_after = rate ** (-(k - 1) / (L - k))  # a^+
    return [rate ** (l - 1) if l <= k else rate ** (k - 1) * rate_after ** (l - k)
            for l in range(1, L + 1)]


def matched_scale(factors, n_embd, ffn_width_ratio=4, kv_ratio=1.0, end_ratios=None):
    """d_bar solving the parameter match, W_end = e_in w_1 (w_1 - d) + e_out w_L (w_L - d)."""
    from scipy.optimize import brentq

    d, L = n_embd, len(factors)
    K = 2 + 2 * kv_ratio + 3 * ffn_width_ratio
    e_in, e_out = end_ratios or (1 + 2 * kv_ratio, ffn_width_ratio)

    S2 = sum(c * c for c in factors)

    def excess(scale):  # over the constant width's L K d^2; it grows with the scale
        w_1, w_L = scale * factors[0], scale * factors[-1]
        w_end = e_in * w_1 * max(w_1 - d, 0) + e_out * w_L * max(w_L - d, 0)
        return K * S2 * scale ** 2 - w_end - L * K * d * d

    high = 2 * d * math.sqrt(L * K / S2)  # excess >= S2 scale^2 - L K d^2 > 0 there
    return brentq(excess, 0, high, xtol=1e-15 * high)


def bottleneck_index(n_layer, bottleneck_layer_ratio):
    """l*, 1-indexed, strictly inside the stack."""
    if n_layer < 3:
        raise ValueError("an x shape needs n_layer >= 3 (a bottleneck strictly inside)")
    return min(max(round(bottleneck_layer_ratio * n_layer), 2), n_layer - 1)


def solve_widths(shape, n_layer, n_embd, bottleneck_layer_ratio=0.75, bottleneck_width_ratio=0.3,
                 width_multiple=32, ffn_width_ratio=4, kv_ratio=1.0, end_ratios=None):
    """(widths, the solver's unrounded widths, rate a^- and bottleneck layer l*)"""
    from scipy.optimize import brentq

    if shape not in ("constant", "x"):
        raise ValueError(f"width_schedule={shape!r}: choose 'x' or 'constant'")
    d, L = n_embd, n_layer
    if shape == "constant":
        return [d] * L, dict(unrounded=[float(d)] * L, rate=1.0, bottleneck_layer=None)
    k = bottleneck_index(L, bottleneck_layer_ratio)

    def bottleneck_excess(rate):  # b(a^-) - r_d d
        c = shape_factors(L, k, rate)
        width = matched_scale(c, d, ffn_width_ratio, kv_ratio, end_ratios) * c[k - 1]
        return width - bottleneck_width_ratio * d

    if bottleneck_excess(1e-6) * bottleneck_excess(1.0) > 0:
        raise ValueError(f"bottleneck_width_ratio={bottleneck_width_ratio} is out of reach of an "
                         f"x shape of {L} layers: it must be below 1")
    rate = brentq(bottleneck_excess, 1e-6, 1.0)
    c = shape_factors(L, k, rate)
    unrounded = [matched_scale(c, d, ffn_width_ratio, kv_ratio, end_ratios) * ci for ci in c]
    widths = [max(width_multiple, math.floor(w / width_multiple + 0.5) * width_multiple)
              for w in unrounded]
    return widths, dict(unrounded=unrounded, rate=rate, bottleneck_layer=k)


def layer_widths_of(model):
    return list(getattr(model.config, "layer_widths", [model.config.n_embd] * model.config.n_layer))


def param_summary(model):
    """param_counts() plus W_end ('endpoint') and Appendix A's count, budget() - W_end."""
    counts = dict(model.param_counts())
    counts["endpoint"] = model.endpoint_params() if hasattr(model, "endpoint_params") else 0
    counts["matched"] = model.budget() - counts["endpoint"]
    return counts


def matched_args(baseline_args):
    """A bare --model_type=variable_width: the x schedule, widths multiples of 2 n_head."""
    n_head = baseline_args.get("n_head", GPTConfig.n_head)
    return {**baseline_args, "width_schedule": "x", "width_multiple": 2 * n_head}


if __name__ == "__main__":
    from model import describe, model_from_command_line

    model = model_from_command_line(  # Table 1's 200M
        "variable_width", VariableWidthGPT, VariableWidthConfig, vocab_size=100277,
        block_size=4096, n_layer=16, n_embd=640, n_head=16, tie_embeddings=False)
    widths, counts = model.config.layer_widths, param_summary(model)
    print(f"widths: {widths} (mean {sum(widths) / len(widths):.1f}, D = {model.stream_width})")
    print(describe(model))
    print(f"Appendix A: W_end {counts['endpoint']:,} unused, matched {counts['matched']:,}")
