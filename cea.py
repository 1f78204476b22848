"""
FFN-Wider, the Combination Enhanced Architecture (an Inner-FFN inside attention) and Inner-MoE.

Paper: Xin Lu, Yanyan Zhao, Bing Qin, Liangyu Huo, Qing Yang, Dongliang Xu (NeurIPS 2024), "How
does Architecture Influence the Base Capabilities of Pre-trained Language Models? A Case Study
Based on FFN-Wider and MoE Transformers", arXiv:2403.02436. No public code: sections 3-7 and
appendix C.2 are the spec.

The idea. Attention *combines* positions; the FFN *transforms* each position on its own. Making
the FFN 8x wider ("FFN-Wider": hidden 32 d instead of 4 d) and training to the same loss hurts
out-of-distribution ability: the wide FFN does more of the work alone, and the share done by
combination drops (section 4.2's contribution ratio, experiments/cea_contribution.py). The fix
moves part of the FFN *inside* attention, where it can help only through combination (section 5,
the Combination Adjustable Architecture). The paper numbers no equations; with a = n(x):

    t = a + InnerFFN(a)                                   the Inner-FFN                 (5.1.1)
    q_t = W_q a_t                                         queries never see the Inner-FFN
    k_s, v_s = W_k t_s, W_v t_s     for s < t             earlier positions: transformed
    k_t, v_t = W_k a_t, W_v a_t     at s = t              the direct pathway            (5.1.2)
    x' = x + W_o softmax_s<=t(q_t . k_s / sqrt(hd)) v_s   ONE softmax over both

A position's own Inner-FFN output reaches the output only through another position. The outer
ratio rho splits the FFN width W: the FFN sublayer keeps rho W (the Outer-FFN), the Inner-FFN
(1 - rho) W; CEA (section 6) is rho = 12.5 % for GPT. For MoE models (section 7, C.2) the MoE
layer before the FFN moves inside attention as an Inner-MoE, and the direct pathway becomes a
masked current position (s < t only).

The code: `CEAAttentionSublayer` is the block above (a model.CausalSelfAttention whose keys and
values come from t and a), `reference_attention` its one softmax as written (the default), and
`direct_pathway_attention` the same numbers on plain causal kernels (attention_impl='causal', the
form the comparison trains); `TopOneMoE`; `CEAConfig` splits W = ffn_hidden or
ffn_width_ratio * d by rho (rho = 1: FFN-Wider, exactly model.GPT); `CEAGPT`. Choices the paper
leaves open, results, commands: docs/cea.md; parameter tables: experiments/cea_tables.py.
"""

import math
from dataclasses import dataclass, field, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import (GPT, CausalSelfAttention, FFNSublayer, GPTConfig, LayerSpec, RMSNorm, SwiGLU,
                   causal_attention, linear_flops, meta_device)


# ----------------------------------------------------------------------------------------
# Attention with an Inner-FFN (sections 5.1.1, 5.1.2; C.2)


