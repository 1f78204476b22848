"""
FFN-Wider, the Combination Adjustable / Enhanced Architecture (an Inner-FFN inside
attention) and Inner-MoE.

Paper: Xin Lu, Yanyan Zhao, Bing Qin, Liangyu Huo, Qing Yang, Dongliang Xu,
"How does Architecture Influence the Base Capabilities of Pre-trained Language Models?
A Case Study Based on FFN-Wider and MoE Transformers" (NeurIPS 2024). There is no public
code: the paper's sections 3-7 and appendix C.2 are the spec, and where they are silent
the choice made here is named below.

The idea, for a learner
-----------------------
Attention *combines* positions; the FFN *transforms* each position on its own. Making
the FFN 8x wider ("FFN-Wider": hidden 32 d instead of 4 d) and training to the same loss
hurts out-of-distribution ability: the wide FFN does more of the work alone, so the share
done by combination drops (section 4.2, the Token Prediction contribution ratio, measured
by experiments/cea_contribution.py).

The fix moves part of the FFN *inside* attention, where it can only help through
combination (section 5, the Combination Adjustable Architecture, CAA). With a = n(x):

    t = a + InnerFFN(a)                                   Inner-FFN (5.1.1)
    q_t = W_q a_t                                         queries never see the Inner-FFN
    k_s, v_s = W_k t_s, W_v t_s        for s < t          context keys/values are transformed
    k_t, v_t = W_k a_t, W_v a_t        at s = t           the direct pathway (5.1.2)
    x_new = x + W_o softmax(q_t . k_s / sqrt(hd) over s <= t) v_s

A position's own Inner-FFN output reaches the output only through *another* position
(without the direct pathway v(t_t) carries it through: the "w/o Direct Pathway"
ablation). The outer ratio rho splits the FFN width W: the FFN sublayer keeps rho W (the
Outer-FFN), the Inner-FFN gets (1 - rho) W. CEA (section 6) is CAA at rho = 12.5 % for
GPT. For MoE models (section 7, C.2) the MoE layer before the FFN moves inside attention
as an Inner-MoE, and the direct pathway is simplified to *masking the current position*.
(The paper has no numbered equations; the lines above are its sections 5.1.1 / 5.1.2.)

What this file implements
-------------------------
- `build_model(...)`: every model of the paper. W = ffn_hidden or ffn_mult * n_embd (32:
  FFN-Wider, 4: vanilla); outer_ratio=1.0 is exactly FFN-Wider (model.GPT's sublayers, same
  logits), 0.125 is CEA; current_position 'direct' (5.1.2), 'masked' (C.2), 'transformed'
  (ablation); n_experts > 0 adds a top-1 MoE before the FFN (moe_place='before_ffn', the
  MoE baseline) or inside attention ('inner', MoE w/ CEA). While training, CEAGPT.forward
  returns the LM loss + balance_coef x the balancing loss (train.py optimises it unchanged);
  in eval mode the plain LM loss; `model.aux_loss` is the added term (train.py logs it).
- The modules below; `param_split` (parameters by role), `match_ffn_hidden` (W matching a baseline).

Every choice, and whose it is (no public code exists, so "the paper" or "ours")
----------------------------------------------------------------------------
- Inner-FFN reads attention's input, adds back residually (t = a + InnerFFN(a)), keys/values
  of earlier positions from t, query from a, the current position's key/value from a: the paper
  (5.1.1, 5.1.2, Figure 5). Outer ratio rho of one total width W; CEA rho = 12.5 % for GPT:
  the paper (6.1). C.2's masked current position for the Inner-MoE: the paper.
- Base model: ours - the repo's pre-norm LLaMA-style GPT (RMSNorm, RoPE, SwiGLU, no biases),
  not the paper's post-LN GPT with GELU (C.1; C.2's backbone has RoPE + RMSNorm like ours). So
  "32x" is a SwiGLU hidden size of 32 d (3 matrices) and counts are ~1.5x the paper's.
- Inner-FFN as a SwiGLU with no norm of its own, reading a = n(x): ours (the figure places none).
- Attention paths (`attention_impl`, ours; equal to float rounding, tested). 'causal', the default:
  every rule on the ordinary causal SDPA call, no mask (flash kernels on a GPU): 'masked' attends
  keys/values shifted by one (what C.2 simplified it for); the exact direct pathway puts a_t's key
  before that shifted context as a "sink" whose score each query carries in an extra head dimension
  (`direct_pathway_attention`). 'reference', the readable form: ONE softmax over [W_k t_1..T |
  W_k a_1..T] (2T keys, a dense (T, 2T) boolean mask). FLOPs count what runs, as torch's
  flop_counter does (2T keys at head dim hd, or T keys at hd + 1 padded to a multiple of 8). CEA /
  FFN-Wider tokens/s, compiled fp32, CPU preset, AMD EPYC (AVX2): reference 0.89x, default 0.97x.
- Masked variant at position 0 (nothing earlier): output defined as zero: ours (C.2 is silent).
- KV cache (generation): per position the keys/values of t, what later positions attend to
  (2 n_kv_head hd per layer, model.kv_cache_bytes_per_token); a new position's own key/value
  come from a ('direct'), are t's ('transformed') or are absent ('masked').
- MoE: Switch-Transformer top-1 routing, expert output x router probability, no capacity limit,
  no token dropping, balancing loss E sum_i f_i P_i with weight 0.01, added only while training:
  ours (the paper used fastmoe and gives none of these). 64 experts, top-1, before the FFN,
  expert hidden d (the default of `expert_hidden`): the paper (C.2). Experts are SwiGLU (3
  matrices): ours, so C.2's shape has 21.2B parameters here, not 14B (2-matrix experts).
- The baseline's MoE sublayer has its own RMSNorm and residual: ours; the Inner-MoE reads
  attention's normed input, so it has d parameters fewer per layer (same matrices, active
  parameters and FLOPs). FLOPs count the router and ONE expert.
- Dense MoE dispatch, ours: each expert runs on every token, keeps its routed rows. Exact, fixed
  shapes, no host sync or graph break, a (zero) gradient for an expert without tokens (DDP needs
  one), at E x one expert's FLOPs: fine for our few experts; for many, sort + F.grouped_mm.
- Measurement choices (equal-loss protocol, texts, MI settings): experiments/cea_*.py, docs/cea.md.

Run it (every command, with measured results: docs/cea.md)
----------------------------------------------------------
    python cea.py                          # shape table + parameter split of CEA, the paper's H=768 GPT
    python cea.py --ffn_mult=4 --outer_ratio=1.0 --n_experts=64 --moe_place=inner --current_position=masked
    python experiments/cea_outer_ratio_sweep.py --ratios=1.0,0.125   # the paper's small GPT, equal loss, CPU
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import (GPT, FFNSublayer, GPTConfig, LayerSpec, RMSNorm, SwiGLU, apply_rope, causal_attention, describe,
                   linear_flops, rope_tables)

CURRENT_POSITION_RULES = ("direct", "masked", "transformed")
ATTENTION_IMPLS = ("causal", "reference")  # the fast paths (default), the one-SDPA dense-mask form


@dataclass
class CEAConfig(GPTConfig):
    """GPTConfig plus the CEA settings. `layers[i].ffn_hidden` is the Outer-FFN width."""

    inner_hidden: int = 0  # (1 - rho) W: Inner-FFN width (0: no Inner-FFN)
    current_position: str = "direct"  # 'direct' | 'masked' | 'transformed'
    attention_impl: str = "causal"  # 'causal' (no mask, fast kernels) | 'reference' (one SDPA, dense mask)
    n_experts: int = 0  # 0: no MoE
    expert_hidden: int = 0  # SwiGLU hidden size of one expert
    moe_place: str = "before_ffn"  # 'before_ffn' (MoE baseline) or 'inner' (MoE w/ CEA)
    balance_coef: float = 0.01


# ----------------------------------------------------------------------------------------
# Top-1 mixture of experts


def load_balancing_loss(router_probs, expert_index, n_experts):
    """Switch Transformer's auxiliary loss E * sum_i f_i P_i: f_i = fraction of tokens sent
    to expert i, P_i = mean router probability of i. Equals 1 for uniform routing.
    router_probs: (N, E); expert_index: (N,)."""
    experts = torch.arange(n_experts, device=expert_index.device)
    f = (expert_index[:, None] == experts).to(router_probs.dtype).mean(dim=0)  # (E,), one-hot counts: no bincount
    P = router_probs.mean(dim=0)  # (E,)
    return n_experts * (f * P).sum()


class TopOneMoE(nn.Module):
    """n_experts SwiGLU experts; each token goes to the one its router ranks first, scaled by that
    router probability. No norm, no residual. Dense dispatch (see the docstring)."""

    def __init__(self, dim, n_experts, expert_hidden):
        super().__init__()
        self.n_experts = n_experts
        self.router = nn.Linear(dim, n_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(dim, expert_hidden) for _ in range(n_experts))
        self.aux_loss = None  # the balancing loss of the last forward pass

    def forward(self, x):  # (B, T, C) -> (B, T, C)
        flat = x.reshape(-1, x.size(-1))  # (N, C)
        probs = F.softmax(self.router(flat).float(), dim=-1)  # (N, E)
        gate, expert_index = probs.max(dim=-1)  # (N,), (N,)
        self.aux_loss = load_balancing_loss(probs, expert_index, self.n_experts)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):  # a loop over experts, not over tokens
            routed_here = (expert_index == e)[:, None]  # (N, 1)
            out = torch.where(routed_here, (expert(flat) * gate[:, None]).to(out.dtype), out)
        return out.view_as(x)

    def flops_per_token(self):
        return linear_flops(self.router) + linear_flops(self.experts[0])  # active experts only (top-1)


class MoESublayer(nn.Module):
    """The MoE baseline's extra residual sublayer: x -> x + MoE(n(x))."""

    def __init__(self, dim, config: CEAConfig):
        super().__init__()
        self.norm = RMSNorm(dim, config.norm_eps)
        self.moe = TopOneMoE(dim, config.n_experts, config.expert_hidden)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return x + self.dropout(self.moe(self.norm(x)))

    def flops_per_token(self, seq_len):
        return self.moe.flops_per_token()


