"""Tests for mlp_hourglass.py: parameter counts from the paper, shape checks, the builder, the
frozen W_in, and the shape table of experiments/mlp_hourglass_tables.py. The tasks, degradations
and metrics are tested in test_image_tasks.py, the data scripts in test_image_data.py, training /
sweep / checkpoints in test_train_mlp.py. CPU, offline, a few seconds."""
import ast
import math
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import mlp_hourglass as M  # noqa: E402
from shapelab.image_tasks import get_task  # noqa: E402
from conftest import run_here  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "experiments"))
import mlp_hourglass_tables as tables  # noqa: E402


# --------------------------------------------------------- parameters (paper Tables 1-2, sec. 4.3)


@pytest.mark.parametrize(
    "name,dx,dout,dz,dh,L,paper_total,paper_trainable", tables.PAPER_PARAM_ROWS
)
def test_param_counts_match_paper(name, dx, dout, dz, dh, L, paper_total, paper_trainable):
    formula = M.param_formula(dx, dz, dh, L, dout, input_proj="frozen_random")
    assert round(formula["total"] / 1e6, 2) == paper_total
    if paper_trainable is not None:
        assert round(formula["trainable"] / 1e6, 2) == paper_trainable
    shape = "hourglass" if dh < dz else "conventional"
    with torch.device("meta"):       # count a real module without allocating 30M floats
        model = M.ImageMLP(dx, dout, dz, dh, L, shape=shape, input_proj="frozen_random")
    counted = M.count_params(model)
    assert counted["total"] == formula["total"]
    assert counted["trainable"] == formula["trainable"] == formula["total"] - dx * dz
    assert counted["input_proj"] == dx * dz
    with torch.device("meta"):
        learned = M.ImageMLP(dx, dout, dz, dh, L, shape=shape, input_proj="learned")
    assert M.count_params(learned)["trainable"] == formula["total"]


def test_section_4_3_trainable_counts():
    # (d_z, d_h, L) = (3546, 270, 5) on ImageNet-32 denoising: 20.47M fixed vs 31.36M trainable
    fixed = M.param_formula(3072, 3546, 270, 5, 3072, "frozen_random")
    learned = M.param_formula(3072, 3546, 270, 5, 3072, "learned")
    assert round(fixed["trainable"] / 1e6, 2) == 20.47
    assert round(learned["trainable"] / 1e6, 2) == 31.36
    assert M.param_formula(784, 784, 2048, 1, 784, "direct")["total"] == 2 * 784 * 2048 + 784 * 784


def test_the_model_says_which_w_in_it_holds_from_the_module():
    """A frozen lift swapped for a trainable one by hand (the workshop's Part 5 exercise), with
    nothing else set: model.input_proj says 'learned' and W_in counts once, as a parameter (a
    count that trusted a label would add it a second time: 2,539,520 instead of 1,736,704).
    requires_grad set on the frozen buffer trains nothing (no optimizer sees a buffer), so that
    model still holds a frozen W_in; a learned lift frozen by hand is frozen."""
    model = M.image_mlp(get_task("mnist_denoise"), 1024, 32, 2)
    frozen = M.count_params(model)
    model.lift.weight.requires_grad_(True)
    assert model.input_proj == "frozen_random" and M.count_params(model) == frozen
    model.lift = M.InputProjection(784, 1024, trainable=True)
    assert model.input_proj == "learned"
    swapped = M.count_params(model)
    learned = M.param_formula(784, 1024, 32, 2, 784, "learned")
    assert swapped["total"] == frozen["total"] == learned["total"] == 1_736_704
    assert swapped["trainable"] == learned["trainable"] == 1_736_704
    model.lift.weight.requires_grad_(False)
    assert model.input_proj == "frozen_random"
    assert M.count_params(model)["trainable"] == frozen["trainable"] == 1_736_704 - 784 * 1024
    padded = M.image_mlp(get_task("mnist_denoise"), 1024, 32, 2, input_proj="zero_pad")
    assert padded.input_proj == "zero_pad" and padded.lift is None


