"""
The ><former: a transformer whose layers have different widths on one wide residual stream.

Paper: "Variable-Width Transformers" (the ><former), Zhaofeng Wu, Oliver Sieberling, Shawn Tan,
Rameswar Panda, Yury Polyanskiy, Yoon Kim (MIT, MIT-IBM Watson AI Lab), 2026. Reference code:
https://github.com/ZhaofengWu/variable-width-transformers

The idea
--------
Layer l gets its own width d_l (we write w_l): wide, a narrow bottleneck at ~3/4 of the depth,
wide ("><"). Parameters grow like w_l^2, attention FLOPs and KV cache like w_l: at equal parameters
the average width is smaller. One residual stream R of width D = max(d, max_l w_l), starting as
[embedding, zeros]; the resize f^l carries each coordinate from the last layer that wrote it:

    x^l = B^l(f^l(x^{l-1})) + f^l(x^{l-1})                                     (sec. 2)
    [f^l(x^{l-1})]_i = [x^{l'}]_i,  l' = max{ l~ < l : d_l~ >= i }   (0 if none)   (1)
    i.e.  R <- cat( Block_l(R[:w_l]), R[w_l:] )                                (eq. 1 in code)

Widths (Appendix A): bottleneck layer l* = r_l L of width r_d d, geometric on each side (a^-
before, a^+ after), equal endpoints d_1 = d_L = d_bar, parameters matched to the constant width:

    a^+ = (a^-)^(-(l*-1)/(L-l*))
    K d_bar^2 S2(a^-) - W_end(d_bar) = L K d^2,  S2 = sum_l c_l^2,  K = 4 + 3E    (App. A)
    W_end(d_bar) = 1{d_bar > d} (3 + E) d_bar (d_bar - d)  (first QKV on the padding, last W_2 rows cut)
    b(a^-) = d_bar(a^-) (a^-)^(l*-1) = d_l*   solved by bisection, then round(d_l / 32) * 32

What this file implements
-------------------------
`VariableWidthGPT`: model.GPT whose layer l is a plain model.Block of width w_l (n_head heads of
w_l / n_head, SwiGLU hidden 4 w_l; constant widths: exactly model.GPT). Expansions of sec. 4.4:
'carry' (eq. 1), 'zero', 'project' (a learned map from the kept w_{l-1} coordinates predicts the
new ones). Schedules constant | x | diamond | v | lambda by Appendix A, or `layer_widths`. W_end and
the "matched" count (`param_summary`); the table against the constant width (`report`).
Generation: forward(idx, cache=model.KVCache(model)) threads layer l's cache through layer_step;
layer l stores keys/values of its own width w_l, so narrow layers store narrower keys and the
cache's measured bytes (cache.nbytes) fall with the average width, as kv_cache_bytes_per_token
counts: the paper's KV-cache saving, measurable.

Deviations: where each choice comes from (the paper / the reference code (URL above) / ours)
- Final norm (the reference code): RMSNorm over R[:w_L], then truncated to d before the head, so
  the last MLP's rows past d (W_end) still move the norm's scale. If w_L < d (lambda) ours norms
  R[:d]; the reference norms R[:w_L] and fills the rest from earlier layers, un-normed.
- Per-layer init (the reference code's `variable_initialization`, on in its configs): layer l's
  matrices at std * sqrt(d / w_l), Var[W] ~ 1 / fan_in at every width. `scale_init_by_width`,
  default on, applied to the repo's std (0.02; out_proj 0.02 / sqrt(2L)).
- Attention multiplier: the reference code uses 1/head_dim (a muP rule; the paper trains every
  model, baseline included, with muP). Ours by default 1/sqrt(head_dim), as our baseline model.GPT;
  `attention_multiplier='head_dim'` gives the reference's (plain attention, no qk_norm).
- No muP (ours): the reference's configs use init 0.1, embedding x12, logits /8, residual x0.22,
  AdamW lr 1e-2 with muP groups; we use the repo's init and train.py's AdamW, as the baseline.
- Rounding (ours): continuous d_bar, widths floor(w / 32 + 1/2) * 32; the reference rounds d_bar to
  an integer first, then uses Python's round. Ours gives the paper's 200M widths (tested).
- The embedding is zero-padded in every expansion variant (ours; W_end assumes it); the
  reference's learned expansions also map the embedding to w_1.
- v / lambda (ours): one geometric progression, W_end at whichever end is wider than d. GQA
  (ours): K = 2 + 2 n_kv/n_head + 3E (16 without GQA, as in the paper).

Run (write-up and results: docs/variable_width.md)
-------------------------------------------------
    python variable_width.py --n_layer=16 --n_embd=640         # the 200M shape table (meta device)
    python variable_width.py config/variable_width_shakespeare_char_x.py   # the CPU shapes
    python train.py config/variable_width_shakespeare_char_x.py   # (and ..._constant.py)
    python experiments/variable_width_analysis.py --out_dirs=out-vw-constant,out-vw-x
"""

