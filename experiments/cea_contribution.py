"""
How much of the language modelling does the FFN do, and how much attention? The Token Prediction
and mutual-information contribution ratios of trained checkpoints of cea.py's models. Lu, Zhao,
Qin, Huo, Yang, Xu, "How does Architecture Influence the Base Capabilities of Pre-trained Language
Models? A Case Study Based on FFN-Wider and MoE Transformers" (NeurIPS 2024,
arXiv:2403.02436), sections 4.2.1-4.2.2, appendix F, Figures 4 and 6.

Token Prediction: a token's class vector is the normalised mean of the normalised representations
whose target it is; each position is predicted by its most cosine-similar class vector, after
every sublayer. A sublayer's gain is its accuracy minus the step before it's; the FFN ratio is the
FFN sublayers' share of the gains. Mutual information: the same with the MI of k-means labels
(scipy's, where the paper's are mini-batch) and the targets.

    python experiments/cea_contribution.py --out_dirs=out-cea-vanilla,out-cea-wider,out-cea-cea
"""


import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from scipy.cluster.vq import kmeans2
from scipy.stats import contingency, entropy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from shapelab.checkpoint import load_checkpoint
from shapelab.configurator import parse_overrides
from shapes import model_from_checkpoint


@torch.no_grad()
def sublayer_representations(model, idx):
    """[embedding, after attn 1, after FFN slot 1, after attn 2, ...], each (B*T, C) float32,
    and the kind of each step ('embedding', 'attention', 'ffn')."""
    x = model.tok_emb(idx)  # (B, T, C)
    reps, kinds = [x], ["embedding"]
    for block in model.blocks:
        x = block.attn(x)
        reps.append(x)
        x = block.ffn(x)  # the whole FFN slot: [FFN], [] or [MoE, FFN]
        reps.append(x)
        kinds += ["attention", "ffn"]
    return [r.reshape(-1, r.size(-1)).float() for r in reps], kinds


def token_prediction_accuracies(reps, targets, min_count=50):
    """The accuracy of nearest-class-vector prediction for each representation (N, C) of `reps`,
    over the positions whose target token kept a class vector."""
    use = torch.bincount(targets)[targets] >= min_count  # (N,) positions whose target has a class
    if not use.any():
        raise ValueError(f"no target token occurs {min_count} times: analyse more batches or lower "
                         "min_count")
    kept, label = torch.unique(targets[use], return_inverse=True)  # (K,) token ids, (M,) classes
    accuracies = []
    for r in reps:
        r = F.normalize(r[use], dim=-1)  # (M, C)
        sums = torch.zeros(len(kept), r.size(-1)).index_add_(0, label, r)  # (K, C)
        classes = F.normalize(sums, dim=-1)  # (K, C): the mean's direction
        predicted = (r @ classes.T).argmax(dim=-1)  # highest cosine similarity
        accuracies.append((predicted == label).float().mean().item())
    return accuracies


def contribution_ratio(accuracies, kinds):
    """Gains of each sublayer over the step before it, and the FFN share of all gains."""
    gains = [b - a for a, b in zip(accuracies, accuracies[1:])]
    ffn_gain = sum(g for g, k in zip(gains, kinds[1:]) if k == "ffn")
    total = sum(gains) or float("nan")
    return dict(accuracies=accuracies, kinds=kinds, gains=gains, ffn_ratio=ffn_gain / total,
                attention_ratio=(total - ffn_gain) / total)