def test_a_conventional_mlp_takes_the_image_itself_by_default():
    """The paper's baseline (section 3: "injecting the input signal directly"): no W_in, d_z = d_x,
    every parameter trainable; a hourglass's own input is the frozen random lift. Where d_z != d_x
    (super-resolution's 196 pixels into d_z = 784) a conventional MLP learns its W_in, as the
    reference code's does."""
    denoise, sr = get_task("mnist_denoise"), get_task("mnist_sr")
    conv = M.image_mlp(denoise, 784, 2048, 1, shape="conventional")
    assert conv.input_proj == "direct" and conv.lift is None
    counts = M.count_params(conv)
    assert counts["total"] == counts["trainable"] == 2 * 784 * 2048 + 784 * 784
    assert counts["input_proj"] == 0 and M.param_formula(784, 784, 2048, 1, 784) == {
        "total": counts["total"], "trainable": counts["total"]}
    x = torch.rand(4, 784)
    conv.eval()
    z = conv.blocks[0](x)  # z_0 = x: the image itself feeds the first block
    assert torch.equal(conv(x), torch.sigmoid(conv.out_proj(z)))
    hourglass = M.image_mlp(denoise, 1024, 64, 2)
    assert hourglass.input_proj == "frozen_random" and not hourglass.lift.weight.requires_grad
    sr_conv = M.image_mlp(sr, 784, 2048, 1, shape="conventional")
    assert sr_conv.input_proj == "learned" and sr_conv.lift.weight.requires_grad
    assert M.param_formula(196, 784, 2048, 1, 784)["trainable"] == M.count_params(sr_conv)[
        "trainable"]
    square = M.image_mlp(denoise, 784, 2048, 1, shape="conventional", input_proj="frozen_random")
    square_counts = M.count_params(square)  # the first full-size sweep's conventional models
    assert (square_counts["total"], square_counts["trainable"]) == (counts["total"] + 784 * 784,
                                                                    counts["total"])


def test_an_input_projection_is_one_of_its_names():
    """Each of INPUT_PROJECTIONS builds the model it names; any other name (none, frozen,
    random, ...) is one line naming the choices."""
    for name, dz in (("direct", 784), ("frozen_random", 1024), ("learned", 1024),
                     ("zero_pad", 1024)):
        shape = "conventional" if name == "direct" else "hourglass"
        dh = 2048 if shape == "conventional" else 64
        model = M.ImageMLP(784, 784, dz, dh, 1, shape=shape, input_proj=name)
        assert model.input_proj == name == M.input_projection(name, shape, dz, 784)
    for other in ("none", "frozen", "identity", "random"):
        with pytest.raises(ValueError,
                           match="choose one of direct, frozen_random, learned, zero_pad"):
            M.ImageMLP(784, 784, 1024, 64, 1, input_proj=other)


# ---------------------------------------------------------------- shapes and bad input

def test_hourglass_and_conventional_shape_checks():
    M.ImageMLP(784, 784, 1024, 64, 2, shape="hourglass")
    M.ImageMLP(784, 784, 784, 2048, 1, shape="conventional")
    with pytest.raises(ValueError, match="d_h < d_z"):
        M.ImageMLP(784, 784, 1024, 1024, 2, shape="hourglass")
    with pytest.raises(ValueError, match="d_h < d_z"):
        M.ImageMLP(784, 784, 1024, 2048, 2, shape="hourglass")
    with pytest.raises(ValueError, match="d_h > d_z"):
        M.ImageMLP(784, 784, 1024, 512, 2, shape="conventional")
    with pytest.raises(ValueError, match="unknown shape"):
        M.ImageMLP(784, 784, 1024, 64, 2, shape="diamond")
    with pytest.raises(ValueError, match="latent_dim == input_dim"):
        M.ImageMLP(784, 784, 1024, 64, 2, input_proj="direct")
    with pytest.raises(ValueError, match="n_blocks"):
        M.ImageMLP(784, 784, 1024, 64, 0)
    with pytest.raises(ValueError, match="latent_dim >= input_dim"):
        M.ImageMLP(784, 784, 512, 64, 2, input_proj="zero_pad")


def test_image_mlp_takes_dims_from_the_task():
    model = M.image_mlp(get_task("mnist_sr"), 2048, 128, 4)  # the task's default shape
    assert (model.input_dim, model.output_dim) == (196, 784)
    assert (model.latent_dim, model.hidden_dim, model.n_blocks) == (2048, 128, 4)
    assert model.lift.weight.shape == (2048, 196) and not model.lift.weight.requires_grad
    conv = M.image_mlp(get_task("mnist_denoise"), 784, 2048, 1, shape="conventional",
                       input_proj="learned")
    assert conv.lift.weight.requires_grad and len(conv.blocks) == 1
    assert (
        M.count_params(conv)["trainable"]
        == M.param_formula(784, 784, 2048, 1, 784, "learned")["total"]
    )
    with torch.device("meta"):
        # the paper's (3546, 270, 5): 31.36M / 20.47M
        big = M.image_mlp(get_task("imagenet32_denoise"), 3546, 270, 5)
    p = M.count_params(big)
    assert (round(p["total"] / 1e6, 2), round(p["trainable"] / 1e6, 2)) == (31.36, 20.47)


def test_forward_shapes_and_range_for_every_input_projection():
    x = torch.rand(5, 196)
    for proj, dz in (("frozen_random", 512), ("learned", 512), ("zero_pad", 512), ("direct", 196)):
        shape = "hourglass" if proj != "direct" else "conventional"
        dh = 32 if shape == "hourglass" else 400
        y = M.ImageMLP(196, 784, dz, dh, 2, shape=shape, input_proj=proj)(x)
        assert y.shape == (5, 784) and y.min() >= 0 and y.max() <= 1


