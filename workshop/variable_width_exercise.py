"""Exercise (Part 2, the ><former): move the bottleneck from 3/4 of the depth to 1/4.

The paper puts the narrowest layer at l* = round(0.75 L) (Appendix A) and widens again towards the
end. Ask its solver for the mirror question: an 8-layer ><former on the constant width d = 128 whose
narrowest layer is layer 2 (1-indexed), still parameter-matched to the constant width by Appendix A.

What to change: `early_bottleneck()` below. Today it returns the paper's default placement. Make it
return VariableWidthConfig keyword arguments whose narrowest layer is layer 2 of 8. Read
variable_width.py's bottleneck_index and solve_widths to see which argument moves it; use
width_multiple=8 (at d = 128, widths rounded to multiples of 32 are too coarse for a close match).

Check:  python tests/workshop/check.py variable_width_exercise
It passes when layer 2 is the only narrowest layer, the widths fall to it and rise after it, and
Appendix A's matched count (variable_width.param_summary(model)['matched']) is within 2% of the
constant-width GPT's budget.
"""

BASELINE = dict(vocab_size=65, block_size=128, n_layer=8, n_head=4, n_embd=128)  # constant width


def early_bottleneck():
    """VariableWidthConfig keyword arguments with the bottleneck at layer 2 of 8."""
    return dict(BASELINE, width_schedule="x", width_multiple=8)  # TODO: move the bottleneck
