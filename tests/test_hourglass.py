"""Hourglass FFN (hourglass.py): K = 1 is the plain GPT, the paper's parameter rows, matching,
causality, FLOPs, overfitting, configs and clear errors."""


import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

import hourglass
from conftest import ROOT, all_logits, assert_causal, overfit_loss, tiny_config
from hourglass import (HourglassConfig, HourglassFFN, HourglassGPT, match_baseline,
                       match_ffn_at_fixed_width)
from model import GPT, FFNSublayer, GPTConfig, shape_counts
from shapelab.configurator import parse_overrides
from shapes import build_model as build_by_name

TINY = dict(vocab_size=50, block_size=32, n_layer=2, n_embd=64, n_head=4)


def build_model(**kw):
    return HourglassGPT(HourglassConfig(**kw))


def build_plain(**kw):
    return GPT(GPTConfig(**kw))


def budget(build, **model_args):
    """model.budget() (non-embedding, without an untied LM head) of a model built on the meta
    device."""
    with torch.device("meta"):
        return build(**model_args).budget()


def test_k1_with_the_plain_hidden_size_is_the_plain_gpt_exactly():
    torch.manual_seed(7)
    plain = GPT(tiny_config()).eval()
    torch.manual_seed(7)
    hourglass = build_model(**TINY, n_sub_blocks=1).eval()  # d_h defaults to the plain 4 d
    # K = 1 builds the plain FFN sublayer, as compose.py does
    assert type(hourglass.blocks[0].ffn) is FFNSublayer
    a, b = plain.state_dict(), hourglass.state_dict()
    # the same parameter names in the same order (checkpoints load either way)
    assert list(a) == list(b)
    assert all(torch.equal(a[k], b[k]) for k in a)  # same init draws
    idx = torch.randint(50, (2, 32))
    assert torch.equal(all_logits(plain, idx), all_logits(hourglass, idx))
    assert plain.param_counts() == hourglass.param_counts()
    assert plain.flops_per_token() == hourglass.flops_per_token()


@pytest.mark.parametrize("k", [1, 3])
def test_compose_builds_the_same_ffn_slot_for_every_k(k):
    """compose.py's K = 1 is the plain FFNSublayer and its K > 1 an HourglassFFN: hourglass.py
    agrees."""
    torch.manual_seed(3)
    composed = build_by_name("composed", **TINY, n_sub_blocks=k, bottleneck_dim=40)
    torch.manual_seed(3)
    ours = build_model(**TINY, n_sub_blocks=k, bottleneck_dim=40)
    a, b = composed.state_dict(), ours.state_dict()
    assert list(a) == list(b) and all(torch.equal(a[key], b[key]) for key in a)


def test_k1_sublayer_equals_ffn_sublayer_with_the_same_weights():
    config = tiny_config()
    plain, hourglass = FFNSublayer(64, 40, config), HourglassFFN(64, 40, 1, config)
    hourglass.sub_blocks[0].load_state_dict(plain.state_dict())
    x = torch.randn(2, 5, 64)
    assert torch.equal(plain(x), hourglass(x))


def test_sub_blocks_are_applied_in_a_row_with_their_own_norm_and_residual():
    """eq. (3)-(5) written out by hand for K = 3."""
    model = build_model(**TINY, n_sub_blocks=3, bottleneck_dim=24)
    ffn = model.blocks[0].ffn
    for p in ffn.parameters():  # norm gains away from 1 so a missing norm would show
        torch.nn.init.normal_(p, std=0.3)
    x = torch.randn(2, 5, 64)
    h = x
    for sub in ffn.sub_blocks:
        n = torch.nn.functional.rms_norm(h, (64,), sub.norm.weight, 1e-5)  # xbar = norm(h)
        w_d1, w_d2 = sub.mlp.gate_up_proj.weight.split(24)  # (d_h, d) each
        # eq. (5), (3)
        h = h + (torch.nn.functional.silu(n @ w_d1.T) * (n @ w_d2.T)) @ sub.mlp.out_proj.weight.T
    torch.testing.assert_close(ffn(x), h, rtol=1e-5, atol=1e-5)
    assert sum(p.numel() for p in ffn.parameters()) == 3 * (3 * 24 * 64 + 64)  # 3 K d_h d + K norms


