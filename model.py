"""
The plain GPT of the shape lab: a small LLaMA-style decoder-only transformer, and the accounting
every model shares. Each mechanism file (hourglass.py, variable_width.py, cea.py, lws.py) changes
the *shape* of this one model, so this file knows nothing about any paper. Read it top to bottom,
like nanoGPT's model.py.

    x_0 = E[idx]                                                       token embedding, (B, T, C)
    for each layer l = 1..L (two residual sublayers):
        x = x + W_o Attn(RoPE(W_q n(x)), RoPE(W_k n(x)), W_v n(x))    attention sublayer
        x = x + W_2 (silu(W_1 n(x)) * W_3 n(x))                        FFN sublayer (SwiGLU)
    logits = W_head n(x_L)                                             (B, T, vocab)

n() is RMSNorm, Attn causal softmax attention (F.scaled_dot_product_attention). Unlike GPT-2, and
like LLaMA and the papers' baselines: RMSNorm and no biases, rotary positions instead of a position
table, a SwiGLU FFN of hidden size 4 d, optional grouped-query attention and QK-norm, a tied or
untied LM head; each choice is explained where it is made.

Top to bottom: the config, the modules (norm, RoPE, attention, FFN, block), `GPT` with its
make_attention / make_ffn seams, generate() and the accounting every shape is matched on
(param_counts, budget, FLOPs, KV bytes); then the KV cache, sizes (the vocabulary's rows, a
size matched to a count), the meta-device build (shape_counts), printing.

    python model.py --n_layer=4 --n_embd=128 --n_head=4      # a shape's parameters and FLOPs/token
"""

import contextlib
import functools
import math
from dataclasses import MISSING, dataclass, field, fields

import torch
import torch.nn as nn
import torch.nn.functional as F


# ----------------------------------------------------------------------------------------
# Configuration


@dataclass
class LayerSpec:
    """The shape of one transformer layer. The model is built from a list of them
    (GPTConfig.layers), so heads and FFN width may vary per layer: the plain GPT is the constant
    list, layer-wise scaling (lws.py) a non-constant one. The schedule formulas live in the
    mechanism files; model.py only builds whatever list it is given."""

    n_head: int  # query heads
    n_kv_head: int  # key/value heads (GQA when < n_head)
    head_dim: int  # size of one head; query dim = n_head * head_dim
    # the hidden size of each SwiGLU in this layer's FFN slot: 4 * n_embd for the plain GPT, the
    # bottleneck d_h of each hourglass sub-block, the Outer-FFN's rho W in CEA; 0: no FFN
    ffn_hidden: int


@dataclass
class GPTConfig:
    vocab_size: int = 65
    block_size: int = 256  # longest context the model is trained on
    n_embd: int = 384  # d, width of the residual stream
    n_layer: int = 6
    n_head: int = 6
    n_kv_head: int | None = None  # None: same as n_head (plain multi-head attention)
    head_dim: int | None = None  # None: n_embd // n_head
    # W, a plain layer's SwiGLU hidden size (None: 4 * n_embd); a mechanism's config derives each
    # layer's LayerSpec.ffn_hidden from it (CEA splits it, a ><former scales it with the width)
    ffn_hidden: int | None = None
    qk_norm: str = ""  # '' (off), 'head' or 'full' (see CausalSelfAttention)
    tie_embeddings: bool = True  # the LM head shares the token embedding's matrix
    dropout: float = 0.0
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    # Per-layer shapes. Empty: n_layer copies of (n_head, n_kv_head, head_dim, ffn_hidden).
    layers: list[LayerSpec] = field(default_factory=list)

    def __post_init__(self):
        for key in ("n_layer", "n_embd", "n_head", "n_kv_head", "head_dim", "ffn_hidden"):
            value = getattr(self, key)  # (None: derived from the others)
            assert value is None or value >= 1, f"{key}={value} must be >= 1"
        assert self.qk_norm in ("", "head", "full"), f"qk_norm={self.qk_norm!r}: '', head or full"
        # layers may arrive as plain dicts (from a checkpoint or a config file)
        self.layers = [LayerSpec(**s) if isinstance(s, dict) else s for s in self.layers]
        assert all(isinstance(s, LayerSpec) for s in self.layers), (
            f"layers={self.layers!r:.60}: give each layer as a dict of LayerSpec's fields")
        self.layers = self.layers or [self.uniform_layer() for _ in range(self.n_layer)]
        self.n_layer = len(self.layers)
        for s in self.layers:
            assert s.n_head % s.n_kv_head == 0, (
                f"n_head={s.n_head} must be a multiple of n_kv_head={s.n_kv_head}")
            assert s.head_dim % 2 == 0, f"head_dim={s.head_dim} must be even (RoPE rotates pairs)"

    def uniform_layer(self):
        """The layer shape of a plain GPT, from n_head, n_kv_head, head_dim and ffn_hidden."""
        assert self.head_dim or self.n_embd % self.n_head == 0, (
            f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}: set head_dim")
        return LayerSpec(n_head=self.n_head, n_kv_head=self.n_kv_head or self.n_head,
                         head_dim=self.head_dim or self.n_embd // self.n_head,
                         ffn_hidden=self.ffn_hidden or 4 * self.n_embd)


