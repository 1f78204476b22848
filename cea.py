"""
FFN-Wider baseline, Combination Adjustable / Enhanced Architecture (Inner-FFN inside
attention), Inner-MoE, and the Token Prediction contribution ratio.

Paper: Xin Lu, Yanyan Zhao, Bing Qin, Liangyu Huo, Qing Yang, Dongliang Xu,
"How does Architecture Influence the Base Capabilities of Pre-trained Language Models?
A Case Study Based on FFN-Wider and MoE Transformers" (NeurIPS 2024).
No public code: the paper (sections 3-7, appendix C.2) and DESIGN.md are the spec.

The idea, for a learner
-----------------------
A transformer layer does two kinds of work. Attention is a *combination* function: the
output at position t is a weighted mix of the other positions' values. The FFN is a
*transformation* function: it rewrites each position's vector on its own. The paper
makes the FFN 8x wider ("FFN-Wider": hidden 32 d instead of 4 d), trains it to the same
pre-training loss, and finds it generalises worse out of distribution. Its explanation:
the wide FFN does more of the language-modelling work by itself, so the share done by
combination drops (section 4.2, measured by the Token Prediction contribution ratio).

The fix is to move part of the FFN *inside* attention, where it can only help through
combination (section 5, the Combination Adjustable Architecture, CAA). With the usual
attention input a = n(x):

    t = a + InnerFFN(a)                                   Inner-FFN (5.1.1)
    q_t = W_q a_t                                         queries never see the Inner-FFN
    k_s, v_s = W_k t_s, W_v t_s        for s < t          context keys/values are transformed
    k_t, v_t = W_k a_t, W_v a_t        at s = t           the direct pathway (5.1.2)
    x_new = x + W_o softmax(q_t . k_s / sqrt(hd) over s <= t) v_s

A position's own Inner-FFN output reaches later layers only after being combined into
*another* position; without the direct pathway its own value v(t_t) would carry the
transformation straight through (the "w/o Direct Pathway" ablation). The FFN width W is
split by the outer ratio rho: the usual FFN sublayer keeps rho W (the Outer-FFN), the
Inner-FFN gets (1 - rho) W. CEA (section 6) is CAA at the best ratio: rho = 12.5 % for
GPT. For MoE models (section 7, C.2) the MoE layer that sits before the FFN is moved
inside attention as an Inner-MoE, and to fit FlashAttention the direct pathway is
simplified to *masking the current position* (each query sees only s < t).

Token Prediction contribution ratio (4.2.2): take the representation after every
sublayer, group positions by their target token, the normalised mean of a group is the
token's class vector (tokens with < 50 occurrences dropped); predict each position's
target by the most cosine-similar class vector. The accuracy gain of each sublayer over
the one before is its contribution; the FFN ratio is the FFN gains over all gains.

(The paper has no numbered equations; the lines above are its sections 5.1.1 / 5.1.2.)

What this file implements
-------------------------
- `build_model(...)`: one builder for every model of the paper on our LLaMA-style GPT.
  FFN width W = ffn_hidden, or ffn_mult * n_embd (ffn_mult=32: FFN-Wider; 4: vanilla).
  outer_ratio=1.0 is exactly FFN-Wider (same parameters, same logits, the plain
  model.AttentionSublayer is used); outer_ratio=0.125 is CEA for GPT.
  current_position = 'direct' (5.1.2, default), 'masked' (C.2 simplification),
  'transformed' (w/o direct pathway ablation).
  n_experts > 0 adds a top-1 MoE (Switch-style): moe_place='before_ffn' (the MoE
  baseline: an extra residual sublayer before the FFN) or 'inner' (MoE w/ CEA, the MoE
  is the Inner-FFN). The weighted load-balancing loss is *added to the loss that
  CEAGPT.forward returns*, so train.py optimises it with no change.
- `CEAAttentionSublayer`: the attention with the Inner-FFN and the three current-position
  rules, in one fused scaled_dot_product_attention call, no loop over positions.
- `TopOneMoE`, `load_balancing_loss`.
- `token_prediction_accuracies`, `contribution_ratio`, `analyze_checkpoint`,
  `plot_contributions`: the contribution analysis and the Figure-4-like plot.
- `param_split(model)`: attention / inner FFN / outer FFN / MoE parameters;
  `match_ffn_hidden(target, **shape)`: the FFN width that matches a baseline's parameters.

Choices the paper leaves open (and deviations)
----------------------------------------------
- Base model: our pre-norm LLaMA-style GPT (RMSNorm, RoPE, SwiGLU), not the paper's
  post-LN GPT-1 with GELU. The FFN width is the SwiGLU hidden size, so "32x" means
  ffn_hidden = 32 d (3 matrices of d x 32d).
- The Inner-FFN is a SwiGLU without its own norm: it reads a = n(x), the attention's
  own normed input, and adds back residually (t = a + InnerFFN(a)); the paper's figure
  shows an FFN with a residual inside MHA but gives no norm placement.
- Exact direct pathway, how: the keys are the concatenation [W_k t_1..T, W_k a_1..T]
  (2T keys, RoPE at the same positions for both halves) with a boolean mask that allows
  the strictly-earlier transformed keys and the diagonal of the untransformed ones. One
  softmax, one SDPA call. It computes 2T scores per query (half of them masked), so the
  attention-score FLOPs are counted twice (as flop_counter counts them).
- Masked variant at position 0 (no earlier position to attend to): the attention output
  is defined as the zero vector, so the sublayer returns x unchanged there (no NaN).
  Implemented by letting position 0 see itself and then zeroing that row.
- MoE: Switch-Transformer top-1 routing, the expert output is scaled by its router
  probability (so the router is trained), no capacity limit and no token dropping
  (the paper used fastmoe); balancing loss E * sum_i f_i P_i (1.0 at perfect balance),
  weight `balance_coef` (0.01). FLOPs per token count the router and ONE expert.
  The baseline's MoE is a residual sublayer with its own RMSNorm (d parameters); the
  Inner-MoE reads the attention's normed input, so it has one norm fewer per layer -
  the matrices (total and active) are identical.
- Contribution analysis: representations are taken after the embedding and after each
  residual sublayer (before the final norm); a sublayer of the MoE baseline's FFN slot
  (MoE + FFN) counts as one FFN step. Accuracy is measured on positions whose target
  kept a class vector. Gains may be negative; the ratio is FFN gains / all gains.
- qk_norm is applied to both key sets the same way as in model.CausalSelfAttention.

Run it
------
    python cea.py                                         # parameter split of FFN-Wider + CEA, H=768 GPT
    python cea.py --outer_ratio=1.0                       # FFN-Wider
    python cea.py --bench=True --n_embd=64 --n_layer=4 --n_head=4 --vocab_size=84   # tokens/s vs FFN-Wider
    python train.py config/cea_shakespeare_char_cea.py    # CPU runs (also _vanilla, _wider)
    python cea.py --analyze=out-cea-vanilla,out-cea-wider,out-cea-cea   # contribution ratios, OOD loss,
                                                          # and docs/cea_contribution.png
"""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import (GPT, FFNSublayer, GPTConfig, LayerSpec, RMSNorm, SwiGLU, apply_rope, describe, linear_flops,
                   rope_tables)

