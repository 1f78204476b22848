"""
How much of the language modelling does the FFN do, and how much attention? The Token Prediction
and mutual-information contribution ratios and the OOD losses of trained checkpoints of cea.py's
models. Lu, Zhao, Qin, Huo, Yang, Xu, "How does Architecture Influence the Base Capabilities of
Pre-trained Language Models? A Case Study Based on FFN-Wider and MoE Transformers" (NeurIPS 2024,
arXiv:2403.02436), sections 4.2.1-4.2.2, appendix F, Figures 4 and 6.

Token Prediction: a token's class vector is the normalised mean of the normalised representations
whose target it is; each position is predicted by its most cosine-similar class vector, after
every sublayer. A sublayer's gain is its accuracy minus the step before it's; the FFN ratio is the
FFN sublayers' share of the gains. Mutual information: the same with the MI of mini-batch k-means
labels and the targets. The OOD texts ship with CPython; each is scored only on windows whose
characters are all in the checkpoint's vocabulary.

    python experiments/cea_contribution.py --out_dirs=out-cea-vanilla,out-cea-wider,out-cea-cea
"""


import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from shapelab.checkpoint import load_checkpoint  # noqa: E402
from shapelab.configurator import parse_overrides  # noqa: E402
from shapelab.dataset import in_vocab_windows  # noqa: E402 (also train.py's eval_ood)
from shapes import model_from_checkpoint  # noqa: E402


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
    """The accuracy of nearest-class-vector prediction for each representation (N, C) of `reps`,
    over the positions whose target token kept a class vector."""
    counts = torch.bincount(targets)
    kept = (counts >= min_count).nonzero(as_tuple=True)[0]  # (K,) token ids with a class vector
    if kept.numel() == 0:
        raise ValueError(f"no target token occurs {min_count} times: analyse more batches or lower "
                         "min_count")
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
    return dict(
        accuracies=accuracies,
        kinds=kinds,
        gains=gains,
        ffn_ratio=ffn_gain / total if total else float("nan"),
        attention_ratio=(total - ffn_gain) / total if total else float("nan"),
    )


def load_run(out_dir):
    """The model of out_dir/ckpt.pt (eval mode, on the CPU), its block_size and its data folder."""
    ckpt = load_checkpoint(Path(out_dir) / "ckpt.pt")
    model = model_from_checkpoint(ckpt).eval()
    cfg = ckpt["config"]
    data_dir = Path(cfg["data_dir"]) if cfg["data_dir"] else ROOT / "data" / cfg["dataset"]
    return model, cfg["block_size"], data_dir


@torch.no_grad()
def analyze_checkpoint(out_dir, split="val", n_batches=16, batch_size=16, min_count=50, seed=0,
                       mi_clusters=0):
    """The Token Prediction contribution of a checkpoint on fixed random windows of its data, and
    with mi_clusters > 0 the mutual-information one."""
    model, T, data_dir = load_run(out_dir)
    data = np.memmap(data_dir / f"{split}.bin", dtype=np.uint16, mode="r")
    g = torch.Generator().manual_seed(seed)
    ix = torch.randint(len(data) - T - 1, (n_batches * batch_size,), generator=g).tolist()
    windows = torch.from_numpy(np.stack([data[i:i + T + 1] for i in ix]).astype(np.int64))
    x, y = windows[:, :-1], windows[:, 1:]  # (n_batches * batch_size, T)
    per_batch, kinds = [], None
    for b in range(n_batches):
        reps, kinds = sublayer_representations(model, x[b * batch_size:(b + 1) * batch_size])
        per_batch.append(reps)
    reps = [torch.cat([r[i] for r in per_batch]) for i in range(len(kinds))]  # each (N, C)
    result = contribution_ratio(token_prediction_accuracies(reps, y.reshape(-1), min_count), kinds)
    if mi_clusters:
        result.update(mi_contribution(reps, y.reshape(-1), kinds, k=mi_clusters, seed=seed))
    result["name"] = Path(out_dir).name
    return result


# the modules whose docstrings form the "stdlib docstrings" text
DOCSTRING_MODULES = ("argparse", "calendar", "collections", "csv", "difflib", "email.message",
                     "functools", "http.client", "inspect", "logging", "pathlib", "shutil",
                     "subprocess", "tarfile", "textwrap", "threading", "unittest.case",
                     "urllib.request", "zipfile")


def ood_texts():
    """{name: text} of the OOD texts shipped with CPython; the license and IDLE's change logs are
    left out where a distribution does not ship them."""
    import importlib
    import inspect
    import sysconfig
    from pydoc_data.topics import topics
    texts = {"python_docs": "\n\n".join(topics[k] for k in sorted(topics))}
    docs = []
    for name in DOCSTRING_MODULES:
        module = importlib.import_module(name)
        docs.append(inspect.getdoc(module) or "")
        for attr in sorted(getattr(module, "__all__", None) or dir(module)):
            obj = getattr(module, attr, None)
            if (not attr.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
                    and obj.__doc__):
                docs.append(inspect.getdoc(obj))
    texts["stdlib_docstrings"] = "\n\n".join(d for d in docs if d)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = {"python_license": [stdlib / "LICENSE.txt"],
             "idle_news": [stdlib / "idlelib" / "NEWS.txt", stdlib / "idlelib" / "NEWS2x.txt"]}
    for name, paths in files.items():
        found = [p.read_text(encoding="utf-8", errors="replace") for p in paths if p.exists()]
        if found:
            texts[name] = "\n\n".join(found)
    return texts


