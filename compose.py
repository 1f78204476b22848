"""
Mechanisms composed: hourglass FFNs on a ><former's layer widths, one model.

The two shape papers change different parts of a transformer, so they stack (composing is ours):

    the layer schedule      width w_l of layer l (one stream)    ><former, variable_width.py
    the FFN slot            K narrow sub-MLPs, eq. (3)           hourglass, hourglass.py

Layer l's K sub-blocks have d_h,l = round(d_h w_l / d); Appendix A's widths are solved with
E = K d_h / d, and W_end's last W_2 is the last sub-block's. With constant widths it is the
hourglass GPT, with K = 1 the ><former, with both the plain GPT: their logits exactly.
"""

from dataclasses import dataclass

import hourglass
from model import FFNSublayer
import variable_width


class ComposedGPT(variable_width.VariableWidthGPT):
    """A ><former stream whose layer l's FFN slot is an hourglass FFN of width w_l."""

    config: "ComposedConfig"

    def make_ffn(self, layer_idx, spec):
        width, K = self.config.layer_widths[layer_idx], self.config.n_sub_blocks
        if K == 1:
            return FFNSublayer(width, spec.ffn_hidden, self.config)
        return hourglass.HourglassFFN(width, spec.ffn_hidden, K, self.config)


@dataclass
class ComposedConfig(variable_width.VariableWidthConfig):
    """The ><former's settings and the hourglass's, each named as in its own file; every default
    builds the plain GPT. ffn_hidden (or bottleneck_dim) is d_h at width n_embd."""

    width_schedule: str = "constant"
    n_sub_blocks: int = 1  # K
    bottleneck_dim: int | None = None  # d_h

    def __post_init__(self):
        assert self.bottleneck_dim is None or self.ffn_hidden in (None, self.bottleneck_dim), (
            f"ffn_hidden={self.ffn_hidden} and bottleneck_dim={self.bottleneck_dim} disagree: "
            f"give one of them")
        assert self.n_sub_blocks >= 1, f"n_sub_blocks={self.n_sub_blocks}: K >= 1 sub-blocks"
        self.ffn_hidden = self.bottleneck_dim or self.ffn_hidden
        super().__post_init__()

    def solver_ratios(self):
        """E = K d_h / d; W_end per unit of width: the first QKV's, the last sub-block's W_u."""
        e_sub = self.ffn_hidden / self.n_embd
        return self.n_sub_blocks * e_sub, (1 + 2 * self.n_kv_head / self.n_head, e_sub)


def matched_args(baseline_args):
    """A bare --model_type=composed: the matched hourglass on the x schedule solved against it."""
    return variable_width.matched_args(hourglass.matched_args(baseline_args))