class FFNSlot(nn.Module):
    """The FFN slot of a layer as a list of residual sublayers run in order: [] (rho = 0,
    no Outer-FFN), [FFN], or [MoE, FFN] for the MoE baseline."""

    def __init__(self, sublayers):
        super().__init__()
        self.sublayers = nn.ModuleList(sublayers)

    def forward(self, x):
        for sublayer in self.sublayers:
            x = sublayer(x)
        return x

    def flops_per_token(self, seq_len):
        return sum(s.flops_per_token(seq_len) for s in self.sublayers)


# ----------------------------------------------------------------------------------------
# Attention with an Inner-FFN (CAA / CEA)


def direct_pathway_attention(q, k_ctx, v_ctx, k_own, v_own, pos=0):
    """The exact direct pathway (5.1.2), ONE softmax over [q_t.k_ctx_s for s < t] and q_t.k_own_t,
    as one causal SDPA call with no mask: the own key is a "sink" in front of the context shifted
    by one, seen by every query, its score q_t.k_own_t carried by an extra head dimension j = hd:
        q'_t = [q_t, q_t.k_own_t]    k'_0 = v'_0 = e_j    k'_s+1, v'_s+1 = [k_ctx_s, 0], [v_ctx_s, 0]
    so y'_t = [sum_s<t p_s v_ctx_s, p_own] and y_t = y'_t[:hd] + p_own v_own_t. q: (B, H, T, hd)
    at positions pos..; k_ctx, v_ctx: (B, Hkv, pos+T, hd) (a cache's and the new); k_own, v_own: (B, Hkv, T, hd)."""
    B, H, T, hd = q.shape
    group = H // k_own.size(1)  # query heads per KV head (GQA)
    k_own, v_own = k_own.repeat_interleave(group, dim=1), v_own.repeat_interleave(group, dim=1)  # (B, H, T, hd)
    width = (hd // 8 + 1) * 8  # hd + 1, padded to a multiple of 8 (the alignment fast GPU kernels want)
    own_score = (q * k_own).sum(dim=-1, keepdim=True)  # (B, H, T, 1)
    q_ext = F.pad(torch.cat([q, own_score], dim=-1), (0, width - hd - 1))  # (B, H, T, width)
    q_ext = q_ext * math.sqrt(width / hd)  # SDPA scales by 1/sqrt(width); the scores must stay q.k/sqrt(hd)
    sink = F.pad(q.new_ones(B, k_ctx.size(1), 1, 1), (hd, width - hd - 1))  # (B, Hkv, 1, width): e_j
    k_ext = torch.cat([sink, F.pad(k_ctx[:, :, :-1], (0, width - hd))], dim=2)  # (B, Hkv, pos+T, width)
    v_ext = torch.cat([sink, F.pad(v_ctx[:, :, :-1], (0, width - hd))], dim=2)
    y = causal_attention(q_ext, k_ext, v_ext, pos, enable_gqa=group > 1)  # (B, H, T, width)
    return y[..., :hd] + y[..., hd:hd + 1] * v_own  # (B, H, T, hd)


def masked_current_attention(q, k_ctx, v_ctx, pos=0):
    """C.2's masked current position: query t sees only s < t, i.e. causal attention over the
    keys/values shifted by one position. Position 0 has nothing to see: its output is defined 0."""
    gqa = q.size(1) != k_ctx.size(1)
    k_shifted, v_shifted = k_ctx[:, :, :-1], v_ctx[:, :, :-1]  # key s now sits at position s + 1
    if pos > 0:
        return causal_attention(q, k_shifted, v_shifted, pos - 1, enable_gqa=gqa)
    later = causal_attention(q[:, :, 1:], k_shifted, v_shifted, enable_gqa=gqa) if q.size(2) > 1 else q[:, :, 1:]
    return torch.cat([torch.zeros_like(q[:, :, :1]), later], dim=2)  # (B, H, T, hd)


class CEAAttentionSublayer(nn.Module):
    """x -> x + W_o Attn(q from a, context k/v from t = a + InnerFFN(a)), a = n(x); the current
    position's key/value follow `current_position`, the kernels `attention_impl` (see the docstring)."""

    def __init__(self, dim, spec: LayerSpec, config: CEAConfig, inner_ffn: nn.Module | None = None):
        """inner_ffn: the module of t = a + InnerFFN(a); default from the config (an Inner-FFN of
        width config.inner_hidden, or the Inner-MoE). compose.py passes its own."""
        super().__init__()
        self.current_position = config.current_position
        self.attention_impl = getattr(config, "attention_impl", "causal")  # compose.py's config may not set it
        if self.current_position not in CURRENT_POSITION_RULES or self.attention_impl not in ATTENTION_IMPLS:
            raise ValueError(f"current_position={self.current_position!r}, attention_impl={self.attention_impl!r}: "
                             f"use one of {CURRENT_POSITION_RULES} and one of {ATTENTION_IMPLS}")
        self.n_head, self.n_kv_head, self.head_dim = spec.n_head, spec.n_kv_head, spec.head_dim
        self.q_dim, self.kv_dim = spec.n_head * spec.head_dim, spec.n_kv_head * spec.head_dim
        self.norm = RMSNorm(dim, config.norm_eps)
        if inner_ffn is not None:
            self.inner_ffn = inner_ffn
        elif config.n_experts and config.moe_place == "inner":
            self.inner_ffn = TopOneMoE(dim, config.n_experts, config.expert_hidden)  # Inner-MoE (section 7)
        else:
            self.inner_ffn = SwiGLU(dim, config.inner_hidden)  # Inner-FFN, width (1 - rho) W
        # W_q, W_k, W_v fused as in model.CausalSelfAttention; W_k, W_v also read t.
        self.qkv_proj = nn.Linear(dim, self.q_dim + 2 * self.kv_dim, bias=False)
        self.out_proj = nn.Linear(self.q_dim, dim, bias=False)  # W_o
        self.qk_norm, self.q_norm, self.k_norm = config.qk_norm, None, None
        if config.qk_norm:
            q_size, k_size = (spec.head_dim, spec.head_dim) if config.qk_norm == "head" else (self.q_dim, self.kv_dim)
            self.q_norm, self.k_norm = RMSNorm(q_size, config.norm_eps), RMSNorm(k_size, config.norm_eps)
        cos, sin = rope_tables(spec.head_dim, config.block_size, config.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.dropout = nn.Dropout(config.dropout)

    def _rotated(self, x, n_heads, qk_norm, pos):
        """(B, T, n_heads*hd) -> QK-normed, rotated at positions pos..pos+T-1: (B, n_heads, T, hd)."""
        B, T, _ = x.shape
        if self.qk_norm == "full":
            x = qk_norm(x)
        x = x.view(B, T, n_heads, self.head_dim).transpose(1, 2)
        if self.qk_norm == "head":
            x = qk_norm(x)
        return apply_rope(x, self.rope_cos[pos:pos + T], self.rope_sin[pos:pos + T])

    def _queries(self, q, pos=0):  # (B, T, H*hd) -> (B, H, T, hd)
        return self._rotated(q, self.n_head, self.q_norm, pos)

    def _keys(self, k, pos=0):  # (B, T, Hkv*hd) -> (B, Hkv, T, hd); both key sets at the same positions
        return self._rotated(k, self.n_kv_head, self.k_norm, pos)

    def _values(self, v):
        return v.view(v.size(0), v.size(1), self.n_kv_head, self.head_dim).transpose(1, 2)  # (B, Hkv, T, hd)

    def attend(self, a, t, cache=None):
        """Attention output (B, T, H*hd), before W_o, from a and t (B, T, C) at positions pos..pos+T-1
        (pos = cache.length, 0 without a cache). The cache keeps t's keys/values (what later positions see)."""
        B, T, _ = a.shape
        pos = 0 if cache is None else cache.length
        W_q, W_kv = self.qkv_proj.weight.split([self.q_dim, 2 * self.kv_dim], dim=0)
        k_t, v_t = F.linear(t, W_kv).split(self.kv_dim, dim=-1)  # context keys/values from t (5.1.1)
        k_ctx, v_ctx = self._keys(k_t, pos), self._values(v_t)  # (B, Hkv, T, hd)
        if cache is not None:
            k_ctx, v_ctx = cache.append(k_ctx, v_ctx)  # (B, Hkv, pos + T, hd): every position so far
        if self.current_position == "direct":
            q, k_a, v_a = self.qkv_proj(a).split([self.q_dim, self.kv_dim, self.kv_dim], dim=-1)
            q, k_own, v_own = self._queries(q, pos), self._keys(k_a, pos), self._values(v_a)  # direct pathway (5.1.2)
        else:
            q, k_own, v_own = self._queries(F.linear(a, W_q), pos), None, None
        if self.current_position == "transformed":  # w/o direct pathway: plain causal attention over t
            y = causal_attention(q, k_ctx, v_ctx, pos, enable_gqa=self.n_kv_head != self.n_head)
        elif self.attention_impl == "reference":
            y = self.reference_attention(q, k_ctx, v_ctx, k_own, v_own, pos)
        elif self.current_position == "direct":
            y = direct_pathway_attention(q, k_ctx, v_ctx, k_own, v_own, pos)
        else:
            y = masked_current_attention(q, k_ctx, v_ctx, pos)
        return y.transpose(1, 2).reshape(B, T, self.q_dim)  # (B, T, H*hd)

    def reference_attention(self, q, k_ctx, v_ctx, k_own, v_own, pos):
        """The readable form, one SDPA call with a boolean mask. 'direct': ONE softmax over 2T keys
        [from t | from a], s < t allowed in the first half, s = t in the second; 'masked': s < t."""
        T, S, gqa = q.size(2), k_ctx.size(2), self.n_kv_head != self.n_head
        positions = torch.arange(pos, pos + T, device=q.device)[:, None]  # (T, 1): t
        earlier = torch.arange(S, device=q.device) < positions  # (T, S): s < t
        if self.current_position == "direct":
            mask = torch.cat([earlier, torch.eye(T, dtype=torch.bool, device=q.device)], dim=1)  # (T, S + T)
            k, v = torch.cat([k_ctx, k_own], dim=2), torch.cat([v_ctx, v_own], dim=2)  # [from t | from a]
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
        first = positions == 0  # (T, 1): the row of position 0
        mask = earlier | (first & (torch.arange(S, device=q.device) == 0))  # position 0 sees itself ...
        y = F.scaled_dot_product_attention(q, k_ctx, v_ctx, attn_mask=mask, enable_gqa=gqa)
        return y.masked_fill(first, 0.0)  # ... and its output is defined as 0

    def check_kernels(self, on_cuda):
        """CUDA SDPA with a boolean mask needs head_dim % 8 == 0 for its memory-efficient / cuDNN
        kernels, else its math fallback saves an fp32 (B, H, T, 2T) tensor per layer: refuse it."""
        needs_mask = self.attention_impl == "reference" and self.current_position != "transformed"
        if on_cuda and needs_mask and self.head_dim % 8:
            raise ValueError(f"CEA attention_impl='reference' needs head_dim % 8 == 0 on CUDA (head_dim={self.head_dim})"
                             f", else SDPA's math fallback saves an fp32 (B, H, T, 2T) tensor per layer: use "
                             f"attention_impl='causal' (the default, no mask)")

    def forward(self, x, cache=None):  # (B, T, C) -> (B, T, C)
        self.check_kernels(x.is_cuda)
        a = self.norm(x)  # a = n(x)
        t = a + self.inner_ffn(a)  # t = a + InnerFFN(a)   (5.1.1); with a cache, of the new positions only
        return x + self.dropout(self.out_proj(self.attend(a, t, cache)))

    def flops_per_token(self, seq_len):
        attn_dim = self.n_head * self.head_dim
        inner = self.inner_ffn.flops_per_token() if isinstance(self.inner_ffn, TopOneMoE) else linear_flops(self.inner_ffn)
        projections = linear_flops(self.qkv_proj) + linear_flops(self.out_proj)
        scores = 4 * seq_len * attn_dim  # q.k and p.v over T keys, as torch's flop_counter counts them
        if self.current_position == "direct":
            projections += 2 * self.qkv_proj.in_features * 2 * self.kv_dim  # W_k, W_v applied to both a and t
            # 'reference': 2T keys of head dim hd; 'causal': T keys (a_t's as the sink) of hd + 1 padded to 8s
            width = 2 * self.head_dim if self.attention_impl == "reference" else (self.head_dim // 8 + 1) * 8
            scores = 4 * seq_len * self.n_head * width
        return inner + projections + scores


# ----------------------------------------------------------------------------------------
# The model


class CEAGPT(GPT):
    """model.GPT with the attention and FFN slots of CAA / CEA / MoE. In training mode forward()
    returns the language-modelling loss PLUS balance_coef x the MoE balancing losses (when there
    is a MoE); in eval mode the plain LM loss. `aux_loss`: that weighted term, last forward."""

    config: CEAConfig
    aux_loss = None  # balance_coef x balancing loss of the last forward (detached); None without MoE

    def make_attention(self, layer_idx, spec):
        c = self.config
        if c.inner_hidden or (c.n_experts and c.moe_place == "inner"):
            return CEAAttentionSublayer(c.n_embd, spec, c)
        return super().make_attention(layer_idx, spec)  # rho = 1: exactly the plain attention sublayer

    def make_ffn(self, layer_idx, spec):
        c = self.config
        sublayers = [MoESublayer(c.n_embd, c)] if c.n_experts and c.moe_place == "before_ffn" else []
        if spec.ffn_hidden:  # Outer-FFN, width rho W
            sublayers.append(FFNSublayer(c.n_embd, spec.ffn_hidden, c))
        if len(sublayers) == 1 and isinstance(sublayers[0], FFNSublayer):
            return sublayers[0]  # the plain FFN sublayer: FFN-Wider and vanilla are exactly model.GPT
        return FFNSlot(sublayers)

    def balancing_loss(self):
        """Sum over MoE layers of the last forward pass's balancing loss (0 without MoE)."""
        losses = [m.aux_loss for m in self.modules() if isinstance(m, TopOneMoE) and m.aux_loss is not None]
        return sum(losses) if losses else None

    def forward(self, idx, targets=None, cache=None):
        """While training, the loss is the LM loss + balance_coef x the balancing loss (so train.py
        optimises both unchanged); in eval mode it is the plain LM loss (what val / OOD losses
        compare). Either way self.aux_loss holds the auxiliary term of this pass (detached; None
        without a MoE), for logging."""
        logits, loss = super().forward(idx, targets, cache)
        aux = self.balancing_loss()
        self.aux_loss = None if aux is None else (self.config.balance_coef * aux).detach()
        if loss is not None and aux is not None and self.training:
            loss = loss + self.config.balance_coef * aux
        return logits, loss


def build_model(vocab_size=84, block_size=256, n_layer=6, n_head=6, n_kv_head=None, n_embd=384, head_dim=None,
                ffn_hidden=None, qk_norm="", tie_embeddings=True, dropout=0.0, ffn_mult=32, outer_ratio=1.0,
                current_position="direct", n_experts=0, expert_hidden=None, moe_place="before_ffn",
                balance_coef=0.01, attention_impl="causal"):
    """FFN-Wider / CAA / CEA / MoE GPT.
    W = ffn_hidden or ffn_mult * n_embd is the total FFN width, split into an Outer-FFN of
    round(outer_ratio * W) and an Inner-FFN of the rest. outer_ratio=1: FFN-Wider (with
    ffn_mult=32) or the vanilla GPT (ffn_mult=4); outer_ratio=0.125: CEA for GPT.
    n_experts > 0: a top-1 MoE of n_experts SwiGLU experts (hidden expert_hidden, default
    n_embd as in appendix C.2: "intermediate dimension is 4,096" at d = 4,096), before the FFN
    (moe_place='before_ffn') or as the Inner-FFN ('inner')."""
    if not 0.0 <= outer_ratio <= 1.0:
        raise ValueError(f"outer_ratio={outer_ratio}: it is the Outer-FFN's share of the FFN width, in [0, 1]")
    if current_position not in CURRENT_POSITION_RULES or attention_impl not in ATTENTION_IMPLS:
        raise ValueError(f"current_position={current_position!r}, attention_impl={attention_impl!r}: use 'direct' (the "
                         f"paper's direct pathway), 'masked' (appendix C.2) or 'transformed' (w/o direct pathway), "
                         f"and 'causal' (no mask, the default) or 'reference' (one SDPA call with a dense mask)")
    if moe_place not in ("before_ffn", "inner"):
        raise ValueError(f"moe_place={moe_place!r}: use 'before_ffn' (MoE baseline) or 'inner' (MoE w/ CEA)")
    width = ffn_hidden or ffn_mult * n_embd  # W
    outer = round(outer_ratio * width)  # rho W
    inner = width - outer  # (1 - rho) W
    if n_experts:
        if n_experts < 1:
            raise ValueError(f"n_experts={n_experts}: use 0 (no MoE) or at least 1")
        if inner:
            raise ValueError(f"n_experts={n_experts} with outer_ratio={outer_ratio}: with a MoE the FFN stays "
                             f"whole (outer_ratio=1.0) and the MoE itself is moved (moe_place='inner')")
    config = CEAConfig(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer, n_head=n_head,
                       n_kv_head=n_kv_head, n_embd=n_embd, head_dim=head_dim, ffn_hidden=width, qk_norm=qk_norm,
                       tie_embeddings=tie_embeddings, dropout=dropout, inner_hidden=inner,
                       current_position=current_position, n_experts=n_experts,
                       expert_hidden=(expert_hidden or n_embd) if n_experts else 0, moe_place=moe_place,
                       balance_coef=balance_coef, attention_impl=attention_impl)
    # layers[i].ffn_hidden becomes the Outer-FFN width (GPTConfig would read ffn_hidden=0 as "default 4d")
    config.layers = [LayerSpec(s.n_head, s.n_kv_head, s.head_dim, outer) for s in config.layers]
    return CEAGPT(config)


def match_ffn_hidden(target_non_embedding, multiple=64, **shape):
    """The total FFN width W (ffn_hidden, a multiple of `multiple`) whose model has the non-embedding
    parameter count closest to target_non_embedding, e.g. a baseline's. The split rho does not
    change the count (the Inner-FFN and Outer-FFN share W), so this works for any outer_ratio."""
    def count(width):
        with torch.device("meta"):
            return build_model(**{**shape, "ffn_hidden": width}).param_counts()["non_embedding"]
    per_unit = (count(2 * multiple) - count(multiple)) / multiple  # parameters per unit of FFN width (3 d L)
    return multiple * max(1, round((target_non_embedding - count(multiple)) / per_unit / multiple + 1))


def param_split(model):
    """Parameters by role: attention (its matrices, without the Inner-FFN/MoE), inner_ffn
    (Inner-FFN or Inner-MoE), outer_ffn (the FFN sublayer), moe (the baseline's MoE
    sublayer), active_ffn (FFN-like parameters one token uses: one expert + router), and
    model.param_counts()'s total / non_embedding. Norm gains are left out of the roles."""
    split = dict(attention=0, inner_ffn=0, outer_ffn=0, moe=0, active_ffn=0)
    for block in model.blocks:
        for name, p in block.named_parameters():
            if name.endswith("norm.weight"):
                continue
            role = ("inner_ffn" if ".inner_ffn." in name else "moe" if ".moe." in name
                    else "attention" if name.startswith("attn.") else "outer_ffn")
            split[role] += p.numel()
        moes = [m for m in block.modules() if isinstance(m, TopOneMoE)]
        in_moe = {id(e) for moe in moes for e in moe.experts}
        for moe in moes:  # top-1: the router and one expert are active
            split["active_ffn"] += moe.router.weight.numel() + sum(p.numel() for p in moe.experts[0].parameters())
        for m in block.modules():  # dense FFNs (Outer and Inner) are always active
            if isinstance(m, SwiGLU) and id(m) not in in_moe:
                split["active_ffn"] += sum(p.numel() for p in m.parameters())
    counts = model.param_counts()
    split.update(total=counts["total"], non_embedding=counts["non_embedding"])
    return split


DEFAULT_ARGS = dict(vocab_size=30522, block_size=128, n_layer=12, n_head=12, n_kv_head=None, n_embd=768,
                    head_dim=None, ffn_hidden=None, qk_norm="", tie_embeddings=True, dropout=0.0, ffn_mult=32,
                    outer_ratio=0.125, current_position="direct", n_experts=0, expert_hidden=None,
                    moe_place="before_ffn", balance_coef=0.01, attention_impl="causal")

if __name__ == "__main__":
    import sys

    from configurator import parse_overrides
    args = parse_overrides(sys.argv[1:], DEFAULT_ARGS)
    with torch.device("meta"):  # instant, even for the H=768 shapes
        model = build_model(**args)
    print(describe(model))
    print("split: " + ", ".join(f"{k} {v / 1e6:.3f}M" for k, v in param_split(model).items()))