import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import GPT, AttentionSublayer, FFNSublayer, GPTConfig, LayerSpec, RMSNorm, linear_flops

SHAPES = ("constant", "x", "diamond", "v", "lambda")
EXPANSIONS = ("carry", "zero", "project")


# ----------------------------------------------------------------------------------------
# Width schedules and the parameter-matched solver of Appendix A


def shape_factors(shape, n_layer, bottleneck_layer, alpha):
    """c_l(alpha) with d_l = d_bar * c_l: the geometric profile, 1-indexed bottleneck layer l*."""
    L, k = n_layer, bottleneck_layer
    if shape == "lambda":  # narrowing all the way: l* = L
        return [alpha ** (l - 1) for l in range(1, L + 1)]
    if shape == "v":  # growing all the way: l* = 1, the mirror image
        return [alpha ** (L - l) for l in range(1, L + 1)]
    alpha_plus = alpha ** (-(k - 1) / (L - k))  # a^+ from d_1 = d_L
    return [alpha ** (l - 1) if l <= k else alpha ** (k - 1) * alpha_plus ** (l - k) for l in range(1, L + 1)]


def matched_scale(factors, n_embd, ffn_mult=4, kv_ratio=1.0, end_in=None, end_out=None):
    """The scale s (= d_bar for x / diamond) with K s^2 S2 - W_end = L K d^2 (Appendix A). W_end:
    end_in w_1 first-layer columns per padded coordinate (default 1 + 2 kv_ratio: QKV) and last
    rows of end_out w_L entries (default E: the MLP's W_2) past d; compose.py passes its own.
    The indicators 1{w_1 > d}, 1{w_L > d} are guessed and the self-consistent root kept."""
    d, L = n_embd, len(factors)
    qkv = 1 + 2 * kv_ratio  # 3 with plain attention
    K = qkv + 1 + 3 * ffn_mult  # 4 + 3E = 16 with plain attention
    e_in, e_out = qkv if end_in is None else end_in, ffn_mult if end_out is None else end_out
    S2 = sum(c * c for c in factors)
    c1, cL = factors[0], factors[-1]
    for first_wide in (0, 1):
        for last_wide in (0, 1):
            A = K * S2 - first_wide * e_in * c1 ** 2 - last_wide * e_out * cL ** 2
            B = (first_wide * e_in * c1 + last_wide * e_out * cL) * d
            C = -L * K * d * d
            s = (-B + math.sqrt(B * B - 4 * A * C)) / (2 * A)
            consistent = all(abs(s * c - d) <= 1e-9 * d or (s * c > d) == bool(wide)
                             for c, wide in ((c1, first_wide), (cL, last_wide)))
            if consistent:
                return s
    raise RuntimeError("no self-consistent endpoint width (should not happen)")


