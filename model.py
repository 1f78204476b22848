"""
The plain GPT: a small LLaMA-style decoder-only transformer, and the accounting every model
shares. The mechanism files change the shape of this one model.

    x_0 = E[idx]                                                       token embedding, (B, T, C)
    for each layer l = 1..L (two residual sublayers):
        x = x + W_o Attn(RoPE(W_q n(x)), RoPE(W_k n(x)), W_v n(x))    attention sublayer
        x = x + W_2 (silu(W_1 n(x)) * W_3 n(x))                        FFN sublayer (SwiGLU)
    logits = W_head n(x_L)                                             (B, T, vocab)

n() is RMSNorm; no biases, a SwiGLU of hidden 4 d, optional GQA and QK-norm, as the papers'
baselines.

    python model.py --n_layer=4 --n_embd=128 --n_head=4      # a shape's parameters and FLOPs/token
"""

import bisect
import contextlib
import functools
import math
from dataclasses import MISSING, dataclass, field, fields
from unittest import mock

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class LayerSpec:
    n_head: int
    n_kv_head: int  # GQA when < n_head
    head_dim: int
    ffn_hidden: int  # the hidden size of each SwiGLU in the layer's FFN slot; 0: no FFN


@dataclass
class GPTConfig:
    vocab_size: int = 65
    block_size: int = 256  # longest context the model is trained on
    n_embd: int = 384
    n_layer: int = 6
    n_head: int = 6
    n_kv_head: int | None = None  # None: n_head
    head_dim: int | None = None  # None: n_embd // n_head
    ffn_hidden: int | None = None  # None: 4 * n_embd
    qk_norm: str = ""  # '' (off), 'head' or 'full'
    tie_embeddings: bool = True
    dropout: float = 0.0
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    layers: list[LayerSpec] = field(default_factory=list)  # empty: n_layer uniform layers

    def __post_init__(self):
        for key in ("n_layer", "n_embd", "n_head", "n_kv_head", "head_dim", "ffn_hidden"):
            value = getattr(self, key)
            assert value is None or value >= 1, f"{key}={value} must be >= 1"
        assert self.qk_norm in ("", "head", "full"), f"qk_norm={self.qk_norm!r}: '', head or full"
        # layers may arrive as dicts, from a checkpoint or a config file
        self.layers = [LayerSpec(**s) if isinstance(s, dict) else s for s in self.layers]
        self.layers = self.layers or [self.uniform_layer() for _ in range(self.n_layer)]
        self.n_layer = len(self.layers)
        for s in self.layers:
            assert s.n_head % s.n_kv_head == 0, (
                f"n_head={s.n_head} must be a multiple of n_kv_head={s.n_kv_head}")
            assert s.head_dim % 2 == 0, f"head_dim={s.head_dim} must be even (RoPE rotates pairs)"

    def uniform_layer(self):
        assert self.head_dim or self.n_embd % self.n_head == 0, (
            f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}: set head_dim")
        return LayerSpec(n_head=self.n_head, n_kv_head=self.n_kv_head or self.n_head,
                         head_dim=self.head_dim or self.n_embd // self.n_head,
                         ffn_hidden=self.ffn_hidden or 4 * self.n_embd)


# ----------------------------------------------------------------------------------------
# Building blocks


class RMSNorm(nn.Module):
    """n(x) = x / sqrt(mean(x^2) + eps) * g"""

    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.size(-1),), self.weight, self.eps)


