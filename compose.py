"""
Mechanisms composed: one model with a ><former or LWS schedule, hourglass FFNs and CEA attention.

The four shape papers change different parts of a transformer, so they stack (no paper stacks
them: composing is ours; each paper is cited in its own file, the last column):

    where in the model          what changes                         paper / file
    ------------------------    ---------------------------------    ----------------------
    the layer schedule          width w_l of layer l (one stream)    ><former, variable_width.py
                                or heads / FFN width of layer l      LWS, lws.py
    the FFN slot                K narrow sub-MLPs, eq. (3)           hourglass, hourglass.py
    the attention sublayer      an Inner-FFN on the context k/v      CEA, cea.py

A composed layer l is built from three choices, one per row:

    schedule   -> heads, kv heads, head_dim, W_l and width w_l of layer l
    FFN slot   -> K sub-blocks  x <- x + SwiGLU_k(n(x)), hidden rho W_l each   (K = 1: plain FFN)
    attention  -> CEA attention with an Inner-FFN of width K (1 - rho) W_l  (rho = 1: plain)

W_l is one FFN sub-block's hidden size before CEA's split (hourglass.py's d_h); CEA moves the share
1 - rho of the slot's FFN width K W_l inside attention, as cea.py does for one FFN (layer l's
ffn_hidden is rho W_l, its layer_inner_hidden K (1 - rho) W_l). The two schedules (each sets the
per-layer shape) do not compose; hourglass and CEA compose with either and with each other. In a
><former the bottleneck scales with the layer, d_h,l = round(d_h w_l / d), and `width_schedule` is
solved by Appendix A with this slot's FFN width ratio E = K d_h / d and its own endpoint count
W_end (ComposedConfig.end_ratios: only the last sub-block's rows past d are truncated; with CEA
only W_q and the Inner-FFN's input read the zero padding). The ><former's stream (VariableWidthGPT)
runs every composed model, so with the same seed (tests/test_compose.py checks the logits):

    composed(constant widths, K = 1, rho = 1)       == model.GPT            (bit for bit)
    composed(x widths, K = 1)                       == variable_width ><former
    composed(constant, K = 4, d_h)                  == hourglass.HourglassGPT
    composed(constant, rho = 0.125, W = 32 d)       == cea.CEAGPT (CEA)
    composed(LWS schedule)                          == lws.LWSGPT

Not composed: cea.py's MoE forms (their router and balancing loss stay there). Read on:
docs/compare.md (composing, W_end); shapes.py matches an hourglass ><former to a GPT's budget.

    python train.py --model_type=composed --model_args="{'width_schedule': 'x', \\
        'width_multiple': 8, 'n_sub_blocks': 4, 'bottleneck_dim': 40}"  # an hourglass ><former,
        # not matched (about half the GPT's budget): shapes.py matches one to a GPT
"""

from dataclasses import dataclass, field, replace

import cea
import hourglass
import lws
from model import AttentionSublayer, FFNSublayer, GPTConfig, LayerSpec, SwiGLU
import variable_width

# ----------------------------------------------------------------------------------------
# The composed model


class ComposedGPT(variable_width.VariableWidthGPT):
    """A ><former stream (constant widths: the plain GPT) whose layer l has the attention
    and FFN sublayers the config asks for, built at the layer's width w_l."""

    config: "ComposedConfig"

    def make_attention(self, layer_idx, spec):
        c = self.config
        width, inner = c.layer_widths[layer_idx], c.layer_inner_hidden[layer_idx]
        if inner == 0:
            return AttentionSublayer(width, spec, self.config)  # rho = 1: plain attention
        # built before the sublayer, as cea.py builds it first inside: same RNG order, same init
        return cea.CEAAttentionSublayer(width, spec, self.config, inner_ffn=SwiGLU(width, inner))

    def make_ffn(self, layer_idx, spec):
        c = self.config
        width, K, outer = c.layer_widths[layer_idx], c.n_sub_blocks, spec.ffn_hidden  # rho W_l
        if outer == 0:
            return cea.FFNSlot([])  # rho = 0: the whole FFN lives inside attention
        if K == 1:
            return FFNSublayer(width, outer, self.config)  # the plain FFN sublayer
        # eq. (3): K sub-blocks of width outer = rho W_l
        return hourglass.HourglassFFN(width, outer, K, self.config)

    def endpoint_params(self):
        """Appendix A's W_end for this composition, counted on the modules. First layer (w_1 > d):
        the input columns that read only the zero padding: all QKV rows with plain attention; with
        CEA W_q's rows and the Inner-FFN's W_1, W_3 (they read a = n(x)), but not W_k, W_v, which
        also read t = a + InnerFFN(a), nonzero past d. Last layer (w_L > d): the rows past d of
        the LAST sublayer only (an earlier sub-block's rows feed the sub-blocks after it): the last
        sub-block's W_u, or W_o when rho = 0 leaves the FFN slot empty."""
        d, widths = self.config.n_embd, self.config.layer_widths
        attn = self.blocks[0].attn
        if isinstance(attn, cea.CEAAttentionSublayer):
            cols = attn.q_dim + attn.inner_ffn.gate_up_proj.weight.size(0)
        else:
            cols = attn.attn.qkv_proj.weight.size(0)
        ffn, last_attn = self.blocks[-1].ffn, self.blocks[-1].attn
        if isinstance(ffn, hourglass.HourglassFFN):
            out = ffn.sub_blocks[-1].mlp.out_proj
        elif isinstance(ffn, FFNSublayer):
            out = ffn.mlp.out_proj
        else:  # rho = 0: the attention sublayer writes last
            cea_attention = isinstance(last_attn, cea.CEAAttentionSublayer)
            out = last_attn.out_proj if cea_attention else last_attn.attn.out_proj
        return cols * max(widths[0] - d, 0) + out.weight.size(1) * max(widths[-1] - d, 0)


