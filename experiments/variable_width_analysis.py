"""
The ><former's representation analyses (section 4 of "Variable-Width Transformers", Wu,
Sieberling, Tan, Panda, Polyanskiy, Kim, 2026), run on trained checkpoints of variable_width.py
(and of the plain GPT, for the constant-width baseline).

What it measures, on a few fixed validation batches, after the embedding (layer 0) and after
every layer l of each checkpoint:

- normalized matrix entropy of the residual stream (sec. 4.2, eq. 2), for a (tokens x D) matrix X
  with singular values sigma_j and numerical rank r:

      H(X) = -(1 / log r) sum_j p_j log p_j,     p_j = sigma_j^2 / ||X||_F^2              (2)

  For a ><former X is the whole wide stream R (width D = max(d, max_l w_l)), not only R[:w_l].
  X is not centred (the paper does not say; we take the stream as it is).
- the logit lens (sec. 4.3): the final norm and the LM head applied to the stream after layer l;
  mean log-probability of the next token, mean entropy of the decoded distribution, and the
  symmetric KL divergence between the decoded distributions of layers l-1 and l.

    python experiments/variable_width_analysis.py --out_dirs=out-vw-constant,out-vw-x

reads <out_dir>/ckpt.pt of each run (train them first: python train.py
config/variable_width_shakespeare_char_constant.py, and _x.py), prints the numbers per layer and
writes docs/variable_width_entropy.png and docs/variable_width_logit_lens.png (--png_prefix).
Options: --data_dir (the validation tokens, default data/shakespeare_char), --n_batches,
--batch_size (default 4 batches of 8 sequences of the model's block_size).
"""

import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for its modules

from checkpoint import load_checkpoint, model_from_checkpoint  # noqa: E402
from configurator import ConfigError, parse_overrides  # noqa: E402
from variable_width import layer_widths_of  # noqa: E402


@torch.no_grad()
def hidden_states(model, idx):
    """[x_0, ..., x_L]: the residual stream after the embedding and after each layer, (B, T, D),
    for a VariableWidthGPT (its wide stream) or a plain model.GPT (width d)."""
    if hasattr(model, "residual_streams"):
        return model.residual_streams(idx)
    x = model.tok_emb(idx)  # (B, T, d)
    states = [x]
    for block in model.blocks:
        x = block(x)
        states.append(x)
    return states


def decode(model, R):
    """Logit lens: the final norm and the unembedding applied to an intermediate stream."""
    if hasattr(model, "head_input"):
        return model.lm_head(model.head_input(R))  # final norm over R[:w_L], cut to d
    return model.lm_head(model.norm_f(R))


def normalized_matrix_entropy(X):
    """Eq. (2) for a (tokens, features) matrix: entropy of sigma_j^2 / ||X||_F^2 over log r."""
    sigma = torch.linalg.svdvals(X.double())
    r = int((sigma > sigma.max() * max(X.shape) * torch.finfo(X.dtype).eps).sum())  # numerical rank
    p = sigma[:r] ** 2 / (sigma[:r] ** 2).sum()
    return float(-(p * p.log()).sum() / math.log(r)) if r > 1 else 0.0


@torch.no_grad()
def matrix_entropy_per_layer(model, batches):
    """Eq. (2) of every x_l (l = 0 is the embedding), over all tokens of the batches."""
    model.eval()
    per_layer = None
    for idx, _ in batches:
        states = [s.reshape(-1, s.size(-1)).float() for s in hidden_states(model, idx)]  # (B*T, D) each
        per_layer = states if per_layer is None else [torch.cat(p) for p in zip(per_layer, states)]
    return [normalized_matrix_entropy(X) for X in per_layer]


