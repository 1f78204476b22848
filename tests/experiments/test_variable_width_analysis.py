"""experiments/variable_width_analysis.py and variable_width_tables.py: matrix entropy (eq. 2),
the logit lens (sec. 4.3), the MLP activation statistics, the command that writes the plots from
checkpoints; the ><former against its constant width (Appendix A's solver, parameters, KV cache)."""

import importlib.util

import pytest
import torch

from shapelab.checkpoint import save_checkpoint
from shapes import build_model
from conftest import ROOT, all_logits, run_here, tiny_config
from model import GPT

SCRIPT = ROOT / "experiments" / "variable_width_analysis.py"
spec = importlib.util.spec_from_file_location("variable_width_analysis", SCRIPT)
analysis = importlib.util.module_from_spec(spec)
spec.loader.exec_module(analysis)
TABLES = ROOT / "experiments" / "variable_width_tables.py"
spec = importlib.util.spec_from_file_location("variable_width_tables", TABLES)
tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tables)
PAPER_200M = [1152, 960, 832, 704, 608, 512, 448, 352, 320, 256, 224, 192, 288, 480, 736, 1152]


def tiny_vw(widths):
    return build_model("variable_width", vocab_size=50, block_size=32, n_layer=len(widths),
                       n_embd=32, n_head=2, layer_widths=widths)


def test_normalized_matrix_entropy_is_one_for_even_directions_and_zero_for_rank_one():
    entropy = analysis.normalized_matrix_entropy
    assert abs(entropy(torch.eye(8)) - 1.0) < 1e-9  # all directions used evenly
    assert entropy(torch.outer(torch.randn(10), torch.randn(6))) == 0.0  # rank 1
    skewed = torch.diag(torch.tensor([10.0, 1.0, 1.0, 1.0]))
    assert 0 < analysis.normalized_matrix_entropy(skewed) < 1


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
    captured = {l: [] for l in range(4)}
    hooks = [b.ffn.mlp.out_proj.register_forward_pre_hook(
        lambda m, i, l=l: captured[l].append(i[0].reshape(-1, i[0].size(-1))))
        for l, b in enumerate(model.blocks)]
    stats = analysis.mlp_activation_stats(model, batches, threshold=0.1, thresholds=(0.1, 0.5))
    for h in hooks:
        h.remove()
    for l, r in enumerate(stats):
        a = torch.cat(captured[l]).double()  # (64 tokens, 4 w_l)
        assert r["dims"] == 4 * [64, 32, 48, 64][l]
        assert r["density"][0.1] == pytest.approx(float((a.abs() > 0.1).double().mean()))
        assert r["density"][0.5] <= r["density"][0.1]
        assert r["utilisation"] == pytest.approx(sorted((a.abs() > 0.1).double().mean(0).tolist()))
        e = (a ** 2).sum(0)
        assert r["n_eff"] == pytest.approx(float(e.sum() ** 2 / (e ** 2).sum()))
        assert 1 <= r["n_eff"] <= r["dims"]
        assert r["n_eff_frac"] == pytest.approx(r["n_eff"] / r["dims"])
    assert 0 < stats[0]["density"][0.1] < 1


def save_tiny_runs(tmp_path):
    runs = {"const": dict(layer_widths=[32, 32, 32]), "x": dict(layer_widths=[64, 16, 64])}
    for name, extra in runs.items():
        args = dict(vocab_size=64, block_size=16, n_layer=3, n_embd=32, n_head=2, **extra)
        (tmp_path / name).mkdir()
        model = build_model("variable_width", **args)
        save_checkpoint(dict(model=model.state_dict(), model_type="variable_width",
                             model_args=args), tmp_path / name / "ckpt.pt")
    return [str(tmp_path / name) for name in runs]


def test_command_line_prints_the_numbers_and_writes_the_plots(tmp_path, char_dataset):
    out_dirs = save_tiny_runs(tmp_path)
    result = run_here(SCRIPT, f"--out_dirs={','.join(out_dirs)}", f"--data_dir={char_dataset}",
                      "--n_batches=1", "--batch_size=2", f"--png_prefix={tmp_path / 'cli'}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("matrix_entropy") == 2 and "sym_kl" in result.stdout
    assert all((tmp_path / f"cli_{kind}.png").stat().st_size > 0
               for kind in ("entropy", "logit_lens", "mlp"))
    bad = run_here(SCRIPT, "--out_dir=x")
    assert bad.returncode != 0 and "out_dirs" in bad.stderr  # a typo names the right key


def test_command_line_prints_the_200m_table_against_the_constant_width():
    result = run_here(TABLES, "--n_layer=16", "--n_embd=640")
    assert result.returncode == 0, result.stderr
    assert f"widths: {PAPER_200M}" in result.stdout and "endpoint width 1146.80" in result.stdout
    kv_row = next(line for line in result.stdout.splitlines()
                  if line.startswith("KV cache bytes/token"))
    assert kv_row.split()[-3:] == ["36,864.0", "40,960.0", "0.9000"]
    matched = next(line for line in result.stdout.splitlines() if line.startswith("matched params"))
    assert matched.split()[-1] == "1.0028"  # Appendix A's match, within 0.3%
    with pytest.raises(ValueError, match="width_schedule"):
        tables.report(tables.read_args(["--width_schedule=hourglass"]))


def test_a_train_config_file_gives_its_cpu_shapes(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.json").write_text('{"vocab_size": 84}')
    args = tables.read_args([str(ROOT / "config" / "variable_width_shakespeare_char_x.py"),
                             f"--data_dir={data}"])
    assert args["vocab_size"] == 84 and args["width_multiple"] == 8
    text = tables.report(args)
    assert "widths: [200, 112, 64, 40, 88, 200]" in text
    kv_row = next(line for line in text.splitlines() if line.startswith("KV cache bytes/token"))
    assert kv_row.split()[-1] == f"{sum([200, 112, 64, 40, 88, 200]) / (6 * 128):.4f}"  # 0.9167