@dataclass
class ComposedConfig(GPTConfig):
    """GPTConfig plus one choice per row of the table above. Its __post_init__ turns the schedule
    into explicit per-layer `layers`, `layer_widths` and `layer_inner_hidden`: each layer's
    ffn_hidden is rho W_l, the hidden size of each of its FFN sub-blocks (W_l: one sub-block's
    hidden size before CEA's split), and layer_inner_hidden its Inner-FFN's K (1 - rho) W_l.
    ffn_hidden (or bottleneck_dim) is W at width n_embd. Every default builds the plain GPT."""

    # the ><former schedule (variable_width.py): explicit widths, or Appendix A's solver
    layer_widths: list[int] = field(default_factory=list)  # w_l; empty: from width_schedule
    width_schedule: str = "constant"  # constant | x | diamond | v | lambda
    bottleneck_layer_ratio: float = 0.75  # r_l: the narrowest layer at r_l L
    bottleneck_width_ratio: float = 0.3  # r_d: its width r_d d
    width_multiple: int = 32  # widths rounded to a multiple of this (and of 2 n_head)
    # how a widening layer fills new coordinates (variable_width.EXPANSIONS)
    expansion: str = "carry"
    scale_init_by_width: bool = True  # the ><former's init rule; a no-op at w_l = d
    attention_multiplier: str = "sqrt"  # 'sqrt' (1/sqrt(head_dim)) or the reference's 'head_dim'
    # the LWS schedule (lws.py): beta (FFN) and alpha (attention) per layer
    ffn_scalars: list[float] | None = None
    qkv_scalars: list[float] | None = None
    framed: bool = False
    ffn_multiple: int = 256
    # the hourglass FFN (hourglass.py): K sub-blocks of hidden d_h
    n_sub_blocks: int = 1
    bottleneck_dim: int | None = None  # d_h at width n_embd (None: ffn_hidden or 4 n_embd)
    # CEA attention (cea.py): the FFN slot keeps rho of every sub-block's width
    outer_ratio: float = 1.0
    current_position: str = "direct"  # cea.CURRENT_POSITION_RULES
    attention_impl: str = "reference"  # cea.ATTENTION_IMPLS: the paper's softmax, or 'causal'
    # ours: round each ><former layer's d_h,l to a multiple (8 feeds a GPU's tensor cores)
    hidden_multiple: int = 1
    # derived: layer l's Inner-FFN hidden size K (1 - rho) W_l (0: plain attention)
    layer_inner_hidden: list[int] = field(default_factory=list, init=False)

    def __post_init__(self):
        assert self.bottleneck_dim is None or self.ffn_hidden in (None, self.bottleneck_dim), (
            f"ffn_hidden={self.ffn_hidden} and bottleneck_dim={self.bottleneck_dim} disagree: both "
            f"name the hidden size of one FFN sub-block; give one of them")
        is_former = bool(self.layer_widths) or self.width_schedule != "constant"
        is_lws = self.ffn_scalars is not None or self.qkv_scalars is not None
        assert not (is_former and is_lws), (
            "a ><former schedule (layer_widths / width_schedule) and an LWS schedule (ffn_scalars "
            "/ "
            "qkv_scalars) both set the per-layer shape and do not compose: pick one")
        assert self.n_sub_blocks >= 1, f"n_sub_blocks={self.n_sub_blocks}: K >= 1 sub-blocks"
        assert 0.0 <= self.outer_ratio <= 1.0, (
            f"outer_ratio={self.outer_ratio}: CEA's rho is the FFN slot's share, in [0, 1]")
        assert self.current_position in cea.CURRENT_POSITION_RULES, (
            f"current_position={self.current_position!r}: one of {cea.CURRENT_POSITION_RULES}")
        assert self.expansion in variable_width.EXPANSIONS, (
            f"expansion={self.expansion!r}: one of {', '.join(variable_width.EXPANSIONS)}")
        d, n_head = self.n_embd, self.n_head
        self.n_kv_head = self.n_kv_head or n_head
        self.ffn_hidden = hidden = self.bottleneck_dim or self.ffn_hidden or 4 * d  # W at width d
        if is_lws:
            assert self.ffn_scalars is not None and self.qkv_scalars is not None, (
                "an LWS schedule needs both ffn_scalars (beta) and qkv_scalars (alpha)")
            _, base_head_dim = lws.head_layout(d, n_head, self.n_kv_head, self.head_dim)
            self.layers = lws.layer_specs(d, self.n_layer, self.ffn_scalars, self.qkv_scalars,
                                          self.framed, base_head_dim, n_head // self.n_kv_head,
                                          self.ffn_multiple)
        elif is_former:
            assert self.head_dim is None or self.head_dim * n_head == d, (
                f"head_dim={self.head_dim}: a ><former keeps n_head heads of w_l / n_head")
            if not self.layer_widths:  # Appendix A, with this FFN slot's width ratio E = K d_h / d
                kv_ratio = self.n_kv_head / n_head
                self.layer_widths, _ = variable_width.solve_widths(
                    self.width_schedule, self.n_layer, d, self.bottleneck_layer_ratio,
                    self.bottleneck_width_ratio,
                    variable_width.width_rounding(self.width_multiple, n_head),
                    ffn_width_ratio=self.n_sub_blocks * hidden / d, kv_ratio=kv_ratio,
                    end_ratios=self.end_ratios())
            variable_width.check_widths(list(self.layer_widths), n_head)
            m = self.hidden_multiple
            self.layers = [LayerSpec(n_head, self.n_kv_head, w // n_head,
                                     max(m, m * round(hidden * w / d / m)))
                           for w in self.layer_widths]
        super().__post_init__()  # (each layer's ffn_hidden is W_l here, before CEA's split)
        variable_width.check_width_rules(self)
        self.layer_widths = list(self.layer_widths) or [d] * self.n_layer
        assert len(self.layer_widths) == self.n_layer, (
            f"{len(self.layer_widths)} layer_widths for {self.n_layer} layers: give one per layer")
        # CEA's split of W_l: the FFN slot's sub-blocks keep rho W_l, the Inner-FFN K (1 - rho) W_l
        sub_block_widths = [s.ffn_hidden for s in self.layers]  # W_l
        outer = [round(self.outer_ratio * w) for w in sub_block_widths]
        self.layer_inner_hidden = [self.n_sub_blocks * (w - o)
                                   for w, o in zip(sub_block_widths, outer)]
        self.layers = [replace(s, ffn_hidden=o) for s, o in zip(self.layers, outer)]

    def end_ratios(self):
        """Appendix A's W_end per unit of width, as ComposedGPT.endpoint_params counts it: (end_in,
        end_out) = the first layer's columns per padded coordinate / w_1 and the last sublayer's
        row length / w_L, for sub-blocks of hidden E_sub w each (E_sub = ffn_hidden / d, before
        CEA's split). variable_width.solve_widths subtracts it."""
        e_sub, rho = self.ffn_hidden / self.n_embd, self.outer_ratio
        inner = self.n_sub_blocks * (1 - rho) * e_sub  # the Inner-FFN's width / w
        # W_q (+ W_1, W_3) or W_q, W_k, W_v
        end_in = 1 + 2 * inner if rho < 1 else 1 + 2 * (self.n_kv_head / self.n_head)
        end_out = rho * e_sub if rho > 0 else 1.0  # the last sub-block's W_u, or W_o
        return end_in, end_out


def matched_args(baseline_args):
    """What a bare `--model_type=composed` trains: the hourglass ><former, i.e. hourglass FFNs
    matched to the plain GPT (hourglass.matched_args) on the ><former's x schedule solved against
    that hourglass (variable_width.matched_args's widths)."""
    return variable_width.matched_args(hourglass.matched_args(baseline_args))

