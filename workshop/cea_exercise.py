"""Exercise (Part 3, CEA): move the outer ratio and measure the FFN's contribution ratio yourself.

CEA splits one FFN width W into an Outer-FFN (the FFN sublayer, rho W) and an Inner-FFN inside
attention ((1 - rho) W). The paper measures how much of the prediction each sublayer does with the
Token Prediction contribution ratio (its section 4.2.2): nearest-class-vector accuracy after every
sublayer, each sublayer's gain over the step before, the FFN's share of all gains.

What to change, two things:
1. OUTER_RATIO: move it from 1.0 (FFN-Wider, everything outside) to 0.5 (half the width inside
   attention). build() then makes a 2-layer FFN-Wider (32x) model with that split.
2. ffn_contribution(): today it returns a placeholder. Make it return the FFN's Token Prediction
   contribution ratio of `model` on the windows `idx` (B, T) whose next tokens are `targets` (B, T),
   with experiments/cea_contribution.py's three functions (sublayer_representations,
   token_prediction_accuracies with min_count=50, contribution_ratio: its 'ffn_ratio').

Check:  python tests/workshop/check.py cea_exercise
The check compares your ratio with its own measurement, then trains build()'s model for 150 steps on
Python's own documentation (a few seconds) and prints the ratio your function measures. It passes
when your ratio is the measured one, the parameter count is still FFN-Wider's (the split moves
parameters, it adds none) and the Outer-FFN holds half of W.
Then set OUTER_RATIO to 1.0 and to 0.125 and run the check again: it prints the ratio before it
says the split is not 0.5. Compare the three. (A 2-layer model after 150 steps, not at equal loss:
the ratio swings by ~0.05-0.1 between steps and settings at this size, more than rho moves it, so
the paper's direction may not show. That spread is the lesson: the paper compares at equal loss.)
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments")]  # the repo root, cea_contribution.py
import cea  # noqa: E402
import cea_contribution  # noqa: E402,F401  (you will need it)

OUTER_RATIO = 1.0  # TODO: 0.5


def build(vocab_size):
    """A tiny FFN-Wider (W = 32 d) GPT with the Outer/Inner split OUTER_RATIO."""
    return cea.CEAGPT(cea.CEAConfig(vocab_size=vocab_size, block_size=64, n_layer=2, n_head=2,
                                    n_embd=32, ffn_width_ratio=32, outer_ratio=OUTER_RATIO))


def ffn_contribution(model, idx, targets):
    """The FFN's Token Prediction contribution ratio of `model` on idx (B, T) -> targets (B, T)."""
    return 0.0  # TODO
