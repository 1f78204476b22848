"""Exercise (Part 5): replace the image MLP's frozen random W_in by a learned one.

1. Make build() give the model a trainable W_in that starts from the frozen random one: replace
   model.lift with an InputProjection whose weight is an nn.Parameter (read mlp_hourglass.py).
2. Set TRAINABLE_PARAMS by hand from P = d_x d_z + 2 L d_z d_h + d_z d_out.

Check:  python tests/workshop/check.py mlp_exercise
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mlp_hourglass
from shapelab.image_tasks import get_task

TRAINABLE_PARAMS = 0  # TODO


def build():
    """The mnist_denoise ImageMLP, d_z = 1024, d_h = 32, L = 2 - with a learned W_in."""
    task = get_task("mnist_denoise")
    model = mlp_hourglass.image_mlp(task, latent_dim=1024, hidden_dim=32, n_blocks=2)
    return model  # TODO: a learned W_in