CURRENT_POSITION_RULES = ("direct", "masked", "transformed")


@dataclass
class CEAConfig(GPTConfig):
    """GPTConfig plus the CEA settings. `layers[i].ffn_hidden` is the Outer-FFN width."""

    inner_hidden: int = 0  # (1 - rho) W: Inner-FFN width (0: no Inner-FFN)
    current_position: str = "direct"  # 'direct' | 'masked' | 'transformed'
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
    f = torch.bincount(expert_index, minlength=n_experts).to(router_probs.dtype) / expert_index.numel()  # (E,)
    P = router_probs.mean(dim=0)  # (E,)
    return n_experts * (f * P).sum()


class TopOneMoE(nn.Module):
    """n_experts SwiGLU experts; each token goes to the one expert its router ranks first,
    and the expert's output is scaled by that router probability. No norm, no residual."""

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
            rows = (expert_index == e).nonzero(as_tuple=True)[0]
            if rows.numel():
                out[rows] = (expert(flat[rows]) * gate[rows, None]).to(out.dtype)
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


class CEAAttentionSublayer(nn.Module):
    """x -> x + W_o Attn(q from a, context k/v from t = a + InnerFFN(a)), a = n(x).
    The current position's key/value follow `current_position` (see the docstring)."""

    def __init__(self, dim, spec: LayerSpec, config: CEAConfig, inner_ffn: nn.Module | None = None):
        """inner_ffn: the module of t = a + InnerFFN(a); by default built from the config (an
        Inner-FFN of width config.inner_hidden, or the Inner-MoE). compose.py passes its own."""
        super().__init__()
        if config.current_position not in CURRENT_POSITION_RULES:
            raise ValueError(f"current_position={config.current_position!r}: use one of {CURRENT_POSITION_RULES}")
        self.current_position = config.current_position
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
        self.qk_norm = config.qk_norm
        if config.qk_norm:
            q_size, k_size = (spec.head_dim, spec.head_dim) if config.qk_norm == "head" else (self.q_dim, self.kv_dim)
            self.q_norm, self.k_norm = RMSNorm(q_size, config.norm_eps), RMSNorm(k_size, config.norm_eps)
        cos, sin = rope_tables(spec.head_dim, config.block_size, config.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.dropout = nn.Dropout(config.dropout)

    def _queries(self, q, T):
        """(B, T, H*hd) -> normed, rotated (B, H, T, hd)."""
        B = q.size(0)
        if self.qk_norm == "full":
            q = self.q_norm(q)
        q = q.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        if self.qk_norm == "head":
            q = self.q_norm(q)
        return apply_rope(q, self.rope_cos[:T], self.rope_sin[:T])

    def _keys(self, k, T):
        """(B, T, Hkv*hd) -> normed, rotated (B, Hkv, T, hd). Both key sets use the same RoPE positions."""
        B = k.size(0)
        if self.qk_norm == "full":
            k = self.k_norm(k)
        k = k.view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
        if self.qk_norm == "head":
            k = self.k_norm(k)
        return apply_rope(k, self.rope_cos[:T], self.rope_sin[:T])

    def _values(self, v, T):
        return v.view(v.size(0), T, self.n_kv_head, self.head_dim).transpose(1, 2)  # (B, Hkv, T, hd)

    def attend(self, a, t):
        """Attention output (before W_o) from the normed input a and the transformed t,
        both (B, T, C). Returns (B, T, H*hd)."""
        B, T, _ = a.shape
        gqa = self.n_kv_head != self.n_head
        W_q, W_kv = self.qkv_proj.weight.split([self.q_dim, 2 * self.kv_dim], dim=0)
        k_t, v_t = F.linear(t, W_kv).split(self.kv_dim, dim=-1)  # context keys/values from t (5.1.1)
        if self.current_position == "direct":
            q, k_a, v_a = self.qkv_proj(a).split([self.q_dim, self.kv_dim, self.kv_dim], dim=-1)
            q = self._queries(q, T)  # (B, H, T, hd)
            k = torch.cat([self._keys(k_t, T), self._keys(k_a, T)], dim=2)  # (B, Hkv, 2T, hd): [from t | from a]
            v = torch.cat([self._values(v_t, T), self._values(v_a, T)], dim=2)  # (B, Hkv, 2T, hd)
            earlier = torch.ones(T, T, dtype=torch.bool, device=a.device).tril(-1)  # s < t: transformed keys
            current = torch.eye(T, dtype=torch.bool, device=a.device)  # s = t: direct pathway (5.1.2)
            mask = torch.cat([earlier, current], dim=1)  # (T, 2T), True = may attend
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)  # one softmax over both
        else:
            q, k, v = self._queries(F.linear(a, W_q), T), self._keys(k_t, T), self._values(v_t, T)
            if self.current_position == "transformed":  # w/o direct pathway: plain causal attention over t
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
            else:  # 'masked' (C.2): only s < t. Position 0 sees itself, then its output is zeroed.
                mask = torch.ones(T, T, dtype=torch.bool, device=a.device).tril(-1)
                mask[0, 0] = True
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
                y = y * (torch.arange(T, device=a.device) > 0).to(y.dtype)[:, None]  # defined as 0 at t = 0
        return y.transpose(1, 2).reshape(B, T, self.q_dim)  # (B, T, H*hd)

    def forward(self, x):  # (B, T, C) -> (B, T, C)
        a = self.norm(x)  # a = n(x)
        t = a + self.inner_ffn(a)  # t = a + InnerFFN(a)   (5.1.1)
        return x + self.dropout(self.out_proj(self.attend(a, t)))

    def flops_per_token(self, seq_len):
        attn_dim = self.n_head * self.head_dim
        inner = self.inner_ffn.flops_per_token() if isinstance(self.inner_ffn, TopOneMoE) else linear_flops(self.inner_ffn)
        projections = linear_flops(self.qkv_proj) + linear_flops(self.out_proj)
        if self.current_position == "direct":
            projections += 2 * self.qkv_proj.in_features * 2 * self.kv_dim  # W_k, W_v applied to both a and t
            scores = 4 * (2 * seq_len) * attn_dim  # 2T keys per query
        else:  # q from a, k/v from t: each projection applied once
            scores = 4 * seq_len * attn_dim
        return inner + projections + scores


