"""
Mechanisms composed: one model with a ><former or LWS schedule, hourglass FFNs and CEA attention.

The shape papers change different parts of a transformer, so they stack (composing is ours):

    the layer schedule      width w_l of layer l (one stream)    ><former, variable_width.py
                            or heads / FFN width of layer l      LWS, lws.py
    the FFN slot            K narrow sub-MLPs, eq. (3)           hourglass, hourglass.py
    the attention sublayer  an Inner-FFN on the context k/v      CEA, cea.py

W_l, a sub-block's hidden size, is split by CEA: K sub-blocks of rho W_l, an Inner-FFN of
K (1 - rho) W_l. In a ><former d_h,l = round(d_h w_l / d), widths solved with E = K d_h / d.
The two schedules do not compose. At their settings the logits are each single mechanism's.
"""

from dataclasses import dataclass, field, replace

import torch.nn as nn

import cea
import hourglass
import lws
from model import AttentionSublayer, FFNSublayer, GPTConfig, SwiGLU
import variable_width


class ComposedGPT(variable_width.VariableWidthGPT):
    """A ><former stream whose layer l has the sublayers the config asks for, at width w_l."""

    config: "ComposedConfig"

    def make_attention(self, layer_idx, spec):
        c = self.config
        width, inner = c.layer_widths[layer_idx], c.layer_inner_hidden[layer_idx]
        if inner == 0:
            return AttentionSublayer(width, spec, self.config)
        return cea.CEAAttentionSublayer(width, spec, self.config, SwiGLU(width, inner))

    def make_ffn(self, layer_idx, spec):
        c = self.config
        width, K, outer = c.layer_widths[layer_idx], c.n_sub_blocks, spec.ffn_hidden  # rho W_l
        if outer == 0:
            return nn.Sequential()  # the whole FFN inside attention
        if K == 1:
            return FFNSublayer(width, outer, self.config)
        return hourglass.HourglassFFN(width, outer, K, self.config)

    def padding_readers(self):  # with CEA: W_q and the Inner-FFN's input (W_k, W_v read t)
        attn = self.blocks[0].attn
        if isinstance(attn, cea.CEAAttentionSublayer):
            return attn.q_dim + attn.inner_ffn.gate_up_proj.out_features
        return super().padding_readers()


@dataclass
class ComposedConfig(variable_width.VariableWidthConfig):
    """One choice per row of the table above, each named as in its own file; every default
    builds the plain GPT. ffn_hidden (or bottleneck_dim) is W at width n_embd."""

    width_schedule: str = "constant"  # the ><former's settings are its own
    # the LWS schedule (lws.py)
    ffn_scalars: list[float] | None = None
    qkv_scalars: list[float] | None = None
    framed: bool = False
    ffn_multiple: int = 256
    # the hourglass FFN (hourglass.py)
    n_sub_blocks: int = 1
    bottleneck_dim: int | None = None
    # CEA attention (cea.py)
    outer_ratio: float = 1.0
    current_position: str = "direct"
    layer_inner_hidden: list[int] = field(default_factory=list, init=False)  # K (1 - rho) W_l

    def __post_init__(self):
        assert self.bottleneck_dim is None or self.ffn_hidden in (None, self.bottleneck_dim), (
            f"ffn_hidden={self.ffn_hidden} and bottleneck_dim={self.bottleneck_dim} disagree: both "
            f"name the hidden size of one FFN sub-block; give one of them")
        assert self.n_sub_blocks >= 1, f"n_sub_blocks={self.n_sub_blocks}: K >= 1 sub-blocks"
        cea.check_attention_settings(self)
        self.ffn_hidden = self.bottleneck_dim or self.ffn_hidden
        if self.ffn_scalars is None and self.qkv_scalars is None:
            super().__post_init__()  # the ><former's widths, or the constant width d
        else:
            assert not self.layer_widths and self.width_schedule == "constant", (
                "a ><former schedule (layer_widths / width_schedule) and an LWS schedule "
                "(ffn_scalars / qkv_scalars) both set the per-layer shape and do not compose")
            assert self.ffn_scalars is not None and self.qkv_scalars is not None, (
                "an LWS schedule needs both ffn_scalars (beta) and qkv_scalars (alpha)")
            self.n_kv_head, head_dim = lws.head_layout(self.n_embd, self.n_head, self.n_kv_head,
                                                       self.head_dim)
            self.layers = lws.layer_specs(self.n_embd, self.n_layer, self.ffn_scalars,
                                          self.qkv_scalars, self.framed, head_dim,
                                          self.n_head // self.n_kv_head, self.ffn_multiple)
            GPTConfig.__post_init__(self)
            self.layer_widths = [self.n_embd] * self.n_layer
        sub_block_widths = [s.ffn_hidden for s in self.layers]  # W_l, before CEA's split
        outer = [round(self.outer_ratio * w) for w in sub_block_widths]
        self.layer_inner_hidden = [self.n_sub_blocks * (w - o)
                                   for w, o in zip(sub_block_widths, outer)]
        self.layers = [replace(s, ffn_hidden=o) for s, o in zip(self.layers, outer)]

    def solver_ratios(self):
        """E = K W / d, and W_end per unit of width as ComposedGPT.endpoint_params counts it."""
        e_sub, rho = self.ffn_hidden / self.n_embd, self.outer_ratio
        inner = self.n_sub_blocks * (1 - rho) * e_sub
        end_in = 1 + 2 * inner if rho < 1 else 1 + 2 * (self.n_kv_head / self.n_head)
        end_out = rho * e_sub if rho > 0 else 1.0
        return self.n_sub_blocks * e_sub, (end_in, end_out)


def matched_args(baseline_args):
    """A bare --model_type=composed: the matched hourglass on the x schedule solved against it."""
    return variable_width.matched_args(hourglass.matched_args(baseline_args))