class CEAAttentionSublayer(CausalSelfAttention):
    """x -> x + W_o Attn(a, t = a + InnerFFN(a)), a = n(x), as in the equations above.

    model.CausalSelfAttention with its own keys and values: the projections W_q, W_k, W_v, W_o,
    the QK-norm and the RoPE tables are the base class's, and so are heads() and kv_heads() (the
    head split, QK-norm, rotation); attend() takes the queries from a and the keys and values
    from t (earlier positions) and a (the current one). Unlike the base class it is a whole
    residual sublayer: its norm n, the Inner-FFN and the residual add are inside."""

    def __init__(self, dim, spec: LayerSpec, config: "CEAConfig",
                 inner_ffn: nn.Module | None = None):
        super().__init__(dim, spec, config)  # W_q, W_k, W_v, W_o, QK-norm, RoPE tables
        self.current_position, self.attention_impl = config.current_position, config.attention_impl
        self.norm = RMSNorm(dim, config.norm_eps)
        if inner_ffn is None and config.n_experts and config.moe_place == "inner":
            inner_ffn = TopOneMoE(dim, config.n_experts, config.expert_hidden)  # Inner-MoE (7)
        elif inner_ffn is None:
            inner_ffn = SwiGLU(dim, config.inner_hidden)  # the Inner-FFN, width (1 - rho) W
        self.inner_ffn = inner_ffn
        self.dropout = nn.Dropout(config.dropout)
        in_forward_order(self, "norm", "inner_ffn")

    def forward(self, x, cache=None):  # (B, T, C) -> (B, T, C)
        a = self.norm(x)  # a = n(x)
        t = a + self.inner_ffn(a)  # t = a + InnerFFN(a)   (5.1.1); with a cache: the new positions
        return x + self.dropout(self.out_proj(self.attend(a, t, cache)))

    def attend(self, a, t, cache=None):
        """Attention before W_o, (B, T, H*hd), of a, t (B, T, C) at positions pos.. (the cache's
        length, else 0). The cache keeps t's keys/values: what later positions see."""
        B, T, _ = a.shape
        pos = 0 if cache is None else cache.length
        W_q, W_kv = self.qkv_proj.weight.split([self.q_dim, 2 * self.kv_dim])  # W_kv: W_k, W_v
        q = self.heads(F.linear(a, W_q), self.q_norm, pos)  # q_t = W_q a_t
        k, v = self.kv_heads(F.linear(t, W_kv), pos)  # k_s, v_s = W_k t_s, W_v t_s
        if cache is not None:
            k, v = cache.append(k, v)  # (B, Hkv, pos + T, hd): every position so far
        k_own = v_own = None  # 'masked' (C.2): s < t only
        if self.current_position == "direct":  # k_t, v_t = W_k a_t, W_v a_t   (5.1.2)
            k_own, v_own = self.kv_heads(F.linear(a, W_kv), pos)
        if self.current_position == "transformed":  # w/o direct pathway: causal over t, s <= t
            y = causal_attention(q, k, v, pos, enable_gqa=self.n_kv_head != self.n_head)
        elif self.attention_impl == "reference":  # the paper's one softmax, as written
            y = self.reference_attention(q, k, v, k_own, v_own, pos)
        elif k_own is not None:  # attention_impl='causal': the same numbers, no mask
            y = direct_pathway_attention(q, k, v, k_own, v_own, pos)
        else:
            y = masked_current_attention(q, k, v, pos)
        return y.transpose(1, 2).reshape(B, T, self.q_dim)  # (B, T, H*hd)

    def reference_attention(self, q, k_ctx, v_ctx, k_own, v_own, pos):
        """ONE softmax: 'direct' over [keys from t, s < t | keys from a, s = t]; 'masked': s < t.
        q: (B, H, T, hd); k_ctx, v_ctx: (B, Hkv, pos+T, hd); k_own, v_own: (B, Hkv, T, hd)."""
        self.check_kernels(q.is_cuda)
        T, S, gqa = q.size(2), k_ctx.size(2), self.n_kv_head != self.n_head
        positions = torch.arange(pos, pos + T, device=q.device)[:, None]  # (T, 1): t
        earlier = torch.arange(S, device=q.device) < positions  # (T, S): s < t
        if self.current_position == "direct":
            own = torch.eye(T, dtype=torch.bool, device=q.device)  # (T, T): s = t
            k, v = torch.cat([k_ctx, k_own], dim=2), torch.cat([v_ctx, v_own], dim=2)
            mask = torch.cat([earlier, own], dim=1)  # (T, S + T)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
        first = positions == 0  # (T, 1): position 0 has nothing earlier; it sees key 0 ...
        mask = earlier | (first & (torch.arange(S, device=q.device) == 0))
        y = F.scaled_dot_product_attention(q, k_ctx, v_ctx, attn_mask=mask, enable_gqa=gqa)
        return y.masked_fill(first, 0.0)  # ... and its output is defined as 0

    def check_kernels(self, on_cuda):  # CUDA SDPA's masked kernels want head_dim % 8 == 0
        needs_mask = self.attention_impl == "reference" and self.current_position != "transformed"
        if on_cuda and needs_mask and self.head_dim % 8:
            raise ValueError(f"CEA's attention_impl='reference' (the default) needs "
                             f"head_dim % 8 == 0 on CUDA (head_dim={self.head_dim}) for SDPA's "
                             f"masked kernels: use attention_impl='causal' (the same numbers, no "
                             f"mask)")

    def flops_per_token(self, seq_len):
        moe = isinstance(self.inner_ffn, TopOneMoE)
        inner = self.inner_ffn.flops_per_token() if moe else linear_flops(self.inner_ffn)
        projections = linear_flops(self.qkv_proj) + linear_flops(self.out_proj)
        scores = 4 * seq_len * self.n_head * self.head_dim  # q.k and p.v over T keys
        if self.current_position == "direct":
            projections += 2 * self.qkv_proj.in_features * 2 * self.kv_dim  # W_k, W_v on a and t
            reference = self.attention_impl == "reference"  # 2T keys; else T keys of hd + 1 -> 8s
            width = 2 * self.head_dim if reference else self.head_dim // 8 * 8 + 8
            scores = 4 * seq_len * self.n_head * width
        return inner + projections + scores