# ----------------------------------------------------------------------------------------
# The model


class CEAGPT(GPT):
    """model.GPT with the attention and FFN slots of CAA / CEA / MoE. forward() returns the
    language-modelling loss PLUS balance_coef x the MoE balancing losses (when there is a MoE)."""

    config: CEAConfig

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

    def forward(self, idx, targets=None):
        logits, loss = super().forward(idx, targets)
        aux = self.balancing_loss()
        if loss is not None and aux is not None:
            loss = loss + self.config.balance_coef * aux  # the auxiliary loss reaches train.py this way
        return logits, loss


def build_model(vocab_size=84, block_size=256, n_layer=6, n_head=6, n_kv_head=None, n_embd=384, head_dim=None,
                ffn_hidden=None, qk_norm="", tie_embeddings=True, dropout=0.0, ffn_mult=32, outer_ratio=1.0,
                current_position="direct", n_experts=0, expert_hidden=None, moe_place="before_ffn",
                balance_coef=0.01):
    """FFN-Wider / CAA / CEA / MoE GPT.
    W = ffn_hidden or ffn_mult * n_embd is the total FFN width, split into an Outer-FFN of
    round(outer_ratio * W) and an Inner-FFN of the rest. outer_ratio=1: FFN-Wider (with
    ffn_mult=32) or the vanilla GPT (ffn_mult=4); outer_ratio=0.125: CEA for GPT.
    n_experts > 0: a top-1 MoE of n_experts SwiGLU experts (hidden expert_hidden, default
    4 * n_embd), before the FFN (moe_place='before_ffn') or as the Inner-FFN ('inner')."""
    if not 0.0 <= outer_ratio <= 1.0:
        raise ValueError(f"outer_ratio={outer_ratio}: it is the Outer-FFN's share of the FFN width, in [0, 1]")
    if current_position not in CURRENT_POSITION_RULES:
        raise ValueError(f"current_position={current_position!r}: use 'direct' (the paper's direct pathway), "
                         f"'masked' (appendix C.2) or 'transformed' (w/o direct pathway)")
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
                       expert_hidden=(expert_hidden or 4 * n_embd) if n_experts else 0, moe_place=moe_place,
                       balance_coef=balance_coef)
    # layers[i].ffn_hidden becomes the Outer-FFN width (GPTConfig would read ffn_hidden=0 as "default 4d")
    config.layers = [LayerSpec(s.n_head, s.n_kv_head, s.head_dim, outer) for s in config.layers]
    return CEAGPT(config)


