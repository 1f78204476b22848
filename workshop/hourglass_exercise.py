"""Exercise (Part 1): an hourglass FFN with K = 2 sub-blocks at the main job's budget.

Make `hourglass_k2()` return HourglassConfig keyword arguments of the K = 2 shape with d_h about
0.4 d, matched to BASELINE's budget (read hourglass.match_baseline). Then set ATTENTION_SHARE to
the fraction of its budget (model.budget()) that attention holds, to two decimals.

Check:  python tests/workshop/check.py hourglass_exercise
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import hourglass  # noqa: F401 (you will need it)

BASELINE = dict(vocab_size=65, block_size=128, n_layer=4, n_head=4, n_embd=128)

ATTENTION_SHARE = 0.25  # TODO


def hourglass_k2():
    """HourglassConfig keyword arguments: K = 2, d_h / d ~ 0.4, matched to BASELINE."""
    return dict(BASELINE, n_sub_blocks=1)  # TODO
