"""
Where the parameters of a 113M model go: the five 113M shapes of Table 2 of "Revisiting the Shape
Convention of Transformer Language Models" (Liao, Chen, Yi, Shiu, 2026, arXiv:2602.06471), counted
by hourglass.py and drawn as stacked bars (attention 4 d^2 L, FFN 3 K d_h d L): at the same budget
the hourglass moves parameters out of the FFN into a wider residual stream.

    python experiments/hourglass_param_split.py                  # -> docs/hourglass_param_split.png
"""


import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments")]

from hourglass_tables import paper_rows
from shapelab.configurator import parse_overrides
from shapelab.plot import plt, save_figure


def plot_param_split(rows, path):
    labels = [f"{r['d_model']}/{r['d_h']}\nK{r['K']} L{r['L']}" for r in rows]
    attention = [r["attention"] / 1e6 for r in rows]
    ffn = [r["ffn"] / 1e6 for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    ax.bar(labels, attention, label="attention (4 d\u00b2 L)")
    ax.bar(labels, ffn, bottom=attention, label="FFN (3 K d_h d L)")
    ax.set_ylabel("parameters (M)")
    ax.set_title("113M models of the paper's Table 2, counted by hourglass.py", fontsize=10)
    ax.tick_params(axis="x", labelsize=8)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    save_figure(fig, path)
    return ax


if __name__ == "__main__":
    args = parse_overrides(sys.argv[1:], dict(out=str(ROOT / "docs" / "hourglass_param_split.png")))
    rows = paper_rows()[:5]  # the 113M ones
    for r in rows:
        print(f"d={r['d_model']:5d} d_h={r['d_h']:5d} K={r['K']} L={r['L']:2d}: attention "
              f"{r['attention'] / 1e6:5.1f}M (paper {r['paper_attention_M']}M), FFN "
              f"{r['ffn'] / 1e6:5.1f}M (paper {r['paper_ffn_M']}M)")
    plot_param_split(rows, args["out"])
    print(f"wrote {args['out']}")
