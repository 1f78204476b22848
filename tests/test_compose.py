"""compose.py: composed models reduce exactly to each single mechanism and to the plain GPT, and
count their own W_end (the matched shapes: tests/test_shapes.py)."""

import pytest
import torch
from conftest import all_logits, assert_causal, overfit_loss

import cea
import compose
from model import GPT
from shapes import build_model

COMMON = dict(vocab_size=50, block_size=32, n_layer=4, n_head=4, n_embd=64)


def same_model(make_a, make_b, vocab_size=50):
    """Build both from the same seed; they must have the same parameters and the same logits."""
    torch.manual_seed(0)
    a = make_a()
    torch.manual_seed(0)
    b = make_b()
    assert a.param_counts() == b.param_counts()
    idx = torch.randint(vocab_size, (2, 32))
    with torch.no_grad():
        assert torch.equal(all_logits(a.eval(), idx), all_logits(b.eval(), idx))


def test_defaults_are_the_plain_gpt():
    same_model(lambda: build_model("composed", **COMMON), lambda: build_model("gpt", **COMMON))


def test_hourglass_former_degenerate_is_the_plain_gpt():
    """The issue's test: hourglass + ><former with K = 1 and constant widths is model.GPT."""
    same_model(
        lambda: build_model(
            "composed",
            **COMMON,
            width_schedule="constant",
            n_sub_blocks=1,
            bottleneck_dim=256,
            layer_widths=[64] * 4,
        ),
        lambda: build_model("gpt", **COMMON),
    )


def test_k1_in_a_former_is_the_former():
    former = dict(width_schedule="x", width_multiple=8)
    same_model(
        lambda: build_model("composed", **COMMON, **former),
        lambda: build_model("variable_width", **COMMON, **former),
    )


def test_k1_in_a_former_is_the_former_with_the_reference_rules():
    former = dict(
        width_schedule="x",
        width_multiple=8,
        attention_multiplier="head_dim",
        scale_init_by_width=False,
    )
    same_model(
        lambda: build_model("composed", **COMMON, **former),
        lambda: build_model("variable_width", **COMMON, **former),
    )
    with pytest.raises(ValueError, match="plain attention only"):
        build_model(
            "composed",
            **COMMON,
            attention_multiplier="head_dim",
            ffn_hidden=32 * 64,
            outer_ratio=0.125,
        )


def test_constant_widths_k4_is_the_hourglass():
    same_model(lambda: build_model("composed", **COMMON, n_sub_blocks=4, bottleneck_dim=24),
               lambda: build_model("hourglass", **COMMON, n_sub_blocks=4, bottleneck_dim=24))


def test_cea_attention_is_cea():
    same_model(lambda: build_model("composed", **COMMON, ffn_hidden=32 * 64, outer_ratio=0.125),
               lambda: build_model("cea", **COMMON, ffn_width_ratio=32, outer_ratio=0.125))


def test_lws_schedule_is_lws():
    schedule = dict(
        ffn_scalars=[0.5, 3.8, 0.5], qkv_scalars=[0.5, 1.0, 0.5], framed=True, ffn_multiple=32
    )
    same_model(
        lambda: build_model("composed", **COMMON, **schedule),
        lambda: build_model("lws", **COMMON, **schedule),
    )


def all_three():
    """Hourglass FFNs inside a ><former with CEA attention."""
    return build_model(
        "composed",
        **COMMON,
        width_schedule="x",
        width_multiple=8,
        n_sub_blocks=3,
        bottleneck_dim=24,
        outer_ratio=0.5,
    )


def test_all_three_compose_causal_and_learn():
    model = all_three()
    assert [len(b.ffn.sub_blocks) for b in model.blocks] == [3] * 4
    assert all(isinstance(b.attn, cea.CEAAttentionSublayer) for b in model.blocks)
    widths = model.config.layer_widths
    assert len(set(widths)) > 1 and [b.attn.norm.weight.numel() for b in model.blocks] == widths
    # the slot keeps rho W_l per sub-block (the layer's ffn_hidden), the Inner-FFN gets
    # K (1 - rho) W_l (layer_inner_hidden): the FFN width is conserved
    inner_hidden = model.config.layer_inner_hidden
    for block, spec, w, inner in zip(model.blocks, model.config.layers, widths, inner_hidden):
        sub_block_width = round(24 * w / 64)  # W_l = d_h,l = round(d_h w_l / d)
        assert spec.ffn_hidden == round(0.5 * sub_block_width)
        assert block.ffn.sub_blocks[0].mlp.out_proj.in_features == spec.ffn_hidden
        assert block.attn.inner_ffn.out_proj.in_features == inner == 3 * (
            sub_block_width - spec.ffn_hidden
        )
    assert_causal(model, 50, t=9)
    assert overfit_loss(all_three(), 50, steps=80) < 1.0


