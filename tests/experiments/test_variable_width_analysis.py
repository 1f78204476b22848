"""experiments/variable_width_analysis.py and variable_width_tables.py: matrix entropy (eq. 2),
the logit lens (sec. 4.3), the MLP activation statistics, the command that writes the plots from
checkpoints; the ><former against its constant width (Appendix A's solver, parameters, KV cache)."""

import sys

import pytest
import torch

from shapelab.checkpoint import save_checkpoint
from shapes import build_model
from conftest import ROOT, all_logits, run_here, tiny_config
from model import GPT, default_args
from variable_width import VariableWidthConfig

sys.path.insert(0, str(ROOT / "experiments"))
import variable_width_analysis as analysis
import variable_width_tables as tables

SCRIPT = ROOT / "experiments" / "variable_width_analysis.py"
PAPER_200M = [1152, 960, 832, 704, 608, 512, 448, 352, 320, 256, 224, 192, 288, 480, 736, 1152]


def tiny_vw(widths):
    return build_model("variable_width", vocab_size=50, block_size=32, n_layer=len(widths),
                       n_embd=32, n_head=2, layer_widths=widths)


def test_normalized_matrix_entropy_is_one_for_even_directions_and_zero_for_rank_one():
    entropy = analysis.normalized_matrix_entropy
    assert abs(entropy(torch.eye(8)) - 1.0) < 1e-9  # all directions used evenly
    assert entropy(torch.outer(torch.randn(10), torch.randn(6))) == 0.0  # rank 1
    assert 0 < entropy(torch.diag(torch.tensor([10.0, 1.0, 1.0, 1.0]))) < 1


@pytest.mark.parametrize("kind", ["x_former", "plain_gpt"])
def test_a_value_per_layer_and_the_lens_last_layer_is_the_model_itself(kind):
    model = (tiny_vw([64, 32, 48, 64]) if kind == "x_former" else GPT(tiny_config())).eval()
    idx, targets = torch.randint(50, (2, 16)), torch.randint(50, (2, 16))
    lens = analysis.logit_lens(model, [(idx, targets)])
    entropy = analysis.matrix_entropy_per_layer(model, [(idx, targets)])
    assert len(entropy) == len(lens["sym_kl"]) == len(model.blocks) + 1
    assert all(0 <= e <= 1 for e in entropy) and lens["sym_kl"][0] == 0
    logp = torch.log_softmax(all_logits(model, idx), -1)
    assert lens["target_logprob"][-1] == pytest.approx(
        logp.gather(-1, targets.unsqueeze(-1)).mean().item(), abs=1e-5)
    if kind == "x_former":  # the whole wide stream
        assert [s.shape[-1] for s in analysis.hidden_states(model, idx)] == [64] * 5


def test_mlp_activation_stats_match_a_hand_computation():
    torch.manual_seed(0)
    model = tiny_vw([64, 32, 48, 64]).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8.0)  # activations of order 0.1-1, so the thresholds matter
    batches = [(torch.randint(50, (2, 16)), None) for _ in range(2)]
    captured = []  # batch by batch, layer by layer
    hooks = [b.ffn.mlp.out_proj.register_forward_pre_hook(lambda m, i: captured.append(i[0]))
             for b in model.blocks]
    stats = analysis.mlp_activation_stats(model, batches)
    for h in hooks:
        h.remove()
    for l, r in enumerate(stats):
        a = torch.cat([c.reshape(32, -1) for c in captured[l::4]]).double()  # (tokens, 4 w_l)
        assert r["density"] == pytest.approx(float((a.abs() > 0.1).double().mean()))
        assert r["utilisation"] == pytest.approx(sorted((a.abs() > 0.1).double().mean(0).tolist()))
        e = (a ** 2).sum(0)
        assert r["n_eff"] == pytest.approx(float(e.sum() ** 2 / (e ** 2).sum()))
    assert 0 < stats[0]["density"] < 1 and [r["dims"] for r in stats] == [256, 128, 192, 256]


def test_command_line_prints_the_numbers_and_writes_the_plots(tmp_path, char_dataset):
    for name, widths in (("const", [32, 32, 32]), ("x", [64, 16, 64])):
        args = dict(vocab_size=64, block_size=16, n_layer=3, n_embd=32, n_head=2,
                    layer_widths=widths)
        (tmp_path / name).mkdir()
        save_checkpoint(dict(model=build_model("variable_width", **args).state_dict(),
                             model_type="variable_width", model_args=args),
                        tmp_path / name / "ckpt.pt")
    result = run_here(SCRIPT, f"--out_dirs={tmp_path / 'const'},{tmp_path / 'x'}",
                      f"--data_dir={char_dataset}", "--n_batches=1", "--batch_size=2",
                      f"--png_prefix={tmp_path / 'cli'}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("matrix_entropy") == 2 and "sym_kl" in result.stdout
    assert all((tmp_path / f"cli_{kind}.png").stat().st_size > 0
               for kind in ("entropy", "logit_lens", "mlp"))


def kv_ratio(text):
    return next(line for line in text.splitlines() if line.startswith("KV cache")).split()[-1]


def test_the_200m_table():
    text = tables.report({**default_args(VariableWidthConfig), **tables.PAPER_200M})
    assert f"widths: {PAPER_200M}" in text and "endpoint width 1146.80" in text
    assert kv_ratio(text) == "0.9000"
    matched = next(line for line in text.splitlines() if line.startswith("matched params"))
    assert matched.split()[-1] == "1.0028"  # Appendix A's match, within 0.3%