@functools.lru_cache(maxsize=32)
def rope_tables(head_dim, max_len, theta=10000.0):
    """RoPE's cos/sin tables, each (max_len, head_dim // 2). Computed on the CPU, so that a
    meta-device build gets real tables at no cost."""
    cpu = dict(dtype=torch.float32, device="cpu")
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, **cpu) / head_dim)
    angles = torch.outer(torch.arange(max_len, **cpu), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class CausalSelfAttention(nn.Module):
    """Causal attention with RoPE, optional GQA and QK-norm ('head' per head, 'full' over the
    projection, as OLMo-2)."""

    def __init__(self, dim, spec: LayerSpec, config: GPTConfig):
        super().__init__()
        self.n_head, self.n_kv_head, self.head_dim = spec.n_head, spec.n_kv_head, spec.head_dim
        self.q_dim, self.kv_dim = spec.n_head * spec.head_dim, spec.n_kv_head * spec.head_dim
        self.qkv_proj = nn.Linear(dim, self.q_dim + 2 * self.kv_dim, bias=False)  # W_q, W_k, W_v
        self.out_proj = nn.Linear(self.q_dim, dim, bias=False)  # W_o
        self.qk_norm, self.q_norm, self.k_norm = config.qk_norm, None, None
        if config.qk_norm:
            per_head = config.qk_norm == "head"
            self.q_norm = RMSNorm(spec.head_dim if per_head else self.q_dim, config.norm_eps)
            self.k_norm = RMSNorm(spec.head_dim if per_head else self.kv_dim, config.norm_eps)
        cos, sin = rope_tables(spec.head_dim, config.block_size, config.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, x):
        B, T, _ = x.shape
        q, kv = self.qkv_proj(x).split([self.q_dim, 2 * self.kv_dim], dim=-1)
        q, (k, v) = self.heads(q, self.q_norm), self.kv_heads(kv)  # (B, H(kv), T, hd)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           enable_gqa=self.n_kv_head != self.n_head)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, self.q_dim))

    def kv_heads(self, kv):
        k, v = kv.split(self.kv_dim, dim=-1)
        return self.heads(k, self.k_norm), self.heads(v, rope=False)

    def heads(self, x, norm=None, rope=True):
        B, T, _ = x.shape
        if norm is not None and self.qk_norm == "full":
            x = norm(x)
        x = x.view(B, T, -1, self.head_dim).transpose(1, 2)
        if norm is not None and self.qk_norm == "head":
            x = norm(x)
        return apply_rope(x, self.rope_cos[:T], self.rope_sin[:T]) if rope else x

    def extra_flops(self, seq_len):
        # q.k^T and attn@v over the full T x T score matrix, as torch.utils.flop_counter counts
        return 4 * seq_len * self.n_head * self.head_dim


class SwiGLU(nn.Module):
    """W_2 (silu(W_1 x) * W_3 x): d -> ffn_hidden -> d."""

    def __init__(self, dim, ffn_hidden):
        super().__init__()
        self.gate_up_proj = nn.Linear(dim, 2 * ffn_hidden, bias=False)  # W_1 and W_3 fused
        self.out_proj = nn.Linear(ffn_hidden, dim, bias=False)  # W_2

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.out_proj(F.silu(gate) * up)


class AttentionSublayer(nn.Module):
    """x -> x + Attn(n(x))"""

    def __init__(self, dim, spec: LayerSpec, config: GPTConfig):
        super().__init__()
        self.norm = RMSNorm(dim, config.norm_eps)
        self.attn = CausalSelfAttention(dim, spec, config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return x + self.dropout(self.attn(self.norm(x)))


class FFNSublayer(nn.Module):
    """x -> x + SwiGLU(n(x))"""

    def __init__(self, dim, ffn_hidden, config: GPTConfig):
        super().__init__()
        self.norm = RMSNorm(dim, config.norm_eps)
        self.mlp = SwiGLU(dim, ffn_hidden)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return x + self.dropout(self.mlp(self.norm(x)))


class Block(nn.Module):
    """One layer: the attention sublayer, then the FFN sublayer."""

    def __init__(self, attn: nn.Module, ffn: nn.Module):
        super().__init__()
        self.attn, self.ffn = attn, ffn

    def forward(self, x):
        return self.ffn(self.attn(x))


# ----------------------------------------------------------------------------------------
# The GPT


class GPT(nn.Module):
    """Token embedding, one block per LayerSpec, final RMSNorm, LM head.

    A mechanism overrides a seam: make_attention or make_ffn (a sublayer), make_block (the
    layer's wiring). A block is a module with forward(x); its `attn` and `ffn` parts
    count as attention and FFN parameters."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        d = config.n_embd
        self.tok_emb = nn.Embedding(config.vocab_size, d)
        self.emb_dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(self.make_block(i, s) for i, s in enumerate(config.layers))
        self.norm_f = RMSNorm(d, config.norm_eps)
        self.lm_head = nn.Linear(d, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        self.init_weights()

    def make_block(self, layer_idx, spec: LayerSpec) -> nn.Module:
        return Block(self.make_attention(layer_idx, spec), self.make_ffn(layer_idx, spec))

    def make_attention(self, layer_idx, spec: LayerSpec) -> nn.Module:
        return AttentionSublayer(self.config.n_embd, spec, self.config)

    def make_ffn(self, layer_idx, spec: LayerSpec) -> nn.Module:
        return FFNSublayer(self.config.n_embd, spec.ffn_hidden, self.config)

    def init_weights(self):
        """normal(0, 0.02) for every matrix, 0.02 / sqrt(2L) for every `out_proj` (GPT-2's rule:
        the residual stream does not grow with depth)."""
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = residual_std if name.endswith("out_proj.weight") else 0.02
                torch.nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, idx, targets=None):
        """(logits, loss); without targets only the last position's logits, and loss None."""
        x = self.embed(idx)  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        return self.logits_and_loss(self.norm_f(x), targets)

    def embed(self, idx):
        if idx.size(1) > self.config.block_size:
            raise ValueError(f"sequence of length {idx.size(1)} is longer than block_size="
                             f"{self.config.block_size}")
        return self.emb_dropout(self.tok_emb(idx))

    def logits_and_loss(self, x, targets=None):
        if targets is None:
            return self.lm_head(x[:, [-1], :]), None  # (B, 1, vocab)
        logits = self.lm_head(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1),
                               ignore_index=-1)
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None,
                 vocab_size=None):
        """idx (B, T) and max_new_tokens sampled tokens, never a padding id >= vocab_size; each
        step reads the last block_size tokens."""
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.config.block_size:])
            logits = logits[:, -1, :].float()
            if vocab_size is not None:
                logits[:, vocab_size:] = float("-inf")
            if temperature == 0:
                next_id = logits.argmax(dim=-1, keepdim=True)
            else:
                # the best logit at 0 first: a tiny temperature then gives -inf, never inf - inf
                logits = (logits - logits.max(dim=-1, keepdim=True).values) / temperature
                if top_k is not None:
                    kth_best = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]
                    logits = logits.masked_fill(logits < kth_best, float("-inf"))
                probs = F.softmax(logits, dim=-1)
                next_id = torch.multinomial(probs, num_samples=1, generator=generator)
            idx = torch.cat((idx, next_id), dim=1)
        return idx

    def param_counts(self):
        """Parameters by component, as the papers report them; non_embedding includes an untied
        head. Frozen parameters count too."""
        counts = dict(embedding=0, lm_head=0, attention=0, ffn=0, norms=0, other=0)
        norms = {name for name, m in self.named_modules() if isinstance(m, RMSNorm)}
        parts = {"tok_emb": "embedding", "lm_head": "lm_head", "attn": "attention", "ffn": "ffn"}
        for name, p in self.named_parameters():  # a tied head is tok_emb's weight, counted once
            path = name.split(".")
            part = path[2] if path[0] == "blocks" else path[0]
            counts["norms" if name.rpartition(".")[0] in norms else parts.get(part, "other")] += (
                p.numel())
        counts["total"] = sum(counts.values())
        counts["non_embedding"] = counts["total"] - counts["embedding"]
        return counts

    def budget(self):
        """What every shape is matched on: non-embedding parameters without an untied head."""
        counts = self.param_counts()
        return counts["non_embedding"] - counts["lm_head"]

    def kv_cache_bytes_per_token(self, bytes_per_element=2):
        return sum(2 * s.n_kv_head * s.head_dim * bytes_per_element for s in self.config.layers)

    def flops_per_token(self, seq_len=None):
        """Forward FLOPs per token at context seq_len (default block_size), 2 per multiply-add:
        every nn.Linear's, plus each module's extra_flops (attention's scores)."""
        seq_len = seq_len or self.config.block_size
        extra = sum(m.extra_flops(seq_len) for m in self.modules() if hasattr(m, "extra_flops"))
        return linear_flops(self) + extra

    def estimate_mfu(self, tokens_per_second, peak_flops, seq_len=None):
        """Achieved training FLOPs/s (3x forward) over the peak."""
        return 3 * self.flops_per_token(seq_len) * tokens_per_second / peak_flops