# ----------------------------------------------------------------------------------------
# Building blocks


class RMSNorm(nn.Module):
    """n(x) = x / sqrt(mean(x^2) + eps) * g   (no bias, no mean subtraction)

    Instead of GPT-2's LayerNorm, and no biases anywhere in the model: what the papers' baselines
    (LLaMA, OLMo-2, the ><former's reference) use; fewer parameters, same quality."""

    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.size(-1),), self.weight, self.eps)


@functools.lru_cache(maxsize=32)
def rope_tables(head_dim, max_len, theta=10000.0):
    """cos/sin tables for rotary embeddings, each (max_len, head_dim // 2). Rotary position
    embeddings (RoPE) on queries and keys replace GPT-2's learned absolute position table: no
    position parameters, and the model is defined for any context (the tables end at block_size,
    the longest context trained on). Computed once on the CPU whatever the default device, and
    shared by every layer of that head size: the model moves them with its .to(device) (a copy),
    and a shapes-only build (meta_device) gets the real tables at no cost."""
    cpu = dict(dtype=torch.float32, device="cpu")
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, **cpu) / head_dim)
    angles = torch.outer(torch.arange(max_len, **cpu), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):
    """Rotate each pair (x_i, x_{i+d/2}) of every head by a position-dependent angle.
    x: (B, H, T, hd); cos, sin: (T, hd/2)."""
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def causal_attention(q, k, v, pos=0, enable_gqa=False):
    """Softmax attention of the T queries q (B, H, T, hd) at positions pos..pos+T-1 over the keys
    and values k, v (B, Hkv, pos+T, hd) of positions 0..pos+T-1, each query seeing keys up to its
    own position. Training and prefill (pos = 0): the usual causal mask. One new token: it may see
    every key, no mask. T > 1 new tokens after a cache: the causal mask shifted by pos (SDPA's
    is_causal would align it to the top-left, i.e. to position 0)."""
    T, S = q.size(2), k.size(2)
    if pos == 0:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=enable_gqa)
    if T == 1:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=enable_gqa)
    mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=pos)  # s <= pos + t
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=enable_gqa)


