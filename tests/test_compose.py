"""Composed models reduce exactly to each single mechanism and to the plain GPT, conserve the FFN
width across CEA's split, and count their own W_end."""

import pytest
import torch

from conftest import all_logits
import cea
from shapes import build_model

COMMON = dict(vocab_size=50, block_size=32, n_layer=4, n_head=4, n_embd=64)
FORMER = dict(width_schedule="x", width_multiple=8)
LWS = dict(ffn_scalars=[0.5, 3.8, 0.5], qkv_scalars=[0.5, 1.0, 0.5], framed=True, ffn_multiple=32)


@pytest.mark.parametrize("composed, single, single_args", [
    (dict(), "gpt", dict()),
    (dict(layer_widths=[64] * 4, bottleneck_dim=256), "gpt", dict()),
    (FORMER, "variable_width", FORMER),
    (dict(FORMER, scale_init_by_width=False), "variable_width",
     dict(FORMER, scale_init_by_width=False)),
    (dict(n_sub_blocks=4, bottleneck_dim=24), "hourglass", dict(n_sub_blocks=4, bottleneck_dim=24)),
    (dict(ffn_hidden=32 * 64, outer_ratio=0.125), "cea",
     dict(ffn_width_ratio=32, outer_ratio=0.125)),
    (LWS, "lws", LWS)])
def test_each_degenerate_composition_is_the_single_mechanism(composed, single, single_args):
    torch.manual_seed(0)
    a = build_model("composed", **COMMON, **composed).eval()
    torch.manual_seed(0)
    b = build_model(single, **COMMON, **single_args).eval()
    idx = torch.randint(50, (2, 32))
    assert a.param_counts() == b.param_counts()
    assert torch.equal(all_logits(a, idx), all_logits(b, idx))


def test_all_three_keep_the_ffn_width_across_ceas_split():
    model = build_model("composed", **COMMON, **FORMER, n_sub_blocks=3, bottleneck_dim=24,
                        outer_ratio=0.5)
    widths = model.config.layer_widths
    assert len(set(widths)) > 1
    for block, spec, w, inner in zip(model.blocks, model.config.layers, widths,
                                     model.config.layer_inner_hidden):
        assert isinstance(block.attn, cea.CEAAttentionSublayer)
        sub_block_width = round(24 * w / 64)  # d_h,l = round(d_h w_l / d)
        assert block.ffn.sub_blocks[0].mlp.out_proj.in_features == spec.ffn_hidden
        assert spec.ffn_hidden == round(0.5 * sub_block_width)
        assert block.attn.inner_ffn.out_proj.in_features == inner == 3 * (
            sub_block_width - spec.ffn_hidden)


@pytest.mark.parametrize("k, rho, by_hand", [
    (4, 1.0, 3 * 96 * 32 + 60 * 32),  # QKV rows 3w; only the last sub-block's W_u (hidden 60)
    (1, 1.0, 3 * 96 * 32 + 60 * 32),
    (2, 0.5, (96 + 2 * 60) * 32 + 30 * 32),  # W_q and the Inner-FFN's W_1, W_3 read the padding
    (2, 0.0, (96 + 2 * 120) * 32 + 96 * 32)])  # no Outer-FFN: W_o writes last
def test_w_end_is_the_hand_count(k, rho, by_hand):
    with torch.device("meta"):
        model = build_model("composed", vocab_size=50, block_size=8, n_layer=4, n_head=4,
                            n_embd=64, layer_widths=[96, 64, 32, 96], bottleneck_dim=40,
                            n_sub_blocks=k, outer_ratio=rho)
    assert model.endpoint_params() == by_hand
    _, (end_in, end_out) = model.config.solver_ratios()  # what the solver subtracts
    assert (end_in + end_out) * 96 * 32 == pytest.approx(by_hand)


@pytest.mark.parametrize("kw, match", [
    (dict(FORMER, ffn_scalars=[1.0, 2.0], qkv_scalars=[1.0, 1.0]), "do not compose"),
    (dict(layer_widths=[64, 36, 64, 64]), "multiple of 2 \\* n_head"),
    (dict(outer_ratio=1.5), "outer_ratio"), (dict(ffn_scalars=[1.0, 2.0]), "both")])
def test_bad_compositions_are_one_line_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        build_model("composed", **COMMON, **kw)
