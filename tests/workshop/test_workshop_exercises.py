"""The workshop's exercises check themselves (docs/workshop.md, workshop/*.py).

    python tests/workshop/check.py lws_exercise     # a participant: their own file, one process

Here (CI) each check runs on the reference solution of docs/workshop_solutions.md (so the checks
and the solutions cannot rot), each unmodified workshop/<exercise>.py must fail its check with the
message that tells the participant what to do, and typical wrong answers must fail too.
"""

import re
import subprocess
import sys

import pytest
from workshop_checks import CHECKS, EXERCISES, ROOT, load_module, load_solution, solution_sources


@pytest.mark.parametrize("name", EXERCISES)
def test_exercise(name, tmp_path):
    print(CHECKS[name](load_solution(name, tmp_path)))


@pytest.mark.parametrize("name", EXERCISES)
def test_unsolved_exercise_fails_and_says_what_to_do(name):
    done = subprocess.run([sys.executable, "tests/workshop/check.py", name], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not solved yet: " in done.stderr, done.stderr
    assert "still has its TODO lines" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_the_checker_names_the_exercises_on_a_typo():
    done = subprocess.run([sys.executable, "tests/workshop/check.py", "hourglass"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "one of: hourglass_exercise" in done.stderr, done.stderr


def test_every_exercise_has_a_file_a_solution_and_a_command():
    files = {p.stem for p in (ROOT / "workshop").glob("*.py")}
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