class CausalSelfAttention(nn.Module):
    """Multi-head causal attention with RoPE and optional GQA / QK-norm. No norm, no residual.

    GQA: n_kv_head < n_head key/value heads, each shared by n_head / n_kv_head query heads (a
    smaller KV cache). QK-norm: 'head' is an RMSNorm over each head's vector, 'full' one RMSNorm
    over the whole q and k projections, as OLMo-2 and the LWS paper count it.

    The seam a mechanism builds on: qkv(x, pos) makes the queries, keys and values of x, and
    heads() is the head split, QK-norm and rotation that every query and key goes through. A
    subclass that takes its keys and values from elsewhere (cea.py) reuses the projections, the
    QK-norm and the RoPE tables set up here and calls heads() / kv_heads() on its own inputs."""

    def __init__(self, dim, spec: LayerSpec, config: GPTConfig):
        super().__init__()
        self.n_head, self.n_kv_head, self.head_dim = spec.n_head, spec.n_kv_head, spec.head_dim
        self.q_dim, self.kv_dim = spec.n_head * spec.head_dim, spec.n_kv_head * spec.head_dim
        self.qkv_proj = nn.Linear(dim, self.q_dim + 2 * self.kv_dim, bias=False)  # W_q, W_k, W_v
        self.out_proj = nn.Linear(self.q_dim, dim, bias=False)  # W_o
        self.qk_norm, self.q_norm, self.k_norm = config.qk_norm, None, None
        if config.qk_norm:  # over each head's vector ('head') or the whole projection ('full')
            per_head = config.qk_norm == "head"
            self.q_norm = RMSNorm(spec.head_dim if per_head else self.q_dim, config.norm_eps)
            self.k_norm = RMSNorm(spec.head_dim if per_head else self.kv_dim, config.norm_eps)
        cos, sin = rope_tables(spec.head_dim, config.block_size, config.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, x, cache=None):
        """x: (B, T, C). With a LayerKVCache, x holds the new tokens at positions pos..pos+T-1
        (pos = cache.length): their keys/values join the cache and every query attends to all
        cached positions up to its own."""
        B, T, _ = x.shape
        pos = 0 if cache is None else cache.length
        q, k, v = self.qkv(x, pos)  # (B, H, T, hd), (B, Hkv, T, hd), (B, Hkv, T, hd)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, Hkv, pos + T, hd): every position so far
        y = causal_attention(q, k, v, pos, enable_gqa=self.n_kv_head != self.n_head)  # (B,H,T,hd)
        y = y.transpose(1, 2).reshape(B, T, self.q_dim)  # (B, T, H*hd)
        return self.out_proj(y)

    def qkv(self, x, pos=0):
        """Queries, keys and values of x (B, T, C) at positions pos..pos+T-1, split into heads:
        W_q x (B, H, T, hd) and W_k x (B, Hkv, T, hd), QK-normed and rotated; W_v x (B, Hkv, T, hd).
        """
        q, kv = self.qkv_proj(x).split([self.q_dim, 2 * self.kv_dim], dim=-1)
        return (self.heads(q, self.q_norm, pos), *self.kv_heads(kv, pos))

    def kv_heads(self, kv, pos):
        """[W_k x, W_v x] (B, T, 2 Hkv*hd) -> the keys (QK-normed, rotated) and values in heads."""
        k, v = kv.split(self.kv_dim, dim=-1)
        return self.heads(k, self.k_norm, pos), self.heads(v)

    def heads(self, x, norm=None, pos=None):
        """(B, T, n*hd) -> (B, n, T, hd). Queries and keys (norm: self.q_norm or self.k_norm, None
        without QK-norm) are QK-normed, then rotated to their positions pos..pos+T-1; values (no
        pos) are only split."""
        B, T, _ = x.shape
        if norm is not None and self.qk_norm == "full":
            x = norm(x)
        x = x.view(B, T, -1, self.head_dim).transpose(1, 2)  # (B, n, T, hd)
        if norm is not None and self.qk_norm == "head":
            x = norm(x)
        if pos is None:
            return x
        return apply_rope(x, self.rope_cos[pos:pos + T], self.rope_sin[pos:pos + T])

    def flops_per_token(self, seq_len):
        # projections, plus q.k^T and attn@v: each 2 * T * hd FLOPs per head per token.
        # Counted over the full T x T score matrix, as torch.utils.flop_counter does.
        return linear_flops(self) + 4 * seq_len * self.n_head * self.head_dim


