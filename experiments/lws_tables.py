"""
The shapes of layer-wise scaling as tables: the paper's Table 2 reproduced on the OLMo-2 190M base,
and our CPU shapes (the isotropic 9-layer baseline and lws.VARIANTS matched to its non-embedding
count by lws.match_params) with the model_args config/lws_*_shakespeare_char.py use. "Crown, Frame,
Reverse: Layer-Wise Scaling Variants for LLM Pre-Training" (Baroian, Notebomer, 2025,
arXiv:2509.06518). Built on the meta device.

    python experiments/lws_tables.py               # the seven Table 2 rows next to the paper's
    python experiments/lws_tables.py --scale=cpu   # our five matched CPU shapes, model_args
"""


import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for its modules

from lws import VARIANTS, LWSConfig, LWSGPT, match_params
from model import meta_device
from shapelab.configurator import parse_overrides

# The paper's Table 2: (n_layer, fnn_scalar, qkv_scalar, framing, total M, non-embedding M), on
# OLMo-2 190M: untied head, vocab padded to 50304, QK-norm over the full q and k.
PAPER_BASE = dict(vocab_size=50304, n_embd=768, n_head=12, n_kv_head=4, head_dim=64,
                  qk_norm="full", tie_embeddings=False, rope_theta=500_000.0, norm_eps=1e-6)
PAPER_TABLE2 = {
    "Baseline 12L": (12, [4.0, 4.0], [1.0, 1.0], False, 181.1, 142.5),
    "Vanilla LWS 12L": (12, [2.0, 5.3], [0.5, 2.0], False, 178.8, 140.1),
    "Baseline 18L": (18, [2.5, 2.5], [0.75, 0.75], False, 183.5, 144.8),
    "Vanilla LWS 18L": (18, [1.0, 4.0], [0.5, 1.0], False, 179.7, 141.1),
    "Framed LWS": (18, [0.5, 4.0], [0.5, 1.0], True, 179.4, 140.7),
    "Reverse LWS": (18, [4.0, 0.5], [1.0, 0.5], True, 179.4, 140.7),
    "Crown LWS": (18, [0.5, 3.8, 0.5], [0.5, 1.0, 0.5], True, 181.9, 143.3),
}

# The five shapes our CPU comparison trains, in the spirit of the 18-layer rows above: ~100x
# smaller (d = 128, 9 layers, head dim 16, group 2), FFN widths in steps of 32 instead of 256.
CPU_BASE = dict(vocab_size=84, block_size=128, n_embd=128, n_head=8, n_kv_head=4, head_dim=16,
                qk_norm="full", tie_embeddings=False, ffn_multiple=32)
CPU_BASELINE = dict(n_layer=9, ffn_scalars=[2.5, 2.5], qkv_scalars=[0.75, 0.75], framed=False)


def build(model_args):
    """LWSGPT(LWSConfig(**model_args)) on the meta device."""
    with meta_device():
        return LWSGPT(LWSConfig(**model_args))


def paper_shapes():
    """The seven shapes of the paper's Table 2, {name: LWSConfig kwargs}."""
    return {name: dict(PAPER_BASE, block_size=1024, n_layer=n_layer, ffn_scalars=fnn,
                       qkv_scalars=qkv, framed=framed)
            for name, (n_layer, fnn, qkv, framed, _, _) in PAPER_TABLE2.items()}


def cpu_shapes():
    """The five CPU shapes of our Shakespeare comparison, {name: LWSConfig kwargs}: the
    isotropic baseline, and the four variants matched to its non-embedding count."""
    baseline = {**CPU_BASE, **CPU_BASELINE}
    return {"baseline": baseline, **{
        name: match_params(baseline, {**CPU_BASE, "n_layer": baseline["n_layer"], **schedule})[0]
        for name, schedule in VARIANTS.items()}}


def shapes_at(scale):
    """{name: LWSConfig kwargs} of the paper's Table 2 rows or of our CPU shapes."""
    if scale not in ("paper", "cpu"):
        raise SystemExit(f"--scale={scale!r}: use paper or cpu")
    return paper_shapes() if scale == "paper" else cpu_shapes()


def shape_report(name, model, paper=None):
    """A few lines: per-layer FFN widths and heads, parameters, FLOPs/token; `paper`: the
    (total M, non-embedding M) of Table 2, printed beside ours."""
    specs = model.config.layers
    c = model.param_counts()
    digits = 1 if c["total"] > 1e7 else 4  # the paper's precision for its 180M rows
    lines = [f"{name}: {len(specs)} layers",
             f"  FFN widths: {[s.ffn_hidden for s in specs]}",
             f"  query heads: {[s.n_head for s in specs]}, "
             f"KV heads: {[s.n_kv_head for s in specs]}",
             f"  params: total {c['total'] / 1e6:.{digits}f}M, non-embedding "
             f"{c['non_embedding'] / 1e6:.{digits}f}M (attention {c['attention'] / 1e6:.2f}M, "
             f"FFN {c['ffn'] / 1e6:.2f}M), forward FLOPs/token at T={model.config.block_size}: "
             f"{model.flops_per_token() / 1e6:.1f}M"]
    if paper:
        lines.append(f"  paper Table 2: total {paper[0]:.1f}M, non-embedding {paper[1]:.1f}M")
    return "\n".join(lines)


if __name__ == "__main__":
    scale = parse_overrides(sys.argv[1:], dict(scale="paper"))["scale"]
    for name, kwargs in shapes_at(scale).items():
        paper = PAPER_TABLE2[name][4:] if scale == "paper" else None
        print(shape_report(name, build(kwargs), paper))
        if scale == "cpu":
            print("  model_args = " + str({key: kwargs[key] for key in (
                "ffn_scalars", "qkv_scalars", "framed", "ffn_multiple")}))
