"""experiments/cea_outer_ratio_sweep.py: the vanilla run sets the target loss, every outer ratio
trains until it reaches it, the analysis rows and plots, and the same command again trains nothing
twice."""

import json
import sys

import pytest

from conftest import ROOT
from shapelab.checkpoint import load_checkpoint

sys.path.insert(0, str(ROOT / "experiments"))
import cea_contribution
import cea_outer_ratio_sweep as sweep

TINY_TRAIN = ("--dtype=float32 --n_layer=1 --n_embd=16 --n_head=2 --block_size=16 --batch_size=4 "
              "--eval_iters=2 --eval_interval=2 --log_interval=1 --warmup_iters=1 "
              "--learning_rate=1e-2")


def train_here(monkeypatch):
    """The sweep's train.py command lines run in this process, their output into its log."""
    import subprocess
    from types import SimpleNamespace

    from conftest import run_here

    def run(command, stdout, stderr, cwd):
        done = run_here(*command[1:])
        stdout.write(done.stdout + done.stderr)
        return done
    monkeypatch.setattr(sweep, "subprocess", SimpleNamespace(run=run, STDOUT=subprocess.STDOUT))


def test_the_sweep_trains_to_the_vanillas_loss_analyses_plots_and_resumes(
        char_dataset, tmp_path, monkeypatch, capsys):
    train_here(monkeypatch)
    monkeypatch.setattr(cea_contribution, "ood_texts",
                        lambda: {"speech": "Speak, speak. Hear me. " * 20})
    root, plot = tmp_path / "sweep", tmp_path / "sweep.png"
    argv = [f"--out_root={root}", "--ratios=1.0,0.0", "--vanilla_iters=6", "--max_iters=8",
            f"--plot={plot}", f"--train_args={TINY_TRAIN} --data_dir={char_dataset}",
            "--n_batches=2", "--batch_size=8", "--min_count=5", "--ood_windows=4",
            "--mi_clusters=4", f"--depth_plot={tmp_path / 'depth.png'}"]
    vanilla, rows = sweep.main(argv)
    target = [json.loads(line) for line in (root / "vanilla/metrics.jsonl").read_text()
              .splitlines() if "val_loss" in line][-1]["val_loss"]
    assert vanilla["val_loss"] == target and vanilla["iters"] == 6
    assert [(r["name"], r["outer_ratio"]) for r in rows] == [("rho1", 1.0), ("rho0", 0.0)]
    for r in rows:
        ckpt = load_checkpoint(root / r["name"] / "ckpt.pt")
        assert ckpt["config"]["stop_val_loss"] == pytest.approx(target)
        assert ckpt["model_args"]["outer_ratio"] == r["outer_ratio"]
        assert r["reached"] == (r["val_loss"] <= target)
        assert r["reached"] or ckpt["iter_num"] == 8  # it stops at the target, or at max_iters
    assert len((root / "results.jsonl").read_text().splitlines()) == 3
    assert plot.stat().st_size > 1000 and (tmp_path / "depth.png").stat().st_size > 1000
    capsys.readouterr()
    _, again = sweep.main(argv)  # trains nothing
    assert capsys.readouterr().out.count("done, skipped") == 3
    assert [r["ffn_ratio"] for r in again] == [r["ffn_ratio"] for r in rows]
    with pytest.raises(SystemExit, match="--ratios="):
        sweep.main([f"--out_root={tmp_path}", "--ratios=1.5"])


def test_a_run_killed_before_its_first_checkpoint_starts_again_clean(char_dataset, tmp_path,
                                                                     monkeypatch):
    train_here(monkeypatch)
    run_dir = tmp_path / "rho1"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text('{"iter": 0, "loss": 9.0}\n')  # killed at step 0
    sweep.train(run_dir, "config/cea_paper_small_wider.py",
                [*TINY_TRAIN.split(), f"--data_dir={char_dataset}"], max_iters=2)
    assert load_checkpoint(run_dir / "ckpt.pt")["iter_num"] == 2
    assert '"loss": 9.0' not in (run_dir / "metrics.jsonl").read_text()
