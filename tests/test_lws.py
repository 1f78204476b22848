"""Layer-wise scaling: schedules and their rounding against the reference's rule, the per-layer
shapes, equivalence with the plain GPT, bad input. (Table 2 and the CPU shapes:
tests/experiments/test_lws_tables.py.)"""

import random
import runpy
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT, all_logits, assert_causal, overfit_loss, tiny_config
import lws
from lws import LWSConfig, LWSGPT
from model import GPT, shape_counts
from shapes import build_model

FRAMED_18L_FFN = [3072, 512, 768, 1024, 1024, 1280, 1280, 1536, 1536, 1792, 2048, 2048, 2304,
                  2560, 2560, 2816, 2816, 3072]
FRAMED_18L_HEADS = [12, 6] + [9] * 10 + [12] * 6
OLMO2_HEADS = dict(n_embd=768, n_head=12, n_kv_head=4, head_dim=64)  # d, 12 / 4 heads of 64


def tiny_lws(**schedule):
    args = dict(vocab_size=50, block_size=32, n_layer=4, n_embd=64, n_head=4, n_kv_head=2,
                ffn_multiple=32)
    args.update(schedule)
    return LWSGPT(LWSConfig(**args))


def test_make_divisible_follows_openelm_with_the_09_guard():
    assert lws.make_divisible(100, 256) == 256  # below the divisor: the divisor
    assert lws.make_divisible(0.5 * 768, 256) == 512  # 384 rounds half up to 512
    # 867.8 rounds to 768, which lost more than 10% (768 <= 0.9 * 867.8): the guard adds one
    assert lws.make_divisible(1.13 * 768, 256) == 1024
    assert lws.make_divisible(1100, 1000) == 1000  # lost 9%: kept
    assert lws.make_divisible(1000, 1000) == 1000


def test_interpolation_rules():
    assert lws.interpolate([0.5, 4.0], 18)[1] == 0.71  # round(x, 2), eq. (2)
    assert lws.interpolate([1.0, 2.0], 3) == [1.0, 1.5, 2.0]
    # crown, odd L: knots at [0, ceil(L/2)-1, L-1]
    assert lws.interpolate([1.0, 3.0, 2.0], 5) == [1.0, 2.0, 3.0, 2.5, 2.0]
    # crown, even L: the two middle layers both take the middle value
    assert lws.interpolate([1.0, 3.0, 1.0], 6) == [1.0, 2.0, 3.0, 3.0, 2.0, 1.0]
    assert lws.interpolate([1, 2, 3, 4], 4) == [1.0, 2.0, 3.0, 4.0]  # one per layer: as written
    betas, alphas = lws.layer_multipliers(5, [1.0, 2.0], [0.5, 0.5], framed=True)
    assert betas == [4.0, 1.25, 1.5, 1.75, 4.0] and alphas == [1.0, 0.5, 0.5, 0.5, 1.0]


# ----------------------------------------------------------------------------------------
# The reference's schedule rule, written out here from github.com/baroian/OLMo-custom
# (olmo_core/nn/transformer/model.py), independently of lws.py: it built the paper's models.


def reference_multipliers(n_layer, scalars):
    """Two values: np.linspace, then Python's round(., 2) on each np.float64 (numpy's rounding,
    as corenet's OpenELM does). Three values: np.interp over the layer indices, knots at
    [0, ceil(N/2)-1, N-1] (odd N) or [0, ceil(N/2)-1, ceil(N/2), N-1] with values
    [start, middle, middle, start] (even N); no rounding."""
    if len(scalars) == 2:
        return [float(round(v, 2))
                for v in np.linspace(scalars[0], scalars[1], num=n_layer, dtype=float)]
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


def reference_layers(n_embd, n_layer, fnn, qkv, framed, head_dim, group):
    betas, alphas = reference_multipliers(n_layer, fnn), reference_multipliers(n_layer, qkv)
    if framed:  # the reference's layer_freeze
        betas[0] = betas[-1] = 4.0
        alphas[0] = alphas[-1] = 1.0
    widths = [reference_make_divisible(b * n_embd, 256) for b in betas]
    heads = [int(reference_make_divisible(n_embd * a, group * head_dim)) // head_dim
             for a in alphas]
    return betas, alphas, widths, heads


def random_schedule(rng, n_layer):
    decimals = rng.choice([1, 2, 3])  # the paper's scalars have 1-2 decimals, match_params' 3
    n_values = rng.choice([2, 3]) if n_layer >= 4 else 2
    values = [round(rng.uniform(0.2, 6.0), decimals) for _ in range(n_values)]
    if len(values) == 3 and n_layer % 2 == 0:
        values[2] = values[0]  # the reference's even-depth crown is symmetric (see below)
    return values


