"""variable_width.py: the ><former's stream semantics (eq. 1), solver (Appendix A), accounting.
(The table against the constant width, experiments/variable_width_tables.py, is tested in
tests/experiments/test_variable_width_tables.py.)"""


import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from shapes import build_model
from conftest import all_logits, assert_causal, overfit_loss, run_here, tiny_config
from model import GPT, GPTConfig
from variable_width import VariableWidthConfig, VariableWidthGPT, param_summary, solve_widths

PAPER_200M = [1152, 960, 832, 704, 608, 512, 448, 352, 320, 256, 224, 192, 288, 480, 736, 1152]


def tiny_vw(widths, expansion="carry", **overrides):
    args = dict(vocab_size=50, block_size=32, n_layer=len(widths), n_embd=32, n_head=2,
                layer_widths=widths, expansion=expansion)
    args.update(overrides)
    return build_model("variable_width", **args)


@pytest.mark.parametrize("tie", [True, False])
def test_constant_widths_give_exactly_the_plain_gpt(tie):
    torch.manual_seed(3)
    plain = GPT(tiny_config(tie_embeddings=tie)).eval()
    torch.manual_seed(3)
    vw = VariableWidthGPT(VariableWidthConfig(vocab_size=50, block_size=32, n_layer=2, n_embd=64,
                                              n_head=4, tie_embeddings=tie,
                                              width_schedule="constant")).eval()
    a, b = plain.state_dict(), vw.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    idx = torch.randint(50, (2, 32))
    assert torch.equal(all_logits(plain, idx), all_logits(vw, idx))
    assert torch.equal(plain(idx)[0], vw(idx)[0])  # last-position path too


def test_carry_forward_keeps_the_last_written_value_and_zero_before_any_write():
    d = 32
    model = tiny_vw([32, 64, 32, 48, 96]).eval()
    idx = torch.randint(50, (2, 16))
    R = model.residual_streams(idx)  # R[l] = stream after layer l (R[0] = padded embedding)
    assert all(r.shape[-1] == 96 for r in R)
    assert torch.equal(R[0][..., d:], torch.zeros_like(R[0][..., d:]))  # [embedding, zeros]
    assert torch.equal(R[1][..., 32:], torch.zeros_like(R[1][..., 32:]))  # nobody wrote 32: yet
    assert not torch.equal(R[2][..., 32:64], torch.zeros_like(R[2][..., 32:64]))  # layer 2 wrote
    assert torch.equal(R[3][..., 32:64], R[2][..., 32:64])  # narrow layer 3 leaves them
    assert torch.equal(R[4][..., 48:64], R[2][..., 48:64])  # still layer 2's values
    assert torch.equal(R[4][..., 64:], torch.zeros_like(R[4][..., 64:]))  # unwritten before layer 5
    # eq. (1) written out coordinate by coordinate: layer l reads coordinate i from the output of
    # the last earlier layer at least i wide (the embedding counts as width d, else 0)
    widths, outputs = [32, 64, 32, 48, 96], [R[0]]
    for l, w in enumerate(widths):
        cols = []
        for i in range(w):
            writers = [j for j in range(l) if widths[j] > i]
            cols.append(outputs[writers[-1] + 1][..., i] if writers else
                        (R[0][..., i] if i < d else torch.zeros_like(R[0][..., 0])))
        x = torch.stack(cols, dim=-1)
        outputs.append(torch.nn.functional.pad(model.blocks[l](x), (0, 96 - w)))
        assert torch.equal(model.blocks[l](x), R[l + 1][..., :w])


def test_zero_padding_and_projection_run_and_differ_from_carry_forward():
    idx = torch.randint(50, (2, 32))
    logits = {}
    for expansion in ("carry", "zero", "project"):
        torch.manual_seed(0)
        model = tiny_vw([64, 32, 48, 64], expansion).eval()
        logits[expansion] = all_logits(model, idx)
        assert torch.isfinite(logits[expansion]).all()
        if expansion == "project":  # one projection per expansion, predicting only the new ones
            shapes = {k: tuple(m.weight.shape) for k, m in model.expansions.items()}
            assert shapes == {"2": (16, 32), "3": (16, 48)}
            assert param_summary(model)["other"] == 16 * 32 + 16 * 48
        else:
            assert len(model.expansions) == 0
    assert not torch.allclose(logits["carry"], logits["zero"])
    assert not torch.allclose(logits["carry"], logits["project"])
    assert not torch.allclose(logits["zero"], logits["project"])


