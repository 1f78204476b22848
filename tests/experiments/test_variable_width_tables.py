"""experiments/variable_width_tables.py: the ><former against its constant width (Appendix A's
solver, parameters, FLOPs, KV cache), from the command line or a train.py config file."""

import importlib.util

import pytest

from conftest import ROOT, run_here

PAPER_200M = [1152, 960, 832, 704, 608, 512, 448, 352, 320, 256, 224, 192, 288, 480, 736, 1152]
SCRIPT = ROOT / "experiments" / "variable_width_tables.py"
spec = importlib.util.spec_from_file_location("variable_width_tables", SCRIPT)
tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tables)


def test_command_line_prints_the_200m_table_against_the_constant_width():
    result = run_here(SCRIPT, "--n_layer=16", "--n_embd=640")
    assert result.returncode == 0, result.stderr
    assert f"widths: {PAPER_200M}" in result.stdout and "endpoint width 1146.80" in result.stdout
    kv_row = next(line for line in result.stdout.splitlines()
                  if line.startswith("KV cache bytes/token"))
    assert kv_row.split()[-3:] == ["36,864.0", "40,960.0", "0.9000"]
    matched = next(line for line in result.stdout.splitlines() if line.startswith("matched params"))
    assert matched.split()[-1] == "1.0028"  # Appendix A's match, within 0.3%


def test_a_bad_schedule_is_an_error_that_names_it():
    with pytest.raises(ValueError, match="width_schedule"):
        tables.report(tables.read_args(["--width_schedule=hourglass"]))


def test_a_train_config_file_gives_its_cpu_shapes(tmp_path):
    """The CPU config's model_args (x, width_multiple 8) on its 6 x 128 shape, its vocabulary
    from a prepared dataset's meta.json."""
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