class SwiGLU(nn.Module):
    """W_2 (silu(W_1 x) * W_3 x): d -> ffn_hidden -> d. No norm, no residual.

    The plain GPT's ffn_hidden is 4 d: three d x 4d matrices, 12 d^2 parameters per layer instead
    of GPT-2's 8 d^2. LLaMA shrinks the hidden size to ~8/3 d to keep 8 d^2; the shape papers we
    implement (hourglass, LWS, ><former) all use 4 d with SwiGLU, so we do too, and their
    parameter tables come out right."""

    def __init__(self, dim, ffn_hidden):
        super().__init__()
        self.gate_up_proj = nn.Linear(dim, 2 * ffn_hidden, bias=False)  # W_1 and W_3 fused
        self.out_proj = nn.Linear(ffn_hidden, dim, bias=False)  # W_2

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)  # (B, T, ffn_hidden) each
        return self.out_proj(F.silu(gate) * up)


class AttentionSublayer(nn.Module):
    """Residual sublayer: x -> x + Attn(n(x))."""

    def __init__(self, dim, spec: LayerSpec, config: GPTConfig):
        super().__init__()
        self.norm = RMSNorm(dim, config.norm_eps)
        self.attn = CausalSelfAttention(dim, spec, config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x, cache=None):  # (B, T, C) -> (B, T, C)
        return x + self.dropout(self.attn(self.norm(x), cache))

    def flops_per_token(self, seq_len):
        return self.attn.flops_per_token(seq_len)


class FFNSublayer(nn.Module):
    """Residual sublayer: x -> x + SwiGLU(n(x))."""

    def __init__(self, dim, ffn_hidden, config: GPTConfig):
        super().__init__()
        self.norm = RMSNorm(dim, config.norm_eps)
        self.mlp = SwiGLU(dim, ffn_hidden)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):  # (B, T, C) -> (B, T, C)
        return x + self.dropout(self.mlp(self.norm(x)))

    def flops_per_token(self, seq_len):
        return linear_flops(self)


class Block(nn.Module):
    """One transformer layer: an attention sublayer, then an FFN sublayer."""

    def __init__(self, attn: nn.Module, ffn: nn.Module):
        super().__init__()
        self.attn, self.ffn = attn, ffn

    def forward(self, x, cache=None):
        """cache: this layer's LayerKVCache (generation), for the attention sublayer only."""
        return self.ffn(self.attn(x) if cache is None else self.attn(x, cache=cache))

    def flops_per_token(self, seq_len):
        return self.attn.flops_per_token(seq_len) + self.ffn.flops_per_token(seq_len)


# ----------------------------------------------------------------------------------------
# The GPT


