"""
FFN-Wider, the Combination Enhanced Architecture (an Inner-FFN inside attention) and Inner-MoE.

Paper: Xin Lu, Yanyan Zhao, Bing Qin, Liangyu Huo, Qing Yang, Dongliang Xu (NeurIPS 2024), "How
does Architecture Influence the Base Capabilities of Pre-trained Language Models? A Case Study
Based on FFN-Wider and MoE Transformers", arXiv:2403.02436.

The idea. Attention combines positions, the FFN transforms each alone. An FFN 8x wider
("FFN-Wider") at the same loss hurts out-of-distribution ability; moving part of it inside
attention, where it helps only through combination, restores it. With a = n(x) (section 5.1):

    t = a + InnerFFN(a)                                   the Inner-FFN                 (5.1.1)
    q_t = W_q a_t                                         queries never see the Inner-FFN
    k_s, v_s = W_k t_s, W_v t_s     for s < t             earlier positions: transformed
    k_t, v_t = W_k a_t, W_v a_t     at s = t              the direct pathway            (5.1.2)
    x' = x + W_o softmax_s<=t(q_t . k_s / sqrt(hd)) v_s   one softmax over both

rho splits the FFN width W: the FFN keeps rho W, the Inner-FFN (1 - rho) W; CEA is rho = 0.125
(section 6), rho = 1 FFN-Wider, exactly model.GPT. With MoE (section 7, C.2) the MoE moves
inside attention and the current position is masked (s < t only).

    python cea.py --n_embd=192 --outer_ratio=0.125     # a CEA shape: parameters and FLOPs
"""

import math
from dataclasses import dataclass, field, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import (GPT, CausalSelfAttention, GPTConfig, LayerSpec, RMSNorm, SwiGLU, linear_flops,
                   shape_counts)


class CEAAttentionSublayer(CausalSelfAttention):
    """x -> x + W_o Attn(a, t = a + InnerFFN(a)), a = n(x): a whole residual sublayer on
    model.CausalSelfAttention's projections, QK-norm and RoPE."""

    def __init__(self, dim, spec: LayerSpec, config: "CEAConfig", inner_ffn: nn.Module):
        super().__init__(dim, spec, config)
        self.current_position = config.current_position
        self.norm = RMSNorm(dim, config.norm_eps)
        self.inner_ffn = inner_ffn
        self.dropout = nn.Dropout(config.dropout)
        # the forward's order first: the order init_weights draws parameters in
        self._modules = {"norm": self.norm, "inner_ffn": self.inner_ffn, **self._modules}

    def forward(self, x):
        a = self.norm(x)
        t = a + self.inner_ffn(a)  # eq. (5.1.1)
        return x + self.dropout(self.out_proj(self.attend(a, t)))

    def attend(self, a, t):
        B, T, _ = a.shape
        W_q, W_kv = self.qkv_proj.weight.split([self.q_dim, 2 * self.kv_dim])
        q = self.heads(F.linear(a, W_q), self.q_norm)  # q_t = W_q a_t
        k, v = self.kv_heads(F.linear(t, W_kv))  # k_s, v_s = W_k t_s, W_v t_s
        if self.current_position == "direct":
            k_own, v_own = self.kv_heads(F.linear(a, W_kv))  # eq. (5.1.2)
            y = direct_pathway_attention(q, k, v, k_own, v_own)
        elif self.current_position == "masked":  # C.2: s < t only
            y = masked_current_attention(q, k, v)
        else:  # 'transformed', no direct pathway: causal over t
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               enable_gqa=self.n_kv_head != self.n_head)
        return y.transpose(1, 2).reshape(B, T, self.q_dim)

    def extra_flops(self, seq_len):
        if self.current_position != "direct":
            return super().extra_flops(seq_len)
        # W_k, W_v on a too; the scores at head dim hd + 1, padded to 8s
        width = self.head_dim // 8 * 8 + 8
        return 4 * self.qkv_proj.in_features * self.kv_dim + 4 * seq_len * self.n_head * width


