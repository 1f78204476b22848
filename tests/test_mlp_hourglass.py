"""The image MLP: the paper's parameter counts, the frozen W_in rebuilt from its seed, what feeds
the blocks read from the modules, the shape checks."""

import sys

import pytest
import torch

from conftest import ROOT
import mlp_hourglass as M
from shapelab.image_tasks import get_task

sys.path.insert(0, str(ROOT / "experiments"))
from mlp_hourglass_tables import PAPER_PARAM_ROWS  # noqa: E402

# Table 1 (ImageNet-32 denoising, W_in counted in every row): (shape, d_z, d_h, L) -> Params (M)
TABLE_1 = {("conventional", 3072, 3075, 1): 37.77, ("conventional", 3072, 4012, 2): 68.17,
           ("hourglass", 3546, 8, 5): 22.07, ("hourglass", 3546, 270, 5): 31.36,
           ("hourglass", 3075, 765, 2): 28.30, ("hourglass", 3075, 2014, 5): 80.82}


@pytest.mark.parametrize("name, dx, dout, dz, dh, L, total, trainable", PAPER_PARAM_ROWS)
def test_param_counts_are_the_papers(name, dx, dout, dz, dh, L, total, trainable):
    formula = M.param_formula(dx, dz, dh, L, dout, input_proj="frozen_random")
    assert round(formula["total"] / 1e6, 2) == total
    if trainable is not None:
        assert round(formula["trainable"] / 1e6, 2) == trainable
    shape = "hourglass" if dh < dz else "conventional"
    with torch.device("meta"):
        model = M.ImageMLP(dx, dout, dz, dh, L, shape=shape, input_proj="frozen_random")
    counted = M.count_params(model)
    assert (counted["total"], counted["trainable"]) == (formula["total"], formula["trainable"])


def test_table_1_and_section_4_3():
    for (shape, dz, dh, L), params in TABLE_1.items():
        assert round(M.param_formula(3072, dz, dh, L, 3072, "learned")["total"] / 1e6, 2) == params
    fixed = M.param_formula(3072, 3546, 270, 5, 3072, "frozen_random")
    assert round(fixed["trainable"] / 1e6, 2) == 20.47  # against 31.36M learned


def test_a_frozen_w_in_is_a_buffer_rebuilt_from_its_seed():
    torch.manual_seed(0)
    rng_before = torch.get_rng_state()
    a = M.InputProjection(196, 512, seed=7)
    assert torch.equal(torch.get_rng_state(), rng_before)  # its own generator
    assert torch.equal(a.weight, M.InputProjection(196, 512, seed=7).weight)
    assert not torch.equal(a.weight, M.InputProjection(196, 512, seed=8).weight)
    assert a.weight.abs().max() <= 196 ** -0.5
    model = M.ImageMLP(196, 784, 512, 32, 2, w_in_seed=7)
    model.requires_grad_(True)
    assert "lift.weight" not in model.state_dict() and not model.lift.weight.requires_grad
    rebuilt = M.ImageMLP(196, 784, 512, 32, 2, w_in_seed=7)
    rebuilt.load_state_dict(model.state_dict())  # strict: no W_in missing
    x = torch.rand(4, 196)
    assert torch.equal(model.eval()(x), rebuilt.eval()(x))
    assert "lift.weight" in M.ImageMLP(196, 784, 512, 32, 2, input_proj="learned").state_dict()


def test_what_feeds_the_blocks_is_read_from_the_modules():
    denoise = get_task("mnist_denoise")
    model = M.image_mlp(denoise, 1024, 32, 2)
    assert model.input_proj == "frozen_random"
    frozen = M.count_params(model)
    model.lift = M.InputProjection(784, 1024, trainable=True)  # swapped by hand
    assert model.input_proj == "learned"
    assert M.count_params(model)["total"] == frozen["total"] == 1_736_704  # W_in counted once
    assert M.count_params(model)["trainable"] == 1_736_704
    conv = M.image_mlp(denoise, 784, 2048, 1, shape="conventional")
    assert conv.input_proj == "direct" and conv.lift is None  # the paper's baseline: x itself
    sr = M.image_mlp(get_task("mnist_sr"), 784, 2048, 1, shape="conventional")
    assert sr.input_proj == "learned" and sr(torch.rand(2, 196)).shape == (2, 784)


@pytest.mark.parametrize("args, kw, match", [
    ((1024, 1024, 2), {}, "d_h < d_z"), ((1024, 512, 2), dict(shape="conventional"), "d_h > d_z"),
    ((1024, 64, 2), dict(shape="diamond"), "unknown shape"), ((1024, 64, 0), {}, "n_blocks"),
    ((1024, 64, 2), dict(input_proj="direct"), "latent_dim == input_dim"),
    ((1024, 64, 1), dict(input_proj="frozen"), "choose one of direct, frozen_random, learned")])
def test_bad_shapes_are_one_line_errors(args, kw, match):
    with pytest.raises(ValueError, match=match):
        M.ImageMLP(784, 784, *args, **kw)