def in_forward_order(module, *first):
    """List the submodules `first` ahead of the others, as the forward pass reaches them: the
    order of parameters() and of a state dict, and the order GPT.init_weights draws them in, so
    one seed gives one model however the class registers them."""
    module._modules = {**{name: module._modules[name] for name in first}, **module._modules}


# attention_impl='causal': the same softmax on the plain causal SDPA call, no mask (flash kernels
# on a GPU), what the comparison trains.
def direct_pathway_attention(q, k_ctx, v_ctx, k_own, v_own, pos=0):
    """reference_attention's 'direct' softmax as one causal call with no mask: the own key is a
    "sink" in front of the context shifted by one, seen by every query, its score q_t.k_own_t
    carried by an extra head dimension j = hd:
        q'_t = [q_t, q_t.k_own_t]   k'_0 = v'_0 = e_j   k'_s+1, v'_s+1 = [k_ctx_s, 0], [v_ctx_s, 0]
    so y'_t = [sum_s<t p_s v_ctx_s, p_own] and y_t = y'_t[:hd] + p_own v_own_t."""
    B, H, T, hd = q.shape
    group = H // k_own.size(1)  # query heads per KV head (GQA)
    k_own, v_own = k_own.repeat_interleave(group, dim=1), v_own.repeat_interleave(group, dim=1)
    width = hd // 8 * 8 + 8  # hd + 1, padded to a multiple of 8 (what fast GPU kernels want)
    own_score = (q * k_own).sum(dim=-1, keepdim=True)  # (B, H, T, 1)
    q_ext = F.pad(torch.cat([q, own_score], dim=-1), (0, width - hd - 1))  # (B, H, T, width)
    q_ext = q_ext * math.sqrt(width / hd)  # SDPA scales by 1/sqrt(width); keep q.k/sqrt(hd)
    sink = F.pad(q.new_ones(B, k_ctx.size(1), 1, 1), (hd, width - hd - 1))  # (B, Hkv, 1, width)
    k_ext = torch.cat([sink, F.pad(k_ctx[:, :, :-1], (0, width - hd))], dim=2)  # (B, Hkv, pos+T, w)
    v_ext = torch.cat([sink, F.pad(v_ctx[:, :, :-1], (0, width - hd))], dim=2)
    y = causal_attention(q_ext, k_ext, v_ext, pos, enable_gqa=group > 1)  # (B, H, T, width)
    return y[..., :hd] + y[..., hd:hd + 1] * v_own  # (B, H, T, hd)


def masked_current_attention(q, k_ctx, v_ctx, pos=0):
    """C.2's masked current position: causal attention over the keys/values shifted by one (what
    C.2 simplified it for). Position 0 has nothing to see: its output is defined as 0."""
    gqa = q.size(1) != k_ctx.size(1)
    k_shifted, v_shifted = k_ctx[:, :, :-1], v_ctx[:, :, :-1]  # key s now sits at position s + 1
    if pos > 0:
        return causal_attention(q, k_shifted, v_shifted, pos - 1, enable_gqa=gqa)
    later = causal_attention(q[:, :, 1:], k_shifted, v_shifted, enable_gqa=gqa) if q.size(2) > 1 \
        else q[:, :, 1:]  # (empty when T = 1)
    return torch.cat([torch.zeros_like(q[:, :, :1]), later], dim=2)  # (B, H, T, hd)


# ----------------------------------------------------------------------------------------
# Top-1 mixture of experts (section 7; the routing is Switch Transformer's)


def load_balancing_loss(router_probs, expert_index, n_experts):
    """Switch Transformer's E sum_i f_i P_i (f_i: i's share of tokens, P_i: its mean probability)"""
    experts = torch.arange(n_experts, device=expert_index.device)
    f = (expert_index[:, None] == experts).to(router_probs.dtype).mean(dim=0)  # (E,)
    P = router_probs.mean(dim=0)  # (E,)
    return n_experts * (f * P).sum()


