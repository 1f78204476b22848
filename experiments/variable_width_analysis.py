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
  symmetric KL divergence between the decoded distributions of layers l-1 and l. Streamed a
  layer at a time (two layers' (B, T, V) log-probs at once, not L + 1: the 200M config's
  all-layers-at-once tensor was ~28 GB); --device runs it on a GPU.
- the MLP activations a = silu(W_1 x) * W_3 x of every layer, from forward hooks (sec. 4.1, App. C):
  activation density across thresholds (Figure 6), per-dimension utilisation at |a| > 0.1
  (Figure 5; we report the share of dimensions active on < 1% of tokens) and the participation
  ratio N_eff = (sum_i e_i)^2 / sum_i e_i^2, e_i = sum_t a_ti^2, raw and over the layer's
  activation dimensions (Figure 9; the paper's "N_eff / d_l", whose maximum is the number of
  activation dimensions). Written to docs/variable_width_mlp.png.

    python experiments/variable_width_analysis.py --out_dirs=out-vw-constant,out-vw-x

reads <out_dir>/ckpt.pt of each run (train them first: python train.py
config/variable_width_shakespeare_char_constant.py, and _x.py), prints the numbers per layer and
writes docs/variable_width_{entropy,logit_lens,mlp}.png (--png_prefix).
Options: --data_dir (the validation tokens, default data/shakespeare_char), --n_batches,
--batch_size (default 4 batches of 8 sequences of the model's block_size), --device (cpu).
"""

import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for its modules

from model import SwiGLU  # noqa: E402
from shapelab.checkpoint import load_checkpoint  # noqa: E402
from shapelab.configurator import ConfigError, parse_overrides  # noqa: E402
from shapes import model_from_checkpoint  # noqa: E402
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
        # (B*T, D) each
        states = [s.reshape(-1, s.size(-1)).float() for s in hidden_states(model, idx)]
        per_layer = states if per_layer is None else [torch.cat(p) for p in zip(per_layer, states)]
    return [normalized_matrix_entropy(X) for X in per_layer]


@torch.no_grad()
def logit_lens(model, batches, device=None):
    """Per layer l = 0..L: mean target log-probability, mean entropy of the decoded distribution,
    and the symmetric KL between layers l-1 and l (sec. 4.3). Streamed: only two layers'
    full-vocabulary log-probs (l-1 and l, each (B, T, V)) are held at once; device: where to run."""
    model.eval()
    if device is not None:
        model.to(device)
    device = next(model.parameters()).device
    sums = None
    for idx, targets in batches:
        idx, targets = idx.to(device), targets.to(device)
        rows, prev = [], None
        for state in hidden_states(model, idx):
            lp = F.log_softmax(decode(model, state).float(), dim=-1)  # (B, T, V), this layer only
            target_lp = lp.gather(-1, targets.unsqueeze(-1)).mean().item()
            entropy = -(lp.exp() * lp).sum(-1).mean().item()
            kl = 0.0
            if prev is not None:
                kl = (
                    0.5
                    * ((lp.exp() * (lp - prev)).sum(-1) + (prev.exp() * (prev - lp)).sum(-1))
                    .mean()
                    .item()
                )
            rows.append((target_lp, entropy, kl))
            prev = lp
        sums = (
            rows
            if sums is None
            else [tuple(a + b for a, b in zip(r, s)) for r, s in zip(rows, sums)]
        )
    n = len(batches)
    return dict(target_logprob=[r[0] / n for r in sums], entropy=[r[1] / n for r in sums],
                sym_kl=[r[2] / n for r in sums])


DENSITY_THRESHOLDS = (0.01, 0.03, 0.1, 0.3, 1.0)


@torch.no_grad()
def mlp_activation_stats(model, batches, threshold=0.1, thresholds=DENSITY_THRESHOLDS, device=None):
    """Sec. 4.1 and appendix C from forward hooks on every SwiGLU's W_2 input a = silu(W_1 x) *
    W_3 x
    (all sub-blocks of a layer's FFN slot together). Per layer:
    density[th]    share of (token, dimension) entries with |a| > th (Figure 6)
    utilisation    per dimension, the share of tokens with |a| > threshold (Figure 5), sorted
    dead           share of dimensions active on < 1% of tokens
    n_eff, n_eff_frac   participation ratio N_eff = (sum_i e_i)^2 / sum_i e_i^2, e_i = sum_t a_ti^2,
                   and N_eff / (the layer's activation dimensions) (Figure 9)"""
    model.eval()
    if device is not None:
        model.to(device)
    device = next(model.parameters()).device
    acc = [
        dict(active=0, over={th: 0 for th in thresholds}, energy=0, tokens=0) for _ in model.blocks
    ]

    def hook_for(l):
        def hook(module, inputs):
            a = inputs[0].reshape(-1, inputs[0].size(-1)).float()  # (tokens, hidden)
            r = acc[l]
            r["parts"] = r.get("parts", []) + [a]
        return hook

    handles = []
    for l, block in enumerate(model.blocks):
        for m in block.ffn.modules():
            if isinstance(m, SwiGLU):
                handles.append(m.out_proj.register_forward_pre_hook(hook_for(l)))
    try:
        for idx, _ in batches:
            model(idx.to(device))
            for r in acc:
                # (tokens, all activation dims of the layer)
                a = torch.cat(r.pop("parts", []), dim=-1)
                if a.numel() == 0:
                    continue
                r["active"] = r["active"] + (a.abs() > threshold).sum(0).double()
                r["energy"] = r["energy"] + (a.double() ** 2).sum(0)
                for th in thresholds:
                    r["over"][th] += int((a.abs() > th).sum())
                r["tokens"] += a.size(0)
    finally:
        for h in handles:
            h.remove()
    out = []
    for r in acc:
        if not r["tokens"]:
            out.append(None)
            continue
        util = (r["active"] / r["tokens"]).sort().values
        e, dims = r["energy"], r["energy"].numel()
        n_eff = float(e.sum() ** 2 / (e ** 2).sum()) if e.sum() > 0 else 0.0
        out.append(dict(density={th: n / (r["tokens"] * dims) for th, n in r["over"].items()},
                        utilisation=util.tolist(), dead=float((util < 0.01).double().mean()),
                        n_eff=n_eff, n_eff_frac=n_eff / dims, dims=dims))
    return out


def val_batches(data_dir, n_batches, batch_size, block_size, seed=0):
    """A few fixed (x, y) batches from data_dir/val.bin (uint16 token ids)."""
    data = np.memmap(Path(data_dir) / "val.bin", dtype=np.uint16, mode="r")
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n_batches):
        starts = torch.randint(
            len(data) - block_size - 1, (batch_size,), generator=generator
        ).tolist()
        x = torch.stack([torch.from_numpy(data[s:s + block_size].astype(np.int64)) for s in starts])
        y = torch.stack(
            [torch.from_numpy(data[s + 1 : s + 1 + block_size].astype(np.int64)) for s in starts]
        )
        batches.append((x, y))  # (batch_size, block_size) each
    return batches


def mlp_summary(stats, threshold=0.1):
    """Per-layer lists from mlp_activation_stats (NaN for a layer without an MLP)."""
    get = lambda key: [float("nan") if r is None else key(r) for r in stats]  # noqa: E731
    return dict(
        mlp_density=get(lambda r: r["density"][threshold]),
        mlp_dead=get(lambda r: r["dead"]),
        mlp_n_eff=get(lambda r: r["n_eff"]),
        mlp_n_eff_frac=get(lambda r: r["n_eff_frac"]),
    )


def analyze_checkpoints(
    out_dirs, data_dir, n_batches=4, batch_size=8, png_prefix="docs/variable_width", device="cpu"
):
    """Load out_dir/ckpt.pt of each run, compute eq. (2), the logit lens and the MLP activation
    statistics on a few validation batches, and save <png_prefix>_entropy.png,
    <png_prefix>_logit_lens.png and <png_prefix>_mlp.png. Returns the numbers."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    results, densities = {}, {}
    for out_dir in out_dirs:
        model = model_from_checkpoint(
            load_checkpoint(Path(out_dir) / "ckpt.pt", map_location=device)
        )
        model = model.float().to(device).eval()
        batches = [
            (x.to(device), y.to(device))
            for x, y in val_batches(data_dir, n_batches, batch_size, model.config.block_size)
        ]
        label = f"{out_dir} (widths {layer_widths_of(model)})"
        stats = mlp_activation_stats(model, batches)
        densities[label] = [sum(r["density"][th] for r in stats if r) / sum(1 for r in stats if r)
                            for th in DENSITY_THRESHOLDS]
        results[label] = dict(
            matrix_entropy=matrix_entropy_per_layer(model, batches),
            **logit_lens(model, batches),
            **mlp_summary(stats),
        )
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, r in results.items():
        ax.plot(range(len(r["matrix_entropy"])), r["matrix_entropy"], marker="o", label=label)
    ax.set(xlabel="layer (0 = embedding)", ylabel="normalized matrix entropy, eq. (2)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(f"{png_prefix}_entropy.png", dpi=90)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for label, r in results.items():
        for ax, key, name in zip(
            axes,
            ("target_logprob", "entropy", "sym_kl"),
            ("target log-prob", "entropy (nats)", "sym. KL to previous layer"),
        ):
            ax.plot(range(len(r[key])), r[key], marker="o", label=label)
            ax.set(xlabel="layer (0 = embedding)", ylabel=name)
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(f"{png_prefix}_logit_lens.png", dpi=90)
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.5))
    for label, r in results.items():
        axes[0].plot(DENSITY_THRESHOLDS, densities[label], marker="o", label=label)
        for ax, key in zip(axes[1:], ("mlp_dead", "mlp_n_eff", "mlp_n_eff_frac")):
            ax.plot(range(1, len(r[key]) + 1), r[key], marker="o", label=label)
    axes[0].set(xscale="log", xlabel="threshold on |activation|", ylabel="MLP activation density "
                                                                         "(mean over layers)")
    for ax, name in zip(axes[1:], ("share of dims active on < 1% of tokens", "participation ratio "
                                                                             "N_eff",
                                   "N_eff / activation dims")):
        ax.set(xlabel="layer", ylabel=name)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=7)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(f"{png_prefix}_mlp.png", dpi=90)
    return results


if __name__ == "__main__":
    defaults = dict(
        out_dirs="out-vw-constant,out-vw-x",
        data_dir="data/shakespeare_char",
        n_batches=4,
        batch_size=8,
        png_prefix="docs/variable_width",
        device="cpu",
    )
    try:
        args = parse_overrides(sys.argv[1:], defaults)
    except ConfigError as e:
        raise SystemExit(f"error: {e}")
    results = analyze_checkpoints(args["out_dirs"].split(","), args["data_dir"], args["n_batches"],
                                  args["batch_size"], args["png_prefix"], args["device"])
    for label, r in results.items():
        print(label)
        for key, values in r.items():
            print(f"  {key:15s} " + " ".join(f"{v:7.3f}" for v in values))
    print(
        "wrote "
        + ", ".join(f"{args['png_prefix']}_{kind}.png" for kind in ("entropy", "logit_lens", "mlp"))
    )
