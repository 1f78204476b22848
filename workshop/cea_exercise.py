"""Exercise (Part 3): move CEA's outer ratio and measure the FFN's contribution ratio yourself.

1. Set OUTER_RATIO to 0.5: half of the FFN width W moves inside attention.
2. Make ffn_contribution() return the FFN's Token Prediction contribution ratio (section 4.2.2)
   with experiments/cea_contribution.py: sublayer_representations, token_prediction_accuracies
   (min_count=50) and contribution_ratio's 'ffn_ratio'.

Check:  python tests/workshop/check.py cea_exercise
It trains build()'s model for 150 steps and prints your ratio. Run it again with OUTER_RATIO at 1.0
and 0.125 and compare: at this size the ratio moves more between runs than with rho.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments")]
import cea
import cea_contribution  # noqa: F401 (you will need it)

OUTER_RATIO = 1.0  # TODO: 0.5


def build(vocab_size):
    """A tiny FFN-Wider (W = 32 d) GPT with the Outer/Inner split OUTER_RATIO."""
    return cea.CEAGPT(cea.CEAConfig(vocab_size=vocab_size, block_size=64, n_layer=2, n_head=2,
                                    n_embd=32, ffn_width_ratio=32, outer_ratio=OUTER_RATIO))


def ffn_contribution(model, idx, targets):
    """The FFN's Token Prediction contribution ratio of `model` on idx (B, T) -> targets (B, T)."""
    return 0.0  # TODO
