"""
Hourglass FFN: a GPT whose feed-forward sublayers are K narrow "wide-narrow-wide" MLPs in a row.

Paper: Feng-Ting Liao, Meng-Hsi Chen, Guan-Ting Yi, Da-shan Shiu (2026), "Revisiting the
Shape Convention of Transformer Language Models" (MediaTek Research; reference code:
https://github.com/mtkresearch/Hourglass_LM).

The idea, for a learner
-----------------------
Every standard transformer FFN is *narrow-wide-narrow*: it lifts the d_model-wide residual
stream to d_h = 4 d_model, applies a non-linearity and projects back. That one wide MLP
holds about 2/3 of a GPT's parameters. The paper turns the shape inside out: each FFN slot
becomes K small MLPs that first *compress* to a bottleneck d_h < d_model and then expand
back (*wide-narrow-wide*, an hourglass), each with its own norm and residual add. The FFN
gets deeper (K non-linear steps per layer) and far cheaper (3 K d_h d instead of 12 d^2),
and the parameters saved buy a wider residual stream, i.e. more attention (4 d^2 per layer).
At a fixed budget of 113M non-embedding parameters the paper moves from 768 wide
(28M attention / 85M FFN) to 1032 wide with K = 4, d_h = 418 (51M / 62M) and gets a
slightly lower validation loss. ("Hourglass" here is the wide-narrow-wide MLP shape. It is
NOT Nawrot et al.'s "Hourglass Transformer", which shortens the *sequence*.)

Equations (numbered as in the paper)
------------------------------------
    u   = z + Attn(norm(z))                                     (2)  attention sublayer, unchanged
    h_0 = u;   h_{i+1} = h_i + MLP_i(h_i),   i = 0..K-1         (3)  the hourglass FFN; z_next = h_K
    MLP_i(x) = W_u^(i) sigma(W_d^(i) norm(x))                   (4)  W_d: d_h x d, W_u: d x d_h
    MLP_i(x) = W_u^(i) (SiLU(W_d1^(i) xbar) * (W_d2^(i) xbar)),  xbar = norm(x)    (5)  SwiGLU form
    parameters = L (Attn(d) + K 3 d_h d),   Attn(d) = 4 d^2 for multi-head attention   (section 3.2)

What this file implements
-------------------------
- `HourglassFFN`: the FFN residual sublayer of eq. (3)-(5): K sub-blocks, each
  model.FFNSublayer(d, d_h) = x + SwiGLU(RMSNorm(x)) with its own RMSNorm, its own fused
  W_d1/W_d2 (`gate_up_proj`, d -> 2 d_h), its own W_u (`out_proj`, d_h -> d) and its own
  residual add. The layer's usual pre-FFN norm and residual are replaced by these, as in the
  reference code. An HourglassFFN always keeps its sub-blocks in a list (parameter names
  `ffn.sub_blocks.<i>.norm.weight`, ...), even for K = 1.
- `HourglassGPT` (GPT with `make_ffn` overridden) and `build_model(...)`, the builder
  train.py and checkpoints use: `--model_type=hourglass --model_args="{'n_sub_blocks': 4,
  'bottleneck_dim': 418}"` (or 'bottleneck_ratio': 0.4 for d_h = round(0.4 d)). With K = 1
  HourglassGPT builds no HourglassFFN but model.FFNSublayer, the plain GPT's FFN sublayer
  (compose.py does the same), so with d_h = the plain FFN hidden size the model IS the plain
  GPT: the same state_dict keys in the same order (checkpoints load either way), the same
  init draws from the same seed, bit-identical logits (tested).
- `match_baseline(...)`: the hourglass shape at the baseline's parameter budget. Step 1: with
  d_h = round(ratio d), pick the d_model (a multiple of 2 n_head: the paper keeps the head
  count, and RoPE needs an even head size) whose count is closest to the baseline's. Step 2:
  re-solve d_h at that d so the count is as close as one integer allows (the count is linear
  in d_h). This is how the paper's rows come out: ratio 0.4, K = 4, L = 12 against
  768/3072/L12 gives exactly its 1032/418 (d_h/d = 0.405). The budget compared is
  model.budget(), the transformer body: attention + FFN + norm gains (non-embedding, without
  an untied LM head, which the paper's "non-embedding" does not count either; the norms are
  < 0.05%).
- `match_ffn_at_fixed_width(...)`: the paper's Table 1 mode: d_model, L and the attention stay
  the baseline's; d_h is solved so the K sub-blocks' FFN matrices match the baseline's FFN
  (768/3072/L12 -> d_h = 614, 512, 384, 307 for K = 5, 6, 8, 10, as in Table 1).
  `python hourglass.py --match=ffn --n_sub_blocks=K`.
- `paper_rows()` / `python hourglass.py`: the parameter split of every shape in the paper's
  Tables 2 and 3, and the matched shape for a baseline given on the command line.

Deviations and sources (each marked: the paper / the reference code / ours)
---------------------------------------------------------------------------
The reference code (github.com/mtkresearch/Hourglass_LM) is a patch of Megatron-Bridge: its
MultiLayerMLP on the Llama 3.2 1B model provider, trained on OLMo-2's data and tokenizer.
- Sub-block = RMSNorm, SwiGLU d -> d_h -> d without biases, residual add; the layer's own
  pre-FFN norm and residual removed: the paper (eq. 3-5) and the reference code. Not a deviation.
- One d_h for all K sub-blocks: the paper. The reference code also allows a different size per
  sub-block (`mlp_intermediate_sizes`); not offered here (ours).
- Init (ours): model.py's rule, normal(0, 0.02) and 0.02/sqrt(2 n_layer) for every `out_proj`
  (each sub-block's W_u too), so K = 1 is the plain GPT exactly. The reference code draws
  normal(0, 0.02) for every matrix, output projections included (its Megatron patch turns the
  depth scaling off). With K sub-blocks there are (K + 1) L residual writes, not 2 L; we do not
  rescale for that (a choice to revisit at large K).
- Attention (ours): model.py's, RoPE theta 10000, no RoPE scaling, no QK-norm (the configs leave
  qk_norm off; the paper does not mention it). The reference code's provider uses RoPE base
  500000 with Llama-3.1-style scaling (factor 32), and its released configs set QK layer-norm on.
  Both: multi-head attention with the paper's head counts (12 at 113M, 16 above), RMSNorm eps 1e-5,
  tied input / output embeddings, no dropout.
- Parameter matching (ours): `match_baseline`'s two steps are our reading; the paper "searched"
  configurations. They reproduce every hourglass row of Tables 2 and 3 (tested); those rows sit
  within 0.05% of their baselines by model.budget(), not the "0.001%" of Table 3's caption.
  Table 1's fixed-width mode is the paper's (FFN matrices matched, the K norm gains not).
- Table 3's 403M hourglass row (1376/557/L24/K4) lists 150M attention / 253M FFN, but that
  shape gives 182M / 221M (the 403M total does match): a misprint in the paper; every other row
  follows from its listed shape. `paper_rows()` prints both.
- The reference code's released configs are not the paper's rows (e.g. its 906M config is
  2496/2016/K4/L12 at context 4096, Table 3's is 2080/819/K4/L24): we follow the paper's tables.
- Training recipe (ours): the paper trains 113M-1B models on the first 2.5B-21B tokens of OLMo-2's
  stage-1 data with the OLMo-2 tokenizer (vocab 100278), context 2048 (4096 at 1074M), cosine LR
  with warm-up, AdamW (0.9, 0.95, eps 1e-8, wd 0.1) and an auxiliary softmax (z-) loss. We use
  train.py as it is (no z-loss), GPT-2 BPE on TinyStories for the 113M configs (vocab 50304, so
  embeddings differ; the non-embedding counts the paper reports do not) at context 1024, and a
  tiny character-level Shakespeare comparison on a CPU. Results at that scale say nothing about
  the paper's claim.

Run it
------
    python hourglass.py                                  # Table 3-style split for 768/3072/L12, K=4, ratio 0.4
    python hourglass.py --match=ffn --n_sub_blocks=8     # Table 1 mode: d=768, L=12 kept, d_h=384 for K=8
    python hourglass.py --n_embd=192 --n_layer=4 --n_head=6 --n_sub_blocks=4 --bottleneck_ratio=0.4
    python train.py config/hourglass_shakespeare_cpu_baseline.py   # CPU comparison, then:
    python train.py config/hourglass_shakespeare_cpu.py
    python train.py config/hourglass_113m_gpu.py                    # the paper's 113M hourglass (GPU)
    python bench.py config/hourglass_shakespeare_cpu_baseline.py config/hourglass_shakespeare_cpu.py \
        --batch_size=16 --modes=eager --dtypes=bfloat16            # tokens/s of both, and the ratio
The write-up with the measured results is docs/hourglass.md.
"""

