"""Layer-wise scaling: schedules, Table 2 shapes and counts, equivalence with the plain GPT."""

import random
import runpy
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT, all_logits, assert_causal, overfit_loss, tiny_config
from configurator import parse_overrides
from model import GPT
import lws

FRAMED_18L_FFN = [3072, 512, 768, 1024, 1024, 1280, 1280, 1536, 1536, 1792, 2048, 2048, 2304, 2560,
                  2560, 2816, 2816, 3072]
FRAMED_18L_HEADS = [12, 6] + [9] * 10 + [12] * 6


def paper_model(row):
    with torch.device("meta"):
        return lws.build_model(**lws.paper_shapes()[row])


def tiny_lws(**schedule):
    args = dict(vocab_size=50, block_size=32, n_layer=4, n_embd=64, n_head=4, n_kv_head=2, ffn_multiple=32)
    args.update(schedule)
    return lws.build_model(**args)


def test_make_divisible_follows_openelm_with_the_09_guard():
    assert lws.make_divisible(100, 256) == 256  # below the divisor: the divisor
    assert lws.make_divisible(0.5 * 768, 256) == 512  # 384 rounds half up to 512
    # 867.8 rounds to 768, which lost more than 10% (768 <= 0.9 * 867.8): the guard adds one divisor
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
# (olmo_core/nn/transformer/model.py), independently of lws.py: it is what built the paper's models.


