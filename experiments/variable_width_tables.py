"""
The ><former against the constant width it is parameter-matched to: per-layer shapes, widths,
parameters (with Appendix A's matched count), forward FLOPs/token and KV cache bytes/token, with
their ratios. "Variable-Width Transformers" (Wu, Sieberling, Tan, Panda, Polyanskiy, Kim, 2026,
arXiv:2606.18246). Built on the meta device. The defaults are the paper's 200M shape (Table 1);
`--key=value` sets any variable_width.py or GPT setting, and a train.py config file is read as
train.py reads it.

    python experiments/variable_width_tables.py --n_layer=16 --n_embd=640     # the paper's 200M
    python experiments/variable_width_tables.py config/variable_width_shakespeare_char_x.py
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for its modules

from model import GPT, GPTConfig, default_args, meta_device
from shapelab.configurator import ConfigError, parse_overrides
from shapes import build_model, train_defaults
from variable_width import (VariableWidthConfig, layer_widths_of, param_summary,
                            solve_widths)

PAPER_200M = dict(vocab_size=100277, block_size=4096, n_layer=16, n_embd=640, n_head=16,
                  tie_embeddings=False)
GPT_KEYS = ("vocab_size", "block_size", "n_layer", "n_head", "n_kv_head", "n_embd", "head_dim",
            "ffn_hidden", "qk_norm", "tie_embeddings", "dropout")
FORMER_KEYS = ("width_schedule", "bottleneck_layer_ratio", "bottleneck_width_ratio",
               "width_multiple", "layer_widths", "expansion", "scale_init_by_width",
               "attention_multiplier")


def report(args):
    """The printable table: the solver's numbers, per-layer shapes, then the ratios."""
    common = {k: args[k] for k in GPT_KEYS}
    former = {k: args[k] for k in FORMER_KEYS}
    former["layer_widths"] = former["layer_widths"] or []
    with meta_device():  # any size, instantly
        model = build_model("variable_width", **common, **former)
        baseline = GPT(GPTConfig(**common))
    schedule, d, L = args["width_schedule"], args["n_embd"], args["n_layer"]
    lines = [f"{schedule if not former['layer_widths'] else 'explicit'} widths, expansion="
             f"{args['expansion']}, matched to a constant width d={d}, L={L}"]
    if not former["layer_widths"] and schedule != "constant":
        _, info = solve_widths(schedule, L, d, args["bottleneck_layer_ratio"],
                               args["bottleneck_width_ratio"], args["width_multiple"],
                               (args["ffn_hidden"] or 4 * d) / d,
                               (args["n_kv_head"] or args["n_head"]) / args["n_head"])
        lines.append(f"solver: endpoint width {info['unrounded'][0]:.2f} (unrounded), a^- = "
                     f"{info['rate']:.5f}, bottleneck layer l* = {info['bottleneck_layer']} "
                     f"(1-indexed)")
    lines.append("layer  width  heads  head_dim  kv_heads  ffn_hidden      params")
    for i, (block, s) in enumerate(zip(model.blocks, model.config.layers)):
        n = sum(p.numel() for p in block.parameters())
        lines.append(f"{i + 1:5d}  {s.n_head * s.head_dim:5d}  {s.n_head:5d}  {s.head_dim:8d}  "
                     f"{s.n_kv_head:8d}  {s.ffn_hidden:10d}  {n / 1e6:9.2f}M")
    lines += [f"widths: {layer_widths_of(model)}",
              f"\n{'':32s} {'><former':>14s} {'constant':>14s}  ratio"]
    columns = []
    for m in (model, baseline):
        p, w, flops = param_summary(m), layer_widths_of(m), m.flops_per_token()
        columns.append([sum(w) / len(w), max(w + [m.config.n_embd]), p["total"],
                        p["non_embedding"], p["matched"], flops, flops - 2 * p["endpoint"],
                        m.kv_cache_bytes_per_token()])
    names = ("average layer width", "residual stream width D", "total params",
             "non-embedding params", "matched params (App. A)",
             f"FLOPs/token fwd (T={model.config.block_size})",
             "  same, less W_end's 2 FLOPs/param", "KV cache bytes/token (bf16)")
    for name, a, b in zip(names, *columns):
        lines.append(f"{name:32s} {a:14,.1f} {b:14,.1f}  {a / b:.4f}")
    pm = param_summary(model)
    lines.append(f"\n><former params by component: embedding {pm['embedding']:,}, lm_head "
                 f"{pm['lm_head']:,}, attention {pm['attention']:,}, ffn {pm['ffn']:,}, norms "
                 f"{pm['norms']:,}, other {pm['other']:,}, endpoint (W_end) {pm['endpoint']:,}")
    return "\n".join(lines)


def read_args(argv):
    """The settings of a command line: train.py's keys too, so that a training config file can be
    given (its model keys, model_args, and its data's vocabulary)."""
    args = parse_overrides(argv, {**train_defaults(), **default_args(VariableWidthConfig),
                                  **PAPER_200M, "dataset": ""})
    args.update(args.pop("model_args") or {})
    meta = Path(args["data_dir"] or f"data/{args['dataset']}") / "meta.json"
    if args["dataset"] and not any(a.startswith("--vocab_size=") for a in argv) and meta.exists():
        args["vocab_size"] = json.loads(meta.read_text())["vocab_size"]
    return args


if __name__ == "__main__":
    try:
        print(report(read_args(sys.argv[1:])))
    except (ConfigError, ValueError) as e:
        raise SystemExit(f"error: {e}")
