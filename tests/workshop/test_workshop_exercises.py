"""The workshop's exercises check themselves (docs/workshop.md, workshop/*.py).

    python tests/workshop/check.py lws_exercise     # a participant: their own file, one process

Here (CI) each check runs on the reference solution of docs/workshop_solutions.md (so the checks
and the solutions cannot rot), each unsolved workshop/<exercise>.py must fail its check with the
message that tells the participant what to do, and typical wrong answers must fail too.

"Unsolved" is the file as committed (`git show HEAD:workshop/<exercise>.py`), so that a teacher who
solved the exercises in their clone still sees this file pass; where the committed file is solved
too (no TODO lines), that test skips and says so.
"""

import math
import re
import subprocess

import check
import pytest
from conftest import run_here
from workshop_checks import (CHECKS, EXERCISES, ROOT, SOLUTIONS, load_module, load_solution,
                             solution_sources)


@pytest.mark.parametrize("name", EXERCISES)
def test_exercise(name, tmp_path):
    print(CHECKS[name](load_solution(name, tmp_path)))


def committed_exercise(name):
    """(source, where) of workshop/<name>.py as committed, or of the file itself outside git."""
    try:
        done = subprocess.run(["git", "show", f"HEAD:workshop/{name}.py"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        if done.returncode == 0:
            return done.stdout, "HEAD"
    except OSError:  # no git
        pass
    return (ROOT / "workshop" / f"{name}.py").read_text(), "this folder (no git history)"


@pytest.mark.parametrize("name", EXERCISES)
def test_unsolved_exercise_fails_and_says_what_to_do(name, tmp_path, capsys):
    source, where = committed_exercise(name)
    if "TODO" not in source:
        pytest.skip(f"workshop/{name}.py at {where} has no TODO lines: it is solved there, so no "
                    f"unsolved file is left to check (the upstream commit has them)")
    (tmp_path / f"{name}.py").write_text(source)
    assert check.run(name, tmp_path / f"{name}.py") == 1
    err = capsys.readouterr().err
    assert err.startswith("not solved yet: "), err
    assert f"workshop/{name}.py still has its TODO lines" in err, err
    assert "Traceback" not in err, err


def test_the_checker_names_the_exercises_on_a_typo():
    done = run_here("tests/workshop/check.py", "hourglass")
    assert done.returncode != 0 and "one of: hourglass_exercise" in done.stderr, done.stderr


def test_every_exercise_has_a_file_a_solution_and_a_command():
    files = {p.stem for p in (ROOT / "workshop").glob("*.py")} - {"did_it_learn"}  # (Part 3's tool)
    assert files == set(EXERCISES), f"workshop/ holds {sorted(files)}, checks: {sorted(EXERCISES)}"
    assert set(solution_sources()) == set(EXERCISES), (
        "one solution block per exercise in docs/workshop_solutions.md")
    plan = (ROOT / "docs" / "workshop.md").read_text()
    for name in EXERCISES:
        command = f"python tests/workshop/check.py {name}"
        assert command in plan, f"docs/workshop.md: no check command for {name}"
        doc = (ROOT / "workshop" / f"{name}.py").read_text()
        assert command in doc, f"workshop/{name}.py's docstring should give its check command"


# Typical wrong answers, made by editing one line of a reference solution: each must fail its
# check, with a message naming the mistake where one is given.
WRONG_ANSWERS = {
    "hourglass_exercise": ("ATTENTION_SHARE = 0.61", "ATTENTION_SHARE = 0.60", "ATTENTION_SHARE"),
    "variable_width_exercise": ("bottleneck_layer_ratio=0.25", "bottleneck_layer_ratio=0.5", ""),
    "variable_width_exercise/coarse": ("width_multiple=8", "width_multiple=32", "too coarse"),
    "cea_exercise": ("min_count=50", "min_count=5", ""),  # not the paper's rule
    "cea_exercise/unflattened": ("targets.reshape(-1)", "targets", "targets.reshape(-1)"),
    "lws_exercise": ("ffn_scalars=[4.0, 0.5, 4.0]", "ffn_scalars=[0.5, 4.0, 0.5]", ""),  # a crown
    "mlp_exercise": ("TRAINABLE_PARAMS = 784 * 1024 + ", "TRAINABLE_PARAMS = ", ""),  # no W_in
    "mlp_exercise/one_word": ("n_blocks=2)  # W_in frozen",
                              "n_blocks=2, input_proj='learned')", "yourself"),
    # requires_grad set on the frozen lift: a buffer still, which no optimizer sees
    "mlp_exercise/requires_grad": ("    model.lift = mlp_hourglass.InputProjection(frozen.weight."
                                   "size(1), frozen.weight.size(0), trainable=True)\n",
                                   "    model.lift.weight.requires_grad_(True)\n", "nn.Parameter"),
    # match_params' whole (kwargs, count) pair returned: named, not a TypeError
    "lws_exercise/pair": ("    return matched\n", "    return matched, _\n", "returned a tuple"),
    "hourglass_exercise/pair": ("    return hourglass.match_baseline(",
                                "    return 0, hourglass.match_baseline(", "returned a tuple"),
}


@pytest.mark.parametrize("case", sorted(WRONG_ANSWERS))
def test_a_wrong_answer_fails_its_check(case, tmp_path):
    name = case.split("/")[0]
    right, wrong, message = WRONG_ANSWERS[case]
    source = solution_sources()[name]
    assert right in source, f"the reference solution of {name} changed: update WRONG_ANSWERS"
    (tmp_path / f"{name}.py").write_text(source.replace(right, wrong))
    module = load_module(tmp_path / f"{name}.py", f"workshop_wrong_{name}")
    with pytest.raises(AssertionError, match=re.escape(message) if message else None):
        CHECKS[name](module)


def test_a_typed_in_ratio_is_shown_with_the_digits_that_differ(tmp_path):
    """A ratio typed in to four decimals must not read 'returned 0.9412; measures 0.9412'."""
    name = "cea_exercise"
    right = 'cea_contribution.contribution_ratio(accuracies, kinds)["ffn_ratio"]'
    source = solution_sources()[name]
    assert right in source, f"the reference solution of {name} changed: update this test"
    (tmp_path / f"{name}.py").write_text(source.replace(right, f"round({right}, 4)"))
    with pytest.raises(AssertionError) as failure:
        CHECKS[name](load_module(tmp_path / f"{name}.py", "workshop_typed_in"))
    got, measured = re.search(r"returned (\S+); .* measures (\S+) ", str(failure.value)).groups()
    assert got != measured and math.isclose(float(got), float(measured), abs_tol=5e-5), (
        str(failure.value))


def test_an_error_in_the_participants_file_is_one_line_naming_its_line(tmp_path, capsys):
    name = "hourglass_exercise"
    source = solution_sources()[name].replace("ATTENTION_SHARE = 0.61", "ATTENTION_SHARE = 0.61)")
    (tmp_path / f"{name}.py").write_text(source)
    line = next(i for i, text in enumerate(source.splitlines(), 1)
                if text.startswith("ATTENTION_SHARE = 0.61)"))
    assert check.run(name, tmp_path / f"{name}.py") == 1
    err = capsys.readouterr().err
    assert f"workshop/{name}.py, line {line}: SyntaxError" in err, err
    assert "Traceback" not in err and len(err.splitlines()) == 2, err
    # an error raised while the check calls into the file: its line there too
    (tmp_path / f"{name}.py").write_text(source.replace("0.61)", "0.61").replace(
        "n_sub_blocks=2, bottleneck_ratio=0.4)", "n_sub_blocks=2, bottleneck_ratio=0.4, x=1)"))
    assert check.run(name, tmp_path / f"{name}.py") == 1
    err = capsys.readouterr().err
    assert re.search(rf"workshop/{name}.py, line \d+ \(in hourglass_k2\): TypeError", err), err
    assert "Traceback" not in err, err


@pytest.mark.parametrize("name", [n for n in EXERCISES if n != "cea_exercise"])
def test_the_check_prints_what_the_solutions_page_quotes(name, tmp_path):
    """What `python tests/workshop/check.py <exercise>` prints for the reference solution is the
    line docs/workshop_solutions.md quotes (counts: the same on every machine). The CEA check's
    trained ratio depends on the CPU: no page pins it."""
    result = CHECKS[name](load_solution(name, tmp_path))
    line = f"{name}: {check.as_written(result)}"
    assert f"the check prints `{line}`" in SOLUTIONS.read_text(), line