def match_ffn_hidden(target_non_embedding, multiple=64, **shape):
    """The total FFN width W (ffn_hidden, a multiple of `multiple`) whose model has the
    non-embedding parameter count closest to target_non_embedding, e.g. a baseline's. The split
    rho does not change the count (the Inner-FFN and Outer-FFN share W), so this works for any
    outer_ratio."""
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
            if ".inner_ffn." in name:
                role = "inner_ffn"
            elif ".moe." in name:
                role = "moe"
            else:
                role = "attention" if name.startswith("attn.") else "outer_ffn"
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


# ----------------------------------------------------------------------------------------
# Token Prediction contribution ratio (section 4.2.2)


@torch.no_grad()
def sublayer_representations(model, idx):
    """[embedding, after attn 1, after FFN slot 1, after attn 2, ...], each (B*T, C) float32,
    and the kind of each step ('embedding', 'attention', 'ffn')."""
    x = model.tok_emb(idx)  # (B, T, C)
    reps, kinds = [x], ["embedding"]
    for block in model.blocks:
        x = block.attn(x)
        reps.append(x)
        kinds.append("attention")
        x = block.ffn(x)
        reps.append(x)
        kinds.append("ffn")
    return [r.reshape(-1, r.size(-1)).float() for r in reps], kinds