from dataclasses import dataclass

import torch
import torch.nn as nn

from model import GPT, FFNSublayer, GPTConfig, LayerSpec


# ----------------------------------------------------------------------------------------
# The hourglass FFN sublayer


class HourglassFFN(nn.Module):
    """The FFN residual sublayer of eq. (3): h <- h + MLP_i(h) for i = 0..K-1.

    Each sub-block is FFNSublayer(d, d_h): its own RMSNorm, SwiGLU with W_d1 and W_d2 fused in
    `gate_up_proj` (d -> 2 d_h) and W_u in `out_proj` (d_h -> d), its own residual add (eq. 4-5).
    """

    def __init__(self, dim, bottleneck_dim, n_sub_blocks, config: GPTConfig):
        super().__init__()
        self.sub_blocks = nn.ModuleList(FFNSublayer(dim, bottleneck_dim, config) for _ in range(n_sub_blocks))

    def forward(self, x):  # (B, T, d) -> (B, T, d)
        for sub_block in self.sub_blocks:
            x = sub_block(x)  # eq. (3): h_{i+1} = h_i + MLP_i(h_i), (B, T, d), bottleneck (B, T, d_h) inside
        return x

    def flops_per_token(self, seq_len):
        return sum(sub_block.flops_per_token(seq_len) for sub_block in self.sub_blocks)  # K * 2 * 3 d_h d


