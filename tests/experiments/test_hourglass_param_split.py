"""experiments/hourglass_param_split.py: the 113M shapes of the hourglass paper's Table 2, drawn
as stacked attention / FFN bars whose heights are hourglass.py's own counts."""

import importlib.util

import matplotlib
import pytest
from conftest import ROOT, run_here

matplotlib.use("Agg")

spec = importlib.util.spec_from_file_location(
    "hourglass_param_split", ROOT / "experiments" / "hourglass_param_split.py"
)
split = importlib.util.module_from_spec(spec)
spec.loader.exec_module(split)


def test_the_five_113m_rows_of_table_2_each_sum_to_113m():
    rows = split.rows_113m()
    assert [(r["d_model"], r["d_h"], r["K"], r["L"]) for r in rows] == [
        (768, 3072, 1, 12),
        (1176, 553, 2, 12),
        (1488, 1122, 2, 6),
        (1032, 418, 4, 12),
        (1368, 694, 4, 6),
    ]
    for r in rows:
        assert r["attention"] == 4 * r["d_model"] ** 2 * r["L"]
        assert r["ffn"] == 3 * r["K"] * r["d_h"] * r["d_model"] * r["L"]
        assert abs(r["attention"] + r["ffn"] - 113e6) < 0.6e6


def test_bars_stack_ffn_on_attention(monkeypatch, tmp_path):
    drawn = []
    real_subplots = split.plt.subplots

    def spy(*args, **kwargs):
        fig, ax = real_subplots(*args, **kwargs)
        drawn.append(ax)
        return fig, ax

    monkeypatch.setattr(split.plt, "subplots", spy)
    rows = split.rows_113m()
    split.plot_param_split(rows, tmp_path / "split.png")
    attention, ffn = drawn[0].containers
    assert [b.get_height() for b in attention] == pytest.approx(
        [r["attention"] / 1e6 for r in rows]
    )
    # stacked on attention
    assert [b.get_y() for b in ffn] == pytest.approx([r["attention"] / 1e6 for r in rows])
    assert [b.get_height() for b in ffn] == pytest.approx([r["ffn"] / 1e6 for r in rows])


def test_the_command_writes_the_figure(tmp_path):
    out = tmp_path / "split.png"
    result = run_here("experiments/hourglass_param_split.py", f"--out={out}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (
        out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        and "attention  51.1M (paper 51M)" in result.stdout
    )
