"""experiments/variable_width_tables.py: the ><former against its constant width (Appendix A's
solver, parameters, KV cache)."""

import sys

from conftest import ROOT
from model import default_args
from variable_width import VariableWidthConfig

sys.path.insert(0, str(ROOT / "experiments"))
import variable_width_tables as tables

PAPER_200M = [1152, 960, 832, 704, 608, 512, 448, 352, 320, 256, 224, 192, 288, 480, 736, 1152]


def kv_ratio(text):
    return next(line for line in text.splitlines() if line.startswith("KV cache")).split()[-1]


def test_the_200m_table():
    text = tables.report({**default_args(VariableWidthConfig), **tables.PAPER_200M})
    assert f"widths: {PAPER_200M}" in text and "endpoint width 1146.80" in text
    assert kv_ratio(text) == "0.9000"
    matched = next(line for line in text.splitlines() if line.startswith("matched params"))
    assert matched.split()[-1] == "1.0028"  # Appendix A's match, within 0.3%