def test_multipliers_and_widths_are_the_references_over_many_random_schedules():
    rng = random.Random(13)
    for _ in range(3000):
        n_layer = rng.randint(2, 40)
        fnn = random_schedule(rng, n_layer)
        qkv = [round(v / 3, 2) for v in random_schedule(rng, n_layer)]
        framed, group, head_dim = rng.random() < 0.5, rng.choice([1, 2, 3, 4]), rng.choice([32, 64])
        n_embd = rng.choice([512, 768, 1024])
        betas, alphas, widths, heads = reference_layers(n_embd, n_layer, fnn, qkv, framed, head_dim,
                                                        group)
        assert lws.layer_multipliers(n_layer, fnn, qkv, framed) == (betas, alphas), (
            n_layer, fnn, qkv, framed)
        specs = lws.layer_specs(n_embd, n_layer, fnn, qkv, framed, head_dim=head_dim,
                                group_size=group)
        assert [s.ffn_hidden for s in specs] == widths, (n_layer, fnn, qkv)
        assert [s.n_head for s in specs] == heads, (n_layer, fnn, qkv)


def test_rounding_follows_numpy_on_a_case_where_python_round_differs():
    # the double nearest 2.675 lies just below it: Python's round(2.675, 2) = 2.67 (correctly
    # rounded), numpy's (x * 100 rounded half-even, / 100; the reference calls round() on an
    # np.float64) = 2.68
    assert lws.interpolate([2.675, 2.675], 4) == [2.68] * 4 == reference_multipliers(4, [2.675] * 2)


def test_an_even_depth_crown_must_be_symmetric():
    # the reference builds an even-depth crown from [start, middle] only ([start, mid, mid, start]);
    # an end value that differs would be dropped without a word, so it is refused
    with pytest.raises(ValueError, match="symmetric"):
        lws.interpolate([0.5, 3.8, 1.0], 18)
    odd = lws.interpolate([0.5, 3.8, 1.0], 17)
    assert odd == reference_multipliers(17, [0.5, 3.8, 1.0])  # odd: any end


def test_no_schedule_and_the_isotropic_schedule_equal_the_plain_gpt():
    torch.manual_seed(7)
    plain = GPT(tiny_config(n_layer=4, n_kv_head=2, qk_norm="full", tie_embeddings=False)).eval()
    idx = torch.randint(50, (2, 32))
    base = dict(vocab_size=50, block_size=32, n_layer=4, n_embd=64, n_head=4, n_kv_head=2,
                qk_norm="full", tie_embeddings=False)
    for schedule in ({}, dict(ffn_scalars=[4.0, 4.0], qkv_scalars=[1.0, 1.0])):
        torch.manual_seed(7)
        lws_model = LWSGPT(LWSConfig(**base, **schedule)).eval()
        assert lws_model.config.layers == plain.config.layers, schedule
        a, b = plain.state_dict(), lws_model.state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), schedule
        assert torch.equal(all_logits(plain, idx), all_logits(lws_model, idx)), schedule