class GPT(nn.Module):
    """The plain GPT: token embedding, one Block per LayerSpec of config.layers, final RMSNorm,
    LM head (tied to the embedding or not).

    Each layer is a Block of two residual sublayers, each a module mapping the residual stream
    x -> x_new (norm and residual add inside): make_attention(layer_idx, spec) builds the first,
    make_ffn(layer_idx, spec) the second. A mechanism swaps a sublayer by subclassing GPT and
    overriding one of them (hourglass.py: make_ffn; cea.py: both); a sublayer may be any module
    with forward(x) -> x_new (attention: forward(x, cache=None)) and flops_per_token(seq_len), so
    parameter accounting and FLOPs per token stay correct for every mechanism.

    forward(idx, targets=None, cache=None) returns (logits, loss): logits (B, T, vocab) and the
    cross-entropy with targets; without targets, the last position's logits (B, 1, vocab) and
    None. generate() samples from it, with a KVCache by default."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        d = config.n_embd
        self.tok_emb = nn.Embedding(config.vocab_size, d)
        self.emb_dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            Block(self.make_attention(i, spec), self.make_ffn(i, spec))
            for i, spec in enumerate(config.layers))
        self.norm_f = RMSNorm(d, config.norm_eps)
        self.lm_head = nn.Linear(d, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        self.init_weights()

    # --- the two seams a mechanism overrides ---

    def make_attention(self, layer_idx, spec: LayerSpec) -> nn.Module:
        return AttentionSublayer(self.config.n_embd, spec, self.config)

    def make_ffn(self, layer_idx, spec: LayerSpec) -> nn.Module:
        return FFNSublayer(self.config.n_embd, spec.ffn_hidden, self.config)

    # ---

    def init_weights(self):
        """normal(0, 0.02) for every matrix; the output projection of every residual sublayer
        (parameters named `out_proj`) at 0.02 / sqrt(2L), so that the residual stream does not
        grow with depth (GPT-2's rule). Drawn in the order of named_parameters()."""
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for name, p in self.named_parameters():
            if p.dim() < 2:
                continue  # norm gains stay at 1
            std = residual_std if name.endswith("out_proj.weight") else 0.02
            torch.nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, idx, targets=None, cache=None):
        """idx: (B, T) token ids. Returns (logits, loss); loss is None without targets, and
        then only the last position's logits are computed (all that sampling needs).
        cache: a KVCache (generation); idx then holds only the new tokens, at positions
        cache.length .. cache.length + T - 1."""
        B, T = idx.shape
        pos = 0 if cache is None else cache.length
        if pos + T > self.config.block_size:
            raise ValueError(f"sequence of length {pos + T} is longer than block_size="
                             f"{self.config.block_size}")
        x = self.emb_dropout(self.tok_emb(idx))  # (B, T, C)
        for l, block in enumerate(self.blocks):
            x = block(x, None if cache is None else cache.layers[l])  # (B, T, C)
        return self.logits_and_loss(self.norm_f(x), targets)

    def logits_and_loss(self, x, targets=None):
        """The LM head on the final normed stream x (B, T, C), and the cross-entropy loss."""
        if targets is None:
            return self.lm_head(x[:, [-1], :]), None  # (B, 1, vocab)
        logits = self.lm_head(x)  # (B, T, vocab)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1),
                               ignore_index=-1)
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None,
                 use_cache=True, vocab_size=None):
        """Append max_new_tokens tokens to idx (B, T). temperature=0 (or top_k=1) is greedy.
        vocab_size: the tokenizer's vocabulary; ids >= vocab_size (rows that pad the embedding,
        see padded_vocab_size) are never sampled.
        use_cache=True: prefill a KVCache with the context, then feed one token per step.
        use_cache=False: recompute the whole context (up to block_size tokens) every step.
        Both give the same tokens until the sequence outgrows block_size (where the RoPE tables
        and the training context end). Then the uncached path slides its window one token per
        step, while the cache, full, is rebuilt from the last block_size // 2 tokens (a prefill)
        and filled again: from there on the two see different contexts and their samples differ."""
        block_size, cache = self.config.block_size, None
        for _ in range(max_new_tokens):
            if not use_cache:
                logits, _ = self(idx[:, -block_size:])
            elif cache is None or cache.length == block_size:  # prefill: first step or a full cache
                keep = block_size if cache is None else max(1, block_size // 2)
                cache = KVCache(self)
                logits, _ = self(idx[:, -keep:], cache=cache)
            else:
                logits, _ = self(idx[:, -1:], cache=cache)  # only the newest token
            logits = logits[:, -1, :].float()  # (B, vocab)
            if vocab_size is not None and vocab_size < logits.size(-1):
                logits[:, vocab_size:] = float("-inf")  # padding ids
            if temperature == 0 or top_k == 1:
                next_id = logits.argmax(dim=-1, keepdim=True)
            else:
                # (the best logit at 0 first: a tiny temperature then gives -inf, never inf - inf)
                logits = (logits - logits.max(dim=-1, keepdim=True).values) / temperature
                if top_k is not None:
                    kth_best = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]
                    logits = logits.masked_fill(logits < kth_best, float("-inf"))
                probs = F.softmax(logits, dim=-1)
                next_id = torch.multinomial(probs, num_samples=1, generator=generator)
            idx = torch.cat((idx, next_id), dim=1)
        return idx

    # --- accounting ---
    # The accounting every model shares: param_counts() (embedding, attention, FFN, norms, ... the
    # way the papers report them), budget() (non-embedding parameters without an untied head:
    # what every shape in this repo is matched on), flops_per_token(), kv_cache_bytes_per_token()
    # and estimate_mfu() (against a peak from shapelab/hardware.py). Drivers (compare.py, bench.py,
    # train.py) take them from here and need no mechanism file for them.

    def param_counts(self):
        """Parameters by component, the way the papers report them:
        embedding (token table), lm_head (0 when tied), attention and ffn (matrices of the
        attention / FFN sublayers), norms (every RMSNorm gain), non_embedding = total - embedding
        (so it includes an untied head), and total. Frozen parameters are counted too."""
        counts = dict(embedding=self.tok_emb.weight.numel(), lm_head=0, attention=0, ffn=0, norms=0,
                      other=0)
        if not self.config.tie_embeddings:
            counts["lm_head"] = self.lm_head.weight.numel()
        seen = {id(self.tok_emb.weight), id(self.lm_head.weight)}
        for block in self.blocks:
            for part, module in (("attention", block.attn), ("ffn", block.ffn)):
                for m in module.modules():
                    for p in m.parameters(recurse=False):
                        if id(p) not in seen:
                            seen.add(id(p))
                            counts["norms" if isinstance(m, RMSNorm) else part] += p.numel()
        for p in self.parameters():  # outside the blocks: the final norm, a mechanism's extras
            if id(p) not in seen:
                seen.add(id(p))
                counts["norms" if p is self.norm_f.weight else "other"] += p.numel()
        counts["total"] = sum(counts.values())
        counts["non_embedding"] = counts["total"] - counts["embedding"]
        return counts

    def budget(self):
        """The parameter budget every shape in this repo is matched on: non-embedding parameters
        without an untied LM head (attention + FFN + norm gains + a mechanism's extras). With tied
        embeddings it equals param_counts()['non_embedding']."""
        counts = self.param_counts()
        return counts["non_embedding"] - counts["lm_head"]

    def kv_cache_bytes_per_token(self, bytes_per_element=2):
        """Keys and values every layer keeps for one generated token: sum_l 2 n_kv_head_l head_dim_l
        elements (bf16: 2 bytes each). GQA, fewer heads or narrower heads shrink it."""
        return sum(2 * s.n_kv_head * s.head_dim * bytes_per_element for s in self.config.layers)

    def flops_per_token(self, seq_len=None):
        """Forward FLOPs per token at context seq_len (default block_size): matmuls and
        attention scores, 2 FLOPs per multiply-add. Training costs ~3x this."""
        seq_len = seq_len or self.config.block_size
        blocks = sum(block.flops_per_token(seq_len) for block in self.blocks)
        return blocks + linear_flops(self.lm_head)

    def estimate_mfu(self, tokens_per_second, peak_flops, seq_len=None):
        """Model FLOPs utilization: achieved training FLOPs/s (3x forward) over the peak."""
        return 3 * self.flops_per_token(seq_len) * tokens_per_second / peak_flops