def test_frozen_w_in_is_a_buffer_regenerated_from_its_seed():
    """The paper's memory argument (section 3.2): a frozen random W_in need not be stored. It is a
    non-persistent buffer rebuilt from its seed: not a parameter (nothing can unfreeze it), not in
    state_dict or a checkpoint, yet counted in the total as the paper's tables count it."""
    torch.manual_seed(0)
    rng_before = torch.get_rng_state()
    a = M.InputProjection(196, 512, seed=7)
    # its own generator, not the global RNG
    assert torch.equal(torch.get_rng_state(), rng_before)
    # regenerated exactly
    assert torch.equal(a.weight, M.InputProjection(196, 512, seed=7).weight)
    assert not torch.equal(a.weight, M.InputProjection(196, 512, seed=8).weight)
    assert a.weight.abs().max() <= 196 ** -0.5 and a.weight.std() > 0.5 * 196 ** -0.5 / math.sqrt(3)
    learned = M.InputProjection(196, 512, seed=7, trainable=True)
    assert torch.equal(learned.weight, a.weight) and isinstance(learned.weight, torch.nn.Parameter)

    model = M.ImageMLP(196, 784, 512, 32, 2, w_in_seed=7)
    assert torch.equal(model.lift.weight, a.weight)
    assert "lift.weight" not in model.state_dict() and "lift.weight" in dict(model.named_buffers())
    assert all(p is not model.lift.weight for p in model.parameters())
    model.requires_grad_(True)  # "unfreeze everything"
    assert not model.lift.weight.requires_grad and all(
        p is not model.lift.weight for p in model.parameters()
    )
    c = M.count_params(model)
    assert (
        c["total"] == M.param_formula(196, 512, 32, 2, 784)["total"]
        and c["input_proj"] == 196 * 512
    )
    assert c["total"] - c["trainable"] == 196 * 512

    rebuilt = M.ImageMLP(196, 784, 512, 32, 2, w_in_seed=7)
    rebuilt.load_state_dict(model.state_dict())                         # strict: no missing W_in
    x = torch.rand(4, 196)
    model.eval(), rebuilt.eval()
    assert torch.equal(model(x), rebuilt(x))
    learned_model = M.ImageMLP(196, 784, 512, 32, 2, input_proj="learned", w_in_seed=7)
    # a learned W_in is stored, of course
    assert "lift.weight" in learned_model.state_dict()



# ---------------------------------------------------------- the shape table and the file's imports


def test_main_prints_paper_checks_and_shape_table(capsys):
    run = run_here("experiments/mlp_hourglass_tables.py")
    assert run.returncode == 0, run.stderr
    for paper_total in ("37.77M", "22.07M", "31.36M", "30.69M"):
        assert f"total {paper_total} (paper {paper_total})" in run.stdout
    assert "20.47M (paper 20.47M)" in run.stdout
    # the frozen square lift of the first full-size sweep's conventional rows: ill-conditioned
    assert ("784x784 seed 0: condition number 1.88e+04, 49 of 784 singular values below 5% of the "
            "largest") in run.stdout
    assert "2048x784 seed 0: condition number 4.22, 0 of 784" in run.stdout
    assert (
        "| mnist_denoise | hourglass | 784 | 2048 | 128 | 4 | 784 | 1.61M | 2.10M | 1.61M | 5.31M "
        "| 3.70M |"
        in run.stdout
    )
    # one shape, and a bad task: main in this process (the command line ran above)
    tables.main(["--task=mnist_sr", "--latent_dim=1024", "--hidden_dim=64", "--n_blocks=8"])
    one = capsys.readouterr().out
    assert "| mnist_sr | hourglass | 196 | 1024 | 64 | 8 | 784 |" in one
    assert "mnist_denoise" not in one
    with pytest.raises(SystemExit) as bad:
        tables.main(["--task=cifar"])
    assert bad.value.code != 0 and "unknown task" in capsys.readouterr().err


