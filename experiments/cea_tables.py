"""
The parameter tables of docs/cea.md, counted by cea.py: every model's parameters by role
(attention, Inner-FFN or Inner-MoE, Outer-FFN, the baseline's MoE, the FFN parameters one token
uses) and FLOPs per token. "How does Architecture Influence the Base Capabilities of Pre-trained
Language Models? A Case Study Based on FFN-Wider and MoE Transformers" (Lu, Zhao, Qin, Huo, Yang,
Xu, NeurIPS 2024, arXiv:2403.02436). Built on the meta device: instant at any size.

    python experiments/cea_tables.py                          # CEA at the paper's H=768 GPT
    python experiments/cea_tables.py --outer_ratio=1.0        # FFN-Wider
    python experiments/cea_tables.py --vocab_size=32000 --n_embd=4096 --n_layer=6 --n_head=32 \\
        --tie_embeddings=False --block_size=2048 --ffn_width_ratio=4 --n_experts=64  # C.2's MoE
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root

from cea import CEAConfig, TopOneMoE
from model import default_args, describe, meta_device
from shapelab.configurator import ConfigError, parse_overrides, usage_error
from shapes import build_model

# The paper's H=768 GPT (section 6.1: 12 layers, 12 heads, BERT's vocabulary, context 128) as CEA
PAPER_H768 = dict(vocab_size=30522, block_size=128, n_layer=12, n_head=12, n_embd=768,
                  ffn_width_ratio=32, outer_ratio=0.125)


def param_split(model):
    """Parameters by role (attention, inner_ffn, outer_ffn, the baseline's moe, active_ffn: the
    FFN parameters one token uses), norm gains left out; and the total and non_embedding."""
    split = dict(attention=0, inner_ffn=0, outer_ffn=0, moe=0)
    for block in model.blocks:
        for name, p in block.named_parameters():
            if not name.endswith("norm.weight"):
                role = ("inner_ffn" if ".inner_ffn." in name else "moe" if ".moe." in name
                        else "attention" if name.startswith("attn.") else "outer_ffn")
                split[role] += p.numel()
    idle = sum(p.numel() for m in model.modules() if isinstance(m, TopOneMoE)
               for expert in m.experts[1:] for p in expert.parameters())  # top-1: one is active
    counts = model.param_counts()
    return dict(split, active_ffn=split["inner_ffn"] + split["outer_ffn"] + split["moe"] - idle,
                total=counts["total"], non_embedding=counts["non_embedding"])


def main(argv):
    try:  # --key=value sets any CEAConfig field
        args = parse_overrides(argv, {**default_args(CEAConfig), **PAPER_H768})
        with meta_device():
            model = build_model("cea", **args)
    except ConfigError as e:
        usage_error(e)
    print(describe(model))
    print("split: " + ", ".join(f"{k} {v / 1e6:.3f}M" for k, v in param_split(model).items()))


if __name__ == "__main__":
    main(sys.argv[1:])
