"""experiments/cea_ood_verdict.py: CEA against FFN-Wider out of distribution at equal in-domain
loss. The fit is checked on made-up rows whose answer is known; the script end to end on a tiny
comparison's runs, and a second call scores nothing again."""

import csv
import os
import subprocess
import sys

import numpy as np

from conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))
import cea_ood_verdict  # noqa: E402


def made_up(c, noise, seed=0):
    """Rows on two parallel lines ood = 1 + 0.8 in_domain (+ c for CEA), in-domain losses spread
    by rate and seed, plus Gaussian noise."""
    g = np.random.default_rng(seed)
    rows = []
    for shape in ("FFN-Wider", "CEA"):
        for lr, seed_ in ((1e-3, 1), (2e-3, 1), (4e-3, 1), (2e-3, 2), (2e-3, 3)):
            x = 1.5 + 0.1 * g.random()
            y = 1.0 + 0.8 * x + c * (shape == "CEA") + noise * g.standard_normal()
            rows.append(dict(shape=shape, lr=lr, seed=seed_, val_loss=x, in_domain=x, ood=y,
                             python_docs=y))
    return rows


def test_the_fit_finds_the_difference_at_equal_in_domain_loss():
    coef, se, df = cea_ood_verdict.equal_loss_difference(made_up(-0.05, 0.0))
    assert abs(coef[2] + 0.05) < 1e-9 and abs(coef[1] - 0.8) < 1e-9 and se < 1e-9 and df == 7
    text, (_, verdict) = cea_ood_verdict.report(made_up(-0.05, 0.005), "cmd")
    assert verdict.startswith("CEA better out of distribution by 0.0")
    text, (_, verdict) = cea_ood_verdict.report(made_up(0.0, 0.05), "cmd")
    assert verdict == "not distinguishable at this scale"
    assert "| seed | in-domain | OOD |" in text  # the seed-paired rows at the chosen rates
    text, fit = cea_ood_verdict.report(made_up(0.0, 0.05)[:6], "cmd")
    assert fit is None and "No verdict yet" in text  # one CEA run only


def test_scores_a_comparisons_runs_once(tmp_path, char_dataset):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    compare = [sys.executable, str(ROOT / "compare.py"), "--n_layer=2", "--n_embd=32",
               "--n_head=2", "--block_size=16", "--batch_size=4", "--eval_iters=1",
               "--models=FFN-Wider,CEA", "--dtype=float32", "--max_iters=4", "--eval_interval=2",
               "--learning_rates=1e-3,4e-3", "--seeds=1,2", "--jobs=2",
               f"--data_dir={char_dataset}", f"--out_dir={tmp_path / 'cmp'}"]
    done = subprocess.run(compare, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    script = [sys.executable, str(ROOT / "experiments" / "cea_ood_verdict.py"),
              str(tmp_path / "cmp"), "--windows=2", f"--out={tmp_path / 'ood'}"]
    first = subprocess.run(script, cwd=ROOT, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stdout + first.stderr
    with open(tmp_path / "ood.csv") as f:
        rows = list(csv.DictReader(f))
    first_seed = {(r["shape"], float(r["lr"])) for r in rows if r["seed"] == "1"}
    assert first_seed == {(s, lr) for s in ("CEA", "FFN-Wider") for lr in (1e-3, 4e-3)}
    assert sorted(r["shape"] for r in rows if r["seed"] == "2") == ["CEA", "FFN-Wider"]
    assert first.stdout.count("] ") == 6  # a line a run scored
    report = (tmp_path / "ood.md").read_text()
    assert "At equal in-domain loss, CEA's OOD loss minus FFN-Wider's" in report
    assert (tmp_path / "ood.png").stat().st_size > 10_000
    again = subprocess.run(script, cwd=ROOT, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.count("] ") == 0, again.stdout
    assert (tmp_path / "ood.md").read_text() == report