# ----------------------------------------------------------------------------------------
# Sizes, and shapes on the meta device


def padded_vocab_size(vocab_size, multiple=64):
    """A BPE vocabulary rounded up to a multiple of 64 (50257 -> 50304) for the GPU's tiles."""
    if vocab_size <= 1024:
        return vocab_size
    return -(-vocab_size // multiple) * multiple


def closest_size(count, target):
    """The n >= 1 whose count(n), growing with n, comes closest to target."""
    count = functools.cache(count)
    high = 1
    while count(high) < target:
        high *= 2
    n = bisect.bisect_left(range(high + 1), target, lo=max(1, high // 2), key=count)
    return min((max(1, n - 1), n), key=lambda n: abs(count(n) - target))


def linear_flops(module):
    """Forward FLOPs per token of every nn.Linear in module."""
    return sum(2 * m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))


@contextlib.contextmanager
def meta_device():
    """Build modules with shapes but no memory or values. Nothing is drawn: the meta normal_
    imports torch._dynamo, seconds of a command that only counts."""
    with torch.device("meta"), mock.patch("torch.nn.init.normal_", lambda tensor, *_, **__: tensor):
        yield


def shape_counts(model_cls, config):
    """param_counts() plus 'budget' of model_cls(config), built on the meta device."""
    with meta_device():
        model = model_cls(config)
    return {**model.param_counts(), "budget": model.budget()}


# ----------------------------------------------------------------------------------------
# Printing


def format_counts(counts):
    return ", ".join(f"{k} {v / 1e6:.2f}M" for k, v in counts.items() if v)


def describe(model):
    """A shape table: one row per layer, then parameters and FLOPs/token."""
    rows = ["layer  heads  kv_heads  head_dim  ffn_hidden"]
    for i, s in enumerate(model.config.layers):
        rows.append(f"{i:5d}  {s.n_head:5d}  {s.n_kv_head:8d}  {s.head_dim:8d}  {s.ffn_hidden:10d}")
    rows.append("parameters: " + format_counts(model.param_counts()))
    seq_len = model.config.block_size
    rows.append(f"forward FLOPs/token at T={seq_len}: {model.flops_per_token() / 1e6:.2f}M")
    return "\n".join(rows)


def shape_report(model, model_args, gpt_args, matched=True):
    gpt_budget = shape_counts(GPT, GPTConfig(**gpt_args))["budget"]
    own = {k: v for k, v in model_args.items() if k not in gpt_args or gpt_args[k] != v}
    how = "matched to the GPT of these settings" if matched else "as --model_args sets it"
    return (f"{type(model).__name__} {how}: {own}\n{describe(model)}"
            f"\nbudget (non-embedding parameters): {model.budget():,}, the GPT's {gpt_budget:,} "
            f"({model.budget() / gpt_budget - 1:+.1%})")


def default_args(cls=GPTConfig):
    """A config dataclass's defaults (None stays None), for command lines."""
    return {f.name: f.default_factory() if f.default_factory is not MISSING else f.default
            for f in fields(cls) if f.init}


def model_from_command_line(model_type, model_cls, config_cls, **defaults):
    """The model of sys.argv's settings over defaults, on the meta device; a setting it refuses
    ends the command with one line. Each file's __main__ prints one."""
    import sys

    from shapelab.configurator import ConfigError, build, parse_overrides, usage_error

    try:
        args = parse_overrides(sys.argv[1:], {**default_args(config_cls), **defaults})
        with meta_device():
            return build(model_type, model_cls, config_cls, **args)
    except ConfigError as e:
        usage_error(e)


if __name__ == "__main__":
    print(describe(model_from_command_line("gpt", GPT, GPTConfig)))
