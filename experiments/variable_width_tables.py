"""
The ><former against the constant width it is parameter-matched to: the solver's numbers, widths,
parameters (with Appendix A's matched count), forward FLOPs/token and KV cache bytes/token, with
their ratios. "Variable-Width Transformers" (Wu, Sieberling, Tan, Panda, Polyanskiy, Kim, 2026,
arXiv:2606.18246). Built on the meta device; the defaults are the paper's 200M shape (Table 1),
`--key=value` sets any variable_width.py or GPT setting (`python variable_width.py` prints the
per-layer shapes).

    python experiments/variable_width_tables.py --n_layer=16 --n_embd=640
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for its modules

from model import GPT, GPTConfig, default_args, meta_device
from shapelab.configurator import ConfigError, parse_overrides, usage_error
from variable_width import (VariableWidthConfig, VariableWidthGPT, layer_widths_of,
                            param_summary, solve_widths)

PAPER_200M = dict(vocab_size=100277, block_size=4096, n_layer=16, n_embd=640, n_head=16,
                  tie_embeddings=False)


def report(args):
    with meta_device():  # any size, instantly
        model = VariableWidthGPT(VariableWidthConfig(**args))
        baseline = GPT(GPTConfig(**{k: args[k] for k in default_args(GPTConfig)}))
    d, L = args["n_embd"], args["n_layer"]
    lines = [f"{args['width_schedule']} widths, matched to a "
             f"constant width d={d}, L={L}"]
    if not args["layer_widths"] and args["width_schedule"] != "constant":
        _, info = solve_widths(args["width_schedule"], L, d, args["bottleneck_layer_ratio"],
                               args["bottleneck_width_ratio"], args["width_multiple"],
                               (args["ffn_hidden"] or 4 * d) / d,
                               (args["n_kv_head"] or args["n_head"]) / args["n_head"])
        lines.append(f"solver: endpoint width {info['unrounded'][0]:.2f} (unrounded), a^- = "
                     f"{info['rate']:.5f}, bottleneck layer l* = {info['bottleneck_layer']} "
                     f"(1-indexed)")
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
    return "\n".join(lines)


if __name__ == "__main__":
    try:
        args = parse_overrides(sys.argv[1:], {**default_args(VariableWidthConfig), **PAPER_200M})
        print(report(args))
    except (ConfigError, ValueError) as e:
        usage_error(e)