def test_solver_reproduces_the_paper_200m_widths_and_matches_parameters():
    widths, info = solve_widths("x", 16, 640)
    assert widths == PAPER_200M
    assert sum(widths) / 16 == 576.0
    assert abs(info["unrounded"][0] - 1146.80) < 0.01 and abs(info["rate"] - 0.85004) < 1e-5
    shape = dict(vocab_size=100277, block_size=4096, n_layer=16, n_embd=640, n_head=16,
                 tie_embeddings=False)
    with torch.device("meta"):
        vw = VariableWidthGPT(VariableWidthConfig(**shape))  # default: x, r_l = 0.75, r_d = 0.3
        base = GPT(GPTConfig(**shape))
    assert vw.config.layer_widths == PAPER_200M
    assert all(s.n_head == 16 and s.head_dim * 16 == w and s.ffn_hidden == 4 * w
               for s, w in zip(vw.config.layers, PAPER_200M))
    mine, theirs = param_summary(vw), param_summary(base)
    assert mine["endpoint"] == 7 * 1152 * (1152 - 640)  # W_end = (3 + E) d_bar (d_bar - d)
    assert abs(mine["matched"] / theirs["matched"] - 1) < 0.01
    assert abs(mine["total"] / theirs["total"] - 1) < 0.03


@pytest.mark.parametrize("n_layer,n_embd,avg",
                         [(24, 960, 855), (32, 1280, 1145), (40, 1600, 1426)])
def test_solver_reproduces_table_2_average_widths(n_layer, n_embd, avg):
    widths, _ = solve_widths("x", n_layer, n_embd)
    assert round(sum(widths) / n_layer) == avg


def test_other_shapes_have_their_profiles():
    diamond, _ = solve_widths("diamond", 16, 640, bottleneck_width_ratio=1.5)
    v, _ = solve_widths("v", 16, 640)
    lam, _ = solve_widths("lambda", 16, 640)
    assert max(diamond) == diamond[11] and diamond[0] < 640 and diamond[-1] < 640
    assert v == sorted(v) and v[0] == 192 and lam == v[::-1]
    assert solve_widths("constant", 4, 128)[0] == [128] * 4
    with pytest.raises(ValueError, match="out of reach"):
        solve_widths("x", 16, 640, bottleneck_width_ratio=1.5)


def test_kv_cache_and_flops_follow_the_widths():
    shape = dict(vocab_size=100, block_size=4096, n_layer=16, n_embd=640, n_head=16)
    with torch.device("meta"):
        vw = build_model("variable_width", **shape, width_schedule="x")
        base = GPT(GPTConfig(**shape))
    assert vw.kv_cache_bytes_per_token() == 2 * 2 * sum(PAPER_200M)
    assert vw.kv_cache_bytes_per_token() / base.kv_cache_bytes_per_token() == 0.9
    assert vw.flops_per_token() < base.flops_per_token()


@pytest.mark.parametrize("expansion", ["carry", "project"])
def test_flops_per_token_agree_with_flop_counter(expansion):
    model = tiny_vw([64, 32, 48, 64], expansion, tie_embeddings=False)
    idx = torch.randint(50, (2, 32))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx, idx)
    measured = counter.get_total_flops() / idx.numel()
    assert abs(measured - model.flops_per_token(32)) / measured < 0.02


@pytest.mark.parametrize("expansion", ["carry", "zero", "project"])
def test_causal_and_backward_works(expansion):
    model = tiny_vw([64, 32, 48, 64], expansion)
    assert_causal(model, vocab_size=50, t=20, batch=1)
    idx = torch.randint(50, (1, 32))
    _, loss = model.train()(idx, idx.roll(-1, dims=1))
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    assert model.blocks[1].attn.attn.qkv_proj.weight.grad.abs().sum() > 0


def test_tiny_x_former_overfits_one_batch():
    model = tiny_vw([64, 32, 16, 64], vocab_size=20)
    assert overfit_loss(model, vocab_size=20) < 0.1  # from ln(20) = 3.0


def test_bad_widths_give_errors_that_say_what_to_do():
    with pytest.raises(ValueError, match="multiple of 2 \\* n_head"):
        tiny_vw([64, 30])
    with pytest.raises(ValueError, match="one width per layer"):
        build_model("variable_width", n_layer=3, n_embd=32, n_head=2, layer_widths=[32, 32])
    with pytest.raises(ValueError, match="expansion"):
        tiny_vw([32, 32], "copy")
    with pytest.raises(ValueError, match="width_schedule"):
        build_model("variable_width", n_layer=4, n_embd=64, n_head=4, width_schedule="hourglass")


