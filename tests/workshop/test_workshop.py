"""The workshop: each exercise's check passes its reference solution (docs/workshop_solutions.md)
and fails the unsolved file and typical wrong answers; did_it_learn tells a run that learned from
one that did not; every command of docs/workshop.md runs, the training ones with tiny settings;
every reading the pages cite (`file.py: symbol`) exists."""

import ast
import functools
import json
import re
import shlex
import sys

import check
import numpy as np
import pytest
from conftest import ROOT, digit_splits, run_here, write_prepared

from shapelab.checkpoint import save_checkpoint

SOLUTIONS = dict(re.findall(r"<!-- solution: (\w+) -->\s*```python\n(.*?)```",
                            (ROOT / "docs" / "workshop_solutions.md").read_text(), re.S))


@pytest.mark.parametrize("name", check.EXERCISES)
def test_the_solution_passes_and_the_unsolved_file_fails_saying_what_to_do(name, tmp_path, capsys,
                                                                           monkeypatch):
    # CEA's check passes or fails on the same conditions after any number of training steps
    monkeypatch.setitem(check.CHECKS, "cea_exercise",
                        functools.partial(check.check_cea_exercise, steps=5))
    (tmp_path / f"{name}.py").write_text(SOLUTIONS[name])
    assert check.run(name, tmp_path / f"{name}.py") == 0, capsys.readouterr().err
    assert capsys.readouterr().out.endswith(f"solved: workshop/{name}.py passes its check\n")
    if "TODO" not in (ROOT / "workshop" / f"{name}.py").read_text():
        pytest.skip(f"workshop/{name}.py is solved in this checkout")
    assert check.run(name) == 1
    err = capsys.readouterr().err
    assert err.startswith("not solved yet: ") and "still has its TODO lines" in err, err


# (a line of the reference solution, the typical mistake in its place, what the message names)
WRONG_ANSWERS = {
    "hourglass_exercise": ("ATTENTION_SHARE = 0.61", "ATTENTION_SHARE = 0.60", "ATTENTION_SHARE"),
    "hourglass_exercise/pair": ("    return hourglass.match_baseline(",
                                "    return 0, hourglass.match_baseline(", "returned a tuple"),
    "variable_width_exercise": ("bottleneck_layer_ratio=0.25", "bottleneck_layer_ratio=0.5",
                                "narrowest"),
    "variable_width_exercise/coarse": ("width_multiple=8", "width_multiple=32", "too coarse"),
    "cea_exercise": ("min_count=50", "min_count=5", "measures"),
    "cea_exercise/unflattened": ("targets.reshape(-1)", "targets", "targets.reshape(-1)"),
    "lws_exercise": ("ffn_scalars=[4.0, 0.5, 4.0]", "ffn_scalars=[0.5, 4.0, 0.5]", "valley"),
    "lws_exercise/pair": ("    return matched\n", "    return matched, _\n", "returned a tuple"),
    "mlp_exercise": ("TRAINABLE_PARAMS = 784 * 1024 + ", "TRAINABLE_PARAMS = ", "TRAINABLE"),
    "mlp_exercise/one_word": ("n_blocks=2)  # W_in frozen",
                              "n_blocks=2, input_proj='learned')", "yourself"),
    "mlp_exercise/requires_grad": ("    model.lift = mlp_hourglass.InputProjection(frozen.weight."
                                   "size(1), frozen.weight.size(0), trainable=True)\n",
                                   "    model.lift.weight.requires_grad_(True)\n", "nn.Parameter"),
}


@pytest.mark.parametrize("case", sorted(WRONG_ANSWERS))
def test_a_typical_wrong_answer_fails_its_check_naming_the_mistake(case, tmp_path):
    name = case.split("/")[0]
    right, wrong, message = WRONG_ANSWERS[case]
    assert right in SOLUTIONS[name], f"the solution of {name} changed: update WRONG_ANSWERS"
    (tmp_path / f"{name}.py").write_text(SOLUTIONS[name].replace(right, wrong))
    with pytest.raises(AssertionError, match=re.escape(message)):
        check.CHECKS[name](check.load_module(tmp_path / f"{name}.py", f"wrong_{name}"))