def test_the_variants_framed_18l_per_layer_ffn_widths_and_heads_follow_the_openelm_rounding():
    specs = LWSConfig(n_layer=18, **OLMO2_HEADS, **lws.VARIANTS["framed"]).layers
    assert [s.ffn_hidden for s in specs] == FRAMED_18L_FFN
    assert [s.n_head for s in specs] == FRAMED_18L_HEADS
    assert [s.n_kv_head for s in specs] == [h // 3 for h in FRAMED_18L_HEADS]
    assert all(s.head_dim == 64 for s in specs)
    # reverse is framed's mirror image in the interior
    reverse = LWSConfig(n_layer=18, **OLMO2_HEADS, **lws.VARIANTS["reverse"]).layers
    assert [s.ffn_hidden for s in reverse[1:-1]] == [s.ffn_hidden for s in specs[1:-1]][::-1]


def test_command_line_prints_each_variants_layers_at_the_papers_shape(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["lws.py"])
    runpy.run_path(str(ROOT / "lws.py"), run_name="__main__")
    tables = capsys.readouterr().out.split("\n\n")
    assert [t.split(":")[0] for t in tables if t.strip()] == list(lws.VARIANTS)
    rows = [line.split() for line in tables[1].splitlines()[2:20]]  # framed: one row per layer
    assert [int(r[4]) for r in rows] == FRAMED_18L_FFN
    assert [int(r[1]) for r in rows] == FRAMED_18L_HEADS
    assert "total 179.35M, non_embedding 140.72M" in tables[1]  # Table 2: 179.4M / 140.7M
    monkeypatch.setattr(sys, "argv", ["lws.py", "--n_layer=4", "--ffn_scalars=[1.0, 4.0]",
                                      "--qkv_scalars=[0.5, 1.0]"])
    runpy.run_path(str(ROOT / "lws.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert out.startswith("given: ffn_scalars [1.0, 4.0]") and out.count("layer  heads") == 1
    monkeypatch.setattr(sys, "argv", ["lws.py", "--n_head=5"])
    with pytest.raises(SystemExit):
        runpy.run_path(str(ROOT / "lws.py"), run_name="__main__")
    assert "multiple of n_kv_head" in capsys.readouterr().err


def test_query_heads_are_always_a_multiple_of_the_group_size():
    rng = random.Random(0)
    for _ in range(200):
        group, head_dim = rng.choice([1, 2, 3, 4]), rng.choice([16, 32, 64])
        n_layer = rng.randint(4, 24)
        qkv = [round(rng.uniform(0.1, 3.0), 2) for _ in range(rng.choice([2, 3]))]
        fnn = [round(rng.uniform(0.1, 6.0), 2) for _ in range(rng.choice([2, 3]))]
        for schedule in (qkv, fnn):
            if len(schedule) == 3 and n_layer % 2 == 0:
                schedule[2] = schedule[0]  # an even-depth crown is symmetric (as the reference)
        specs = lws.layer_specs(768, n_layer, fnn, qkv, framed=rng.random() < 0.5,
                                head_dim=head_dim, group_size=group)
        for s in specs:
            assert s.n_head % group == 0 and s.n_kv_head * group == s.n_head and s.n_kv_head >= 1
            assert s.ffn_hidden % 256 == 0 and s.ffn_hidden >= 256


def test_causality():
    torch.manual_seed(0)
    model = tiny_lws(ffn_scalars=[1.0, 4.0], qkv_scalars=[0.5, 1.0]).eval()
    assert len({s.n_head for s in model.config.layers}) > 1  # the layers really differ
    assert_causal(model, vocab_size=50, t=11)


def test_tiny_lws_model_overfits_one_batch():
    torch.manual_seed(0)
    model = LWSGPT(LWSConfig(vocab_size=50, block_size=16, n_layer=3, n_embd=32, n_head=4,
                             n_kv_head=2, ffn_scalars=[1.0, 4.0], qkv_scalars=[0.5, 1.0],
                             ffn_multiple=16))
    assert overfit_loss(model, vocab_size=50, steps=60, lr=2e-2, batch=2) < 0.2  # from ln(50)


def test_flops_per_token_counts_each_layer_shape():
    model = tiny_lws(ffn_scalars=[1.0, 4.0], qkv_scalars=[0.5, 1.0])
    T, d = 32, 64
    expected = 2 * 50 * d  # head
    for s in model.config.layers:
        q, kv = s.n_head * s.head_dim, s.n_kv_head * s.head_dim
        expected += 2 * d * (q + 2 * kv) + 2 * q * d + 4 * T * q + 2 * 3 * d * s.ffn_hidden
    assert model.flops_per_token(T) == expected


def test_match_params_scales_only_beta_to_the_baselines_count():
    base = dict(vocab_size=50, block_size=32, n_layer=5, n_embd=64, n_head=4, n_kv_head=2,
                ffn_multiple=16)
    baseline = dict(base, ffn_scalars=[2.5, 2.5], qkv_scalars=[0.75, 0.75])
    variant = dict(base, **lws.VARIANTS["crown"])
    matched, count = lws.match_params(baseline, variant, tolerance=1e-2)
    target, matched_count, unmatched = (
        shape_counts(lws.LWSGPT, lws.LWSConfig(**args))["non_embedding"]
        for args in (baseline, matched, variant))
    assert count == matched_count
    assert abs(count - target) / target < 0.02 and count != unmatched
    assert {k: v for k, v in matched.items() if k != "ffn_scalars"} == {
        k: v for k, v in variant.items() if k != "ffn_scalars"}  # alpha and the frame stay
    ratios = [m / v for m, v in zip(matched["ffn_scalars"], variant["ffn_scalars"])]
    assert max(ratios) - min(ratios) < 0.005 and abs(ratios[0] - 1) > 0.01  # one factor for all


def test_bad_input_gets_a_clear_error():
    with pytest.raises(ValueError, match="multiple of n_kv_head"):
        build_model("lws", n_head=6, n_kv_head=4, n_embd=384, ffn_scalars=[1, 2],
                    qkv_scalars=[1, 1])
    with pytest.raises(ValueError, match="2 values"):
        build_model("lws", n_layer=6, ffn_scalars=[1, 2, 3, 4], qkv_scalars=[1, 1])
    with pytest.raises(ValueError, match="a crown, for 4\\+ layers"):
        lws.interpolate([0.5, 3.0, 0.5], 2)  # a crown needs more layers than knots
    with pytest.raises(ValueError, match="> 0"):
        build_model("lws", n_layer=6, ffn_scalars=[0.0, 2.0], qkv_scalars=[1, 1])
    with pytest.raises(ValueError, match="both"):
        build_model("lws", n_layer=6, ffn_scalars=[1.0, 2.0])
    with pytest.raises(ValueError, match="ffn_hidden"):
        build_model("lws", n_layer=6, ffn_hidden=512, ffn_scalars=[1.0, 2.0], qkv_scalars=[1, 1])
    with pytest.raises(ValueError, match="ffn_multiple=0 must be >= 1"):
        build_model("lws", n_layer=6, ffn_multiple=0, ffn_scalars=[1.0, 2.0], qkv_scalars=[1, 1])
    with pytest.raises(ValueError, match="layers: an LWS model builds them"):
        build_model("lws", layers=LWSConfig(n_layer=2).layers, ffn_scalars=[1.0, 2.0],
                    qkv_scalars=[1, 1])
