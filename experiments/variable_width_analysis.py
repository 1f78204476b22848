"""
The ><former's representation analyses, section 4 of "Variable-Width Transformers" (Wu,
Sieberling, Tan, Panda, Polyanskiy, Kim, 2026), on trained checkpoints of variable_width.py and of
the plain GPT, after the embedding (layer 0) and every layer:

- the normalized matrix entropy of the residual stream X (the whole wide stream, not centred),
  singular values sigma_j, numerical rank r (sec. 4.2):

      H(X) = -(1 / log r) sum_j p_j log p_j,     p_j = sigma_j^2 / ||X||_F^2              (2)

- the logit lens (sec. 4.3), streamed a layer at a time (all at once was ~28 GB at 200M);
- the MLP activations a = silu(W_1 x) * W_3 x (sec. 4.1, appendix C): density, dead dimensions
  and the participation ratio N_eff = (sum_i e_i)^2 / sum_i e_i^2, e_i = sum_t a_ti^2.

    python experiments/variable_width_analysis.py --out_dirs=out-vw-constant,out-vw-x
"""


import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for its modules

from cea_contribution import val_windows
from shapelab.checkpoint import load_checkpoint
from shapelab.configurator import ConfigError, parse_overrides, usage_error
from shapes import model_from_checkpoint
from variable_width import layer_widths_of

@torch.no_grad()
def hidden_states(model, idx):
    """[x_0, ..., x_L]: the residual stream after the embedding and each layer, (B, T, D)."""
    if hasattr(model, "residual_streams"):
        return model.residual_streams(idx)
    states = [model.tok_emb(idx)]
    for block in model.blocks:
        states.append(block(states[-1]))
    return states


def normalized_matrix_entropy(X):
    sigma = torch.linalg.svdvals(X.double())
    r = int((sigma > sigma.max() * max(X.shape) * torch.finfo(X.dtype).eps).sum())  # numerical rank
    p = sigma[:r] ** 2 / (sigma[:r] ** 2).sum()
    return float(-(p * p.log()).sum() / math.log(r)) if r > 1 else 0.0


@torch.no_grad()
def matrix_entropy_per_layer(model, batches):
    """Eq. (2) of every x_l over all tokens of the batches."""
    per_batch = [[s.reshape(-1, s.size(-1)).float() for s in hidden_states(model, idx)]
                 for idx, _ in batches]
    return [normalized_matrix_entropy(torch.cat(X)) for X in zip(*per_batch)]


@torch.no_grad()
def logit_lens(model, batches):
    """Per layer: the target's mean log-probability, the decoded entropy, the symmetric KL to
    the layer before; two layers' log-probs held at a time."""
    decode = getattr(model, "head_input", model.norm_f)  # the ><former's cuts R to d
    per_batch = []
    for idx, targets in batches:
        rows, prev = [], None
        for state in hidden_states(model, idx):
            lp = F.log_softmax(model.lm_head(decode(state)).float(), dim=-1)  # (B, T, V)
            kl = 0.0 if prev is None else 0.5 * (
                (lp.exp() * (lp - prev)).sum(-1) + (prev.exp() * (prev - lp)).sum(-1)).mean().item()
            rows.append((lp.gather(-1, targets.unsqueeze(-1)).mean().item(),
                         -(lp.exp() * lp).sum(-1).mean().item(), kl))
            prev = lp
        per_batch.append(rows)
    means = np.mean(per_batch, axis=0).T  # (3, layers)
    return {key: m.tolist() for key, m in zip(("target_logprob", "entropy", "sym_kl"), means)}