# ----------------------------------------------------------------------------------------
# The KV cache of generation


class LayerKVCache:
    """The keys and values one attention layer has computed so far, kept so that each new token
    costs one position of work instead of the whole context. The buffers are allocated on the
    first append, for max_len positions, in the dtype of the keys (the model's activation dtype:
    bf16 under autocast)."""

    def __init__(self, max_len):
        self.max_len = max_len  # the model's block_size: RoPE tables and training end there
        self.keys = self.values = None  # (B, Hkv, max_len, hd) each, once allocated
        self.length = 0  # positions stored = the position of the next new token

    def append(self, k, v):
        """Store k, v (B, Hkv, T, hd) at positions length..length+T-1; return the keys and values
        of every position so far, (B, Hkv, length, hd) each."""
        T = k.size(2)
        if self.length + T > self.max_len:
            raise ValueError(f"KV cache full: {self.length} + {T} positions > {self.max_len} "
                             f"(block_size)")
        if self.keys is None:
            B, H, _, hd = k.shape
            self.keys = k.new_empty(B, H, self.max_len, hd)
            self.values = v.new_empty(B, v.size(1), self.max_len, v.size(3))
        self.keys[:, :, self.length:self.length + T] = k
        self.values[:, :, self.length:self.length + T] = v
        self.length += T
        return self.keys[:, :, :self.length], self.values[:, :, :self.length]

    @property
    def nbytes(self):
        """Bytes of the keys and values stored so far (the buffer holds max_len positions)."""
        if self.keys is None:
            return 0
        return (self.keys.nbytes + self.values.nbytes) // self.max_len * self.length