@dataclass
class HourglassConfig(GPTConfig):
    """GPTConfig plus K. Each layer's `ffn_hidden` is the bottleneck d_h of its sub-blocks."""

    n_sub_blocks: int = 1  # K, sub-blocks per FFN slot

    def __post_init__(self):
        super().__post_init__()
        if self.n_sub_blocks < 1:
            raise ValueError(f"n_sub_blocks={self.n_sub_blocks}: an hourglass FFN needs K >= 1 sub-blocks")


class HourglassGPT(GPT):
    """The plain GPT with every FFN sublayer replaced by an HourglassFFN (attention unchanged, eq. 2)."""

    def make_ffn(self, layer_idx, spec: LayerSpec) -> nn.Module:
        if self.config.n_sub_blocks == 1:  # K = 1: the plain FFN sublayer itself (names, init order), as compose.py
            return FFNSublayer(self.config.n_embd, spec.ffn_hidden, self.config)
        return HourglassFFN(self.config.n_embd, spec.ffn_hidden, self.config.n_sub_blocks, self.config)


def build_model(vocab_size=65, block_size=256, n_layer=6, n_head=6, n_kv_head=None, n_embd=384, head_dim=None,
                ffn_hidden=None, qk_norm="", tie_embeddings=True, dropout=0.0,
                n_sub_blocks=1, bottleneck_dim=None, bottleneck_ratio=None):
    """An HourglassGPT from the common GPT keywords plus K (`n_sub_blocks`) and d_h, given either
    as `bottleneck_dim` or as `bottleneck_ratio` (d_h = round(ratio * n_embd)). With neither,
    d_h = ffn_hidden or 4 * n_embd, so the defaults build the plain GPT."""
    if bottleneck_dim is not None and bottleneck_ratio is not None:
        raise ValueError(f"give d_h either as bottleneck_dim={bottleneck_dim} or as bottleneck_ratio="
                         f"{bottleneck_ratio}, not both")
    if bottleneck_ratio is not None:
        bottleneck_dim = max(1, round(bottleneck_ratio * n_embd))
    if bottleneck_dim is not None and ffn_hidden is not None and ffn_hidden != bottleneck_dim:
        raise ValueError(f"ffn_hidden={ffn_hidden} and bottleneck_dim={bottleneck_dim} disagree: in an hourglass "
                         f"model the FFN hidden size is d_h, so leave ffn_hidden unset (None)")
    d_h = bottleneck_dim if bottleneck_dim is not None else ffn_hidden
    if d_h is not None and d_h < 1:
        raise ValueError(f"bottleneck dim d_h={d_h} must be a positive integer")
    config = HourglassConfig(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer, n_head=n_head,
                             n_kv_head=n_kv_head, n_embd=n_embd, head_dim=head_dim, ffn_hidden=d_h, qk_norm=qk_norm,
                             tie_embeddings=tie_embeddings, dropout=dropout, n_sub_blocks=n_sub_blocks)
    return HourglassGPT(config)


