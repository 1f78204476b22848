"""Composed models reduce exactly to each single mechanism and to the plain GPT, give every layer
its own d_h,l, and count their own W_end."""

import pytest
import torch

from conftest import all_logits
from shapes import build_model

COMMON = dict(vocab_size=50, block_size=32, n_layer=4, n_head=4, n_embd=64)
FORMER = dict(width_schedule="x", width_multiple=8)
HOURGLASS = dict(n_sub_blocks=4, bottleneck_dim=24)


@pytest.mark.parametrize("composed, single, single_args", [
    (dict(), "gpt", dict()),
    (dict(layer_widths=[64] * 4, bottleneck_dim=256), "gpt", dict()),
    (FORMER, "variable_width", FORMER),
    (dict(FORMER, scale_init_by_width=False), "variable_width",
     dict(FORMER, scale_init_by_width=False)),
    (HOURGLASS, "hourglass", HOURGLASS)])
def test_each_degenerate_composition_is_the_single_mechanism(composed, single, single_args):
    torch.manual_seed(0)
    a = build_model("composed", **COMMON, **composed).eval()
    torch.manual_seed(0)
    b = build_model(single, **COMMON, **single_args).eval()
    idx = torch.randint(50, (2, 32))
    assert a.param_counts() == b.param_counts()
    assert torch.equal(all_logits(a, idx), all_logits(b, idx))


def test_each_layer_has_k_sub_blocks_of_its_own_bottleneck():
    model = build_model("composed", **COMMON, **FORMER, n_sub_blocks=3, bottleneck_dim=24)
    widths = model.config.layer_widths
    assert len(set(widths)) > 1
    for block, w in zip(model.blocks, widths):
        assert len(block.ffn.sub_blocks) == 3
        for sub in block.ffn.sub_blocks:  # d_h,l = round(d_h w_l / d)
            assert tuple(sub.mlp.out_proj.weight.shape) == (w, round(24 * w / 64))


@pytest.mark.parametrize("k", [1, 4])
def test_w_end_is_the_hand_count(k):
    with torch.device("meta"):
        model = build_model("composed", vocab_size=50, block_size=8, n_layer=4, n_head=4,
                            n_embd=64, layer_widths=[96, 64, 32, 96], bottleneck_dim=40,
                            n_sub_blocks=k)
    by_hand = 3 * 96 * 32 + 60 * 32  # QKV rows 3w; only the last sub-block's W_u (hidden 60)
    assert model.endpoint_params() == by_hand
    _, (end_in, end_out) = model.config.solver_ratios()  # what the solver subtracts
    assert (end_in + end_out) * 96 * 32 == pytest.approx(by_hand)


@pytest.mark.parametrize("kw, match", [
    (dict(layer_widths=[64, 36, 64, 64]), "multiple of 2 \\* n_head"),
    (dict(ffn_hidden=128, bottleneck_dim=64), "disagree"), (dict(n_sub_blocks=0), "K >= 1")])
def test_bad_compositions_are_one_line_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        build_model("composed", **COMMON, **kw)