class KVCache:
    """One LayerKVCache per layer (`layers[l]`), for GPT.forward(idx, cache=...).

    generate() adds one token at a time. Recomputing the whole context for each one repeats all
    the earlier positions' work; a KVCache instead keeps every attention layer's keys and values
    (LayerKVCache: (B, n_kv_head, block_size, head_dim) each, allocated on first use, in the
    activation dtype). One prefill pass over the prompt fills it, then each step feeds only the
    newest token: RoPE rotates its query and key at its absolute position, its key/value join the
    cache, and it attends to every cached position. The cache stores sum_l 2 n_kv_head_l
    head_dim_l numbers per token, GPT.kv_cache_bytes_per_token() (GQA, fewer or narrower heads
    shrink it; `nbytes` measures it). At block_size positions the cache is full: generate()
    rebuilds it (see there). Every attention sublayer takes forward(x, cache=None), the cache
    being its LayerKVCache; FFN sublayers never see the cache."""

    def __init__(self, model):
        self.layers = [LayerKVCache(model.config.block_size) for _ in model.blocks]

    @property
    def length(self):
        return self.layers[0].length

    @property
    def nbytes(self):
        return sum(layer.nbytes for layer in self.layers)


# ----------------------------------------------------------------------------------------
# Sizes: the vocabulary's rows, a size matched to a count, the FLOPs of a module's matrices


def padded_vocab_size(vocab_size, multiple=64):
    """The embedding / LM-head size for a tokenizer of vocab_size ids: a BPE vocabulary (more
    than 1024 ids) rounded up to a multiple of 64 (GPT-2's 50257 -> 50304), so the LM head, the
    largest matmul of a small model, tiles evenly on a GPU's tensor cores (nanoGPT's trick). The
    extra rows are never a target and generate(vocab_size=...) never samples them. A character
    vocabulary (65 ids) stays as it is: its head costs next to nothing, and padding it would only
    change the parameter counts and checkpoints of every char run for no speed."""
    if vocab_size <= 1024:
        return vocab_size
    return -(-vocab_size // multiple) * multiple



def closest_size(count, target):
    """The integer n >= 1 (a hidden size, a bottleneck width) whose count(n) comes closest to
    target, for a count that grows with n. It starts where the line through n = 1 and 2 points,
    steps (doubling) until it passes the target, then bisects: a count that bends (a learner's
    taper, an extra norm) still matches, and a straight one costs a few counts."""
    count = functools.cache(count)
    low = high = max(1, 1 + round((target - count(1)) / max(count(2) - count(1), 1)))
    step = 1
    while count(high) < target:  # up: low stays below the target
        low, high, step = high, high + step, 2 * step
    while low > 1 and count(low) >= target:  # down: high stays at or above it
        low, high, step = max(1, low - step), low, 2 * step
    while high - low > 1:  # count(low) < target <= count(high), or low = 1
        mid = (low + high) // 2
        low, high = (mid, high) if count(mid) < target else (low, mid)
    return min((low, high), key=lambda n: abs(count(n) - target))


def linear_flops(module):
    """Forward FLOPs per token of every nn.Linear inside `module`: one multiply-add per weight."""
    return sum(2 * m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))