def test_hourglass_in_lws():
    model = build_model(
        "composed",
        **COMMON,
        ffn_scalars=[1.0, 2.0],
        qkv_scalars=[0.5, 1.0],
        ffn_multiple=16,
        n_sub_blocks=2,
    )
    hidden = [s.ffn_hidden for s in model.config.layers]
    assert len(set(hidden)) > 1
    assert [b.ffn.sub_blocks[1].mlp.out_proj.in_features for b in model.blocks] == hidden
    assert_causal(model, 50, t=5)


def test_flops_match_the_flop_counter():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    model = build_model(
        "composed",
        **COMMON,
        width_schedule="x",
        width_multiple=8,
        n_sub_blocks=2,
        bottleneck_dim=24,
    )
    idx = torch.randint(50, (1, 32))
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx, idx)
    assert counter.get_total_flops() == 32 * model.flops_per_token(32)


def test_bad_compositions_are_refused():
    with pytest.raises(ValueError, match="do not compose"):
        build_model(
            "composed", **COMMON, width_schedule="x", ffn_scalars=[1.0, 2.0], qkv_scalars=[1.0, 1.0]
        )
    with pytest.raises(ValueError, match="multiple of 2 \\* n_head"):
        build_model("composed", **COMMON, layer_widths=[64, 36, 64, 64])
    with pytest.raises(ValueError, match="outer_ratio"):
        build_model("composed", **COMMON, outer_ratio=1.5)
    with pytest.raises(ValueError, match="both"):
        build_model("composed", **COMMON, ffn_scalars=[1.0, 2.0])


def test_train_builds_composed_by_name():
    model = build_model("composed", **COMMON, width_schedule="x", width_multiple=8, n_sub_blocks=2)
    assert isinstance(model, compose.ComposedGPT) and isinstance(model, GPT)


def test_composed_endpoint_params_is_the_hand_count():
    """Appendix A's W_end of a K-sub-block slot: the first layer's QKV columns facing the zero
    padding, and only the LAST sub-block's W_u rows past d (not K of them); with CEA attention
    W_q and the Inner-FFN's input read the padding, W_k / W_v read t (not zero past d)."""
    d, w, hid = 64, 96, 40  # w_1 = w_L = 96 > d; each sub-block's hidden at w: 40 * 96 / 64 = 60
    shape = dict(
        vocab_size=50,
        block_size=8,
        n_layer=4,
        n_head=4,
        n_embd=d,
        layer_widths=[w, 64, 32, w],
        bottleneck_dim=hid,
    )
    cases = {  # (K, rho): W_end by hand
        (4, 1.0): 3 * w * (w - d) + 60 * (w - d),  # QKV rows 3w; one sub-block of hidden 60
        # the plain FFN: the ><former's (3 + E) d_bar (d_bar - d)
        (1, 1.0): 3 * w * (w - d) + 60 * (w - d),
        # W_q + Inner-FFN W_1, W_3 (2 x K(1-rho)W = 60 wide)
        (2, 0.5): (w + 2 * 60) * (w - d) + 30 * (w - d),
        (2, 0.0): (w + 2 * 120) * (w - d) + w * (w - d),  # no Outer-FFN: W_o writes last
    }
    for (k, rho), by_hand in cases.items():
        with torch.device("meta"):
            model = build_model("composed", **shape, n_sub_blocks=k, outer_ratio=rho)
        assert model.endpoint_params() == by_hand, (k, rho)
        # what the solver subtracts, per unit width
        end_in, end_out = model.config.end_ratios()
        assert end_in * w * (w - d) + end_out * w * (w - d) == pytest.approx(by_hand), (k, rho)
