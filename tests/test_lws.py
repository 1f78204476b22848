"""Layer-wise scaling: the schedules and their rounding against the reference code's rule, the
paper's 18-layer shapes, the isotropic schedule is the plain GPT, matching."""

import random

import numpy as np
import pytest
import torch

from conftest import all_logits, tiny_config
import lws
from lws import LWSConfig, LWSGPT
from model import GPT, shape_counts
from shapes import build_model

FRAMED_18L_FFN = [3072, 512, 768, 1024, 1024, 1280, 1280, 1536, 1536, 1792, 2048, 2048, 2304,
                  2560, 2560, 2816, 2816, 3072]
FRAMED_18L_HEADS = [12, 6] + [9] * 10 + [12] * 6
OLMO2_HEADS = dict(n_embd=768, n_head=12, n_kv_head=4, head_dim=64)


# The reference's rule, written out from github.com/baroian/OLMo-custom independently of lws.py
def reference_multipliers(n_layer, scalars):
    if len(scalars) == 2:
        return [float(round(v, 2)) for v in np.linspace(scalars[0], scalars[1], num=n_layer)]
    if n_layer % 2 == 0:
        xs = [0, np.ceil(n_layer / 2) - 1, np.ceil(n_layer / 2), n_layer - 1]
        ys = [scalars[0], scalars[1], scalars[1], scalars[0]]
    else:
        xs, ys = [0, np.ceil(n_layer / 2) - 1, n_layer - 1], scalars
    return [float(v) for v in np.interp(np.arange(0, n_layer), xs, ys)]


def reference_make_divisible(value, divisor):
    if value < divisor:
        return divisor
    rounded = int(value + divisor / 2) // divisor * divisor
    return rounded + divisor if rounded <= 0.9 * value else rounded


def random_schedule(rng, n_layer):
    values = [round(rng.uniform(0.2, 6.0), rng.choice([1, 2, 3]))
              for _ in range(rng.choice([2, 3]) if n_layer >= 4 else 2)]
    if len(values) == 3 and n_layer % 2 == 0:
        values[2] = values[0]  # the reference's even-depth crown is symmetric
    return values


def test_widths_and_heads_are_the_references_over_many_random_schedules():
    rng = random.Random(13)
    for _ in range(500):
        n_layer, framed = rng.randint(2, 40), rng.random() < 0.5
        fnn = random_schedule(rng, n_layer)
        qkv = [round(v / 3, 2) for v in random_schedule(rng, n_layer)]
        group, head_dim = rng.choice([1, 2, 3]), rng.choice([32, 64])
        n_embd = rng.choice([512, 768])
        betas, alphas = reference_multipliers(n_layer, fnn), reference_multipliers(n_layer, qkv)
        if framed:
            betas[0] = betas[-1] = 4.0
            alphas[0] = alphas[-1] = 1.0
        specs = lws.layer_specs(n_embd, n_layer, fnn, qkv, framed, head_dim, group)
        assert [s.ffn_hidden for s in specs] == [
            reference_make_divisible(b * n_embd, 256) for b in betas], (n_layer, fnn)
        assert [s.n_head for s in specs] == [
            reference_make_divisible(n_embd * a, group * head_dim) // head_dim for a in alphas]
        assert all(s.n_kv_head * group == s.n_head for s in specs)
    # numpy's rounding, where Python's round(2.675, 2) gives 2.67
    assert lws.interpolate([2.675, 2.675], 4) == [2.68] * 4


def test_the_papers_framed_18_layers_and_its_counts():
    specs = LWSConfig(n_layer=18, **OLMO2_HEADS, **lws.VARIANTS["framed"]).layers
    assert [s.ffn_hidden for s in specs] == FRAMED_18L_FFN
    assert [s.n_head for s in specs] == FRAMED_18L_HEADS
    olmo2 = dict(vocab_size=50304, block_size=2, n_layer=18, qk_norm="full",
                 tie_embeddings=False, **OLMO2_HEADS)
    counts = shape_counts(LWSGPT, LWSConfig(**olmo2, **lws.VARIANTS["framed"]))
    assert round(counts["total"] / 1e5) == 1794 and round(counts["non_embedding"] / 1e5) == 1407


def test_no_schedule_and_the_isotropic_schedule_equal_the_plain_gpt():
    torch.manual_seed(7)
    plain = GPT(tiny_config(n_layer=4, n_kv_head=2, qk_norm="full", tie_embeddings=False)).eval()
    idx = torch.randint(50, (2, 32))
    base = dict(vocab_size=50, block_size=32, n_layer=4, n_embd=64, n_head=4, n_kv_head=2,
                qk_norm="full", tie_embeddings=False)
    for schedule in ({}, dict(ffn_scalars=[4.0, 4.0], qkv_scalars=[1.0, 1.0])):
        torch.manual_seed(7)
        model = LWSGPT(LWSConfig(**base, **schedule)).eval()
        assert torch.equal(all_logits(plain, idx), all_logits(model, idx)), schedule


def test_match_params_scales_only_beta_to_the_baselines_count():
    base = dict(vocab_size=50, block_size=32, n_layer=5, n_embd=64, n_head=4, n_kv_head=2,
                ffn_multiple=16)
    baseline = dict(base, ffn_scalars=[2.5, 2.5], qkv_scalars=[0.75, 0.75])
    variant = dict(base, **lws.VARIANTS["crown"])
    matched, count = lws.match_params(baseline, variant, tolerance=1e-2)
    target = shape_counts(LWSGPT, LWSConfig(**baseline))["non_embedding"]
    assert abs(count - target) / target < 0.02
    assert matched["qkv_scalars"] == variant["qkv_scalars"]
    ratios = [m / v for m, v in zip(matched["ffn_scalars"], variant["ffn_scalars"])]
    assert max(ratios) - min(ratios) < 0.005 and abs(ratios[0] - 1) > 0.01


@pytest.mark.parametrize("kw, match", [
    (dict(n_head=6, n_kv_head=4, n_embd=384), "multiple of n_kv_head"),
    (dict(n_layer=6, ffn_scalars=[1, 2, 3, 4]), "2 values"),
    (dict(n_layer=18, ffn_scalars=[0.5, 3.8, 1.0]), "symmetric"),
    (dict(n_layer=6, ffn_scalars=[0.0, 2.0]), "> 0"),
    (dict(n_layer=6, qkv_scalars=None), "both"),
    (dict(n_layer=6, ffn_hidden=512), "ffn_hidden")])
def test_bad_settings_are_one_line_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        build_model("lws", **{"ffn_scalars": [1.0, 2.0], "qkv_scalars": [1, 1], **kw})