# ----------------------------------------------------------------------------------------
# Shapes only: building on the meta device


@contextlib.contextmanager
def meta_device():
    """Modules built inside hold meta tensors: shapes and parameter counts at any size, with no
    memory and no values. Nothing is drawn for them: the meta form of normal_ imports
    torch._dynamo at its first call, a large part of the start of a CPU command that only checks
    or counts models (rope_tables computes its small tables on the CPU for the same reason)."""
    with torch.device("meta"), _NoMetaDraws():
        yield


def shape_counts(model_cls, config):
    """model_cls(config).param_counts() with its budget() as 'budget', built on the meta device:
    the one way a shape is counted from its settings (matching, tables), at any size, instantly."""
    with meta_device():
        model = model_cls(config)
    return {**model.param_counts(), "budget": model.budget()}


class _NoMetaDraws(torch.overrides.TorchFunctionMode):
    """nn.init.normal_ of a meta tensor returns it as it is (nn.Embedding draws its weights when
    built)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.init.normal_:
            tensor = args[0] if args else kwargs["tensor"]
            if tensor.is_meta:
                return tensor
        return func(*args, **kwargs)


# ----------------------------------------------------------------------------------------
# Command line and printing


def format_counts(counts):
    return ", ".join(f"{k} {v / 1e6:.2f}M" for k, v in counts.items() if v)


def describe(model, seq_len=None):
    """A printable shape table: one row per layer, then parameters and FLOPs/token."""
    rows = ["layer  heads  kv_heads  head_dim  ffn_hidden"]
    for i, s in enumerate(model.config.layers):
        rows.append(f"{i:5d}  {s.n_head:5d}  {s.n_kv_head:8d}  {s.head_dim:8d}  {s.ffn_hidden:10d}")
    rows.append("parameters: " + format_counts(model.param_counts()))
    seq_len = seq_len or model.config.block_size
    rows.append(f"forward FLOPs/token at T={seq_len}: {model.flops_per_token(seq_len) / 1e6:.2f}M")
    return "\n".join(rows)


def shape_report(model, model_args, gpt_args, matched=True):
    """What train.py prints for a mechanism's model: the settings that make it differ from the
    plain GPT of gpt_args, its per-layer shape (describe; the widths of a variable-width stream)
    and its budget next to that GPT's."""
    with meta_device():
        gpt_budget = GPT(GPTConfig(**gpt_args)).budget()
    own = {k: v for k, v in model_args.items() if k not in gpt_args or gpt_args[k] != v}
    how = "matched to the GPT of these settings" if matched else "as --model_args sets it"
    rows = [f"{type(model).__name__} {how}: {own}"]
    if matched:
        rows[0] += " (--model_args sets a shape by hand)"
    widths = getattr(model.config, "layer_widths", None)
    if widths:
        rows.append(f"layer widths: {widths}")
    rows.append(describe(model))
    rows.append(f"budget (non-embedding parameters): {model.budget():,}, the GPT's {gpt_budget:,} "
                f"({model.budget() / gpt_budget - 1:+.1%})")
    return "\n".join(rows)


def default_args(cls=GPTConfig):
    """The un-resolved defaults of a config dataclass (None stays None), for command lines."""
    return {f.name: f.default_factory() if f.default_factory is not MISSING else f.default
            for f in fields(cls) if f.init}


if __name__ == "__main__":
    import sys

    from shapelab.configurator import ConfigError, build, parse_overrides, usage_error

    try:
        args = parse_overrides(sys.argv[1:], default_args())
        print(describe(build("gpt", GPT, GPTConfig, **args)))
    except ConfigError as e:
        usage_error(e)