def bottleneck_index(shape, n_layer, bottleneck_layer_ratio):
    if shape in ("v", "lambda"):
        return 1 if shape == "v" else n_layer
    if n_layer < 3:
        raise ValueError(f"a {shape} shape needs n_layer >= 3 (a bottleneck strictly inside), got {n_layer}")
    return min(max(round(bottleneck_layer_ratio * n_layer), 2), n_layer - 1)  # l* = r_l L


def solve_widths(shape, n_layer, n_embd, bottleneck_layer_ratio=0.75, bottleneck_width_ratio=0.3,
                 width_multiple=32, ffn_mult=4, kv_ratio=1.0, end_in=None, end_out=None):
    """Per-layer widths for a shape, parameter-matched to a constant width n_embd (Appendix A;
    end_in / end_out: W_end's multiples, see matched_scale). Returns (widths rounded to
    width_multiple, dict with the unrounded widths, alpha, l*)."""
    if shape not in SHAPES:
        raise ValueError(f"width_schedule={shape!r}: choose one of {', '.join(SHAPES)} or give layer_widths")
    d, L = n_embd, n_layer
    if shape == "constant":
        return [d] * L, dict(unrounded=[float(d)] * L, alpha=1.0, bottleneck_layer=None)
    k = bottleneck_index(shape, L, bottleneck_layer_ratio)
    target = bottleneck_width_ratio * d  # d_l* = r_d d

    def bottleneck_width(alpha):  # b(a^-) = d_bar(a^-) c_l*(a^-)
        c = shape_factors(shape, L, k, alpha)
        return matched_scale(c, d, ffn_mult, kv_ratio, end_in, end_out) * c[k - 1]

    lo, hi = (1.0, 8.0) if shape == "diamond" else (1e-6, 1.0)  # diamond widens: a^- > 1
    f_lo, f_hi = bottleneck_width(lo) - target, bottleneck_width(hi) - target
    if f_lo * f_hi > 0:
        reach = sorted([bottleneck_width(lo) / d, bottleneck_width(hi) / d])
        raise ValueError(f"bottleneck_width_ratio={bottleneck_width_ratio} is out of reach for a {shape} shape "
                         f"with {L} layers: pick it in ({reach[0]:.2f}, {reach[1]:.2f})"
                         + (" (above 1 for a diamond)" if shape == "diamond" else " (below 1)"))
    for _ in range(200):  # 1-D bisection on a^-
        mid = 0.5 * (lo + hi)
        f_mid = bottleneck_width(mid) - target
        if (f_mid > 0) == (f_lo > 0):
            lo, f_lo = mid, f_mid
        else:
            hi = mid
    alpha = 0.5 * (lo + hi)
    c = shape_factors(shape, L, k, alpha)
    scale = matched_scale(c, d, ffn_mult, kv_ratio, end_in, end_out)
    unrounded = [scale * ci for ci in c]  # continuous widths; round only at the very end
    widths = [max(width_multiple, int(math.floor(w / width_multiple + 0.5)) * width_multiple) for w in unrounded]
    return widths, dict(unrounded=unrounded, alpha=alpha, bottleneck_layer=k)


# ----------------------------------------------------------------------------------------
# The model


def check_widths(widths, n_head):
    """Every layer keeps n_head heads of w_l / n_head dims, and RoPE needs an even head_dim."""
    for i, w in enumerate(widths):
        if w % (2 * n_head) != 0:
            raise ValueError(f"layer {i}: width {w} must be a multiple of 2 * n_head = {2 * n_head} "
                             f"(same heads in every layer, even head_dim for RoPE); round the widths "
                             f"to such a multiple (width_multiple)")


def check_width_rules(config):
    if config.attention_multiplier not in ("sqrt", "head_dim"):
        raise ValueError(f"attention_multiplier={config.attention_multiplier!r}: choose 'sqrt' (1/sqrt(head_dim)) "
                         f"or 'head_dim' (1/head_dim, the reference code's)")
    if config.attention_multiplier == "head_dim" and config.qk_norm:
        raise ValueError("attention_multiplier='head_dim' scales q before qk_norm, which would undo it: "
                         "use qk_norm='' with it")


