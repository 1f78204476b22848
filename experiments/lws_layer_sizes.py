"""
Per-layer sizes of the layer-wise scaling variants, in the spirit of Figure 3 of "Crown, Frame,
Reverse: Layer-Wise Scaling Variants for LLM Pre-Training" (Baroian, Notebomer, 2025,
arXiv:2509.06518): each layer's attention and FFN parameters stacked, its query heads on its bar,
for the shapes lws_tables.py prints (meta device).

    python experiments/lws_layer_sizes.py              # Table 2 -> docs/lws_layer_sizes.png
    python experiments/lws_layer_sizes.py --scale=cpu  # CPU shapes -> docs/lws_layer_sizes_cpu.png
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repo root, for lws.py, model.py and shapelab/configurator.py
sys.path.insert(0, str(ROOT / "experiments"))  # for lws_tables.py (already there when run)

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import lws_tables  # noqa: E402
from shapelab.configurator import parse_overrides  # noqa: E402

TITLES = {
    "paper": "LWS variants at the paper's 180M scale (d=768, Table 2 / Figure 3)",
    "cpu": "LWS variants at our CPU scale (d=128, 9 layers, matched parameters)",
}
DEFAULT_OUT = {"paper": ROOT / "docs" / "lws_layer_sizes.png",
               "cpu": ROOT / "docs" / "lws_layer_sizes_cpu.png"}


def layer_params(model):
    """(attention, FFN) parameters of every layer, each sublayer's norm included."""
    return [(sum(p.numel() for p in block.attn.parameters()),
             sum(p.numel() for p in block.ffn.parameters())) for block in model.blocks]


def build_models(scale):
    """{name: model on the meta device} of the paper's Table 2 rows or of our CPU shapes."""
    if scale not in TITLES:
        raise ValueError(f"--scale={scale!r}: use paper or cpu")
    shapes = lws_tables.paper_shapes() if scale == "paper" else lws_tables.cpu_shapes()
    return {name: lws_tables.build(kwargs) for name, kwargs in shapes.items()}


def plot_layer_sizes(models, path, title):
    """One panel per model: attention (bottom) and FFN (top) parameters per layer, in millions."""
    fig, axes = plt.subplots(len(models), 1, figsize=(7, 1.5 * len(models) + 0.6), sharex=True,
                             sharey=True)
    for ax, (name, model) in zip(axes, models.items()):
        sizes = layer_params(model)
        layers = range(1, len(sizes) + 1)
        attn = [a / 1e6 for a, _ in sizes]
        ffn = [f / 1e6 for _, f in sizes]
        ax.bar(layers, attn, color="tab:orange", label="attention")
        ax.bar(layers, ffn, bottom=attn, color="tab:blue", label="FFN")
        for x, spec, a, f in zip(layers, model.config.layers, attn, ffn):
            ax.text(x, a + f, str(spec.n_head), ha="center", va="bottom", fontsize=6)  # query heads
        ax.set_ylabel("M params", fontsize=7)
        ax.set_title(name, fontsize=8, loc="left")
        ax.tick_params(labelsize=7)
        ax.set_xticks(list(layers))
    axes[0].legend(fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, frameon=False)
    axes[-1].set_xlabel("layer (number on a bar: query heads)", fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    args = parse_overrides(sys.argv[1:], dict(scale="paper", out=""))
    try:
        models = build_models(args["scale"])
    except ValueError as e:
        raise SystemExit(str(e))
    out = args["out"] or DEFAULT_OUT[args["scale"]]
    plot_layer_sizes(models, out, TITLES[args["scale"]])
    print(f"saved {out}")
