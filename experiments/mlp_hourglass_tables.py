"""
The image-MLP paper's parameter counts, from mlp_hourglass.py's models: every row of its Tables 1
and 2 and of section 4.3 (total, and trainable with W_in frozen) next to the paper's number, and any
task's shape by component (W_in, blocks, W_out) with its forward FLOPs (a task's default shape is
its config/mlp_<task>.py's), and the conditioning of the frozen random W_in (square 784x784, as
the first full-size sweep gave its conventional models, and the wider hourglass lifts). "Rethinking
the Shape Convention of an MLP" (Chen, Lee, Liao, Shiu, 2025, arXiv:2510.01796). The counts are
built on the meta device. The paper's conventional rows count a d_x x d_z W_in too (37.77M).

    python experiments/mlp_hourglass_tables.py          # the paper's rows, each task's shape, the
                                                        # W_in conditioning
    python experiments/mlp_hourglass_tables.py --task=mnist_sr --latent_dim=1024 --hidden_dim=64 \\
        --n_blocks=8                                      # one shape, by component
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root

import torch  # noqa: E402

import train_mlp  # noqa: E402
from configurator import ConfigError, parse_overrides, usage_error  # noqa: E402
from image_tasks import TASKS, get_task  # noqa: E402
from mlp_hourglass import ImageMLP, InputProjection, count_params, image_mlp  # noqa: E402

# rows of the paper's Tables 1 / 2 and section 4.3:
# (name, d_x, d_out, d_z, d_h, L, params M, trainable M)
PAPER_PARAM_ROWS = [
    ("ImageNet-32 denoise, conventional (Table 1)", 3072, 3072, 3072, 3075, 1, 37.77, None),
    ("ImageNet-32 denoise, hourglass (Table 1)", 3072, 3072, 3546, 8, 5, 22.07, None),
    ("ImageNet-32 denoise, hourglass (Table 1, sec. 4.3)", 3072, 3072, 3546, 270, 5, 31.36, 20.47),
    ("ImageNet-32 SR, conventional (Table 2)", 768, 3072, 3072, 3075, 1, 30.69, None),
]


def param_checks():
    """One line per paper row: our count of the built model next to the paper's number."""
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


def lift_conditioning(shapes=((784, 784), (784, 1024), (784, 2048)), seeds=(0, 1)):
    """The frozen random W_in's conditioning (d_z x d_x, uniform(+-1/sqrt(d_x)) as every run draws
    it from its seed): its condition number, how many of its singular values are below 5% of the
    largest, and the smallest. A square lift (d_z = d_x, the first full-size sweep's conventional
    rows) is ill-conditioned; a wide one (the hourglass's) is not."""
    lines = ["Conditioning of the frozen random W_in (its seed = the run's seed):"]
    for d_x, d_z in shapes:
        for seed in seeds:
            s = torch.linalg.svdvals(InputProjection(d_x, d_z, seed=seed).weight.double())
            lines.append(f"  {d_z}x{d_x} seed {seed}: condition number {s[0] / s[-1]:.3g}, "
                         f"{int((s < 0.05 * s[0]).sum())} of {len(s)} singular values below 5% "
                         f"of the largest, the smallest {s[-1]:.2g} (largest {s[0]:.3g})")
    return "\n".join(lines)


def shape_table(rows):
    """rows: (task name, d_z, d_h, L, input_proj) -> a markdown table of parameters by component
    and forward matmul FLOPs per image (2 x multiply-adds)."""
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


def main(argv):
    try:
        args = parse_overrides(argv, dict(task="", latent_dim=0, hidden_dim=0, n_blocks=0,
                                          input_proj=""))  # '' = the shape's own
        if args["task"]:  # one shape: the task's default with the given overrides
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
