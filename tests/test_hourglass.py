"""Hourglass FFN: K = 1 is the plain GPT, eq. (3)-(5) by hand, the paper's Tables 1-3."""

import pytest
import torch
import torch.nn.functional as F

from conftest import all_logits, tiny_config
from hourglass import (HourglassConfig, HourglassGPT, match_baseline,
                       match_ffn_at_fixed_width)
from model import GPT, GPTConfig, shape_counts
from shapes import build_model

TINY = dict(vocab_size=50, block_size=32, n_layer=2, n_embd=64, n_head=4)
PAPER = dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50304, block_size=2)


def test_k1_with_the_plain_hidden_size_is_the_plain_gpt_exactly():
    torch.manual_seed(7)
    plain = GPT(tiny_config()).eval()
    torch.manual_seed(7)
    hourglass = HourglassGPT(HourglassConfig(**TINY, n_sub_blocks=1)).eval()
    a, b = plain.state_dict(), hourglass.state_dict()
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
    idx = torch.randint(50, (2, 32))
    assert torch.equal(all_logits(plain, idx), all_logits(hourglass, idx))


def test_sub_blocks_run_in_a_row_each_with_its_own_norm_and_residual():
    ffn = HourglassGPT(HourglassConfig(**TINY, n_sub_blocks=3, bottleneck_dim=24)).blocks[0].ffn
    for p in ffn.parameters():  # norm gains away from 1, so that a missing norm shows
        torch.nn.init.normal_(p, std=0.3)
    x = torch.randn(2, 5, 64)
    h = x
    for sub in ffn.sub_blocks:
        n = F.rms_norm(h, (64,), sub.norm.weight, 1e-5)
        w_d1, w_d2 = sub.mlp.gate_up_proj.weight.split(24)
        h = h + (F.silu(n @ w_d1.T) * (n @ w_d2.T)) @ sub.mlp.out_proj.weight.T  # eq. (5), (3)
    torch.testing.assert_close(ffn(x), h, rtol=1e-5, atol=1e-5)
    assert sum(p.numel() for p in ffn.parameters()) == 3 * (3 * 24 * 64 + 64)  # 3 K d_h d + norms


def test_the_matcher_finds_the_papers_113m_shape():
    matched = match_baseline(PAPER, n_sub_blocks=4, bottleneck_ratio=0.4)
    assert (matched["n_embd"], matched["bottleneck_dim"], matched["n_layer"]) == (1032, 418, 12)
    target = shape_counts(GPT, GPTConfig(**PAPER))["budget"]
    got = shape_counts(HourglassGPT, HourglassConfig(**matched))["budget"]
    assert abs(got - target) / target < 0.005
    with pytest.raises(ValueError, match="smaller ratio"):
        match_baseline(PAPER, n_sub_blocks=4, bottleneck_ratio=0.4, tolerance=1e-6)


@pytest.mark.parametrize("k, d_h", [(5, 614), (6, 512), (8, 384), (10, 307)])
def test_fixed_width_mode_gives_table_1(k, d_h):
    matched = match_ffn_at_fixed_width(PAPER, k)
    assert (matched["n_embd"], matched["bottleneck_dim"]) == (768, d_h)
    counts = shape_counts(HourglassGPT, HourglassConfig(**matched))
    assert round(counts["attention"] / 1e6) == 28 and round(counts["ffn"] / 1e6) == 85


def test_bad_settings_are_one_line_errors():
    for kw, match in [(dict(ffn_hidden=256, bottleneck_dim=16), "leave ffn_hidden unset"),
                      (dict(bottleneck_ratio=0.4), "has no setting bottleneck_ratio"),
                      (dict(n_sub_blocks=0), "K >= 1")]:
        with pytest.raises(ValueError, match=match):
            build_model("hourglass", **TINY, **kw)
