"""workshop/did_it_learn.py: before Part 3 analyses the main job's checkpoint, one line says
whether the run learned (its val loss clearly below what token frequencies alone give)."""

import json
import sys

import numpy as np
from conftest import ROOT, run_here

from shapelab.checkpoint import save_checkpoint

sys.path.insert(0, str(ROOT / "workshop"))
from did_it_learn import LEARNED_BELOW, unigram_loss  # noqa: E402


def a_run(tmp_path, val_loss, step):
    """A checkpoint (the keys the script reads) of a run on a dataset of two tokens, 3:1."""
    data = tmp_path / "data"
    data.mkdir()
    np.array([0, 0, 0, 1] * 100, dtype=np.uint16).tofile(data / "train.bin")
    (data / "meta.json").write_text(json.dumps({"vocab_size": 2}))
    out = tmp_path / "out"
    out.mkdir()
    val_loss = float(val_loss)
    save_checkpoint(dict(config=dict(dataset="two", data_dir=str(data)), val_loss=val_loss,
                         best_val_loss=val_loss, iter_num=step), out / "ckpt.pt")
    return out


def test_the_unigram_loss_is_the_entropy_of_the_token_frequencies(tmp_path):
    a_run(tmp_path, 0.1, 10)
    expected = -(0.75 * np.log(0.75) + 0.25 * np.log(0.25))
    assert abs(unigram_loss(tmp_path / "data" / "train.bin") - expected) < 1e-12


def test_a_run_that_learned_nothing_is_one_line_with_what_to_do(tmp_path):
    floor = -(0.75 * np.log(0.75) + 0.25 * np.log(0.25))
    done = run_here("workshop/did_it_learn.py", a_run(tmp_path, 0.95 * floor, 15))
    assert done.returncode == 1 and len(done.stdout.splitlines()) == 1, done
    assert done.stdout.startswith("did not learn yet: ") and "--init_from=resume" in done.stdout
    assert f"at step 15, against {floor:.2f}" in done.stdout


def test_a_run_that_learned_says_so(tmp_path):
    floor = -(0.75 * np.log(0.75) + 0.25 * np.log(0.25))
    done = run_here("workshop/did_it_learn.py", a_run(tmp_path, 0.99 * LEARNED_BELOW * floor, 900))
    assert done.returncode == 0 and done.stdout.startswith("learned: "), done


def test_no_checkpoint_is_one_line(tmp_path):
    done = run_here("workshop/did_it_learn.py", tmp_path)
    assert done.returncode == 1 and done.stderr.startswith("error: no checkpoint at "), done
    assert len(done.stderr.strip().splitlines()) == 1