# Table 1 of the paper (ImageNet-32 denoising): its Params column (M), W_in counted in every row
TABLE_1_PARAMS = {
    ("conventional", 3072, 3075, 1): 37.77, ("conventional", 3072, 4012, 1): 43.52,
    ("conventional", 3072, 3075, 2): 56.66, ("conventional", 3072, 4012, 2): 68.17,
    ("conventional", 3072, 3075, 3): 75.55, ("conventional", 3072, 3546, 3): 84.23,
    ("hourglass", 3546, 8, 5): 22.07, ("hourglass", 3546, 16, 5): 22.35,
    ("hourglass", 3546, 64, 5): 24.06, ("hourglass", 3546, 128, 5): 26.33,
    ("hourglass", 3546, 270, 3): 27.53, ("hourglass", 3075, 765, 2): 28.30,
    ("hourglass", 3546, 270, 4): 29.45, ("hourglass", 3546, 270, 5): 31.36,
    ("hourglass", 3075, 765, 3): 33.01, ("hourglass", 3546, 270, 7): 35.19,
    ("hourglass", 3546, 270, 8): 37.11, ("hourglass", 3075, 765, 4): 37.71,
    ("hourglass", 3075, 765, 5): 42.42, ("hourglass", 3075, 1146, 4): 47.08,
    ("hourglass", 3075, 1146, 5): 54.13, ("hourglass", 3075, 1560, 4): 57.27,
    ("hourglass", 3546, 1146, 5): 62.42, ("hourglass", 3546, 1560, 4): 66.04,
    ("hourglass", 3075, 1560, 5): 66.86, ("hourglass", 3546, 1560, 5): 77.10,
    ("hourglass", 3075, 2014, 5): 80.82,
}
IMAGENET32_SWEEP = os.path.join(ROOT, "config", "mlp_sweep_imagenet32_denoise.py")


def test_the_imagenet32_sweep_is_table_1_and_its_time_is_the_counted_flops():
    """config/mlp_sweep_imagenet32_denoise.py holds Table 1's shapes in its Params order (the
    learned form counts what the paper counts), and every number of its time estimate is what
    the tables script computes for it."""
    own, own_flops, own_hours, text = tables.sweep_cost(IMAGENET32_SWEEP)
    learned, learned_flops, learned_hours, _ = tables.sweep_cost(IMAGENET32_SWEEP, "learned")
    shapes = [(r["shape"], r["d_z"], r["d_h"], r["L"]) for r in learned]
    assert sorted(shapes) == sorted(TABLE_1_PARAMS)
    assert [round(r["params"] / 1e6, 2) for r in learned] == sorted(TABLE_1_PARAMS.values())
    assert {r["input_proj"] for r in own} == {"frozen_random", "direct"}
    assert {r["input_proj"] for r in learned} == {"learned"}
    comment = open(IMAGENET32_SWEEP).read()
    runs = len(own) * 4 * 3  # shapes x lrs x seeds
    minutes = [r["run_s"] / 60 for r in own + learned]
    for number in (f"{runs} runs per form", "20,018 steps each", f"{own_flops / 1e18:.2f} EFLOP",
                   f"{learned_flops / 1e18:.2f} EFLOP learned",
                   f"{own_hours:.1f} + {learned_hours:.1f} = {own_hours + learned_hours:.1f}",
                   f"{min(minutes):.1f} to {max(minutes):.1f} min per run"):
        assert number in " ".join(comment.replace("# ", "").split()), number
    assert "20,018 steps of 512 (1,281,167 images x 4 flips x 2 epochs)" in text


@pytest.mark.parametrize("d_x,d_z,d_h,L,shape,input_proj", [
    (3072, 3546, 270, 5, "hourglass", "frozen_random"),
    (3072, 3546, 270, 5, "hourglass", "learned"),
    (3072, 3072, 3075, 2, "conventional", "direct"),
    (3072, 3072, 3075, 2, "conventional", "learned"),
    (196, 1024, 64, 3, "hourglass", "zero_pad"),
])
def test_the_step_flops_are_what_flopcountermode_counts(d_x, d_z, d_h, L, shape, input_proj):
    """train_step_flops (the sweep's time estimate) against torch's own count of one step on the
    meta device: forward, MSE loss, backward; and a lift made trainable by hand counts as
    learned."""
    from torch.utils.flop_counter import FlopCounterMode
    with torch.device("meta"):
        model = M.ImageMLP(d_x, 784, d_z, d_h, L, shape=shape, input_proj=input_proj)
        x, target = torch.zeros(64, d_x), torch.zeros(64, 784)
    with FlopCounterMode(display=False) as step:
        torch.nn.functional.mse_loss(model(x), target).backward()
    model.eval()
    with FlopCounterMode(display=False) as forward, torch.no_grad():
        model(x[:1])
    assert tables.train_step_flops(model, 64) == (step.get_total_flops(),
                                                  forward.get_total_flops())
    if input_proj == "frozen_random":
        model.lift = M.InputProjection(d_x, d_z, trainable=True).to("meta")
        model.train()
        with FlopCounterMode(display=False) as swapped:
            torch.nn.functional.mse_loss(model(x), target).backward()
        assert tables.train_step_flops(model, 64)[0] == swapped.get_total_flops()


def repo_imports(path):
    """Top-level names of every import in a file, function bodies included."""
    names = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    repo_modules = {f[:-3] for f in os.listdir(ROOT) if f.endswith(".py")}
    return names & repo_modules
