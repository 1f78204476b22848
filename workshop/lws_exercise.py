"""Exercise (Part 4): the "valley", a crown upside down: large FFNs at both ends, the smallest in
the middle layer.

Make `valley_shape()` return LWSConfig keyword arguments of a 9-layer valley (FFN and attention)
on CPU_BASE, its non-embedding count matched to BASELINE's with lws.match_params
(tolerance=1e-2 keeps it to seconds). A 3-value schedule [start, middle, end] is a crown.

Check:  python tests/workshop/check.py lws_exercise
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments")]
import lws  # noqa: F401 (you will need it)
from lws_tables import CPU_BASE, CPU_BASELINE

BASELINE = {**CPU_BASE, **CPU_BASELINE}


def valley_shape():
    """LWSConfig keyword arguments of the matched valley."""
    variant = dict(BASELINE)  # TODO: a valley
    return variant  # TODO: matched
