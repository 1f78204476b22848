"""
The image-MLP paper's parameter counts from mlp_hourglass.py's models (meta device): every row of
its Tables 1 and 2 and section 4.3 next to the paper's number (its conventional rows count a
d_x x d_z W_in too). "Rethinking the Shape Convention of an MLP" (Chen, Lee, Liao, Shiu, 2025,
arXiv:2510.01796).

    python experiments/mlp_hourglass_tables.py
"""


import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root

import torch

from mlp_hourglass import ImageMLP, count_params

# rows of the paper's Tables 1 / 2 and section 4.3:
# (name, d_x, d_out, d_z, d_h, L, params M, trainable M)
PAPER_PARAM_ROWS = [
    ("ImageNet-32 denoise, conventional (Table 1)", 3072, 3072, 3072, 3075, 1, 37.77, None),
    ("ImageNet-32 denoise, hourglass (Table 1)", 3072, 3072, 3546, 8, 5, 22.07, None),
    ("ImageNet-32 denoise, hourglass (Table 1, sec. 4.3)", 3072, 3072, 3546, 270, 5, 31.36, 20.47),
    ("ImageNet-32 SR, conventional (Table 2)", 768, 3072, 3072, 3075, 1, 30.69, None),
]


def param_checks():
    lines = ["Parameter checks against the paper (P = d_x d_z + 2 L d_z d_h + d_z d_out):"]
    for name, dx, dout, dz, dh, L, paper_total, paper_trainable in PAPER_PARAM_ROWS:
        shape = "hourglass" if dh < dz else "conventional"
        with torch.device("meta"):                       # count without allocating 30M floats
            p = count_params(ImageMLP(dx, dout, dz, dh, L, shape=shape,
                                      input_proj="frozen_random"))
        lines.append(f"  {name:52s} d_z={dz} d_h={dh} L={L}: total {p['total'] / 1e6:.2f}M "
                     f"(paper {paper_total}M), "
                     f"trainable with frozen W_in {p['trainable'] / 1e6:.2f}M"
                     + (f" (paper {paper_trainable}M)" if paper_trainable else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    print(param_checks())
