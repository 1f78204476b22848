"""Exercise (Part 2): move the ><former's bottleneck from 3/4 of the depth to 1/4.

Make `early_bottleneck()` return VariableWidthConfig keyword arguments of an 8-layer model whose
narrowest layer is layer 2, still matched to the constant width by Appendix A. Read
variable_width.bottleneck_index to see which argument moves it; keep width_multiple=8.

Check:  python tests/workshop/check.py variable_width_exercise
"""

BASELINE = dict(vocab_size=65, block_size=128, n_layer=8, n_head=4, n_embd=128)


def early_bottleneck():
    """VariableWidthConfig keyword arguments with the bottleneck at layer 2 of 8."""
    return dict(BASELINE, width_schedule="x", width_multiple=8)  # TODO: move the bottleneck