@torch.no_grad()
def analyze_checkpoint(out_dir, n_batches=16, batch_size=16, min_count=50, mi_clusters=0):
    """The Token Prediction contribution of a checkpoint on fixed random windows of its val data,
    and with mi_clusters > 0 the mutual-information one."""
    ckpt = load_checkpoint(Path(out_dir) / "ckpt.pt")
    model, cfg = model_from_checkpoint(ckpt).eval(), ckpt["config"]
    data_dir = Path(cfg["data_dir"]) if cfg["data_dir"] else ROOT / "data" / cfg["dataset"]
    data = np.memmap(data_dir / "val.bin", dtype=np.uint16, mode="r")
    T, n = cfg["block_size"], n_batches * batch_size
    starts = torch.randint(len(data) - T - 1, (n,), generator=torch.Generator().manual_seed(0))
    windows = np.stack([data[i:i + T + 1] for i in starts.tolist()]).astype(np.int64)
    windows = torch.from_numpy(windows)  # (n, T + 1)
    x, y = windows[:, :-1], windows[:, 1:].reshape(-1)
    per_batch = [sublayer_representations(model, b) for b in x.split(batch_size)]
    kinds = per_batch[0][1]
    reps = [torch.cat(r) for r in zip(*(reps for reps, _ in per_batch))]  # each (N, C)
    result = contribution_ratio(token_prediction_accuracies(reps, y, min_count), kinds)
    if mi_clusters:
        mi = [kmeans_mutual_information(r, y, mi_clusters) for r in reps]
        result.update(mi=mi, mi_ffn_ratio=contribution_ratio(mi, kinds)["ffn_ratio"])
    result["name"] = Path(out_dir).name
    return result


def kmeans_mutual_information(x, targets, k):
    """I(cluster; target) in nats of k-means labels (k-means++ start, as appendix F) of x (N, C)."""
    _, labels = kmeans2(x.double().numpy(), k, minit="++", seed=0)
    joint = contingency.crosstab(labels, targets.numpy()).count
    return float(entropy(joint.sum(1)) + entropy(joint.sum(0)) - entropy(joint.ravel()))


def rounded(value):
    """value with every float in it rounded to 4 digits, for the printed JSON lines."""
    return json.loads(json.dumps(value), parse_float=lambda text: round(float(text), 4))


def plot_contributions(results, path):
    """Figure 4's view: the FFN's and attention's cumulative share of the accuracy gain by layer."""
    from shapelab.plot import plt, save_figure
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for i, r in enumerate(results):
        gains = np.array(r["gains"]).reshape(-1, 2) / (sum(r["gains"]) or 1.0)  # (layer, 2)
        cum_attn, cum_ffn = np.vstack([[0.0, 0.0], gains.cumsum(0)]).T
        layers = range(len(cum_ffn))
        ax.plot(layers, cum_ffn, "-o", color=f"C{i}",
                label=f"{r['name']}: FFN ({100 * r['ffn_ratio']:.0f}%)")
        ax.plot(layers, cum_attn, "--", color=f"C{i}", label=f"{r['name']}: attention")
    ax.set_xticks(layers)
    ax.set_xlabel("layer")
    ax.set_ylabel("cumulative share of the accuracy gain")
    ax.set_title("Token Prediction contribution (section 4.2.2)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)


DEFAULT_ARGS = dict(out_dirs="", plot="docs/cea_contribution.png", n_batches=16, batch_size=16,
                    min_count=50, mi_clusters=0)


def main(argv):
    args = parse_overrides(argv, DEFAULT_ARGS)
    out_dirs = [d for d in args["out_dirs"].split(",") if d]
    missing = [d for d in out_dirs if not (Path(d) / "ckpt.pt").exists()]
    if not out_dirs or missing:  # one line, before any work
        raise SystemExit(f"error: no checkpoint in {', '.join(missing) or '--out_dirs'}: give "
                         "the trained runs, e.g. --out_dirs=out-cea-vanilla,out-cea-wider,"
                         "out-cea-cea (python train.py config/cea_shakespeare_char_cea.py)")
    results = []
    for d in out_dirs:
        r = analyze_checkpoint(d, args["n_batches"], args["batch_size"], args["min_count"],
                               args["mi_clusters"])
        keys = ("name", "ffn_ratio", "attention_ratio", "accuracies", "mi_ffn_ratio", "mi")
        print(json.dumps(rounded({k: r[k] for k in keys if k in r})))
        results.append(r)
    plot_contributions(results, args["plot"])
    print(f"wrote {args['plot']}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
