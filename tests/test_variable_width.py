"""The ><former: constant widths are the plain GPT, the stream of eq. (1), Appendix A's widths
(the paper's 200M shape and Table 2), the reference code's width rules."""

import pytest
import torch
import torch.nn.functional as F

from conftest import all_logits, tiny_config
from model import GPT, GPTConfig
from shapes import build_model
from variable_width import VariableWidthConfig, VariableWidthGPT, param_summary, solve_widths

PAPER_200M = [1152, 960, 832, 704, 608, 512, 448, 352, 320, 256, 224, 192, 288, 480, 736, 1152]


def tiny_vw(widths, **overrides):
    return build_model("variable_width", **{**dict(
        vocab_size=50, block_size=32, n_layer=len(widths), n_embd=32, n_head=2,
        layer_widths=widths), **overrides})


def test_constant_widths_give_exactly_the_plain_gpt():
    torch.manual_seed(3)
    plain = GPT(tiny_config(tie_embeddings=False)).eval()
    torch.manual_seed(3)
    vw = VariableWidthGPT(VariableWidthConfig(vocab_size=50, block_size=32, n_layer=2, n_embd=64,
                                              n_head=4, tie_embeddings=False,
                                              width_schedule="constant")).eval()
    idx = torch.randint(50, (2, 32))
    assert torch.equal(all_logits(plain, idx), all_logits(vw, idx))


def test_each_layer_reads_every_coordinate_from_the_last_layer_that_wrote_it():
    """eq. (1), coordinate by coordinate: the embedding counts as width d, else 0."""
    widths, d = [32, 64, 32, 48, 96], 32
    model = tiny_vw(widths).eval()
    R = [model.stream_input(torch.randint(50, (2, 16)))]
    for l in range(len(widths)):
        R.append(model.layer_step(l, R[-1]))
    outputs = [R[0]]
    for l, w in enumerate(widths):
        cols = []
        for i in range(w):
            writers = [j for j in range(l) if widths[j] > i]
            cols.append(outputs[writers[-1] + 1][..., i] if writers else
                        (R[0][..., i] if i < d else torch.zeros_like(R[0][..., 0])))
        out = model.blocks[l](torch.stack(cols, dim=-1))
        outputs.append(F.pad(out, (0, 96 - w)))
        assert torch.equal(out, R[l + 1][..., :w])


def test_the_solver_gives_the_papers_200m_widths_and_matches_its_parameters():
    widths, info = solve_widths("x", 16, 640)
    assert widths == PAPER_200M and abs(info["rate"] - 0.85004) < 1e-5
    shape = dict(vocab_size=100277, block_size=4096, n_layer=16, n_embd=640, n_head=16,
                 tie_embeddings=False)
    with torch.device("meta"):
        vw, base = VariableWidthGPT(VariableWidthConfig(**shape)), GPT(GPTConfig(**shape))
    mine, theirs = param_summary(vw), param_summary(base)
    assert mine["endpoint"] == 7 * 1152 * (1152 - 640)  # W_end = (3 + E) d_bar (d_bar - d)
    assert abs(mine["matched"] / theirs["matched"] - 1) < 0.01
    assert vw.kv_cache_bytes_per_token() / base.kv_cache_bytes_per_token() == 0.9


@pytest.mark.parametrize("n_layer, n_embd, avg", [(24, 960, 855), (32, 1280, 1145),
                                                  (40, 1600, 1426)])
def test_the_solver_gives_table_2s_average_widths(n_layer, n_embd, avg):
    assert round(sum(solve_widths("x", n_layer, n_embd)[0]) / n_layer) == avg


def test_a_bottleneck_out_of_reach_is_one_line():
    with pytest.raises(ValueError, match="out of reach"):
        solve_widths("x", 16, 640, bottleneck_width_ratio=1.5)


def test_the_reference_codes_init_scales_each_layer_by_its_width():
    shape = dict(vocab_size=50, block_size=8, n_layer=3, n_embd=256, n_head=4,
                 layer_widths=[256, 64, 256])
    torch.manual_seed(0)
    on = VariableWidthGPT(VariableWidthConfig(**shape))
    torch.manual_seed(0)
    off = VariableWidthGPT(VariableWidthConfig(**shape, scale_init_by_width=False))
    for (name, a), b in zip(on.named_parameters(), off.parameters()):  # sqrt(256 / 64) = 2
        assert torch.equal(a, b * 2.0 if name.startswith("blocks.1.") and a.dim() >= 2 else b)


@pytest.mark.parametrize("kw, match", [
    (dict(layer_widths=[64, 30]), "multiple of 2 \\* n_head"),
    (dict(layer_widths=[32, 32], n_layer=3), "give one per layer"),
    (dict(layer_widths=[], n_layer=4, width_schedule="hourglass"), "width_schedule")])
def test_bad_settings_are_one_line_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        tiny_vw(kw.pop("layer_widths"), **kw)