def scale_queries(spec):
    """A forward hook on qkv_proj: q * head_dim^-1/2, so that SDPA's own 1/sqrt(head_dim) makes 1/head_dim."""
    q_dim = spec.n_head * spec.head_dim
    return lambda module, inputs, out: torch.cat((out[..., :q_dim] * spec.head_dim ** -0.5, out[..., q_dim:]), -1)


@dataclass
class VariableWidthConfig(GPTConfig):
    layer_widths: list[int] = field(default_factory=list)  # w_l; empty: n_embd everywhere
    expansion: str = "carry"  # how coordinates a layer gains are filled: carry | zero | project
    scale_init_by_width: bool = True  # layer l's matrices at std * sqrt(d / w_l), as the reference trained
    attention_multiplier: str = "sqrt"  # softmax(q.k * m): 'sqrt' m = 1/sqrt(hd) (ours), 'head_dim' 1/hd

    def __post_init__(self):
        if self.layers:
            raise ValueError("VariableWidthConfig builds its layers from layer_widths; do not pass layers")
        if self.expansion not in EXPANSIONS:
            raise ValueError(f"expansion={self.expansion!r}: choose one of {', '.join(EXPANSIONS)}")
        check_width_rules(self)
        d = self.n_embd
        self.layer_widths = list(self.layer_widths) or [d] * self.n_layer
        if len(self.layer_widths) != self.n_layer:
            raise ValueError(f"layer_widths has {len(self.layer_widths)} entries but n_layer={self.n_layer}: "
                             f"give one width per layer")
        if self.head_dim is not None and self.head_dim * self.n_head != d:
            raise ValueError(f"head_dim={self.head_dim}: the ><former keeps n_head={self.n_head} heads in every "
                             f"layer with head_dim = w_l / n_head; leave head_dim unset")
        ffn_hidden = self.ffn_hidden or 4 * d  # scales with the width: 4 w_l by default
        n_kv_head = self.n_kv_head or self.n_head
        check_widths(self.layer_widths, self.n_head)
        for i, w in enumerate(self.layer_widths):
            if (ffn_hidden * w) % d != 0:
                raise ValueError(f"layer {i}: its FFN width ffn_hidden * w / d = {ffn_hidden} * {w} / {d} is not "
                                 f"a whole number; pick widths (width_multiple) or ffn_hidden that make it one")
        self.layers = [LayerSpec(self.n_head, n_kv_head, w // self.n_head, ffn_hidden * w // d)
                       for w in self.layer_widths]
        super().__post_init__()


class VariableWidthGPT(GPT):
    """model.GPT whose layer l is a model.Block of width w_l on the first w_l coordinates of
    one residual stream R of width D = max(d, max w_l)."""

    def __init__(self, config: VariableWidthConfig):
        super().__init__(config)  # builds blocks via make_attention / make_ffn below, then init
        d, widths = config.n_embd, config.layer_widths
        self.stream_width = max([d] + widths)  # D
        self.final_width = max(widths[-1], d)  # the final norm's width (w_L unless w_L < d)
        if self.final_width != d:
            self.norm_f = RMSNorm(self.final_width, config.norm_eps)
        self.expansions = nn.ModuleDict()  # 'project' only: Linear(w_{l-1} -> w_l - w_{l-1})
        if config.expansion == "project":
            for l in range(1, len(widths)):
                if widths[l] > widths[l - 1]:
                    proj = nn.Linear(widths[l - 1], widths[l] - widths[l - 1], bias=False)
                    torch.nn.init.normal_(proj.weight, mean=0.0, std=0.02)
                    self.expansions[str(l)] = proj
        if config.attention_multiplier == "head_dim":  # the reference's 1/head_dim (a muP rule)
            for block, spec in zip(self.blocks, config.layers):
                if not isinstance(block.attn, AttentionSublayer):
                    raise ValueError("attention_multiplier='head_dim' is built for plain attention only")
                block.attn.attn.qkv_proj.register_forward_hook(scale_queries(spec))

    def init_weights(self):
        """model.GPT's init, then (scale_init_by_width) layer l's matrices times sqrt(d / w_l)."""
        super().init_weights()
        with torch.no_grad():
            for block, w in zip(self.blocks, self.config.layer_widths):
                for p in block.parameters():
                    if self.config.scale_init_by_width and p.dim() >= 2 and w != self.config.n_embd:
                        p.mul_(math.sqrt(self.config.n_embd / w))

    def make_attention(self, layer_idx, spec):
        return AttentionSublayer(self.config.layer_widths[layer_idx], spec, self.config)

    def make_ffn(self, layer_idx, spec):
        return FFNSublayer(self.config.layer_widths[layer_idx], spec.ffn_hidden, self.config)

    def layer_input(self, l, R):
        """f^l: the w_l-wide input of layer l read from the stream R (B, T, D)."""
        w = self.config.layer_widths[l]
        w_prev = self.config.layer_widths[l - 1] if l > 0 else w  # layer 0 reads [embedding, zeros]
        if self.config.expansion == "carry" or w <= w_prev:
            return R[..., :w]  # eq. (1): R holds each coordinate's last written value (or 0)
        kept = R[..., :w_prev]  # (B, T, w_{l-1})
        if self.config.expansion == "zero":
            return F.pad(kept, (0, w - w_prev))  # new coordinates start at 0
        return torch.cat((kept, self.expansions[str(l)](kept)), dim=-1)  # predict only the new ones

    def layer_step(self, l, R, cache=None):
        """R (B, T, D) -> R: layer l rewrites R[:w_l] and leaves R[w_l:] untouched (carry).
        cache: layer l's model.LayerKVCache (generation); it holds keys/values of width w_l."""
        w = self.config.layer_widths[l]
        out = self.blocks[l](self.layer_input(l, R), cache)  # (B, T, w_l)
        # torch.cat, not R[..., :w] += ...: an in-place write would clobber what RMSNorm saved
        return out if w == R.size(-1) else torch.cat((out, R[..., w:]), dim=-1)

    def residual_streams(self, idx):
        """[R_0, R_1, ..., R_L]: the wide stream after the embedding and after every layer."""
        x = self.emb_dropout(self.tok_emb(idx))  # (B, T, d)
        R = F.pad(x, (0, self.stream_width - x.size(-1)))  # (B, T, D): [embedding, zeros]
        streams = [R]
        for l in range(len(self.blocks)):
            R = self.layer_step(l, R)
            streams.append(R)
        return streams

    def head_input(self, R):
        """Final norm over R[:w_L], truncated to the d coordinates the LM head sees."""
        return self.norm_f(R[..., :self.final_width])[..., :self.config.n_embd]  # (B, T, d)

    def forward(self, idx, targets=None, cache=None):
        """model.GPT.forward on the wide stream; cache: a model.KVCache, idx then the new tokens."""
        B, T = idx.shape
        pos = 0 if cache is None else cache.length
        if pos + T > self.config.block_size:
            raise ValueError(f"sequence of length {pos + T} is longer than block_size={self.config.block_size}")
        x = self.emb_dropout(self.tok_emb(idx))  # (B, T, d)
        R = F.pad(x, (0, self.stream_width - x.size(-1)))  # (B, T, D)
        for l in range(len(self.blocks)):
            R = self.layer_step(l, R, None if cache is None else cache.layers[l])
        return self.logits_and_loss(self.head_input(R), targets)  # final norm at w_L, truncated to d

    def flops_per_token(self, seq_len=None):
        return super().flops_per_token(seq_len) + linear_flops(self.expansions)

    def endpoint_params(self):
        """Appendix A's W_end: first-layer QKV columns on the zero padding, last MLP-down rows past d."""
        d, widths = self.config.n_embd, self.config.layer_widths
        qkv = self.blocks[0].attn.attn.qkv_proj.weight  # (q + 2 kv, w_1)
        down = self.blocks[-1].ffn.mlp.out_proj.weight  # (w_L, hidden)
        return qkv.size(0) * max(widths[0] - d, 0) + down.size(1) * max(widths[-1] - d, 0)


def build_model(vocab_size=65, block_size=256, n_layer=6, n_head=6, n_kv_head=None, n_embd=384, head_dim=None,
                ffn_hidden=None, qk_norm="", tie_embeddings=True, dropout=0.0, layer_widths=None,
                width_schedule="x", bottleneck_layer_ratio=0.75, bottleneck_width_ratio=0.3, width_multiple=32,
                expansion="carry", scale_init_by_width=True, attention_multiplier="sqrt"):
    """A ><former: explicit `layer_widths`, or `width_schedule` (constant | x | diamond | v | lambda)
    with l* = r_l L, d_l* = r_d d, matched to the constant width n_embd, rounded to width_multiple."""
    if not layer_widths:
        ffn_mult = (ffn_hidden or 4 * n_embd) / n_embd
        layer_widths, _ = solve_widths(width_schedule, n_layer, n_embd, bottleneck_layer_ratio,
                                       bottleneck_width_ratio, width_multiple, ffn_mult,
                                       (n_kv_head or n_head) / n_head)
    return VariableWidthGPT(VariableWidthConfig(
        vocab_size=vocab_size, block_size=block_size, n_layer=n_layer, n_head=n_head, n_kv_head=n_kv_head,
        n_embd=n_embd, head_dim=head_dim, ffn_hidden=ffn_hidden, qk_norm=qk_norm, tie_embeddings=tie_embeddings,
        dropout=dropout, layer_widths=list(layer_widths), expansion=expansion,
        scale_init_by_width=scale_init_by_width, attention_multiplier=attention_multiplier))


# ----------------------------------------------------------------------------------------
# Accounting of Appendix A and the table against the constant width (any model.GPT)


def layer_widths_of(model):
    return list(getattr(model.config, "layer_widths", [model.config.n_embd] * model.config.n_layer))


def param_summary(model):
    """param_counts() plus the endpoint correction and the 'matched' count of Appendix A:
    model.budget() (non-embedding parameters without an untied head: the paper matches
    2vd + sum_l K w_l^2 and vd cancels on both sides) minus W_end."""
    counts = dict(model.param_counts())
    counts["endpoint"] = model.endpoint_params() if hasattr(model, "endpoint_params") else 0
    counts["matched"] = model.budget() - counts["endpoint"]
    return counts


def compare(model, baseline, seq_len=None):
    """Rows (name, model value, baseline value) for the report."""
    seq_len = seq_len or model.config.block_size
    pm, pb = param_summary(model), param_summary(baseline)
    wm, wb = layer_widths_of(model), layer_widths_of(baseline)
    return [
        ("average layer width", sum(wm) / len(wm), sum(wb) / len(wb)),
        ("residual stream width D", max(wm + [model.config.n_embd]), max(wb + [baseline.config.n_embd])),
        ("total params", pm["total"], pb["total"]),
        ("non-embedding params", pm["non_embedding"], pb["non_embedding"]),
        ("matched params (App. A)", pm["matched"], pb["matched"]),
        (f"FLOPs/token fwd (T={seq_len})", model.flops_per_token(seq_len), baseline.flops_per_token(seq_len)),
        ("  same, less W_end's 2 FLOPs/param", model.flops_per_token(seq_len) - 2 * pm["endpoint"],
         baseline.flops_per_token(seq_len) - 2 * pb["endpoint"]),
        ("KV cache bytes/token (bf16)", model.kv_cache_bytes_per_token(), baseline.kv_cache_bytes_per_token()),
    ]


def report(args):
    """The printable table of `python variable_width.py`: per-layer shapes, then ratios."""
    common = {k: args[k] for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_kv_head", "n_embd",
                                   "head_dim", "ffn_hidden", "qk_norm", "tie_embeddings", "dropout")}
    keys = ("width_schedule", "n_layer", "n_embd", "bottleneck_layer_ratio", "bottleneck_width_ratio", "width_multiple")
    with torch.device("meta"):  # any size, instantly
        model = build_model(**common, **{k: args[k] for k in keys + ("layer_widths", "expansion") if k not in common})
        baseline = GPT(GPTConfig(**common))
    lines = [f"{args['width_schedule'] if not args['layer_widths'] else 'explicit'} widths, "
             f"expansion={args['expansion']}, matched to a constant width d={args['n_embd']}, L={args['n_layer']}"]
    if not args["layer_widths"] and args["width_schedule"] != "constant":
        _, info = solve_widths(*(args[k] for k in keys), (args["ffn_hidden"] or 4 * args["n_embd"]) / args["n_embd"],
                               (args["n_kv_head"] or args["n_head"]) / args["n_head"])
        lines.append(f"solver: endpoint width {info['unrounded'][0]:.2f} (unrounded), alpha^- = {info['alpha']:.5f}, "
                     f"bottleneck layer l* = {info['bottleneck_layer']} (1-indexed)")
    lines.append("layer  width  heads  head_dim  kv_heads  ffn_hidden      params")
    for i, (block, s) in enumerate(zip(model.blocks, model.config.layers)):
        n = sum(p.numel() for p in block.parameters())
        lines.append(f"{i + 1:5d}  {s.n_head * s.head_dim:5d}  {s.n_head:5d}  {s.head_dim:8d}  {s.n_kv_head:8d}"
                     f"  {s.ffn_hidden:10d}  {n / 1e6:9.2f}M")
    lines += [f"widths: {layer_widths_of(model)}", f"\n{'':32s} {'><former':>14s} {'constant':>14s}  ratio"]
    for name, a, b in compare(model, baseline):
        lines.append(f"{name:32s} {a:14,.1f} {b:14,.1f}  {a / b:.4f}")
    pm = param_summary(model)
    lines.append(f"\n><former params by component: embedding {pm['embedding']:,}, lm_head {pm['lm_head']:,}, "
                 f"attention {pm['attention']:,}, ffn {pm['ffn']:,}, norms {pm['norms']:,}, other {pm['other']:,}, "
                 f"endpoint (W_end) {pm['endpoint']:,}")
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    from configurator import ConfigError, parse_overrides, train_defaults
    from model import default_args
    # train.py's keys too, so a training config file can be passed (its model keys, model_args, data's vocabulary)
    defaults = {**train_defaults(), **{k: v for k, v in default_args().items() if k not in ("layers", "rope_theta",
                                                                                           "norm_eps")}}
    defaults.update(vocab_size=100277, block_size=4096, n_layer=16, n_embd=640, n_head=16, tie_embeddings=False,
                    layer_widths=None, width_schedule="x", bottleneck_layer_ratio=0.75, bottleneck_width_ratio=0.3,
                    width_multiple=32, expansion="carry", dataset="")
    try:
        args = parse_overrides(sys.argv[1:], defaults)
        args.update(args.pop("model_args") or {})
        meta = Path(args["data_dir"] or f"data/{args['dataset']}") / "meta.json"
        if args["dataset"] and "--vocab_size" not in " ".join(sys.argv) and meta.exists():  # a training config
            args["vocab_size"] = json.loads(meta.read_text())["vocab_size"]
        print(report(args))
    except (ConfigError, ValueError) as e:
        raise SystemExit(f"error: {e}")
