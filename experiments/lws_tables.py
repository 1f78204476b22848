"""
The shapes of layer-wise scaling: the paper's Table 2 reproduced on the OLMo-2 190M base, and our
CPU shapes (the isotropic 9-layer baseline and lws.VARIANTS matched to its non-embedding count by
lws.match_params) with the model_args config/lws_*_shakespeare_char.py use; --plot draws each
shape's per-layer attention and FFN parameters, its query heads on its bars (in the spirit of the
paper's Figure 3). "Crown, Frame, Reverse: Layer-Wise Scaling Variants for LLM Pre-Training"
(Baroian, Notebomer, 2025, arXiv:2509.06518). Built on the meta device.

    python experiments/lws_tables.py [--plot=docs/lws_layer_sizes.png]  # Table 2 next to ours
    python experiments/lws_tables.py --scale=cpu [--plot=docs/lws_layer_sizes_cpu.png]
"""

import sys
from pathlib import Path

import numpy as np

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
    with meta_device():
        return LWSGPT(LWSConfig(**model_args))


def paper_shapes():
    """The seven shapes of the paper's Table 2, {name: LWSConfig kwargs}."""
    return {name: dict(PAPER_BASE, block_size=1024, n_layer=n_layer, ffn_scalars=fnn,
                       qkv_scalars=qkv, framed=framed)
            for name, (n_layer, fnn, qkv, framed, _, _) in PAPER_TABLE2.items()}


def cpu_shapes():
    """The isotropic CPU baseline and the four variants matched to its non-embedding count."""
    baseline = {**CPU_BASE, **CPU_BASELINE}
    return {"baseline": baseline, **{
        name: match_params(baseline, {**CPU_BASE, "n_layer": baseline["n_layer"], **schedule})[0]
        for name, schedule in VARIANTS.items()}}


def layer_params(model):
    """(attention, FFN) parameters of every layer, each sublayer's norm included."""
    return [(sum(p.numel() for p in block.attn.parameters()),
             sum(p.numel() for p in block.ffn.parameters())) for block in model.blocks]


def plot_layer_sizes(models, path):
    """One panel per model: attention (bottom) and FFN (top) parameters per layer, in millions."""
    from shapelab.plot import plt, save_figure

    fig, axes = plt.subplots(len(models), 1, figsize=(7, 1.5 * len(models) + 0.6), sharex=True,
                             sharey=True)
    for ax, (name, model) in zip(axes, models.items()):
        attn, ffn = np.array(layer_params(model)).T / 1e6
        layers = range(1, len(attn) + 1)
        ax.bar(layers, attn, color="tab:orange", label="attention")
        ax.bar(layers, ffn, bottom=attn, color="tab:blue", label="FFN")
        for x, spec, a, f in zip(layers, model.config.layers, attn, ffn):
            ax.text(x, a + f, str(spec.n_head), ha="center", va="bottom", fontsize=6)
        ax.set_ylabel("M params", fontsize=7)
        ax.set_title(name, fontsize=8, loc="left")
        ax.tick_params(labelsize=7)
        ax.set_xticks(list(layers))
    axes[0].legend(fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, frameon=False)
    axes[-1].set_xlabel("layer (number on a bar: query heads)", fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=90)


if __name__ == "__main__":
    args = parse_overrides(sys.argv[1:], dict(scale="paper", plot=""))
    if args["scale"] not in ("paper", "cpu"):
        raise SystemExit(f"--scale={args['scale']!r}: use paper or cpu")
    shapes = paper_shapes() if args["scale"] == "paper" else cpu_shapes()
    models = {name: build(kwargs) for name, kwargs in shapes.items()}
    for name, model in models.items():
        specs, c = model.config.layers, model.param_counts()
        print(f"{name}: FFN widths {[s.ffn_hidden for s in specs]}, query heads "
              f"{[s.n_head for s in specs]}, KV heads {[s.n_kv_head for s in specs]}\n"
              f"  params: total {c['total'] / 1e6:.2f}M, non-embedding "
              f"{c['non_embedding'] / 1e6:.2f}M, forward FLOPs/token "
              f"{model.flops_per_token() / 1e6:.1f}M")
        if args["scale"] == "paper":
            print(f"  paper Table 2: total {PAPER_TABLE2[name][4]:.1f}M, non-embedding "
                  f"{PAPER_TABLE2[name][5]:.1f}M")
        else:
            print("  model_args = " + str({key: shapes[name][key] for key in (
                "ffn_scalars", "qkv_scalars", "framed", "ffn_multiple")}))
    if args["plot"]:
        plot_layer_sizes(models, args["plot"])
        print(f"wrote {args['plot']}")
