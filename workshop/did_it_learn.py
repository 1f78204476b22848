"""Did the main job learn? Part 3's ratios mean something only for a model that predicts from
context: this compares the checkpoint's val loss with the unigram entropy of its training text.

    python workshop/did_it_learn.py out
"""

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from shapelab.checkpoint import load_checkpoint
from shapelab.dataset import find_dataset

LEARNED_BELOW = 0.85  # of the unigram loss


def unigram_loss(train_bin):
    """Cross-entropy (nats a token) of predicting every token by its frequency in train_bin."""
    counts = np.bincount(np.memmap(train_bin, dtype=np.uint16, mode="r"))
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def verdict(out_dir):
    """(learned, the one line that says so) for the run in out_dir."""
    path = Path(out_dir) / "ckpt.pt"
    checkpoint = load_checkpoint(path)
    config = checkpoint["config"]
    data = find_dataset(config["dataset"], config["data_dir"], may_prepare=False)
    val_loss = checkpoint.get("val_loss", checkpoint["best_val_loss"])
    floor, step = unigram_loss(data / "train.bin"), checkpoint["iter_num"]
    said = (f"{path}: val loss {val_loss:.2f} at step {step:,}, against {floor:.2f} for a model "
            f"that knows only how often each token occurs")
    if val_loss <= LEARNED_BELOW * floor:
        return True, f"learned: {said}"
    return False, (f"did not learn yet: {said}, so Part 3's ratios would be noise. Train it on "
                   f"(python train.py --out_dir={out_dir} --init_from=resume --max_minutes=10), "
                   f"or give it a fixed length (--max_iters=1000 --overwrite=True), then run this "
                   f"again; meanwhile read the ratios docs/workshop.md quotes")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python workshop/did_it_learn.py <out_dir of the run>, e.g. out")
    try:
        learned, line = verdict(sys.argv[1])
    except FileNotFoundError as e:
        raise SystemExit(f"error: {e}") from None
    print(line)
    sys.exit(0 if learned else 1)
