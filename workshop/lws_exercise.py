"""Exercise (Part 4, layer-wise scaling): a new schedule shape, the "valley", and its match.

The paper's crown is small - large - small. Build its upside-down cousin, the valley: large FFNs
at both ends, the smallest FFN in the middle layer, a straight line on each side, no framing.

What to change: `valley_shape()` below. Today it returns the isotropic baseline. Make it return
lws.LWSConfig keyword arguments of a 9-layer model on CPU_BASE whose FFN widths fall from the
first layer to the middle one (layer 5 of 9) and rise again to the last, with the attention
following the same valley, and whose non-embedding parameter count is matched to the baseline's
by lws.match_params (read it in lws.py: it scales the FFN multipliers by bisection).
Hints: a 3-value schedule [start, middle, end] is a crown (lws.interpolate); match_params takes
`tolerance` - 1e-2 is plenty here and keeps it to a few seconds.

Check:  python tests/workshop/check.py lws_exercise
It passes when the FFN widths make a valley with its minimum in the middle layer and the count is
within 1.5% of the baseline's (the FFN widths move in steps of 32, so the match cannot be exact).
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments")]  # the repo root, experiments/lws_tables.py
import lws  # noqa: E402,F401  (you will need it)
from lws_tables import CPU_BASE, CPU_BASELINE  # noqa: E402  (the CPU comparison's shapes)

BASELINE = {**CPU_BASE, **CPU_BASELINE}  # 9 layers, d = 128, beta = 2.5, alpha = 0.75 everywhere


def valley_shape():
    """LWSConfig keyword arguments of the matched valley."""
    variant = dict(BASELINE)  # TODO: a valley: ffn_scalars and qkv_scalars [start, middle, end]
    return variant  # TODO: match it to BASELINE with lws.match_params, return the matched kwargs
