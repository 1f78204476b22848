"""
The hourglass paper's Tables 2 and 3 counted by hourglass.py: every shape's attention / FFN split
next to the paper's rounded sizes, and with --plot the five 113M shapes of Table 2 as stacked bars
(attention 4 d^2 L, FFN 3 K d_h d L): at one budget the hourglass moves parameters out of the FFN
into a wider residual stream. "Revisiting the Shape Convention of Transformer Language Models"
(Liao, Chen, Yi, Shiu, 2026, arXiv:2602.06471). `python hourglass.py` matches a shape to any
baseline.

    python experiments/hourglass_tables.py [--plot=docs/hourglass_param_split.png]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root

from hourglass import HourglassConfig, HourglassGPT
from model import shape_counts
from shapelab.configurator import parse_overrides

# the paper's shapes (Tables 2 and 3) and its rounded sizes:
# (label, d_model, d_h, K, L, n_head, paper attention M, paper FFN M)
PAPER_ROWS = [
    ("113M conventional (T2, T3)", 768, 3072, 1, 12, 12, 28, 85),
    ("113M hourglass K2 L12 (T2)", 1176, 553, 2, 12, 12, 66, 47),
    ("113M hourglass K2 L6 (T2)", 1488, 1122, 2, 6, 12, 53, 60),
    ("113M hourglass K4 L12 (T2, T3)", 1032, 418, 4, 12, 12, 51, 62),
    ("113M hourglass K4 L6 (T2)", 1368, 694, 4, 6, 12, 45, 68),
    ("403M conventional (T3)", 1024, 4096, 1, 24, 16, 101, 302),
    ("403M hourglass (T3)", 1376, 557, 4, 24, 16, 150, 253),  # the split misprinted: see docs
    ("906M conventional (T3)", 1536, 6144, 1, 24, 16, 227, 679),
    ("906M hourglass (T3)", 2080, 819, 4, 24, 16, 415, 491),
    ("1074M conventional (T3)", 2048, 8192, 1, 16, 16, 269, 805),
    ("1074M hourglass K1 (T3)", 2848, 2486, 1, 20, 16, 649, 425),
]


def paper_rows():
    """Our attention / FFN counts for each shape of PAPER_ROWS, beside the paper's."""
    rows = []
    for label, d, d_h, n_sub_blocks, n_layer, n_head, paper_attn, paper_ffn in PAPER_ROWS:
        c = shape_counts(HourglassGPT, HourglassConfig(
            n_embd=d, bottleneck_dim=d_h, n_sub_blocks=n_sub_blocks, n_layer=n_layer,
            n_head=n_head, vocab_size=50304, block_size=2))
        rows.append(dict(label=label, d_model=d, d_h=d_h, K=n_sub_blocks, L=n_layer,
                         attention=c["attention"], ffn=c["ffn"], norms=c["norms"],
                         paper_attention_M=paper_attn, paper_ffn_M=paper_ffn))
    return rows


def plot_param_split(rows, path):
    from shapelab.plot import plt, save_figure

    attention = [r["attention"] / 1e6 for r in rows]
    labels = [f"{r['d_model']}/{r['d_h']}\nK{r['K']} L{r['L']}" for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    ax.bar(labels, attention, label="attention (4 d\u00b2 L)")
    ax.bar(labels, [r["ffn"] / 1e6 for r in rows], bottom=attention, label="FFN (3 K d_h d L)")
    ax.set_ylabel("parameters (M)")
    ax.set_title("113M models of the paper's Table 2, counted by hourglass.py", fontsize=10)
    ax.tick_params(axis="x", labelsize=8)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    save_figure(fig, path)
    return ax


if __name__ == "__main__":
    plot = parse_overrides(sys.argv[1:], dict(plot=""))["plot"]
    print("| row | d_model | d_h | K | L | attention (ours / paper) | FFN (ours / paper) |\n"
          "|---|---:|---:|---:|---:|---:|---:|")
    for r in paper_rows():
        print(f"| {r['label']} | {r['d_model']} | {r['d_h']} | {r['K']} | {r['L']} | "
              f"{r['attention'] / 1e6:.1f}M / {r['paper_attention_M']}M | "
              f"{r['ffn'] / 1e6:.1f}M / {r['paper_ffn_M']}M |")
    if plot:
        plot_param_split(paper_rows()[:5], plot)
        print(f"wrote {plot}")