@torch.no_grad()
def logit_lens(model, batches):
    """Per layer l = 0..L: mean target log-probability, mean entropy of the decoded distribution,
    and the symmetric KL between layers l-1 and l (sec. 4.3)."""
    model.eval()
    sums = None
    for idx, targets in batches:
        logps = [F.log_softmax(decode(model, s).float(), dim=-1) for s in hidden_states(model, idx)]  # (B, T, V)
        rows = []
        for l, lp in enumerate(logps):
            target_lp = lp.gather(-1, targets.unsqueeze(-1)).mean().item()
            entropy = -(lp.exp() * lp).sum(-1).mean().item()
            kl = 0.0
            if l > 0:
                q = logps[l - 1]
                kl = 0.5 * ((lp.exp() * (lp - q)).sum(-1) + (q.exp() * (q - lp)).sum(-1)).mean().item()
            rows.append((target_lp, entropy, kl))
        sums = rows if sums is None else [tuple(a + b for a, b in zip(r, s)) for r, s in zip(rows, sums)]
    n = len(batches)
    return dict(target_logprob=[r[0] / n for r in sums], entropy=[r[1] / n for r in sums],
                sym_kl=[r[2] / n for r in sums])


def val_batches(data_dir, n_batches, batch_size, block_size, seed=0):
    """A few fixed (x, y) batches from data_dir/val.bin (uint16 token ids)."""
    data = np.memmap(Path(data_dir) / "val.bin", dtype=np.uint16, mode="r")
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n_batches):
        starts = torch.randint(len(data) - block_size - 1, (batch_size,), generator=generator).tolist()
        x = torch.stack([torch.from_numpy(data[s:s + block_size].astype(np.int64)) for s in starts])
        y = torch.stack([torch.from_numpy(data[s + 1:s + 1 + block_size].astype(np.int64)) for s in starts])
        batches.append((x, y))  # (batch_size, block_size) each
    return batches


def analyze_checkpoints(out_dirs, data_dir, n_batches=4, batch_size=8, png_prefix="docs/variable_width"):
    """Load out_dir/ckpt.pt of each run, compute eq. (2) and the logit lens on a few validation
    batches, and save <png_prefix>_entropy.png and <png_prefix>_logit_lens.png. Returns the numbers."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    results = {}
    for out_dir in out_dirs:
        model = model_from_checkpoint(load_checkpoint(Path(out_dir) / "ckpt.pt")).float().eval()
        batches = val_batches(data_dir, n_batches, batch_size, model.config.block_size)
        label = f"{out_dir} (widths {layer_widths_of(model)})"
        results[label] = dict(matrix_entropy=matrix_entropy_per_layer(model, batches), **logit_lens(model, batches))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, r in results.items():
        ax.plot(range(len(r["matrix_entropy"])), r["matrix_entropy"], marker="o", label=label)
    ax.set(xlabel="layer (0 = embedding)", ylabel="normalized matrix entropy, eq. (2)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(f"{png_prefix}_entropy.png", dpi=90)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for label, r in results.items():
        for ax, key, name in zip(axes, ("target_logprob", "entropy", "sym_kl"),
                                 ("target log-prob", "entropy (nats)", "sym. KL to previous layer")):
            ax.plot(range(len(r[key])), r[key], marker="o", label=label)
            ax.set(xlabel="layer (0 = embedding)", ylabel=name)
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(f"{png_prefix}_logit_lens.png", dpi=90)
    return results


if __name__ == "__main__":
    defaults = dict(out_dirs="out-vw-constant,out-vw-x", data_dir="data/shakespeare_char", n_batches=4, batch_size=8,
                    png_prefix="docs/variable_width")
    try:
        args = parse_overrides(sys.argv[1:], defaults)
    except ConfigError as e:
        raise SystemExit(f"error: {e}")
    results = analyze_checkpoints(args["out_dirs"].split(","), args["data_dir"], args["n_batches"],
                                  args["batch_size"], args["png_prefix"])
    for label, r in results.items():
        print(label)
        for key, values in r.items():
            print(f"  {key:15s} " + " ".join(f"{v:7.3f}" for v in values))
    print(f"wrote {args['png_prefix']}_entropy.png and {args['png_prefix']}_logit_lens.png")