def test_matcher_finds_the_papers_113m_shape_and_stays_within_half_a_percent():
    baseline = dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50304, block_size=2)
    matched = match_baseline(baseline, n_sub_blocks=4, bottleneck_ratio=0.4)
    # Table 2/3
    assert (matched["n_embd"], matched["bottleneck_dim"], matched["n_layer"]) == (1032, 418, 12)
    target = budget(build_plain, **baseline)
    got = budget(build_model, **matched)
    assert abs(got - target) / target < 0.005
    # the K4 L6 row
    shallow = match_baseline(baseline, n_sub_blocks=4, bottleneck_ratio=0.5, n_layer=6)
    assert shallow["n_layer"] == 6 and shallow["n_embd"] % 24 == 0
    assert abs(budget(build_model, **shallow) - target) / target < 0.005


# K -> d_h at d_model = 768, L = 12 (the paper's Table 1)
TABLE_1 = {5: 614, 6: 512, 8: 384, 10: 307}


@pytest.mark.parametrize("k", TABLE_1)
def test_fixed_width_mode_gives_table_1(k):
    baseline = dict(n_embd=768, n_layer=12, n_head=12, vocab_size=50304, block_size=2)
    matched = match_ffn_at_fixed_width(baseline, k)
    assert (
        matched["n_embd"],
        matched["n_layer"],
        matched["n_head"],
        matched["bottleneck_dim"],
    ) == (768, 12, 12, TABLE_1[k])
    base, hg = (shape_counts(HourglassGPT, HourglassConfig(**args)) for args in (baseline, matched))
    assert hg["attention"] == base["attention"]  # Table 1: 28M attention for every row
    assert round(hg["attention"] / 1e6) == 28 and round(hg["ffn"] / 1e6) == 85  # and 85M FFN
    assert abs(hg["ffn"] - base["ffn"]) <= 3 * k * 12 * 768 / 2  # within half a unit of d_h


def test_matcher_for_the_cpu_config_and_its_error():
    baseline = dict(n_layer=4, n_head=6, n_embd=192, vocab_size=84, block_size=128)
    matched = match_baseline(baseline, n_sub_blocks=4, bottleneck_ratio=0.4)
    # what config/hourglass_shakespeare_cpu.py uses
    assert (matched["n_embd"], matched["bottleneck_dim"]) == (264, 98)
    with pytest.raises(ValueError, match="smaller ratio"):  # one unit of d_h is 0.5% of the budget
        match_baseline(baseline, n_sub_blocks=4, bottleneck_ratio=0.4, tolerance=1e-6)