def test_checkpoint_round_trip_rebuilds_the_same_model(tmp_path):
    from shapelab.checkpoint import load_checkpoint, save_checkpoint
    from shapes import model_from_checkpoint
    args = dict(vocab_size=50, block_size=32, n_layer=4, n_embd=32, n_head=2,
                layer_widths=[64, 32, 48, 64], expansion="project")
    model = build_model("variable_width", **args).eval()
    save_checkpoint(dict(model=model.state_dict(), model_type="variable_width", model_args=args),
                    tmp_path / "c.pt")
    loaded = model_from_checkpoint(load_checkpoint(tmp_path / "c.pt")).eval()
    idx = torch.randint(50, (1, 32))
    assert isinstance(loaded, VariableWidthGPT)
    assert torch.equal(all_logits(model, idx), all_logits(loaded, idx))


@pytest.mark.slow
def test_compiled_x_former_matches_eager_and_trains():
    model = tiny_vw([64, 32, 48, 64])
    compiled = torch.compile(model)
    idx = torch.randint(50, (2, 32))
    torch.testing.assert_close(all_logits(compiled, idx), all_logits(model, idx), rtol=1e-4,
                               atol=1e-4)
    _, loss = compiled(idx, idx)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_command_line_prints_the_200m_shape_table():
    result = run_here("variable_width.py", "--n_layer=16", "--n_embd=640")
    assert result.returncode == 0, result.stderr
    assert f"widths: {PAPER_200M} (mean 576.0, D = 1152)" in result.stdout
    assert "Appendix A: W_end 4,128,768 unused" in result.stdout  # 7 * 1152 * (1152 - 640)
    bad = run_here("variable_width.py", "--width_schedule=hourglass")
    assert bad.returncode == 2 and "width_schedule" in bad.stderr


# The reference code's width-dependent rules (github.com/ZhaofengWu/variable-width-transformers)


def test_init_std_of_a_narrow_layer_scales_with_sqrt_d_over_w():
    """scale_init_by_width (default, as the reference trained): layer l's matrices at
    std * sqrt(d / w_l)."""
    d, widths = 256, [256, 64, 256]
    shape = dict(vocab_size=50, block_size=8, n_layer=3, n_embd=d, n_head=4, layer_widths=widths)
    torch.manual_seed(0)
    on = VariableWidthGPT(VariableWidthConfig(**shape))
    torch.manual_seed(0)
    off = VariableWidthGPT(VariableWidthConfig(**shape, scale_init_by_width=False))
    narrow_on = on.blocks[1].attn.attn.qkv_proj.weight
    narrow_off = off.blocks[1].attn.attn.qkv_proj.weight
    assert narrow_off.std().item() == pytest.approx(0.02, rel=0.03)
    assert narrow_on.std().item() == pytest.approx(0.02 * (d / 64) ** 0.5, rel=0.03)  # 0.04
    # the same draws, scaled: off is model.GPT's init bit for bit, on scales the narrow layer only
    for (name, a), b in zip(on.named_parameters(), off.parameters()):
        scaled = name.startswith("blocks.1.") and a.dim() >= 2
        assert torch.equal(a, b * 2.0 if scaled else b), name


def test_attention_multiplier_head_dim_is_q_scaled_by_rsqrt_head_dim():
    """'head_dim' (the reference's 1/head_dim) changes the logits and equals 'sqrt'
    (1/sqrt(head_dim), the default) with W_q scaled by head_dim^-1/2; refused
    with qk_norm."""
    widths = [64, 32, 64]
    torch.manual_seed(0)
    default = tiny_vw(widths).eval()
    torch.manual_seed(0)
    sqrt = tiny_vw(widths, attention_multiplier="sqrt").eval()
    torch.manual_seed(0)
    inverse = tiny_vw(widths, attention_multiplier="head_dim").eval()
    idx = torch.randint(50, (2, 32))
    with torch.no_grad():
        assert torch.equal(all_logits(default, idx), all_logits(sqrt, idx))
        assert not torch.allclose(all_logits(sqrt, idx), all_logits(inverse, idx), atol=1e-4)
        for block, spec in zip(sqrt.blocks, sqrt.config.layers):
            block.attn.attn.qkv_proj.weight[:spec.n_head * spec.head_dim] *= spec.head_dim ** -0.5
        torch.testing.assert_close(all_logits(sqrt, idx), all_logits(inverse, idx), rtol=1e-5,
                                   atol=1e-5)
    with pytest.raises(ValueError, match="qk_norm"):
        tiny_vw(widths, attention_multiplier="head_dim", qk_norm="head")
    with pytest.raises(ValueError, match="choose 'sqrt'"):
        tiny_vw(widths, attention_multiplier="1/d")