# ----------------------------------------------------------------------------------------
# Parameter accounting and matching (the paper's Tables 1-3)


def count_params(**model_args):
    """param_counts() of an hourglass model built on the meta device (instant, no memory)."""
    with torch.device("meta"):
        return build_model(**model_args).param_counts()


def match_baseline(baseline_args, n_sub_blocks, bottleneck_ratio, n_layer=None, tolerance=0.005):
    """The hourglass shape with the baseline's parameter budget (model.budget(): non-embedding
    parameters without an untied LM head, i.e. attention + FFN + norm gains).

    baseline_args: keyword arguments of a plain GPT (model.build_model / train.py's keys).
    Keeps the baseline's head count (and KV heads, qk_norm, vocab); n_layer defaults to the
    baseline's. Step 1: with d_h = round(ratio d), the d (multiple of 2 n_head) whose count is
    closest; step 2: the d_h at that d whose count is closest. Returns the hourglass
    build_model keyword arguments (bottleneck_dim set, bottleneck_ratio not), and raises a
    ValueError when the result is more than `tolerance` (relative) off the baseline.
    """
    from model import build_model as build_plain
    with torch.device("meta"):
        target = build_plain(**baseline_args).budget()
    n_head = baseline_args.get("n_head", 6)
    step = 2 * n_head  # d = n_head * head_dim, head_dim even for RoPE
    common = {k: v for k, v in baseline_args.items() if k not in ("n_embd", "ffn_hidden", "head_dim", "n_layer")}
    common.update(n_layer=n_layer or baseline_args.get("n_layer", 6), n_sub_blocks=n_sub_blocks)

    def count(d, d_h):  # the budget of L uniform layers, from 1- and 2-layer models (fast)
        with torch.device("meta"):
            one, two = [build_model(**dict(common, n_layer=n, block_size=2), n_embd=d, bottleneck_dim=d_h).budget()
                        for n in (1, 2)]
        return one + (common["n_layer"] - 1) * (two - one)

    # step 1: the count grows with d; start near the multi-head estimate L d^2 (4 + 3 K ratio) = target
    # and walk up or down while the count gets closer
    estimate = (target / (common["n_layer"] * (4 + 3 * n_sub_blocks * bottleneck_ratio))) ** 0.5
    error = lambda d: abs(count(d, max(1, round(bottleneck_ratio * d))) - target)
    best_d = max(step, step * round(estimate / step))
    best_err = error(best_d)
    for direction in (step, -step):
        d = best_d + direction
        while d >= step and (err := error(d)) < best_err:
            best_d, best_err = d, err
            d += direction
    # step 2: the count is linear in d_h at fixed d: solve for it, keep the closest integer
    base = count(best_d, 1)
    per_unit = count(best_d, 2) - base  # 3 K L d (+0: norms do not depend on d_h)
    d_h = max(1, 1 + round((target - base) / per_unit))
    result = dict(common, n_embd=best_d, bottleneck_dim=d_h)
    got = count(best_d, d_h)
    if abs(got - target) > tolerance * target:
        raise ValueError(f"no hourglass shape with K={n_sub_blocks}, d_h/d~{bottleneck_ratio} and "
                         f"L={common['n_layer']} comes within {tolerance:.1%} of the baseline's {target:,} "
                         f"parameters (best: d={best_d}, d_h={d_h}, {got:,}); try a smaller ratio, K or L")
    return result