@torch.no_grad()
def mlp_activation_stats(model, batches):
    """Per layer, from a hook on its SwiGLU's W_2 input: the share of |a| > 0.1 (density), each
    dimension's share of tokens over it (utilisation, sorted), the dimensions active on < 1% of
    tokens (dead), the participation ratio n_eff and n_eff / dims."""
    sums = [[] for _ in model.blocks]  # per batch: (tokens active per dim, energy per dim, tokens)

    def add(r, a):
        a = a.reshape(-1, a.size(-1)).double()  # (tokens, the layer's dims)
        r.append(((a.abs() > 0.1).sum(0).double(), (a ** 2).sum(0), a.size(0)))
    handles = [block.ffn.mlp.out_proj.register_forward_pre_hook(
        lambda module, inputs, r=r: add(r, inputs[0])) for block, r in zip(model.blocks, sums)]
    for idx, _ in batches:
        model(idx)
    for h in handles:
        h.remove()
    out = []
    for r in sums:
        active, e, tokens = map(sum, zip(*r))
        util = (active / tokens).sort().values
        n_eff = float(e.sum() ** 2 / (e ** 2).sum())
        out.append(dict(density=float(util.mean()), utilisation=util.tolist(),
                        dead=float((util < 0.01).double().mean()), n_eff=n_eff,
                        n_eff_frac=n_eff / e.numel(), dims=e.numel()))
    return out


def analyze_checkpoints(out_dirs, data_dir, n_batches=4, batch_size=8,
                        png_prefix="docs/variable_width", device="cpu"):
    """The numbers of every run's out_dir/ckpt.pt, drawn into <png_prefix>_entropy.png,
    _logit_lens.png and _mlp.png."""
    from shapelab.plot import plt, save_figure
    results = {}
    for out_dir in out_dirs:
        ckpt = load_checkpoint(Path(out_dir) / "ckpt.pt", map_location=device)
        model = model_from_checkpoint(ckpt).float().to(device).eval()
        x, y = val_windows(data_dir, n_batches * batch_size, model.config.block_size)
        batches = list(zip(x.to(device).split(batch_size), y.to(device).split(batch_size)))
        stats = mlp_activation_stats(model, batches)
        results[f"{out_dir} (widths {layer_widths_of(model)})"] = dict(
            matrix_entropy=matrix_entropy_per_layer(model, batches), **logit_lens(model, batches),
            **{f"mlp_{key}": [r[key] for r in stats]
               for key in ("density", "dead", "n_eff", "n_eff_frac")})
    figures = {"entropy": {"matrix_entropy": "normalized matrix entropy, eq. (2)"},
               "logit_lens": {"target_logprob": "target log-prob", "entropy": "entropy (nats)",
                              "sym_kl": "sym. KL to previous layer"},
               "mlp": {"mlp_density": "share of |activation| > 0.1",
                       "mlp_dead": "share of dims active on < 1% of tokens",
                       "mlp_n_eff": "participation ratio N_eff",
                       "mlp_n_eff_frac": "N_eff / activation dims"}}
    for kind, panels in figures.items():
        fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels) + 1, 3.5), squeeze=False)
        first = int(kind == "mlp")  # the MLP's values start at layer 1, the stream's at 0
        for ax, (key, ylabel) in zip(axes[0], panels.items()):
            for label, r in results.items():
                ax.plot(range(first, first + len(r[key])), r[key], marker="o", label=label)
            ax.set(xlabel="layer (0 = embedding)", ylabel=ylabel)
        axes[0, 0].legend(fontsize=6)
        fig.tight_layout()
        save_figure(fig, f"{png_prefix}_{kind}.png", dpi=90)
    return results


if __name__ == "__main__":
    defaults = dict(out_dirs="out-vw-constant,out-vw-x", data_dir="data/shakespeare_char",
                    n_batches=4, batch_size=8, png_prefix="docs/variable_width", device="cpu")
    try:
        args = parse_overrides(sys.argv[1:], defaults)
    except ConfigError as e:
        usage_error(e)
    results = analyze_checkpoints(args["out_dirs"].split(","), args["data_dir"], args["n_batches"],
                                  args["batch_size"], args["png_prefix"], args["device"])
    for label, r in results.items():
        print(label)
        for key, values in r.items():
            print(f"  {key:15s} " + " ".join(f"{v:7.3f}" for v in values))
    print("wrote " + ", ".join(f"{args['png_prefix']}_{kind}.png"
                               for kind in ("entropy", "logit_lens", "mlp")))