class TopOneMoE(nn.Module):
    """Each token goes to the SwiGLU expert its router ranks first, scaled by that probability.
    Every expert runs on every token and keeps its routed rows: fixed shapes, no host sync."""

    def __init__(self, dim, n_experts, expert_hidden):
        super().__init__()
        self.n_experts = n_experts
        self.router = nn.Linear(dim, n_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(dim, expert_hidden) for _ in range(n_experts))
        self.balancing_loss = None  # the balancing loss of the last forward pass (unweighted)

    def forward(self, x):  # (B, T, C) -> (B, T, C)
        flat = x.reshape(-1, x.size(-1))  # (N, C)
        probs = F.softmax(self.router(flat).float(), dim=-1)  # (N, E)
        gate, expert_index = probs.max(dim=-1)  # (N,), (N,)
        self.balancing_loss = load_balancing_loss(probs, expert_index, self.n_experts)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):  # a loop over experts, not over tokens
            routed_here = (expert_index == e)[:, None]  # (N, 1)
            out = torch.where(routed_here, (expert(flat) * gate[:, None]).to(out.dtype), out)
        return out.view_as(x)

    def flops_per_token(self):  # the router and one expert (top-1)
        return linear_flops(self.router) + linear_flops(self.experts[0])


class MoESublayer(nn.Module):
    """The MoE baseline's extra residual sublayer before the FFN: x -> x + MoE(n(x))."""

    def __init__(self, dim, config: "CEAConfig"):
        super().__init__()
        self.norm = RMSNorm(dim, config.norm_eps)
        self.moe = TopOneMoE(dim, config.n_experts, config.expert_hidden)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return x + self.dropout(self.moe(self.norm(x)))

    def flops_per_token(self, seq_len):
        return self.moe.flops_per_token()


class FFNSlot(nn.Sequential):
    """An FFN slot of residual sublayers in order: [] (rho = 0) or [MoE, FFN] (MoE baseline)."""

    def __init__(self, sublayers):
        super().__init__(*sublayers)

    def flops_per_token(self, seq_len):
        return sum(s.flops_per_token(seq_len) for s in self)


# ----------------------------------------------------------------------------------------
# The model: the paper's settings (rho, the current position, the MoE), and the GPT they build


CURRENT_POSITION_RULES = ("direct", "masked", "transformed")  # 5.1.2, C.2, w/o direct pathway
# the paper's one softmax (the default); the same numbers on the mask-free causal kernels
ATTENTION_IMPLS = ("reference", "causal")


@dataclass
class CEAConfig(GPTConfig):
    """GPTConfig plus the paper's settings; layers[i].ffn_hidden is the Outer-FFN's rho W."""
    ffn_width_ratio: int = 32  # W / d when ffn_hidden is not given: 32 FFN-Wider, 4 vanilla
    outer_ratio: float = 1.0  # rho: 1.0 FFN-Wider (no Inner-FFN), 0.125 CEA
    current_position: str = "direct"  # one of CURRENT_POSITION_RULES
    attention_impl: str = "reference"  # one of ATTENTION_IMPLS
    n_experts: int = 0  # > 0: a top-1 MoE of SwiGLU experts
    expert_hidden: int = 0  # one expert's hidden size; 0: d (C.2: 4,096 at d = 4,096)
    moe_place: str = "before_ffn"  # 'before_ffn' (the MoE baseline) or 'inner' (MoE w/ CEA)
    balance_coef: float = 0.01  # weight of the balancing loss while training
    inner_hidden: int = field(default=0, init=False)  # (1 - rho) W, derived

    def __post_init__(self):
        assert 0 <= self.outer_ratio <= 1, f"outer_ratio={self.outer_ratio}: a share, in [0, 1]"
        c, rules = self.current_position, CURRENT_POSITION_RULES
        assert c in rules, f"current_position={c!r}: one of {rules}"
        impl, place = self.attention_impl, self.moe_place
        assert impl in ATTENTION_IMPLS, f"attention_impl={impl!r}: one of {ATTENTION_IMPLS}"
        assert place in ("before_ffn", "inner"), f"moe_place={place!r}: 'before_ffn' or 'inner'"
        assert self.n_experts >= 0, f"n_experts={self.n_experts}: use 0 (no MoE) or at least 1"
        width = self.ffn_hidden or self.ffn_width_ratio * self.n_embd  # W
        outer = round(self.outer_ratio * width)  # rho W
        self.inner_hidden = width - outer  # (1 - rho) W
        assert not (self.n_experts and self.inner_hidden), (
            f"n_experts={self.n_experts} with outer_ratio={self.outer_ratio}: with a MoE the FFN "
            f"stays whole (outer_ratio=1.0) and the MoE itself moves (moe_place='inner')")
        if self.n_experts:
            self.expert_hidden = self.expert_hidden or self.n_embd
        super().__post_init__()
        self.layers = [replace(s, ffn_hidden=outer) for s in self.layers]