def match_ffn_at_fixed_width(baseline_args, n_sub_blocks):
    """The paper's Table 1 mode: keep the baseline's d_model, L and heads (so the attention is
    the same), and pick the d_h whose hourglass FFN matrices (3 K d_h d per layer) come closest
    to the baseline's FFN matrices; the K extra norm gains per layer are not matched (FFN-only
    matching, as Table 1 does). Against 768/3072/L12 this gives d_h = 614, 512, 384, 307 for
    K = 5, 6, 8, 10 (Table 1). Returns hourglass build_model keyword arguments."""
    from model import build_model as build_plain
    with torch.device("meta"):
        target = build_plain(**baseline_args).param_counts()["ffn"]
    args = {k: v for k, v in baseline_args.items() if k != "ffn_hidden"}
    args.update(n_embd=baseline_args.get("n_embd", 384), n_sub_blocks=n_sub_blocks)
    ffn = lambda d_h: count_params(**dict(args, block_size=2), bottleneck_dim=d_h)["ffn"]
    base, per_unit = ffn(1), ffn(2) - ffn(1)  # linear in d_h: 3 K L d per unit
    return dict(args, bottleneck_dim=max(1, 1 + round((target - base) / per_unit)))


# Shapes the paper lists (Tables 2 and 3) with its rounded attention / FFN sizes in millions.
# (label, d_model, d_h, K, L, n_head, paper attention M, paper FFN M)
PAPER_ROWS = [
    ("113M conventional (T2, T3)", 768, 3072, 1, 12, 12, 28, 85),
    ("113M hourglass K2 L12 (T2)", 1176, 553, 2, 12, 12, 66, 47),
    ("113M hourglass K2 L6 (T2)", 1488, 1122, 2, 6, 12, 53, 60),
    ("113M hourglass K4 L12 (T2, T3)", 1032, 418, 4, 12, 12, 51, 62),
    ("113M hourglass K4 L6 (T2)", 1368, 694, 4, 6, 12, 45, 68),
    ("403M conventional (T3)", 1024, 4096, 1, 24, 16, 101, 302),
    ("403M hourglass (T3)", 1376, 557, 4, 24, 16, 150, 253),  # listed split does not follow from the shape
    ("906M conventional (T3)", 1536, 6144, 1, 24, 16, 227, 679),
    ("906M hourglass (T3)", 2080, 819, 4, 24, 16, 415, 491),
    ("1074M conventional (T3)", 2048, 8192, 1, 16, 16, 269, 805),
    ("1074M hourglass K1 (T3)", 2848, 2486, 1, 20, 16, 649, 425),
]


