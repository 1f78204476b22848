"""
The image-MLP paper's parameter counts from mlp_hourglass.py's models (meta device): every row of
its Tables 1 and 2 and section 4.3 next to the paper's number (its conventional rows count a
d_x x d_z W_in too), each task's shape by component with its forward FLOPs, the conditioning of
the frozen random W_in, and a sweep config's FLOPs and time. "Rethinking the Shape Convention of
an MLP" (Chen, Lee, Liao, Shiu, 2025, arXiv:2510.01796).

    python experiments/mlp_hourglass_tables.py          # the paper's rows, each task's shape
    python experiments/mlp_hourglass_tables.py --task=mnist_sr --latent_dim=1024 --hidden_dim=64
    python experiments/mlp_hourglass_tables.py --sweep=config/mlp_sweep_imagenet32_denoise.py \\
        [--input_proj=learned] [--tflops=40]              # a sweep's FLOPs and time, per shape
"""


import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root

import torch

import train_mlp
from mlp_hourglass import ImageMLP, InputProjection, count_params, image_mlp
from shapelab.configurator import (ConfigError, parse_overrides, read_config_file,
                                   usage_error)
from shapelab.image_tasks import TASKS, get_task

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


def lift_conditioning():
    """The frozen random W_in's condition number and small singular values, as each seed draws
    it: a square lift is ill-conditioned, a wide one (the hourglass's) is not."""
    lines = ["Conditioning of the frozen random W_in (its seed = the run's seed):"]
    for d_z in 784, 1024, 2048:
        for seed in 0, 1:
            s = torch.linalg.svdvals(InputProjection(784, d_z, seed=seed).weight.double())
            lines.append(f"  {d_z}x784 seed {seed}: condition number {s[0] / s[-1]:.3g}, "
                         f"{int((s < 0.05 * s[0]).sum())} of {len(s)} singular values below 5% "
                         f"of the largest, the smallest {s[-1]:.2g} (largest {s[0]:.3g})")
    return "\n".join(lines)


