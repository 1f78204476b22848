"""compare.py end to end on a tiny dataset: it trains every asked-for shape through train.py,
writes the table and the plot, and an interrupted comparison resumes to the same results."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT

TINY = ["--n_layer=3", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
        "--eval_iters=2", "--width_multiple=4", "--ffn_multiple=8",
        "--models=GPT,hourglass+><former", "--dtype=float32"]


def compare(out_dir, data_dir, *extra, wait=True):
    command = [sys.executable, str(ROOT / "compare.py"), *TINY, f"--data_dir={data_dir}",
               f"--out_dir={out_dir}", *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if not wait:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)


def losses(out_dir):
    """Everything in results.json except the speed measurements."""
    results = json.loads((out_dir / "results.json").read_text())["results"]
    return [(r["model"], r["seed"], r["val_loss"], r["train_loss"], r["tokens"]) for r in results]


def test_compare_writes_table_and_plot(tmp_path, char_dataset):
    out = tmp_path / "cmp"
    done = compare(out, char_dataset, "--max_iters=20", "--eval_interval=10", "--seeds=1,2")
    assert done.returncode == 0, done.stdout + done.stderr
    table = (out / "results.md").read_text()
    # +-: the spread over 2 seeds
    assert "| GPT |" in table and "| hourglass+><former |" in table and "+-" in table
    assert (out / "val_loss.png").stat().st_size > 10_000
    assert {p.name for p in out.iterdir()} >= {"gpt-s1", "gpt-s2", "hourglass-xformer-s1",
                                               "hourglass-xformer-s2"}
    assert len(losses(out)) == 4
    # the composed model (hourglass FFNs in a ><former) samples from its checkpoint like any other
    sample = subprocess.run([sys.executable, str(ROOT / "sample.py"),
                             f"--out_dir={out / 'hourglass-xformer-s1'}", "--start=All:",
                             "--num_samples=1", "--max_new_tokens=20"], cwd=ROOT,
                            capture_output=True, text=True)
    assert sample.returncode == 0 and sample.stdout.startswith("composed from"), (
        sample.stdout + sample.stderr)
    # a finished comparison is not retrained: the rerun only rebuilds the table
    again = compare(out, char_dataset, "--max_iters=20", "--eval_interval=10", "--seeds=1,2")
    assert again.stdout.count("finished before, skipping") == 4
    # other settings into the same folder are refused
    changed = compare(out, char_dataset, "--max_iters=30", "--eval_interval=10", "--seeds=1,2")
    assert changed.returncode != 0 and "new --out_dir" in changed.stdout + changed.stderr


def test_interrupted_compare_resumes_to_the_same_results(tmp_path, char_dataset):
    args = ("--max_iters=300", "--eval_interval=20")
    straight = compare(tmp_path / "straight", char_dataset, *args)
    assert straight.returncode == 0, straight.stdout + straight.stderr

    out = tmp_path / "interrupted"
    process = compare(out, char_dataset, *args, wait=False)
    checkpoint = out / "hourglass-xformer-s1337" / "ckpt.pt"  # the second model's first checkpoint
    deadline = time.time() + 120
    while not checkpoint.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: compare.py and its train.py
    process.communicate(timeout=60)
    if (out / "hourglass-xformer-s1337" / "result.json").exists():
        pytest.fail("the second run finished before it could be interrupted: raise max_iters")
    assert (out / "gpt-s1337" / "result.json").exists()

    resumed = compare(out, char_dataset, *args)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "finished before, skipping" in resumed.stdout and "resuming from" in resumed.stdout
    assert losses(out) == losses(tmp_path / "straight")


def test_missing_dataset_is_prepared_or_explained(tmp_path):
    from dataset import find_dataset  # (what compare.py calls before it matches the shapes)
    with pytest.raises(SystemExit, match="not prepared.*prepare.py"):
        find_dataset("tinystories", str(tmp_path / "nothing-here"))


def test_the_plot_shows_every_evaluation_of_a_short_run(tmp_path):
    """A 3-evaluation run: the y-axis must hold all three points (it once took its limits from
    the third evaluation, the last, and the curves fell off the plot)."""
    import compare

    def curve(losses):
        return [dict(iter=i, tokens=1000 * i, val_loss=v, elapsed_s=10.0 * i)
                for i, v in enumerate(losses)]

    results = {("GPT", 1): dict(curve=curve([4.2, 2.3, 2.2126])),
               ("hourglass", 1): dict(curve=curve([4.2, 2.4, 2.2147]))}
    low, high = compare.plot_curves(["GPT", "hourglass"], results, [1], tmp_path / "p.png", "t")
    assert low <= 2.2126 and high >= 4.2