@pytest.mark.parametrize("fraction,learned", [(0.99, True), (1.01, False)])
def test_did_it_learn_compares_the_val_loss_with_the_unigram_loss(tmp_path, fraction, learned):
    sys.path.insert(0, str(ROOT / "workshop"))
    from did_it_learn import LEARNED_BELOW
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    np.array([0, 0, 0, 1] * 100, dtype=np.uint16).tofile(data / "train.bin")  # tokens 3:1
    (data / "meta.json").write_text(json.dumps({"vocab_size": 2}))
    unigram = -(0.75 * np.log(0.75) + 0.25 * np.log(0.25))
    val_loss = float(fraction * LEARNED_BELOW * unigram)
    save_checkpoint(dict(config=dict(dataset="two", data_dir=str(data)), val_loss=val_loss,
                         best_val_loss=val_loss, iter_num=15), out / "ckpt.pt")
    done = run_here("workshop/did_it_learn.py", out)
    assert done.returncode == (0 if learned else 1) and len(done.stdout.splitlines()) == 1, done
    said = "learned: " if learned else "did not learn yet: "
    assert done.stdout.startswith(said) and f"against {unigram:.2f}" in done.stdout, done.stdout
    assert learned or "--init_from=resume" in done.stdout


TINY = ("--data_dir={data} --out_dir={tmp}/out --max_iters=2 --lr_decay_iters=2 --warmup_iters=1 "
        "--eval_interval=1 --eval_iters=1 --batch_size=2 --block_size=32 --sample_tokens=5 "
        "--dtype=float32")
# command prefix -> the settings appended (the last of a key wins), or None: not run here
RULES = {
    "python -m venv ": None, "pip install ": None, "export ": None,
    "python data/shakespeare_char/prepare.py": None,  # downloads
    "python tests/workshop/check.py ": None,  # the checks: tested above
    "python workshop/did_it_learn.py ": None,  # tested above
    "python train.py": TINY,
    "python sample.py": "--out_dir={tmp}/out --num_samples=1 --max_new_tokens=5 --start=First",
    "python model.py": "", "python hourglass.py": "", "python variable_width.py": "",
    "python experiments/lws_tables.py": "",
    "python experiments/cea_contribution.py": "--out_dirs={tmp}/out --plot={tmp}/cea.png "
                                              "--n_batches=2 --batch_size=4 --min_count=5",
    "python shapes.py": "",
    "python compare.py": "settings only",  # minutes of training: tests/test_compare.py runs it
    "python -c ": "",
}


def plan_commands():
    """Every command of docs/workshop.md: a ```bash block's lines, a ```python block whole."""
    found = []
    for lang, body in re.findall(r"^```(bash|python)\n(.*?)^```", (ROOT / "docs" / "workshop.md")
                                 .read_text(), re.S | re.M):
        lines = [re.sub(r"\s+#.*$", "", line).strip() for line in body.splitlines()]
        found += [f"python -c {body}"] if lang == "python" else [x for x in lines if x]
    return found


def test_every_command_of_the_plan_runs(tmp_path, char_dataset):
    values = dict(tmp=tmp_path, data=char_dataset,
                  mnist=write_prepared(tmp_path / "mnist", digit_splits(64, 16, 16)))
    commands = plan_commands()
    assert len(commands) >= 12
    for command in commands:
        extra = next((e for prefix, e in RULES.items() if command.startswith(prefix)), "unknown")
        assert extra != "unknown", f"docs/workshop.md runs {command!r}: add a rule to RULES here"
        if extra == "settings only":
            from shapes import preset_settings, select_models
            select_models(preset_settings(shlex.split(command)[2:])["models"])
            continue
        if extra is None:
            continue
        if command.startswith("python -c "):
            snippet = tmp_path / "snippet.py"
            snippet.write_text(command[len("python -c "):])
            words = [snippet]
        else:
            words = shlex.split(f"{command} {extra.format(**values)}")[1:]
        done = run_here(*words)
        assert done.returncode == 0, f"{command}\n{done.stdout[-1500:]}{done.stderr[-1500:]}"


def defined(path, symbol):
    """Whether the Python file defines symbol: a function, a class, Class.method or a name."""
    body = ast.parse(path.read_text()).body
    for part in symbol.split("."):
        node = next((n for n in body if part in names_defined(n)), None)
        if node is None:
            return False
        body = getattr(node, "body", [])
    return True


def names_defined(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def test_every_reading_the_pages_cite_exists():
    cited = re.findall(r"`([\w/]+\.py): ([\w.]+)`", (ROOT / "docs" / "workshop.md").read_text())
    assert len(cited) >= 12
    missing = [f"docs/workshop.md: `{file}: {symbol}`" for file, symbol in cited
               if not (ROOT / file).exists() or not defined(ROOT / file, symbol)]
    assert not missing, "readings whose code is gone (renamed or moved?):\n" + "\n".join(missing)
