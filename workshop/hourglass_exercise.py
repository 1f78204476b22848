"""Exercise (Part 1, hourglass FFN): an hourglass with K = 2 sub-blocks at the main job's budget.

The main job (`python train.py`) trains a plain GPT: 4 layers, d = 128, 4 heads, SwiGLU hidden 512.
Give the same parameter budget to an hourglass model with K = 2 wide-narrow-wide sub-blocks per FFN
slot and a bottleneck d_h of about 0.4 d: the parameters the narrow FFN saves buy a wider residual
stream (and so more attention).

What to change: `hourglass_k2()` below. Today it returns the baseline itself (K = 1). Make it return
hourglass.HourglassConfig keyword arguments of the matched K = 2 shape - read hourglass.py's
match_baseline (the paper's rows come out of it) and use it.
Then answer in ATTENTION_SHARE: the fraction of the matched model's budget (model.budget()) that
its attention sublayers hold, to two decimals (the baseline's is 0.25: 4 d^2 of 16 d^2 per layer).

Check:  python tests/workshop/check.py hourglass_exercise
It passes when K = 2, d_h < d (an hourglass), d is a multiple of 2 x heads, the budget is within
0.5% of the baseline's, and ATTENTION_SHARE is right to two decimals.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root
import hourglass  # noqa: E402,F401  (you will need it)

# the main job's GPT (65: Tiny Shakespeare's characters; the offline data has 84, the same shape)
BASELINE = dict(vocab_size=65, block_size=128, n_layer=4, n_head=4, n_embd=128)

ATTENTION_SHARE = 0.25  # TODO: the matched model's attention parameters / model.budget()


def hourglass_k2():
    """HourglassConfig keyword arguments: K = 2, d_h / d ~ 0.4, matched to BASELINE."""
    return dict(BASELINE, n_sub_blocks=1)  # TODO
