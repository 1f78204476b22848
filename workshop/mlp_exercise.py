"""Exercise (Part 5, image MLP): replace the frozen random W_in by a learned one.

mlp_hourglass.ImageMLP lifts the image x (d_x = 784 pixels) to a wide latent z = W_in x (eq. 2) with
a random W_in that is never trained: a buffer, not a parameter. The paper's section 4.3 asks what
training it would buy. Make the lift learnable yourself.

What to change, two things:
1. build(): today it returns the model with the frozen W_in. Give it a learned W_in that STARTS
   from the same random matrix (so a frozen and a learned run differ only in training it), e.g. by
   replacing model.lift with a module whose weight is an nn.Parameter - read InputProjection. The
   model then says "learned" by itself: model.input_proj reads which W_in it holds from model.lift.
2. TRAINABLE_PARAMS: the number of trainable parameters of your model, worked out by hand from
   P = d_x d_z + 2 L d_z d_h + d_z d_out (the paper's section 3.3 plus W_out; all matrices, no
   biases; BatchNorm without affine has no parameters).

Check:  python tests/workshop/check.py mlp_exercise
It passes when W_in is a trainable parameter that starts equal to the frozen one, the model says
it holds a learned W_in, one AdamW step on a batch moves W_in, and TRAINABLE_PARAMS equals the
model's trainable count.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root
import mlp_hourglass  # noqa: E402
from shapelab.image_tasks import get_task  # noqa: E402

TRAINABLE_PARAMS = 0  # TODO: by hand, from the formula


def build():
    """The mnist_denoise ImageMLP, d_z = 1024, d_h = 32, L = 2 - with a learned W_in."""
    task = get_task("mnist_denoise")  # d_x = d_out = 784
    # W_in frozen
    model = mlp_hourglass.image_mlp(task, latent_dim=1024, hidden_dim=32, n_blocks=2)
    return model  # TODO: a learned W_in that starts from the frozen one