def shape_table(rows):
    """rows: (task name, d_z, d_h, L, input_proj) -> a markdown table of parameters by component
    and forward FLOPs per image."""
    out = ["| task | shape | d_x | d_z | d_h | L | d_out | W_in | blocks | W_out | total | "
           "trainable | GFLOPs/image |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for task_name, dz, dh, L, input_proj in rows:
        task = get_task(task_name)
        shape = "hourglass" if dh < dz else "conventional"
        with torch.device("meta"):
            p = count_params(image_mlp(task, dz, dh, L, shape=shape, input_proj=input_proj))
        flops = 2 * p["total"]                           # one multiply-add per weight and image
        out.append(f"| {task_name} | {shape} | {task.input_dim} | {dz} | {dh} | {L} | "
                   f"{task.output_dim} | {p['input_proj'] / 1e6:.2f}M | {p['blocks'] / 1e6:.2f}M | "
                   f"{p['output_proj'] / 1e6:.2f}M | "
                   f"{p['total'] / 1e6:.2f}M | {p['trainable'] / 1e6:.2f}M | {flops / 1e9:.4f} |")
    return "\n".join(out)


# ImageNet-32's splits as data/imagenet32/prepare.py writes them: the official 50k val halved
IMAGENET32_SPLITS = {"train": 1_281_167, "val": 25_000, "test": 25_000}
STEP_OVERHEAD_S = 1e-3  # per step, beside the matmuls: kernel launches, the noise, AdamW (assumed)


def train_step_flops(model, batch_size):
    """(the matmul FLOPs of a training step, of one image's forward pass). Backward: the weight
    gradient of every trained matrix, the input gradient never of the image, and of z_0 only
    behind a learned W_in."""
    w_in = model.lift.weight.numel() if model.lift is not None else 0
    blocks = sum(p.numel() for p in model.blocks.parameters())     # W1, W2 of every block
    w_out = model.out_proj.weight.numel()
    learned = model.input_proj == "learned"
    forward = 2 * (w_in + blocks + w_out)
    weight_grads = 2 * (blocks + w_out + (w_in if learned else 0))
    input_grads = 2 * (blocks + w_out - (0 if learned else model.latent_dim * model.hidden_dim))
    return batch_size * (forward + weight_grads + input_grads), forward


def sweep_cost(path, input_proj, tflops):
    """The FLOPs and the time of a sweep config's runs at an assumed tflops plus STEP_OVERHEAD_S a
    step, per shape, as a table."""
    s = read_config_file(path)
    task = get_task(s["task"])
    protocol = train_mlp.task_protocol(s["task"])
    epochs, batch, flips, eval_interval = (s.get(k, protocol[k]) for k in (
        "epochs", "batch_size", "flips", "eval_interval"))
    input_proj = s.get("input_proj", "") if input_proj is None else input_proj
    splits = IMAGENET32_SPLITS
    n_train = s.get("max_train_images") or splits["train"]
    steps = max(1, round(epochs * (n_train * flips // batch)))
    evals = math.ceil(steps / (eval_interval or n_train * flips // batch))
    runs = len(s["learning_rates"]) * len(s["seeds"])
    lines = [f"{path}: {len(s['shapes'])} shapes x {len(s['learning_rates'])} lr x "
             f"{len(s['seeds'])} seeds = {len(s['shapes']) * runs} runs; each {steps:,} steps of "
             f"{batch} ({n_train:,} images x {flips} flips x {epochs:g} epochs), {evals} "
             f"evaluations of {splits['val']:,} images, one test of {splits['test']:,}; time at "
             f"{tflops:g} TFLOP/s (assumed) + {STEP_OVERHEAD_S * 1e3:g} ms per step",
             "| shape | d_z | d_h | L | W_in | params | PFLOP per run | min per run |",
             "|---|---:|---:|---:|---|---:|---:|---:|"]
    total_flops, total_s = 0, 0.0
    for shape, d_z, d_h, L in s["shapes"]:
        with torch.device("meta"):
            model = image_mlp(task, d_z, d_h, L, shape=shape, input_proj=input_proj or None)
        step, forward = train_step_flops(model, batch)
        flops = steps * step + (evals * splits["val"] + splits["test"]) * forward
        seconds = flops / (tflops * 1e12) + steps * STEP_OVERHEAD_S
        lines.append(f"| {shape} | {d_z} | {d_h} | {L} | {model.input_proj} | "
                     f"{count_params(model)['total'] / 1e6:.2f}M | {flops / 1e15:.3f} | "
                     f"{seconds / 60:.1f} |")
        total_flops, total_s = total_flops + runs * flops, total_s + runs * seconds
    lines.append(f"total: {total_flops / 1e18:.2f} EFLOP, {total_s / 3600:.1f} hours")
    return "\n".join(lines)


def main(argv):
    try:
        args = parse_overrides(argv, dict(task="", latent_dim=0, hidden_dim=0, n_blocks=0,
                                          input_proj="",  # '' = the shape's own
                                          sweep="", tflops=40.0))
        if args["sweep"]:  # a sweep config's cost: its input_proj unless one is given here
            print(sweep_cost(args["sweep"], args["input_proj"] or None, args["tflops"]))
        elif args["task"]:  # one shape: the task's default with the given overrides
            default = train_mlp.task_protocol(args["task"])
            print(shape_table([(args["task"], args["latent_dim"] or default["latent_dim"],
                                args["hidden_dim"] or default["hidden_dim"],
                                args["n_blocks"] or default["n_blocks"], args["input_proj"])]))
        else:
            print(param_checks())
            print("\nEach task's default shape (W_in frozen: in the total, not trainable):")
            defaults = {name: train_mlp.task_protocol(name) for name in TASKS}
            print(shape_table([(name, d["latent_dim"], d["hidden_dim"], d["n_blocks"],
                                "frozen_random") for name, d in defaults.items()]))
            print()
            print(lift_conditioning())
    except ConfigError as e:
        usage_error(e)


if __name__ == "__main__":
    main(sys.argv[1:])
