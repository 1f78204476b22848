"""experiments/hourglass_tables.py: the hourglass paper's Tables 1-3 counted by hourglass.py, the
matcher finding every hourglass row from its baseline, the command line and the 113M bars."""

import math
import runpy
import sys

import pytest

from conftest import ROOT
from hourglass import HourglassConfig, HourglassGPT, match_baseline, match_ffn_at_fixed_width
from model import GPT, GPTConfig, shape_counts

TABLES = ROOT / "experiments" / "hourglass_tables.py"
sys.path.insert(0, str(TABLES.parent))
from hourglass_tables import PAPER_ROWS, paper_rows, plot_param_split


@pytest.mark.parametrize("r", paper_rows(), ids=lambda r: r["label"])
def test_parameter_counts_equal_the_papers_tables_2_and_3(r):
    assert r["attention"] == r["L"] * 4 * r["d_model"] ** 2
    assert r["ffn"] == r["L"] * r["K"] * 3 * r["d_h"] * r["d_model"]
    if r["label"].startswith("113M"):  # Table 2: every row a 113M model, its split to 1M
        assert (round(r["attention"] / 1e6), round(r["ffn"] / 1e6)) == (
            r["paper_attention_M"], r["paper_ffn_M"])
        assert abs(r["attention"] + r["ffn"] + r["norms"] - 113e6) < 0.5e6
    elif r["label"].startswith("403M hourglass"):  # its listed split is misprinted, not its total
        assert abs((r["attention"] + r["ffn"]) / 1e6 - 403) < 1
    else:  # Table 3 rounds inconsistently (268.4M -> 269M, 679.5M -> 679M)
        for ours, paper in ((r["attention"], r["paper_attention_M"]),
                            (r["ffn"], r["paper_ffn_M"])):
            assert paper in (math.floor(ours / 1e6), math.ceil(ours / 1e6))


BASELINE_OF = {"113M": (768, 12, 12), "403M": (1024, 24, 16), "906M": (1536, 24, 16),
               "1074M": (2048, 16, 16)}  # each size's conventional baseline (Table 3)


@pytest.mark.parametrize("row", [r for r in PAPER_ROWS if "hourglass" in r[0]],
                         ids=lambda r: r[0])
def test_matcher_finds_every_hourglass_shape_of_tables_2_and_3(row):
    label, d, d_h, k, n_layer, n_head, *_ = row
    base_d, base_l, base_heads = BASELINE_OF[label.split()[0]]
    baseline = dict(n_embd=base_d, n_layer=base_l, n_head=base_heads, vocab_size=50304,
                    block_size=2)
    matched = match_baseline(baseline, n_sub_blocks=k, bottleneck_ratio=d_h / d, n_layer=n_layer)
    assert (matched["n_embd"], matched["bottleneck_dim"], matched["n_layer"]) == (d, d_h, n_layer)
    target = shape_counts(GPT, GPTConfig(**baseline))["budget"]
    ours = shape_counts(HourglassGPT, HourglassConfig(**matched))["budget"]
    assert abs(ours - target) / target < 5e-4


def test_command_line_prints_every_paper_row_and_table_1s_d_h(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "argv", [str(TABLES), f"--plot={tmp_path / 'split.png'}"])
    runpy.run_path(str(TABLES), run_name="__main__")
    out = capsys.readouterr().out
    assert all(f"| {label} | {d} | {d_h} |" in out for label, d, d_h, *_ in PAPER_ROWS)
    assert (tmp_path / "split.png").exists()
    baseline = dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50304, block_size=2048)
    assert match_ffn_at_fixed_width(baseline, 8)["bottleneck_dim"] == 384  # Table 1's d_h


def test_the_113m_bars_stack_hourglass_pys_ffn_on_its_attention(tmp_path):
    rows = paper_rows()[:5]
    assert all(r["label"].startswith("113M") for r in rows)
    attention, ffn = plot_param_split(rows, tmp_path / "split.png").containers
    assert [b.get_height() for b in attention] == pytest.approx([r["attention"] / 1e6
                                                                  for r in rows])
    assert [b.get_y() for b in ffn] == pytest.approx([r["attention"] / 1e6 for r in rows])
