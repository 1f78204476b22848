"""experiments/cea_outer_ratio_sweep.py: the vanilla run sets the target loss, every outer ratio
trains
until it reaches it (train.py's stop_val_loss), the analysis rows, the plot, and resuming skips
finished runs."""

import json
import sys

import pytest

from conftest import ROOT
from shapelab.checkpoint import load_checkpoint

sys.path.insert(0, str(ROOT / "experiments"))
import cea_contribution  # noqa: E402
import cea_outer_ratio_sweep as sweep  # noqa: E402

TINY_TRAIN = (
    "--dtype=float32 --n_layer=1 --n_embd=16 --n_head=2 --block_size=16 --batch_size=4 "
    "--eval_iters=2 "
    "--eval_interval=2 --log_interval=1 --warmup_iters=1 --learning_rate=1e-2"
)


def train_here(monkeypatch):
    """The sweep's train.py command lines run in this process (conftest.run_here), their output
    into the log file the sweep opened: what is tested is the sweep, not the interpreter's start."""
    import subprocess
    from types import SimpleNamespace

    from conftest import run_here

    def run(command, stdout, stderr, cwd):
        assert command[0] == sys.executable and command[1].endswith("train.py") and cwd == ROOT
        done = run_here(*command[1:])
        stdout.write(done.stdout + done.stderr)
        return done
    monkeypatch.setattr(sweep, "subprocess", SimpleNamespace(run=run, STDOUT=subprocess.STDOUT))


def test_the_sweep_trains_to_the_vanillas_loss_analyses_plots_and_resumes(
    char_dataset, tmp_path, monkeypatch, capsys
):
    train_here(monkeypatch)
    monkeypatch.setattr(
        cea_contribution, "ood_texts", lambda: {"speech": "Speak, speak. Hear me. " * 20}
    )
    root, plot = tmp_path / "sweep", tmp_path / "sweep.png"
    argv = [
        f"--out_root={root}",
        "--ratios=1.0,0.0",
        "--vanilla_iters=6",
        "--max_iters=8",
        f"--plot={plot}",
        f"--train_args={TINY_TRAIN} --data_dir={char_dataset}",
        "--n_batches=2",
        "--batch_size=8",
        "--min_count=5",
        "--ood_windows=4",
        "--mi_clusters=4",
        f"--depth_plot={tmp_path / 'depth.png'}",
    ]
    vanilla, rows = sweep.main(argv)
    target = [
        json.loads(l)
        for l in (root / "vanilla/metrics.jsonl").read_text().splitlines()
        if "val_loss" in l
    ][-1]
    assert (
        load_checkpoint(root / "vanilla/ckpt.pt")["iter_num"] == 6
        and vanilla["val_loss"] == target["val_loss"]
    )
    assert [r["name"] for r in rows] == ["rho1", "rho0"] and [r["outer_ratio"] for r in rows] == [
        1.0,
        0.0,
    ]
    for r in rows:
        ckpt = load_checkpoint(root / r["name"] / "ckpt.pt")
        assert ckpt["config"]["stop_val_loss"] == pytest.approx(target["val_loss"])
        assert (
            ckpt["model_args"]["outer_ratio"] == r["outer_ratio"]
            and ckpt["model_args"]["ffn_width_ratio"] == 32
        )
        assert r["reached"] == (r["val_loss"] <= target["val_loss"])
        assert r["reached"] or ckpt["iter_num"] == 8  # it stops at the target, or at max_iters
        assert set(r["ood"]) == {"speech"} and r["ood_loss"] > 0 and 0 <= r["mi"][0]
    assert (
        len((root / "results.jsonl").read_text().splitlines()) == 3 and plot.stat().st_size > 1000
    )
    assert (tmp_path / "depth.png").stat().st_size > 1000
    logs = {r["name"]: (root / r["name"] / "metrics.jsonl").read_text() for r in rows}
    capsys.readouterr()
    analysed = {
        name: (root / name / "analysis.json").stat().st_mtime_ns
        for name in ("vanilla", "rho1", "rho0")
    }
    _, again = sweep.main(argv)  # a second call trains nothing and reuses the analysis
    assert capsys.readouterr().out.count("done, skipped") == 3
    assert [r["ffn_ratio"] for r in again] == [r["ffn_ratio"] for r in rows]
    assert analysed == {
        name: (root / name / "analysis.json").stat().st_mtime_ns for name in analysed
    }
    assert logs == {name: (root / name / "metrics.jsonl").read_text() for name in logs}


def test_bad_ratios_say_what_to_do(tmp_path):
    with pytest.raises(SystemExit, match="--ratios="):
        sweep.main([f"--out_root={tmp_path}", "--ratios=1.5"])
    with pytest.raises(SystemExit, match="--target_loss"):
        sweep.main([f"--out_root={tmp_path}", "--ratios=0.5", "--train=False"])


def test_a_run_killed_before_its_first_checkpoint_starts_again_clean(char_dataset, tmp_path,
                                                                     monkeypatch):
    train_here(monkeypatch)
    run_dir = tmp_path / "rho1"
    run_dir.mkdir()
    # left by a run killed at step 0
    (run_dir / "metrics.jsonl").write_text('{"iter": 0, "loss": 9.0}\n')
    sweep.train(
        run_dir,
        "config/cea_paper_small_wider.py",
        [*TINY_TRAIN.split(), f"--data_dir={char_dataset}"],
        max_iters=2,
    )
    assert load_checkpoint(run_dir / "ckpt.pt")["iter_num"] == 2
    assert '"loss": 9.0' not in (run_dir / "metrics.jsonl").read_text()