class CEAGPT(GPT):
    """model.GPT with CAA / CEA / MoE slots. Training loss: LM loss + balance_coef x the MoE
    balancing losses (train.py optimises it unchanged); in eval mode the plain LM loss."""

    config: CEAConfig
    aux_loss = None  # balance_coef x balancing loss of the last forward (detached); None: no MoE

    def make_attention(self, layer_idx, spec):
        c = self.config
        if c.inner_hidden or (c.n_experts and c.moe_place == "inner"):
            return CEAAttentionSublayer(c.n_embd, spec, c)
        return super().make_attention(layer_idx, spec)  # rho = 1: the plain attention sublayer

    def make_ffn(self, layer_idx, spec):
        c = self.config
        moe_first = c.n_experts and c.moe_place == "before_ffn"  # the MoE baseline
        sublayers = [MoESublayer(c.n_embd, c)] if moe_first else []
        if spec.ffn_hidden:  # the Outer-FFN, width rho W
            sublayers.append(FFNSublayer(c.n_embd, spec.ffn_hidden, c))
        if len(sublayers) == 1 and isinstance(sublayers[0], FFNSublayer):
            return sublayers[0]  # the plain FFN sublayer: FFN-Wider and vanilla are model.GPT
        return FFNSlot(sublayers)

    def balancing_loss(self):
        """Sum over MoE layers of the last forward pass's balancing loss (None without MoE)."""
        losses = [m.balancing_loss for m in self.modules()
                  if isinstance(m, TopOneMoE) and m.balancing_loss is not None]
        return sum(losses) if losses else None

    def forward(self, idx, targets=None, cache=None):
        logits, loss = super().forward(idx, targets, cache)
        balancing = self.balancing_loss()  # unweighted; aux_loss is the term in the loss
        weighted = None if balancing is None else self.config.balance_coef * balancing
        self.aux_loss = None if weighted is None else weighted.detach()
        if loss is not None and weighted is not None and self.training:
            loss = loss + weighted
        return logits, loss


def match_ffn_hidden(target_non_embedding, multiple=64, **shape):
    """The FFN width W (a multiple of `multiple`) whose non-embedding count is closest to the
    target (a baseline's). Inner- and Outer-FFN share W, so it holds for any outer_ratio."""
    def count(width):
        with meta_device():
            model = CEAGPT(CEAConfig(**{**shape, "ffn_hidden": width}))
        return model.param_counts()["non_embedding"]
    per_unit = (count(2 * multiple) - count(multiple)) / multiple  # per unit of W (3 d L)
    units = round((target_non_embedding - count(multiple)) / per_unit / multiple + 1)
    return multiple * max(1, units)


def match_ffn_wider(baseline, ffn_width_ratio=32, multiple=8, head_dim_multiple=2):
    """FFN-Wider at the budget of the plain GPT `baseline` (GPTConfig keywords): same depth and
    heads, a narrower d and an FFN about ffn_width_ratio x d wide. For each d (head_dim_multiple x
    n_head apart: head dims stay even for RoPE, or multiples of 8 for the GPU's fast attention
    kernels) match_ffn_hidden solves the FFN width W (a multiple of `multiple`) that matches the
    budget; the d whose W / d is closest to ffn_width_ratio wins. Returns CEAConfig keywords
    (outer_ratio 1)."""
    if head_dim_multiple % 2:
        raise ValueError(f"head_dim_multiple={head_dim_multiple}: RoPE needs even head dims; use "
                         "2, 8, ...")
    with meta_device():
        target = GPT(GPTConfig(**dict(baseline, block_size=2))).budget()
    step = head_dim_multiple * baseline["n_head"]
    shape = {k: v for k, v in baseline.items() if k not in ("n_embd", "head_dim", "ffn_hidden")}
    best = None
    for d in range(step, baseline["n_embd"] + 1, step):
        # budget() leaves out an untied head; non_embedding counts it
        untied_head = 0 if shape.get("tie_embeddings", True) else shape["vocab_size"] * d
        width = match_ffn_hidden(target + untied_head, multiple, **shape, n_embd=d)
        score = abs(width / d - ffn_width_ratio)
        if best is None or score < best[0]:
            best = (score, dict(shape, n_embd=d, ffn_hidden=width, outer_ratio=1.0))
    return best[1]


def matched_args(baseline):
    """What a bare `--model_type=cea` trains: CEA with the paper's GPT setting rho = 0.125 on the
    FFN-Wider shape matched to the plain GPT that `baseline` describes (CEA moves FFN width
    inside attention, so it has FFN-Wider's parameters), on the mask-free kernels as compare.py
    trains it (attention_impl='causal': the paper's numbers, and no head_dim % 8 rule on CUDA)."""
    return {**match_ffn_wider(baseline), "outer_ratio": 0.125, "attention_impl": "causal"}

