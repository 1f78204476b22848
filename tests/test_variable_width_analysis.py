"""experiments/variable_width_analysis.py: matrix entropy (eq. 2), the logit lens (sec. 4.3), and
the command that writes both plots from checkpoints."""

import importlib.util
import subprocess
import sys

import pytest
import torch

from checkpoint import save_checkpoint
from conftest import ROOT, all_logits, tiny_config
from model import GPT
from variable_width import build_model

SCRIPT = ROOT / "experiments" / "variable_width_analysis.py"
spec = importlib.util.spec_from_file_location("variable_width_analysis", SCRIPT)
analysis = importlib.util.module_from_spec(spec)
spec.loader.exec_module(analysis)


def tiny_vw(widths):
    return build_model(vocab_size=50, block_size=32, n_layer=len(widths), n_embd=32, n_head=2, layer_widths=widths)


def test_normalized_matrix_entropy_is_one_for_even_directions_and_zero_for_rank_one():
    assert abs(analysis.normalized_matrix_entropy(torch.eye(8)) - 1.0) < 1e-9  # all directions used evenly
    assert analysis.normalized_matrix_entropy(torch.outer(torch.randn(10), torch.randn(6))) == 0.0  # rank 1
    skewed = torch.diag(torch.tensor([10.0, 1.0, 1.0, 1.0]))
    assert 0 < analysis.normalized_matrix_entropy(skewed) < 1


def test_matrix_entropy_and_logit_lens_have_one_value_per_layer():
    model = tiny_vw([64, 32, 48, 64])
    batches = [(torch.randint(50, (2, 16)), torch.randint(50, (2, 16))) for _ in range(2)]
    entropy = analysis.matrix_entropy_per_layer(model, batches)
    lens = analysis.logit_lens(model, batches)
    assert len(entropy) == 5 and all(0 <= e <= 1 for e in entropy)
    assert len(lens["target_logprob"]) == 5 and lens["sym_kl"][0] == 0 and all(k > 0 for k in lens["sym_kl"][1:])
    assert [s.shape[-1] for s in analysis.hidden_states(model, batches[0][0])] == [64] * 5  # the whole wide stream


@pytest.mark.parametrize("kind", ["x_former", "plain_gpt"])
def test_last_layer_of_the_logit_lens_is_the_model_itself(kind):
    model = tiny_vw([64, 32, 48, 64]) if kind == "x_former" else GPT(tiny_config())
    batches = [(torch.randint(50, (2, 16)), torch.randint(50, (2, 16)))]
    idx, targets = batches[0]
    logp = torch.log_softmax(all_logits(model.eval(), idx), -1)
    final = analysis.logit_lens(model, batches)["target_logprob"][-1]
    assert abs(final - logp.gather(-1, targets.unsqueeze(-1)).mean().item()) < 1e-5


def save_tiny_runs(tmp_path):
    runs = {"const": dict(layer_widths=[32, 32, 32]), "x": dict(layer_widths=[64, 16, 64])}
    for name, extra in runs.items():
        args = dict(vocab_size=64, block_size=16, n_layer=3, n_embd=32, n_head=2, **extra)
        (tmp_path / name).mkdir()
        save_checkpoint(dict(model=build_model(**args).state_dict(), model_type="variable_width", model_args=args),
                        tmp_path / name / "ckpt.pt")
    return [str(tmp_path / name) for name in runs]


def test_analyze_checkpoints_saves_both_plots(tmp_path, char_dataset):
    out_dirs = save_tiny_runs(tmp_path)
    results = analysis.analyze_checkpoints(out_dirs, char_dataset, n_batches=1, batch_size=2,
                                           png_prefix=str(tmp_path / "vw"))
    assert (tmp_path / "vw_entropy.png").stat().st_size > 0 and (tmp_path / "vw_logit_lens.png").stat().st_size > 0
    assert all(len(r["matrix_entropy"]) == 4 and len(r["entropy"]) == 4 for r in results.values())


def test_command_line_prints_the_numbers_and_writes_the_plots(tmp_path, char_dataset):
    out_dirs = save_tiny_runs(tmp_path)
    result = subprocess.run([sys.executable, str(SCRIPT), f"--out_dirs={','.join(out_dirs)}",
                             f"--data_dir={char_dataset}", "--n_batches=1", "--batch_size=2",
                             f"--png_prefix={tmp_path / 'cli'}"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("matrix_entropy") == 2 and "sym_kl" in result.stdout
    assert (tmp_path / "cli_entropy.png").is_file() and (tmp_path / "cli_logit_lens.png").is_file()
    bad = subprocess.run([sys.executable, str(SCRIPT), "--out_dir=x"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "out_dirs" in bad.stderr  # a typo names the right key