def token_prediction_accuracies(reps, targets, min_count=50):
    """Accuracy of nearest-class-vector prediction for each representation in `reps`
    (each (N, C)), targets (N,). Class vector of token c = normalised mean of the
    normalised representations whose target is c; tokens with < min_count positions are
    dropped, and accuracy is over the positions whose target kept a class vector."""
    counts = torch.bincount(targets)
    kept = (counts >= min_count).nonzero(as_tuple=True)[0]  # (K,) token ids with a class vector
    if kept.numel() == 0:
        raise ValueError(f"no target token occurs {min_count} times: analyse more batches or lower min_count")
    lookup = torch.full((counts.numel(),), -1, dtype=torch.long)
    lookup[kept] = torch.arange(kept.numel())
    label = lookup[targets]  # (N,) class index or -1
    use = label >= 0
    accuracies = []
    for r in reps:
        r = F.normalize(r[use], dim=-1)  # (M, C)
        sums = torch.zeros(kept.numel(), r.size(-1)).index_add_(0, label[use], r)  # (K, C)
        classes = F.normalize(sums, dim=-1)  # (K, C) normalised mean (the mean's direction)
        predicted = (r @ classes.T).argmax(dim=-1)  # highest cosine similarity
        accuracies.append((predicted == label[use]).float().mean().item())
    return accuracies


def contribution_ratio(accuracies, kinds):
    """Gains of each sublayer over the step before it, and the FFN share of all gains."""
    gains = [accuracies[i] - accuracies[i - 1] for i in range(1, len(accuracies))]
    ffn_gain = sum(g for g, k in zip(gains, kinds[1:]) if k == "ffn")
    total = sum(gains)
    return dict(accuracies=accuracies, kinds=kinds, gains=gains, ffn_ratio=ffn_gain / total if total else float("nan"),
                attention_ratio=(total - ffn_gain) / total if total else float("nan"))


@torch.no_grad()
def analyze_checkpoint(out_dir, split="val", n_batches=16, batch_size=16, min_count=50, seed=0):
    """Token Prediction contribution of a trained checkpoint on a few fixed batches of its dataset."""
    from pathlib import Path

    import numpy as np

    from checkpoint import load_checkpoint, model_from_checkpoint
    ckpt = load_checkpoint(Path(out_dir) / "ckpt.pt")
    model = model_from_checkpoint(ckpt).eval()
    cfg = ckpt["config"]
    data_dir = Path(cfg["data_dir"]) if cfg["data_dir"] else Path(__file__).resolve().parent / "data" / cfg["dataset"]
    data = np.memmap(data_dir / f"{split}.bin", dtype=np.uint16, mode="r")
    T = cfg["block_size"]
    g = torch.Generator().manual_seed(seed)
    ix = torch.randint(len(data) - T - 1, (n_batches * batch_size,), generator=g).tolist()
    x = torch.from_numpy(np.stack([data[i:i + T] for i in ix]).astype(np.int64))
    y = torch.from_numpy(np.stack([data[i + 1:i + 1 + T] for i in ix]).astype(np.int64))
    reps, kinds = [], None
    for b in range(n_batches):
        r, kinds = sublayer_representations(model, x[b * batch_size:(b + 1) * batch_size])
        reps.append(r)
    reps = [torch.cat([r[i] for r in reps]) for i in range(len(kinds))]
    result = contribution_ratio(token_prediction_accuracies(reps, y.reshape(-1), min_count), kinds)
    result["name"] = Path(out_dir).name
    return result


def ood_text():
    """The out-of-distribution text: the Python 3 documentation's topic pages (CPython's
    pydoc_data/topics.py, shipped with every CPython install), i.e. technical English
    prose and code instead of Shakespeare. Returns one string."""
    from pydoc_data.topics import topics
    return "\n\n".join(topics[k] for k in sorted(topics))