def direct_pathway_attention(q, k_ctx, v_ctx, k_own, v_own):
    """The 'direct' softmax as one mask-free causal call: the own key a sink in front of the
    context shifted by one, its score in an extra head dimension:
        q'_t = [q_t, q_t.k_own_t]   k'_0 = v'_0 = e_hd   k'_s+1, v'_s+1 = [k_ctx_s, 0], [v_ctx_s, 0]
    so y'_t = [sum_s<t p_s v_ctx_s, p_own] and y_t = y'_t[:hd] + p_own v_own_t."""
    B, H, T, hd = q.shape
    group = H // k_own.size(1)
    k_own, v_own = k_own.repeat_interleave(group, dim=1), v_own.repeat_interleave(group, dim=1)
    width = hd // 8 * 8 + 8  # hd + 1, padded to a multiple of 8 for fast GPU kernels
    own_score = (q * k_own).sum(dim=-1, keepdim=True)
    q_ext = F.pad(torch.cat([q, own_score], dim=-1), (0, width - hd - 1))
    q_ext = q_ext * math.sqrt(width / hd)  # SDPA scales by 1/sqrt(width); keep q.k/sqrt(hd)
    sink = F.pad(q.new_ones(B, k_ctx.size(1), 1, 1), (hd, width - hd - 1))
    k_ext = torch.cat([sink, F.pad(k_ctx[:, :, :-1], (0, width - hd))], dim=2)
    v_ext = torch.cat([sink, F.pad(v_ctx[:, :, :-1], (0, width - hd))], dim=2)
    y = F.scaled_dot_product_attention(q_ext, k_ext, v_ext, is_causal=True, enable_gqa=group > 1)
    return y[..., :hd] + y[..., hd:hd + 1] * v_own


def masked_current_attention(q, k_ctx, v_ctx):
    """Query t over keys s < t; position 0 sees none and gets zeros."""
    if q.size(2) == 1:  # position 0 alone: no query left for SDPA
        return torch.zeros_like(q)
    later = F.scaled_dot_product_attention(q[:, :, 1:], k_ctx[:, :, :-1], v_ctx[:, :, :-1],
                                           is_causal=True, enable_gqa=q.size(1) != k_ctx.size(1))
    return torch.cat([torch.zeros_like(q[:, :, :1]), later], dim=2)


# ----------------------------------------------------------------------------------------
# Top-1 mixture of experts (section 7), routed as the Switch Transformer


def load_balancing_loss(router_probs, expert_index, n_experts):
    """E sum_i f_i P_i (f_i: expert i's share of tokens, P_i: its mean probability)"""
    f = F.one_hot(expert_index, n_experts).to(router_probs.dtype).mean(dim=0)
    return n_experts * (f * router_probs.mean(dim=0)).sum()


class TopOneMoE(nn.Module):
    """Each token to its router's first SwiGLU expert, scaled by that probability. Every expert
    runs on every token: fixed shapes, no host sync."""

    def __init__(self, dim, n_experts, expert_hidden):
        super().__init__()
        self.n_experts = n_experts
        self.router = nn.Linear(dim, n_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(dim, expert_hidden) for _ in range(n_experts))
        self.balancing_loss = None  # of the last forward pass

    def forward(self, x):
        flat = x.reshape(-1, x.size(-1))
        probs = F.softmax(self.router(flat).float(), dim=-1)
        gate, expert_index = probs.max(dim=-1)
        self.balancing_loss = load_balancing_loss(probs, expert_index, self.n_experts)
        every = torch.stack([expert(flat) for expert in self.experts])  # (E, N, C)
        chosen = every[expert_index, torch.arange(flat.size(0), device=x.device)]
        return (chosen * gate[:, None]).to(x.dtype).view_as(x)

    def extra_flops(self, seq_len):  # a token's FLOPs are its one expert's, not every expert's
        return -(self.n_experts - 1) * linear_flops(self.experts[0])


class MoESublayer(nn.Module):
    """The MoE baseline's sublayer before the FFN: x -> x + MoE(n(x))."""

    def __init__(self, dim, config: "CEAConfig"):
        super().__init__()
        self.norm = RMSNorm(dim, config.norm_eps)
        self.moe = TopOneMoE(dim, config.n_experts, config.expert_hidden)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return x + self.dropout(self.moe(self.norm(x)))


# ----------------------------------------------------------------------------------------
# The model


CURRENT_POSITIONS = ("direct", "masked", "transformed")  # 5.1.2, C.2, no direct pathway