def reference_multipliers(n_layer, scalars):
    """Two values: np.linspace, then Python's round(., 2) on each np.float64 (numpy's rounding,
    as corenet's OpenELM does). Three values: np.interp over the layer indices, knots at
    [0, ceil(N/2)-1, N-1] (odd N) or [0, ceil(N/2)-1, ceil(N/2), N-1] with values
    [start, middle, middle, start] (even N); no rounding."""
    if len(scalars) == 2:
        return [float(round(v, 2)) for v in np.linspace(scalars[0], scalars[1], num=n_layer, dtype=float)]
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
    heads = [int(reference_make_divisible(n_embd * a, group * head_dim)) // head_dim for a in alphas]
    return betas, alphas, widths, heads


def random_schedule(rng, n_layer):
    decimals = rng.choice([1, 2, 3])  # the paper's scalars have 1-2 decimals, match_params' have 3
    values = [round(rng.uniform(0.2, 6.0), decimals) for _ in range(rng.choice([2, 3]) if n_layer >= 4 else 2)]
    if len(values) == 3 and n_layer % 2 == 0:
        values[2] = values[0]  # the reference's even-depth crown is symmetric (see below)
    return values


def test_multipliers_and_widths_are_the_references_over_many_random_schedules():
    rng = random.Random(13)
    for _ in range(3000):
        n_layer = rng.randint(2, 40)
        fnn, qkv = random_schedule(rng, n_layer), [round(v / 3, 2) for v in random_schedule(rng, n_layer)]
        framed, group, head_dim = rng.random() < 0.5, rng.choice([1, 2, 3, 4]), rng.choice([32, 64])
        n_embd = rng.choice([512, 768, 1024])
        betas, alphas, widths, heads = reference_layers(n_embd, n_layer, fnn, qkv, framed, head_dim, group)
        assert lws.layer_multipliers(n_layer, fnn, qkv, framed) == (betas, alphas), (n_layer, fnn, qkv, framed)
        specs = lws.layer_specs(n_embd, n_layer, fnn, qkv, framed, head_dim=head_dim, group_size=group)
        assert [s.ffn_hidden for s in specs] == widths and [s.n_head for s in specs] == heads, (n_layer, fnn, qkv)


def test_rounding_follows_numpy_on_a_case_where_python_round_differs():
    # the double nearest 2.675 lies just below it: Python's round(2.675, 2) = 2.67 (correctly rounded), numpy's
    # (x * 100 rounded half-even, / 100; the reference calls round() on an np.float64) = 2.68
    assert lws.interpolate([2.675, 2.675], 4) == [2.68] * 4 == reference_multipliers(4, [2.675, 2.675])


def test_an_even_depth_crown_must_be_symmetric():
    # the reference builds an even-depth crown from [start, middle] only ([start, mid, mid, start]);
    # an end value that differs would be dropped without a word, so it is refused
    with pytest.raises(ValueError, match="symmetric"):
        lws.interpolate([0.5, 3.8, 1.0], 18)
    assert lws.interpolate([0.5, 3.8, 1.0], 17) == reference_multipliers(17, [0.5, 3.8, 1.0])  # odd: any end


def test_isotropic_schedule_equals_the_plain_gpt():
    torch.manual_seed(7)
    plain = GPT(tiny_config(n_layer=4, n_kv_head=2, qk_norm="full", tie_embeddings=False)).eval()
    torch.manual_seed(7)
    iso = lws.build_model(vocab_size=50, block_size=32, n_layer=4, n_embd=64, n_head=4, n_kv_head=2,
                          qk_norm="full", tie_embeddings=False, ffn_scalars=[4.0, 4.0], qkv_scalars=[1.0, 1.0]).eval()
    assert iso.config.layers == plain.config.layers
    a, b = plain.state_dict(), iso.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    idx = torch.randint(50, (2, 32))
    assert torch.equal(all_logits(plain, idx), all_logits(iso, idx))


def test_framed_18l_per_layer_ffn_widths_and_heads_follow_the_openelm_rounding():
    specs = paper_model("Framed LWS").config.layers
    assert [s.ffn_hidden for s in specs] == FRAMED_18L_FFN
    assert [s.n_head for s in specs] == FRAMED_18L_HEADS
    assert [s.n_kv_head for s in specs] == [h // 3 for h in FRAMED_18L_HEADS]
    assert all(s.head_dim == 64 for s in specs)
    # reverse is framed's mirror image in the interior
    reverse = paper_model("Reverse LWS").config.layers
    assert [s.ffn_hidden for s in reverse[1:-1]] == [s.ffn_hidden for s in specs[1:-1]][::-1]


@pytest.mark.parametrize("row", list(lws.PAPER_TABLE2))
def test_parameter_counts_equal_table_2(row):
    total, non_embedding = lws.PAPER_TABLE2[row][4:]
    c = paper_model(row).param_counts()
    assert round(c["total"] / 1e6, 1) == total
    assert round(c["non_embedding"] / 1e6, 1) == non_embedding


def test_baseline_12l_and_framed_totals_equal_table_2_with_an_untied_head():
    base, framed = paper_model("Baseline 12L").param_counts(), paper_model("Framed LWS").param_counts()
    assert (round(base["total"] / 1e6, 1), round(base["non_embedding"] / 1e6, 1)) == (181.1, 142.5)
    assert (round(framed["total"] / 1e6, 1), round(framed["non_embedding"] / 1e6, 1)) == (179.4, 140.7)
    assert base["embedding"] == 50304 * 768 and base["lm_head"] == 50304 * 768  # untied head


def test_paper_shapes_are_table_2_on_the_olmo2_base():
    shapes = lws.paper_shapes()
    assert list(shapes) == list(lws.PAPER_TABLE2)
    for name, shape in shapes.items():
        n_layer, fnn, qkv, framed, _, _ = lws.PAPER_TABLE2[name]
        assert shape == {**lws.PAPER_BASE, "block_size": 1024, "n_layer": n_layer, "ffn_scalars": fnn,
                         "qkv_scalars": qkv, "framed": framed}


def test_command_line_prints_every_table_2_row_next_to_the_paper(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["lws.py"])
    runpy.run_path(str(ROOT / "lws.py"), run_name="__main__")
    out = capsys.readouterr().out
    for name, (n_layer, _, _, _, total, non_embedding) in lws.PAPER_TABLE2.items():
        assert f"{name}: {n_layer} layers" in out
        ours = f"params: total {total:.1f}M, non-embedding {non_embedding:.1f}M"
        paper = f"paper Table 2: total {total:.1f}M, non-embedding {non_embedding:.1f}M"
        assert ours in out and paper in out, name
    assert "FFN widths: " + str(FRAMED_18L_FFN) in out


def test_command_line_prints_the_cpu_shapes_with_their_model_args(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["lws.py", "--scale=cpu"])
    runpy.run_path(str(ROOT / "lws.py"), run_name="__main__")
    out = capsys.readouterr().out
    for name, shape in lws.cpu_shapes().items():
        assert f"{name}: {shape['n_layer']} layers" in out
        assert f"'ffn_scalars': {shape['ffn_scalars']}, 'qkv_scalars': {shape['qkv_scalars']}, " \
               f"'framed': {shape['framed']}, 'ffn_multiple': 32" in out
    monkeypatch.setattr(sys, "argv", ["lws.py", "--scale=gpu"])
    with pytest.raises(SystemExit, match="use paper or cpu"):
        runpy.run_path(str(ROOT / "lws.py"), run_name="__main__")


def test_query_heads_are_always_a_multiple_of_the_group_size():
    rng = random.Random(0)
    for _ in range(200):
        group, head_dim = rng.choice([1, 2, 3, 4]), rng.choice([16, 32, 64])
        n_layer = rng.randint(4, 24)
        qkv = [round(rng.uniform(0.1, 3.0), 2) for _ in range(rng.choice([2, 3]))]
        fnn = [round(rng.uniform(0.1, 6.0), 2) for _ in range(rng.choice([2, 3]))]
        for schedule in (qkv, fnn):
            if len(schedule) == 3 and n_layer % 2 == 0:
                schedule[2] = schedule[0]  # an even-depth crown is symmetric (as in the reference)
        specs = lws.layer_specs(768, n_layer, fnn, qkv, framed=rng.random() < 0.5, head_dim=head_dim,
                                group_size=group)
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
    model = lws.build_model(vocab_size=50, block_size=16, n_layer=3, n_embd=32, n_head=4, n_kv_head=2,
                            ffn_scalars=[1.0, 4.0], qkv_scalars=[0.5, 1.0], ffn_multiple=16)
    assert overfit_loss(model, vocab_size=50, steps=60, lr=2e-2, batch=2) < 0.2  # from ln(50) = 3.9


def test_flops_per_token_counts_each_layer_shape():
    model = tiny_lws(ffn_scalars=[1.0, 4.0], qkv_scalars=[0.5, 1.0])
    T, d = 32, 64
    expected = 2 * 50 * d  # head
    for s in model.config.layers:
        q, kv = s.n_head * s.head_dim, s.n_kv_head * s.head_dim
        expected += 2 * d * (q + 2 * kv) + 2 * q * d + 4 * T * q + 2 * 3 * d * s.ffn_hidden
    assert model.flops_per_token(T) == expected


def test_cpu_configs_are_the_baseline_and_the_variants_matched_to_it():
    shapes = lws.cpu_shapes()  # runs match_params for the four variants
    target = lws.count_params(**shapes["baseline"])["non_embedding"]
    keys = ("out_dir", "eval_interval", "eval_iters", "log_interval", "sample_tokens", "dataset", "batch_size",
            "block_size", "model_type", "n_layer", "n_embd", "n_head", "n_kv_head", "head_dim", "qk_norm",
            "tie_embeddings", "dropout", "dtype", "model_args", "learning_rate", "max_iters", "lr_decay_iters",
            "min_lr", "beta2", "warmup_iters")
    for name, shape in shapes.items():
        count = lws.count_params(**shape)["non_embedding"]
        assert abs(count - target) / target < 0.01, name
        assert shape["qkv_scalars"] == {**lws.CPU_VARIANTS, "baseline": lws.CPU_BASELINE}[name]["qkv_scalars"]
        cfg = parse_overrides([str(ROOT / f"config/lws_{name}_shakespeare_char.py")], {k: None for k in keys})
        assert cfg["model_type"] == "lws" and cfg["n_layer"] == shape["n_layer"]
        for key in ("n_embd", "n_head", "n_kv_head", "head_dim", "qk_norm", "tie_embeddings"):
            assert cfg[key] == shape[key], (name, key)
        for key in ("ffn_scalars", "qkv_scalars", "framed", "ffn_multiple"):
            assert cfg["model_args"][key] == shape[key], (name, key)


def test_bad_input_gets_a_clear_error():
    with pytest.raises(ValueError, match="multiple of n_kv_head"):
        lws.build_model(n_head=6, n_kv_head=4, n_embd=384, ffn_scalars=[1, 2], qkv_scalars=[1, 1])
    with pytest.raises(ValueError, match="2 values"):
        lws.build_model(n_layer=6, ffn_scalars=[1, 2, 3, 4], qkv_scalars=[1, 1])
    with pytest.raises(ValueError, match="a crown, for 4\\+ layers"):
        lws.interpolate([0.5, 3.0, 0.5], 2)  # a crown needs more layers than knots
    with pytest.raises(ValueError, match="> 0"):
        lws.build_model(n_layer=6, ffn_scalars=[0.0, 2.0], qkv_scalars=[1, 1])
    with pytest.raises(ValueError, match="both"):
        lws.build_model(n_layer=6, ffn_scalars=[1.0, 2.0])
    with pytest.raises(ValueError, match="ffn_hidden"):
        lws.build_model(n_layer=6, ffn_hidden=512, ffn_scalars=[1.0, 2.0], qkv_scalars=[1, 1])


@pytest.mark.parametrize("row, name", [("Baseline 12L", "baseline_12l"), ("Vanilla LWS 12L", "vanilla_12l"),
                                       ("Baseline 18L", "baseline"), ("Vanilla LWS 18L", "vanilla"),
                                       ("Framed LWS", "framed"), ("Reverse LWS", "reverse"), ("Crown LWS", "crown")])
def test_paper_scale_configs_build_table_2_on_the_olmo2_base(row, name):
    from configurator import build_model as build_by_name, train_defaults
    cfg = parse_overrides([str(ROOT / f"config/lws_{name}_180m.py")], train_defaults())
    keys = ("block_size", "n_layer", "n_head", "n_kv_head", "n_embd", "head_dim", "ffn_hidden", "qk_norm",
            "tie_embeddings", "dropout")
    with torch.device("meta"):
        model = build_by_name(cfg["model_type"], vocab_size=50304, **{k: cfg[k] for k in keys}, **cfg["model_args"])
    assert model.config.layers == paper_model(row).config.layers
    assert (model.config.rope_theta, model.config.norm_eps) == (500_000.0, 1e-6)  # OLMo-2 190M's values
    c = model.param_counts()
    assert (round(c["total"] / 1e6, 1), round(c["non_embedding"] / 1e6, 1)) == tuple(lws.PAPER_TABLE2[row][4:])