def test_matcher_searches_d_h_so_a_block_whose_count_is_no_straight_line_still_matches(
        monkeypatch):
    """A learner's taper (sub-block i of hidden d_h (i + 2) / 4, floored) makes the count bend in
    d_h: the matcher still finds the d_h whose count is closest, where a line through d_h = 1 and 2
    misses by far."""
    class TaperedGPT(HourglassGPT):
        def make_ffn(self, layer_idx, spec):
            c = self.config
            ffn = HourglassFFN(c.n_embd, spec.ffn_hidden, c.n_sub_blocks, c)
            ffn.sub_blocks = torch.nn.ModuleList(
                FFNSublayer(c.n_embd, max(1, spec.ffn_hidden * (i + 2) // 4), c)
                for i in range(c.n_sub_blocks))
            return ffn

    monkeypatch.setattr(hourglass, "HourglassGPT", TaperedGPT)
    baseline = dict(n_layer=4, n_head=6, n_embd=192, vocab_size=84, block_size=2)
    matched = match_baseline(baseline, n_sub_blocks=4, bottleneck_ratio=0.4)
    target = budget(build_plain, **baseline)
    error = lambda d_h: abs(budget(  # noqa: E731
        lambda **kw: TaperedGPT(HourglassConfig(**kw)), **dict(matched, bottleneck_dim=d_h))
        - target)
    d_h = matched["bottleneck_dim"]
    assert error(d_h) <= min(error(d_h - 1), error(d_h + 1)) and error(d_h) < 0.005 * target


def test_causality_of_the_full_model():
    assert_causal(build_model(**TINY, n_sub_blocks=3, bottleneck_dim=16), vocab_size=50, t=11)


def test_flops_per_token_match_the_flop_counter():
    model = build_model(**TINY, n_sub_blocks=4, bottleneck_dim=24)
    idx = torch.randint(50, (1, 32))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx, targets=idx)  # with targets: the head runs at every position
    assert counter.get_total_flops() == 32 * model.flops_per_token(32)


def test_tiny_hourglass_overfits_a_batch():
    torch.manual_seed(0)
    model = build_model(
        vocab_size=20,
        block_size=16,
        n_layer=1,
        n_embd=64,
        n_head=4,
        n_sub_blocks=3,
        bottleneck_dim=16,
    )
    assert overfit_loss(model, vocab_size=20, steps=100, lr=1e-2) < 0.1  # from ln(20) = 3.0


def test_bad_input_gets_a_clear_error():
    """(short asserts in the config, worded as one-line ConfigErrors by the configurator)"""
    with pytest.raises(ValueError, match="not both"):
        build_by_name("hourglass", **TINY, bottleneck_dim=16, bottleneck_ratio=0.4)
    with pytest.raises(ValueError, match="leave ffn_hidden unset"):
        build_by_name("hourglass", **TINY, ffn_hidden=256, bottleneck_dim=16)
    with pytest.raises(ValueError, match="K >= 1"):
        build_by_name("hourglass", **TINY, n_sub_blocks=0)
    with pytest.raises(ValueError, match="not divisible by n_head"):
        build_by_name("hourglass", **dict(TINY, n_embd=66), n_sub_blocks=2, bottleneck_dim=16)


def test_hourglass_configs_load_build_and_are_matched_pairs():
    from shapes import train_defaults
    defaults = train_defaults()
    built = {}
    for name in ("shakespeare_cpu_baseline", "shakespeare_cpu", "113m_gpu_baseline", "113m_gpu"):
        cfg = parse_overrides([str(ROOT / f"config/hourglass_{name}.py")], defaults)
        common = {
            k: cfg[k]
            for k in (
                "block_size",
                "n_layer",
                "n_head",
                "n_kv_head",
                "n_embd",
                "head_dim",
                "ffn_hidden",
                "qk_norm",
                "tie_embeddings",
                "dropout",
            )
        }
        with torch.device("meta"):
            model = build_by_name(cfg["model_type"], vocab_size=84, **common, **cfg["model_args"])
        built[name] = (cfg, model.budget())
    for pair in ("shakespeare_cpu", "113m_gpu"):
        (base_cfg, base_n), (hg_cfg, hg_n) = built[pair + "_baseline"], built[pair]
        assert base_cfg["model_type"] == "gpt" and hg_cfg["model_type"] == "hourglass"
        assert abs(hg_n - base_n) / base_n < 0.005
        same = (
            "dataset",
            "batch_size",
            "block_size",
            "gradient_accumulation_steps",
            "max_iters",
            "seed",
            "learning_rate",
            "n_layer",
            "n_head",
        )
        assert all(base_cfg[k] == hg_cfg[k] for k in same)  # same tokens, same seed
    assert built["113m_gpu"][0]["model_args"] == {"n_sub_blocks": 4, "bottleneck_dim": 418}
    assert built["113m_gpu"][0]["n_embd"] == 1032