@dataclass
class CEAConfig(GPTConfig):
    """Each layer's ffn_hidden is the Outer-FFN's rho W."""
    ffn_width_ratio: int = 32  # W / d when ffn_hidden is not given: 32 FFN-Wider, 4 vanilla
    outer_ratio: float = 1.0  # rho: 1.0 FFN-Wider, 0.125 CEA
    current_position: str = "direct"
    n_experts: int = 0  # > 0: a top-1 MoE of SwiGLU experts
    expert_hidden: int = 0  # 0: d
    moe_place: str = "before_ffn"  # 'before_ffn' (the MoE baseline) or 'inner'
    balance_coef: float = 0.01
    inner_hidden: int = field(default=0, init=False)  # (1 - rho) W

    def __post_init__(self):
        assert 0 <= self.outer_ratio <= 1, f"outer_ratio={self.outer_ratio}: a share, in [0, 1]"
        assert self.current_position in CURRENT_POSITIONS, (
            f"current_position={self.current_position!r}: one of {CURRENT_POSITIONS}")
        assert self.moe_place in ("before_ffn", "inner"), f"moe_place={self.moe_place!r}"
        width = self.ffn_hidden or self.ffn_width_ratio * self.n_embd
        outer = round(self.outer_ratio * width)
        self.inner_hidden = width - outer
        assert not (self.n_experts and self.inner_hidden), (
            f"n_experts={self.n_experts}: a MoE keeps outer_ratio=1.0, moe_place='inner' moves it")
        self.expert_hidden = self.expert_hidden or self.n_embd
        super().__post_init__()
        self.layers = [replace(s, ffn_hidden=outer) for s in self.layers]


class CEAGPT(GPT):
    """model.GPT with CEA attention and MoE slots. In training the loss adds balance_coef x the
    MoE balancing losses."""

    config: CEAConfig
    aux_loss = None  # the weighted balancing loss of the last forward, detached

    def make_attention(self, layer_idx, spec):
        c = self.config
        if c.n_experts and c.moe_place == "inner":
            inner_ffn = TopOneMoE(c.n_embd, c.n_experts, c.expert_hidden)  # Inner-MoE (7)
        elif c.inner_hidden:
            inner_ffn = SwiGLU(c.n_embd, c.inner_hidden)  # width (1 - rho) W
        else:
            return super().make_attention(layer_idx, spec)
        return CEAAttentionSublayer(c.n_embd, spec, c, inner_ffn)

    def make_ffn(self, layer_idx, spec):
        c = self.config
        if c.n_experts and c.moe_place == "before_ffn":  # the MoE baseline
            return nn.Sequential(MoESublayer(c.n_embd, c), super().make_ffn(layer_idx, spec))
        # FFN-Wider is model.GPT; rho = 0 leaves no FFN outside attention
        return super().make_ffn(layer_idx, spec) if spec.ffn_hidden else nn.Sequential()

    def forward(self, idx, targets=None):
        logits, loss = super().forward(idx, targets)
        if self.config.n_experts:
            moes = [m for m in self.modules() if isinstance(m, TopOneMoE)]
            weighted = self.config.balance_coef * sum(m.balancing_loss for m in moes)
            self.aux_loss = weighted.detach()
            if loss is not None and self.training:
                loss = loss + weighted
        return logits, loss


def match_ffn_wider(baseline, ffn_width_ratio=32, multiple=8, head_dim_multiple=2):
    """FFN-Wider keywords at the baseline's budget: the d whose matched W (a multiple) makes W / d
    closest to ffn_width_ratio."""
    target = shape_counts(GPT, GPTConfig(**baseline))["budget"]
    shape = {k: v for k, v in baseline.items() if k not in ("n_embd", "head_dim", "ffn_hidden")}
    candidates = []
    step = head_dim_multiple * baseline["n_head"]
    for d in range(step, baseline["n_embd"] + 1, step):
        def count(width):  # linear in W
            return shape_counts(GPT, GPTConfig(**shape, n_embd=d, ffn_hidden=width))["budget"]
        per_unit = (count(2 * multiple) - count(multiple)) / multiple
        units = round((target - count(multiple)) / per_unit / multiple + 1)
        candidates.append(dict(shape, n_embd=d, ffn_hidden=multiple * max(1, units),
                               outer_ratio=1.0))
    return min(candidates, key=lambda c: abs(c["ffn_hidden"] / c["n_embd"] - ffn_width_ratio))


def matched_args(baseline):
    return {**match_ffn_wider(baseline), "outer_ratio": 0.125}



if __name__ == "__main__":
    from model import describe, model_from_command_line

    print(describe(model_from_command_line("cea", CEAGPT, CEAConfig, outer_ratio=0.125)))