@torch.no_grad()
def char_text_loss(out_dir, text, n_windows=64, batch_size=16):
    """The mean next-character loss of a checkpoint on `text`, over up to n_windows evenly spaced
    windows of block_size + 1 characters all in its vocabulary."""
    model, T, data_dir = load_run(out_dir)
    chars = json.loads((data_dir / "meta.json").read_text())["chars"]
    index = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([[index[c] for c in text[s:s + T + 1]]
                        for s in in_vocab_windows(text, chars, T + 1, n_windows)])
    x, y = ids[:, :-1], ids[:, 1:]
    losses = [F.cross_entropy(model(x[i:i + batch_size], y[i:i + batch_size])[0].flatten(0, 1),
                              y[i:i + batch_size].flatten(), reduction="sum").item()
              for i in range(0, len(ids), batch_size)]
    return sum(losses) / y.numel()


def ood_losses(out_dir, texts, n_windows=64):
    return {name: char_text_loss(out_dir, text, n_windows) for name, text in texts.items()}


def minibatch_kmeans(x, k, batch=1024, steps=100, seed=0):
    """The cluster label of every row of x (N, C): mini-batch k-means (Sculley 2010) with
    k-means++ initialisation, as appendix F."""
    g = torch.Generator().manual_seed(seed)
    # k-means++: each next center with prob ~ d^2
    centers = x[torch.randint(len(x), (1,), generator=g)]
    d2 = torch.cdist(x, centers).square().squeeze(1)
    for _ in range(1, k):
        centers = torch.cat([centers, x[torch.multinomial(d2 + 1e-12, 1, generator=g)]])
        d2 = torch.minimum(d2, (x - centers[-1]).square().sum(-1))
    counts = torch.zeros(k)
    for _ in range(steps):
        b = x[torch.randint(len(x), (batch,), generator=g)]
        nearest = torch.cdist(b, centers).argmin(dim=1)
        n = torch.bincount(nearest, minlength=k).float()  # (k,)
        sums = torch.zeros_like(centers).index_add_(0, nearest, b)  # (k, C)
        # each center moves to the running mean of every row it has received (rate n / count)
        counts += n
        moved = n > 0
        centers[moved] += (sums[moved] - n[moved, None] * centers[moved]) / counts[moved, None]
    return torch.cat([torch.cdist(chunk, centers).argmin(dim=1) for chunk in x.split(8192)])


def mutual_information(labels, targets):
    """Plug-in estimate of I(label; target) in nats from the joint counts."""
    joint = torch.zeros(int(labels.max()) + 1, int(targets.max()) + 1)
    joint.index_put_((labels, targets), torch.ones(len(labels)), accumulate=True)
    p = joint / joint.sum()
    outer = p.sum(1, keepdim=True) * p.sum(0, keepdim=True)
    nz = p > 0
    return (p[nz] * (p[nz] / outer[nz]).log()).sum().item()


def mi_contribution(reps, targets, kinds, k=100, seed=0):
    """contribution_ratio with the MI of each representation's k-means labels in place of
    accuracy."""
    mi = [mutual_information(minibatch_kmeans(r, k, seed=seed), targets) for r in reps]
    result = contribution_ratio(mi, kinds)
    return dict(mi=mi, mi_gains=result["gains"], mi_ffn_ratio=result["ffn_ratio"])


def plot_contributions(results, path):
    """Figure 4's view: the FFN's and attention's cumulative share of the accuracy gain by layer."""
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
        ax.plot(layers, cum_ffn, "-o", color=f"C{i}",
                label=f"{r['name']}: FFN ({100 * r['ffn_ratio']:.0f}%)")
        ax.plot(layers, cum_attn, "--", color=f"C{i}", label=f"{r['name']}: attention")
    ax.set_xticks(range(len(cum_ffn)))
    ax.set_xlabel("layer")
    ax.set_ylabel("cumulative share of the accuracy gain")
    ax.set_title("Token Prediction contribution (section 4.2.2)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


DEFAULT_ARGS = dict(out_dirs="", plot="docs/cea_contribution.png", n_batches=16, batch_size=16,
                    min_count=50, ood_windows=64, mi_clusters=0)


def main(argv):
    args = parse_overrides(argv, DEFAULT_ARGS)
    out_dirs = [d for d in args["out_dirs"].split(",") if d]
    if not out_dirs:
        raise SystemExit("give the trained runs: "
                         "--out_dirs=out-cea-vanilla,out-cea-wider,out-cea-cea "
                         "(train them with python train.py config/cea_shakespeare_char_vanilla.py, "
                         "_wider, _cea)")
    missing = [d for d in out_dirs if not (Path(d) / "ckpt.pt").exists()]
    if missing:  # one line, before any work
        raise SystemExit(f"error: no checkpoint in {', '.join(missing)}: train the run first "
                         f"or fix --out_dirs (the folders that hold ckpt.pt, comma-separated)")
    texts = ood_texts()
    results = []
    for d in out_dirs:
        r = analyze_checkpoint(d, n_batches=args["n_batches"], batch_size=args["batch_size"],
                               min_count=args["min_count"], mi_clusters=args["mi_clusters"])
        r["ood"] = ood_losses(d, texts, n_windows=args["ood_windows"])
        r["ood_loss"] = sum(r["ood"].values()) / len(r["ood"])  # the mean over the texts
        line = dict(name=r["name"], ffn_ratio=round(r["ffn_ratio"], 4),
                    attention_ratio=round(r["attention_ratio"], 4),
                    ood_loss=round(r["ood_loss"], 4),
                    ood={k: round(v, 4) for k, v in r["ood"].items()},
                    accuracies=[round(a, 4) for a in r["accuracies"]])
        if "mi_ffn_ratio" in r:
            line.update(mi_ffn_ratio=round(r["mi_ffn_ratio"], 4), mi=[round(m, 4) for m in r["mi"]])
        print(json.dumps(line))
        results.append(r)
    plot_contributions(results, args["plot"])
    print(f"wrote {args['plot']}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