def paper_rows():
    """Our attention / FFN counts (in parameters) for each shape of PAPER_ROWS, next to the paper's."""
    rows = []
    for label, d, d_h, k, n_layer, n_head, paper_attn, paper_ffn in PAPER_ROWS:
        c = count_params(n_embd=d, bottleneck_dim=d_h, n_sub_blocks=k, n_layer=n_layer, n_head=n_head,
                         vocab_size=50304, block_size=2)
        rows.append(dict(label=label, d_model=d, d_h=d_h, K=k, L=n_layer, attention=c["attention"], ffn=c["ffn"],
                         norms=c["norms"], paper_attention_M=paper_attn, paper_ffn_M=paper_ffn))
    return rows


def split_table(named_args, seq_len=None):
    """Table 3-style rows (name, d, d_h, K, L, attention, FFN, non-embedding, FLOPs/token) for model args."""
    lines = ["| model | d_model | d_h | K | L | attention | FFN | norms | non-embedding (body) | fwd FLOPs/token |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, args in named_args:
        with torch.device("meta"):
            model = build_model(**args)
        c, cfg = model.param_counts(), model.config
        flops = model.flops_per_token(seq_len or cfg.block_size)
        lines.append(f"| {name} | {cfg.n_embd} | {cfg.layers[0].ffn_hidden} | {cfg.n_sub_blocks} | {cfg.n_layer} | "
                     f"{c['attention'] / 1e6:.2f}M | {c['ffn'] / 1e6:.2f}M | {c['norms'] / 1e6:.3f}M | "
                     f"{model.budget() / 1e6:.3f}M | {flops / 1e6:.1f}M |")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    from configurator import parse_overrides
    args = parse_overrides(sys.argv[1:], dict(
        n_layer=12, n_head=12, n_embd=768, ffn_hidden=None, vocab_size=50304, block_size=2048,  # the 113M baseline
        n_sub_blocks=4, bottleneck_ratio=0.4, hourglass_n_layer=0,  # 0: the baseline's n_layer
        match="budget"))  # budget: Tables 2-3 (d and d_h move); ffn: Table 1 (d and L fixed, FFN matrices matched)
    k, ratio, hourglass_layers = args.pop("n_sub_blocks"), args.pop("bottleneck_ratio"), args.pop("hourglass_n_layer")
    mode, baseline = args.pop("match"), args
    if mode == "ffn":  # Table 1: the fixed-width comparison
        if hourglass_layers:
            raise SystemExit("--match=ffn keeps the baseline's d_model and L: leave --hourglass_n_layer unset")
        matched = match_ffn_at_fixed_width(baseline, k)
        print(f"baseline {baseline}\nhourglass K={k} at the baseline's d_model={matched['n_embd']} and "
              f"L={matched['n_layer']} (Table 1 mode, FFN matrices matched): d_h={matched['bottleneck_dim']}\n")
    elif mode == "budget":
        try:
            matched = match_baseline(baseline, k, ratio, n_layer=hourglass_layers or None)
        except ValueError as e:
            raise SystemExit(str(e))
        print(f"baseline {baseline}\nhourglass K={k}, target d_h/d={ratio}: matched d_model={matched['n_embd']}, "
              f"d_h={matched['bottleneck_dim']} (d_h/d={matched['bottleneck_dim'] / matched['n_embd']:.3f}), "
              f"L={matched['n_layer']}\n")
    else:
        raise SystemExit(f"--match={mode!r}: use budget (Tables 2-3) or ffn (Table 1: fixed d_model and L)")
    print(split_table([("conventional", dict(baseline)), ("hourglass", matched)]))
    print("\nThe paper's shapes (Tables 2 and 3), counted by this code, vs the paper's rounded sizes:")
    print("| row | d_model | d_h | K | L | attention (ours / paper) | FFN (ours / paper) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in paper_rows():
        print(f"| {r['label']} | {r['d_model']} | {r['d_h']} | {r['K']} | {r['L']} | "
              f"{r['attention'] / 1e6:.1f}M / {r['paper_attention_M']}M | {r['ffn'] / 1e6:.1f}M / {r['paper_ffn_M']}M |")