@torch.no_grad()
def char_text_loss(out_dir, text, n_windows=64, batch_size=16):
    """Mean next-character loss of a char-level checkpoint on `text` (characters outside the
    checkpoint's vocabulary are dropped), over n_windows evenly spaced windows of block_size."""
    import json
    from pathlib import Path

    from checkpoint import load_checkpoint, model_from_checkpoint
    ckpt = load_checkpoint(Path(out_dir) / "ckpt.pt")
    model = model_from_checkpoint(ckpt).eval()
    cfg = ckpt["config"]
    data_dir = Path(cfg["data_dir"]) if cfg["data_dir"] else Path(__file__).resolve().parent / "data" / cfg["dataset"]
    chars = json.loads((data_dir / "meta.json").read_text())["chars"]
    index = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([index[c] for c in text if c in index], dtype=torch.long)
    T = cfg["block_size"]
    starts = torch.linspace(0, len(ids) - T - 1, n_windows).long().tolist()
    x = torch.stack([ids[s:s + T] for s in starts])
    y = torch.stack([ids[s + 1:s + 1 + T] for s in starts])
    losses = [model(x[i:i + batch_size], y[i:i + batch_size])[1].item() for i in range(0, n_windows, batch_size)]
    return sum(losses) / len(losses)


def plot_contributions(results, path):
    """Figure-4-like plot: the FFN's and attention's cumulative share of the accuracy gain over depth."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for i, r in enumerate(results):
        total = sum(r["gains"]) or 1.0
        ffn, attn, cum_ffn, cum_attn = 0.0, 0.0, [0.0], [0.0]
        for g, k in zip(r["gains"], r["kinds"][1:]):
            ffn, attn = (ffn + g, attn) if k == "ffn" else (ffn, attn + g)
            if k == "ffn":  # one point per layer
                cum_ffn.append(ffn / total)
                cum_attn.append(attn / total)
        layers = range(len(cum_ffn))
        color = f"C{i}"
        ax.plot(layers, cum_ffn, "-o", color=color, label=f"{r['name']}: FFN ({100 * r['ffn_ratio']:.0f}%)")
        ax.plot(layers, cum_attn, "--", color=color, label=f"{r['name']}: attention")
    ax.set_xticks(range(len(cum_ffn)))
    ax.set_xlabel("layer")
    ax.set_ylabel("cumulative share of the accuracy gain")
    ax.set_title("Token Prediction contribution (section 4.2.2)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def format_split(split):
    return ", ".join(f"{k} {v / 1e6:.3f}M" for k, v in split.items())


DEFAULT_ARGS = dict(vocab_size=30522, block_size=128, n_layer=12, n_head=12, n_kv_head=None, n_embd=768,
                    head_dim=None, ffn_hidden=None, qk_norm="", tie_embeddings=True, dropout=0.0, ffn_mult=32,
                    outer_ratio=0.125, current_position="direct", n_experts=0, expert_hidden=None,
                    moe_place="before_ffn", balance_coef=0.01, analyze="", plot="docs/cea_contribution.png",
                    bench=False, batch_size=16, steps=10)

if __name__ == "__main__":
    import json
    import sys

    from configurator import parse_overrides
    args = parse_overrides(sys.argv[1:], DEFAULT_ARGS)
    analyze, plot = args.pop("analyze"), args.pop("plot")
    bench, batch_size, steps = args.pop("bench"), args.pop("batch_size"), args.pop("steps")
    if analyze:  # contribution ratios (+ OOD loss) of trained checkpoints: --analyze=out_a,out_b
        results = [analyze_checkpoint(d) for d in analyze.split(",")]
        text = ood_text()
        for d, r in zip(analyze.split(","), results):
            r["ood_loss"] = char_text_loss(d, text)
            print(json.dumps(dict(name=r["name"], ffn_ratio=round(r["ffn_ratio"], 4),
                                  attention_ratio=round(r["attention_ratio"], 4), ood_loss=round(r["ood_loss"], 4),
                                  accuracies=[round(a, 4) for a in r["accuracies"]])))
        plot_contributions(results, plot)
        print(f"wrote {plot}")
    elif bench:  # training tokens/s of this shape vs FFN-Wider (outer_ratio=1) in the same run, bf16 eager
        from bench import benchmark_shapes, markdown_table
        device = "cuda" if torch.cuda.is_available() else "cpu"
        shapes = {"ffn-wider": ("cea", {**args, "outer_ratio": 1.0}),
                  f"caa rho={args['outer_ratio']}": ("cea", args)}
        rows, _ = benchmark_shapes(shapes, batch_size, device, [torch.bfloat16], [False], steps=steps)
        print(markdown_table(rows))
        print(f"tokens/s ratio (CAA / FFN-Wider): {rows[1]['ratio']:.3f}")
    else:
        with torch.device("meta"):  # instant, even for the H=768 shapes
            model = build_model(**args)
        print(describe(model))
        print("split: " + format_split(param_split(model)))
