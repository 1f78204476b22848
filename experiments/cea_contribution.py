"""
How much of the language modelling does the FFN do, and how much attention? The Token
Prediction contribution ratio and an out-of-distribution loss of trained checkpoints of
cea.py's models (vanilla GPT, FFN-Wider, CEA, ...), and the plot docs/cea_contribution.png.

Paper: Lu, Zhao, Qin, Huo, Yang, Xu, "How does Architecture Influence the Base
Capabilities of Pre-trained Language Models? A Case Study Based on FFN-Wider and MoE
Transformers" (NeurIPS 2024): section 4.2.2 (Token Prediction), Figure 4 (the FFN's
contribution over depth), Figure 6 (contribution ratio and OOD loss against the outer ratio).

Token Prediction (4.2.2): take the representation after every sublayer, group the positions
by their target token; the normalised mean of a group's normalised representations is that
token's class vector (tokens with < 50 positions are dropped). Predict each position's target
by the most cosine-similar class vector. The accuracy gain of each sublayer over the step
before it is its contribution; the FFN ratio is the FFN sublayers' gains over all gains, the
attention ratio the rest.

Choices the paper leaves open:
- Representations are taken after the embedding and after each residual sublayer (before
  the final norm). The MoE baseline's FFN slot (MoE sublayer + FFN) counts as one FFN step;
  an Inner-FFN or Inner-MoE is part of its attention step. Accuracy is measured on the
  positions whose target kept a class vector. Gains may be negative.
- The positions: n_batches x batch_size windows of block_size tokens drawn with a fixed
  seed from the checkpoint's validation split (16 x 16 x 128 = 32,768 characters by default).
- The OOD text (the paper uses the Pile): the Python 3 documentation's topic pages
  (CPython's pydoc_data/topics.py, shipped with every CPython, no download), i.e. technical
  English and code instead of Shakespeare; characters outside the checkpoint's vocabulary
  are dropped. The loss is the mean next-character loss (what the model's forward returns)
  over n_windows evenly spaced windows of block_size. Character-level checkpoints only.

Run it (from the repository root, after training the CPU runs of cea.py):
    nice -n 10 python train.py config/cea_shakespeare_char_vanilla.py    # then _wider, _cea
    python experiments/cea_contribution.py --out_dirs=out-cea-vanilla,out-cea-wider,out-cea-cea
For Figure 6's sweep, train the CEA config with other ratios (--out_dir=out-cea-r0.5
--model_args="{'ffn_mult': 32, 'outer_ratio': 0.5}") and list those folders too.
It prints one JSON line per checkpoint (ffn_ratio, attention_ratio, ood_loss, accuracies)
and writes the plot (--plot=docs/cea_contribution.png, relative to the working directory).
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from checkpoint import load_checkpoint, model_from_checkpoint  # noqa: E402
from configurator import parse_overrides  # noqa: E402


@torch.no_grad()
def sublayer_representations(model, idx):
    """[embedding, after attn 1, after FFN slot 1, after attn 2, ...], each (B*T, C) float32,
    and the kind of each step ('embedding', 'attention', 'ffn')."""
    x = model.tok_emb(idx)  # (B, T, C)
    reps, kinds = [x], ["embedding"]
    for block in model.blocks:
        x = block.attn(x)
        reps.append(x)
        kinds.append("attention")
        x = block.ffn(x)  # the whole FFN slot: [FFN], [] or [MoE, FFN]
        reps.append(x)
        kinds.append("ffn")
    return [r.reshape(-1, r.size(-1)).float() for r in reps], kinds


def token_prediction_accuracies(reps, targets, min_count=50):
    """Accuracy of nearest-class-vector prediction for each representation in `reps`
    (each (N, C)), targets (N,). Class vector of token c = normalised mean of the
    normalised representations whose target is c; tokens with < min_count positions are
    dropped, and accuracy is over the positions whose target kept a class vector."""
    counts = torch.bincount(targets)
    kept = (counts >= min_count).nonzero(as_tuple=True)[0]  # (K,) token ids with a class vector
    if kept.numel() == 0:
        raise ValueError(f"no target token occurs {min_count} times: analyse more batches or lower min_count")
    lookup = torch.full((counts.numel(),), -1, dtype=torch.long)
    lookup[kept] = torch.arange(kept.numel())
    label = lookup[targets]  # (N,) class index or -1
    use = label >= 0
    accuracies = []
    for r in reps:
        r = F.normalize(r[use], dim=-1)  # (M, C)
        sums = torch.zeros(kept.numel(), r.size(-1)).index_add_(0, label[use], r)  # (K, C)
        classes = F.normalize(sums, dim=-1)  # (K, C): the mean's direction
        predicted = (r @ classes.T).argmax(dim=-1)  # highest cosine similarity
        accuracies.append((predicted == label[use]).float().mean().item())
    return accuracies


def contribution_ratio(accuracies, kinds):
    """Gains of each sublayer over the step before it, and the FFN share of all gains."""
    gains = [accuracies[i] - accuracies[i - 1] for i in range(1, len(accuracies))]
    ffn_gain = sum(g for g, k in zip(gains, kinds[1:]) if k == "ffn")
    total = sum(gains)
    return dict(accuracies=accuracies, kinds=kinds, gains=gains, ffn_ratio=ffn_gain / total if total else float("nan"),
                attention_ratio=(total - ffn_gain) / total if total else float("nan"))


def load_run(out_dir):
    """The model of out_dir/ckpt.pt (eval mode, on the CPU), its block_size and its data folder."""
    ckpt = load_checkpoint(Path(out_dir) / "ckpt.pt")
    model = model_from_checkpoint(ckpt).eval()
    cfg = ckpt["config"]
    data_dir = Path(cfg["data_dir"]) if cfg["data_dir"] else ROOT / "data" / cfg["dataset"]
    return model, cfg["block_size"], data_dir


@torch.no_grad()
def analyze_checkpoint(out_dir, split="val", n_batches=16, batch_size=16, min_count=50, seed=0):
    """Token Prediction contribution of a trained checkpoint on fixed random windows of its dataset."""
    model, T, data_dir = load_run(out_dir)
    data = np.memmap(data_dir / f"{split}.bin", dtype=np.uint16, mode="r")
    g = torch.Generator().manual_seed(seed)
    ix = torch.randint(len(data) - T - 1, (n_batches * batch_size,), generator=g).tolist()
    x = torch.from_numpy(np.stack([data[i:i + T] for i in ix]).astype(np.int64))  # (n_batches*B, T)
    y = torch.from_numpy(np.stack([data[i + 1:i + 1 + T] for i in ix]).astype(np.int64))
    per_batch, kinds = [], None
    for b in range(n_batches):
        reps, kinds = sublayer_representations(model, x[b * batch_size:(b + 1) * batch_size])
        per_batch.append(reps)
    reps = [torch.cat([r[i] for r in per_batch]) for i in range(len(kinds))]  # each (N, C)
    result = contribution_ratio(token_prediction_accuracies(reps, y.reshape(-1), min_count), kinds)
    result["name"] = Path(out_dir).name
    return result


def ood_text():
    """The out-of-distribution text: the Python 3 documentation's topic pages (CPython's
    pydoc_data/topics.py), technical English prose and code. Returns one string."""
    from pydoc_data.topics import topics
    return "\n\n".join(topics[k] for k in sorted(topics))


@torch.no_grad()
def char_text_loss(out_dir, text, n_windows=64, batch_size=16):
    """Mean next-character loss of a char-level checkpoint on `text` (characters outside the
    checkpoint's vocabulary are dropped), over n_windows evenly spaced windows of block_size."""
    model, T, data_dir = load_run(out_dir)
    chars = json.loads((data_dir / "meta.json").read_text())["chars"]
    index = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([index[c] for c in text if c in index], dtype=torch.long)
    starts = torch.linspace(0, len(ids) - T - 1, n_windows).long().tolist()
    x = torch.stack([ids[s:s + T] for s in starts])  # (n_windows, T)
    y = torch.stack([ids[s + 1:s + 1 + T] for s in starts])
    losses = [model(x[i:i + batch_size], y[i:i + batch_size])[1].item() for i in range(0, n_windows, batch_size)]
    return sum(losses) / len(losses)


def plot_contributions(results, path):
    """Figure-4-like plot: the FFN's and attention's cumulative share of the accuracy gain over depth."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for i, r in enumerate(results):
        total = sum(r["gains"]) or 1.0
        ffn, attn, cum_ffn, cum_attn = 0.0, 0.0, [0.0], [0.0]
        for g, k in zip(r["gains"], r["kinds"][1:]):
            ffn, attn = (ffn + g, attn) if k == "ffn" else (ffn, attn + g)
            if k == "ffn":  # one point per layer
                cum_ffn.append(ffn / total)
                cum_attn.append(attn / total)
        layers = range(len(cum_ffn))
        color = f"C{i}"
        ax.plot(layers, cum_ffn, "-o", color=color, label=f"{r['name']}: FFN ({100 * r['ffn_ratio']:.0f}%)")
        ax.plot(layers, cum_attn, "--", color=color, label=f"{r['name']}: attention")
    ax.set_xticks(range(len(cum_ffn)))
    ax.set_xlabel("layer")
    ax.set_ylabel("cumulative share of the accuracy gain")
    ax.set_title("Token Prediction contribution (section 4.2.2)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


DEFAULT_ARGS = dict(out_dirs="", plot="docs/cea_contribution.png", n_batches=16, batch_size=16, min_count=50,
                    ood_windows=64, seed=0)


def main(argv):
    args = parse_overrides(argv, DEFAULT_ARGS)
    out_dirs = [d for d in args["out_dirs"].split(",") if d]
    if not out_dirs:
        raise SystemExit("give the trained runs: --out_dirs=out-cea-vanilla,out-cea-wider,out-cea-cea "
                         "(train them with python train.py config/cea_shakespeare_char_vanilla.py, _wider, _cea)")
    text = ood_text()
    results = []
    for d in out_dirs:
        r = analyze_checkpoint(d, n_batches=args["n_batches"], batch_size=args["batch_size"],
                               min_count=args["min_count"], seed=args["seed"])
        r["ood_loss"] = char_text_loss(d, text, n_windows=args["ood_windows"])
        print(json.dumps(dict(name=r["name"], ffn_ratio=round(r["ffn_ratio"], 4),
                              attention_ratio=round(r["attention_ratio"], 4), ood_loss=round(r["ood_loss"], 4),
                              accuracies=[round(a, 4) for a in r["accuracies"]])))
        results.append(r)
    plot_contributions(results, args["plot"])
    print(f"wrote {args['plot']}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
