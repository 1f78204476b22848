"""
The hourglass paper's parameter tables, counted by hourglass.py: Tables 2 and 3 (every shape's
attention / FFN split next to the paper's rounded sizes) and a Table 3-style split of a baseline
and the hourglass shape matched to it (hourglass.match_baseline), or Table 1's fixed-width mode
(hourglass.match_ffn_at_fixed_width). "Revisiting the Shape Convention of Transformer Language
Models" (Liao, Chen, Yi, Shiu, 2026, arXiv:2602.06471). Built on the meta device: instant.

    python experiments/hourglass_tables.py                       # 768/3072/L12 -> 1032/418/K4
    python experiments/hourglass_tables.py --match=ffn --n_sub_blocks=8     # Table 1: d_h = 384
    python experiments/hourglass_tables.py --n_embd=192 --n_layer=4 --n_head=6 --vocab_size=84 \\
        --block_size=128                                         # the CPU pair's shape
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root

from hourglass import (HourglassConfig, HourglassGPT, match_baseline,
                       match_ffn_at_fixed_width)
from model import meta_device, shape_counts
from shapelab.configurator import ConfigError, parse_overrides, usage_error

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
    """Our attention / FFN counts (parameters) for each shape of PAPER_ROWS, beside the paper's."""
    rows = []
    for label, d, d_h, n_sub_blocks, n_layer, n_head, paper_attn, paper_ffn in PAPER_ROWS:
        c = shape_counts(HourglassGPT, HourglassConfig(
            n_embd=d, bottleneck_dim=d_h, n_sub_blocks=n_sub_blocks, n_layer=n_layer,
            n_head=n_head, vocab_size=50304, block_size=2))
        rows.append(dict(label=label, d_model=d, d_h=d_h, K=n_sub_blocks, L=n_layer,
                         attention=c["attention"], ffn=c["ffn"], norms=c["norms"],
                         paper_attention_M=paper_attn, paper_ffn_M=paper_ffn))
    return rows


def split_table(named_args):
    """Table 3-style rows (name, d, d_h, K, L, attention, FFN, norms, budget, FLOPs/token)."""
    lines = ["| model | d_model | d_h | K | L | attention | FFN | norms | non-embedding (body) | "
             "fwd FLOPs/token |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, args in named_args:
        with meta_device():
            model = HourglassGPT(HourglassConfig(**args))
        c, cfg = model.param_counts(), model.config
        lines.append(f"| {name} | {cfg.n_embd} | {cfg.layers[0].ffn_hidden} | {cfg.n_sub_blocks} | "
                     f"{cfg.n_layer} | {c['attention'] / 1e6:.2f}M | {c['ffn'] / 1e6:.2f}M | "
                     f"{c['norms'] / 1e6:.3f}M | {model.budget() / 1e6:.3f}M | "
                     f"{model.flops_per_token() / 1e6:.1f}M |")
    return "\n".join(lines)


def main(argv):
    try:
        args = parse_overrides(argv, dict(
            n_layer=12, n_head=12, n_embd=768, ffn_hidden=None, vocab_size=50304, block_size=2048,
            n_sub_blocks=4, bottleneck_ratio=0.4,
            match="budget"))  # budget: Tables 2-3 (d and d_h move); ffn: Table 1 (d, L fixed)
        n_sub_blocks, ratio, mode = (args.pop(key) for key in (
            "n_sub_blocks", "bottleneck_ratio", "match"))
        if mode not in ("budget", "ffn"):
            raise ConfigError(f"--match={mode!r}: use budget (Tables 2-3) or ffn (Table 1: fixed "
                              f"d_model and L)")
        if mode == "ffn":
            matched = match_ffn_at_fixed_width(args, n_sub_blocks)
        else:
            matched = match_baseline(args, n_sub_blocks, ratio)
    except (ConfigError, ValueError) as e:
        usage_error(e)
    if mode == "ffn":
        print(f"baseline {args}\nhourglass K={n_sub_blocks} at the baseline's "
              f"d_model={matched['n_embd']} and L={matched['n_layer']} (Table 1 mode, FFN "
              f"matrices matched): d_h={matched['bottleneck_dim']}\n")
    else:
        print(f"baseline {args}\nhourglass K={n_sub_blocks}, target d_h/d={ratio}: matched "
              f"d_model={matched['n_embd']}, d_h={matched['bottleneck_dim']} (d_h/d="
              f"{matched['bottleneck_dim'] / matched['n_embd']:.3f}), L={matched['n_layer']}\n")
    print(split_table([("conventional", dict(args)), ("hourglass", matched)]))
    print("\nThe paper's shapes (Tables 2 and 3), counted by this code, vs the paper's rounded "
          "sizes:\n| row | d_model | d_h | K | L | attention (ours / paper) | FFN (ours / paper) |"
          "\n|---|---:|---:|---:|---:|---:|---:|")
    for r in paper_rows():
        print(f"| {r['label']} | {r['d_model']} | {r['d_h']} | {r['K']} | {r['L']} | "
              f"{r['attention'] / 1e6:.1f}M / {r['paper_attention_M']}M | "
              f"{r['ffn'] / 1e6:.1f}M / {r['paper_ffn_M']}M |")


if __name__ == "__main__":
    main(sys.argv[1:])
