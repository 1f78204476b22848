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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments")]
import lws_tables
from shapelab.configurator import parse_overrides
from shapelab.plot import plt, save_figure

TITLES = {
    "paper": "LWS variants at the paper's 180M scale (d=768, Table 2 / Figure 3)",
    "cpu": "LWS variants at our CPU scale (d=128, 9 layers, matched parameters)",
}


def layer_params(model):
    """(attention, FFN) parameters of every layer, each sublayer's norm included."""
    return [(sum(p.numel() for p in block.attn.parameters()),
             sum(p.numel() for p in block.ffn.parameters())) for block in model.blocks]


def plot_layer_sizes(models, path, title):
    """One panel per model: attention (bottom) and FFN (top) parameters per layer, in millions."""
    fig, axes = plt.subplots(len(models), 1, figsize=(7, 1.5 * len(models) + 0.6), sharex=True,
                             sharey=True)
    for ax, (name, model) in zip(axes, models.items()):
        attn, ffn = np.array(layer_params(model)).T / 1e6
        layers = range(1, len(attn) + 1)
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
    save_figure(fig, path, dpi=90)


if __name__ == "__main__":
    args = parse_overrides(sys.argv[1:], dict(scale="paper", out=""))
    shapes = lws_tables.shapes_at(args["scale"])
    out = args["out"] or ROOT / "docs" / f"lws_layer_sizes{'_cpu' * (args['scale'] == 'cpu')}.png"
    plot_layer_sizes({name: lws_tables.build(kwargs) for name, kwargs in shapes.items()}, out,
                     TITLES[args["scale"]])
    print(f"saved {out}")
