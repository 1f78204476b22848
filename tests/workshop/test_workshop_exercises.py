"""The workshop's exercises check themselves (docs/workshop.md, workshop/*.py).

    python -m pytest tests/workshop --workshop -k lws_exercise     # a participant: their own file
    python -m pytest tests/workshop                                # CI: the reference solutions

In CI each check runs on the reference solution of docs/workshop_solutions.md (so the checks and
the solutions cannot rot), and each unmodified workshop/<exercise>.py must fail its check (so an
exercise never passes before the participant has done it).
"""

import pytest
from workshop_checks import CHECKS, EXERCISES, ROOT, load_exercise, load_module, load_solution, solution_sources


@pytest.mark.parametrize("name", EXERCISES)
def test_exercise(name, participant_mode, tmp_path):
    module = load_exercise(name) if participant_mode else load_solution(name, tmp_path)
    print(CHECKS[name](module))


@pytest.mark.parametrize("name", EXERCISES)
def test_unsolved_exercise_fails_its_check(name, participant_mode):
    if participant_mode:
        pytest.skip("participant mode: the file is yours now")
    module = load_exercise(name)
    with pytest.raises(AssertionError):
        CHECKS[name](module)
    # (if this fails after you solved workshop/<name>.py in your own checkout: that is expected, the
    # committed files stay unsolved for the next participant)


def test_every_exercise_has_a_file_a_solution_and_a_command():
    files = {p.stem for p in (ROOT / "workshop").glob("*.py")}
    assert files == set(EXERCISES), f"workshop/ holds {sorted(files)}, the checks know {sorted(EXERCISES)}"
    assert set(solution_sources()) == set(EXERCISES), "one solution block per exercise in docs/workshop_solutions.md"
    plan = (ROOT / "docs" / "workshop.md").read_text()
    for name in EXERCISES:
        assert f"python -m pytest tests/workshop --workshop -k {name}" in plan, f"docs/workshop.md: no check command for {name}"
        doc = (ROOT / "workshop" / f"{name}.py").read_text()
        assert f"-k {name}" in doc, f"workshop/{name}.py's docstring should give its check command"


# Typical wrong answers, made by editing one line of a reference solution: each must fail its check.
WRONG_ANSWERS = {
    "variable_width_exercise": ("bottleneck_layer_ratio=0.25", "bottleneck_layer_ratio=0.5"),  # layer 4
    "cea_exercise": ("min_count=50", "min_count=5"),  # not the paper's rule: another set of class vectors
    "lws_exercise": ("ffn_scalars=[4.0, 0.5, 4.0]", "ffn_scalars=[0.5, 4.0, 0.5]"),  # a crown, not a valley
    "mlp_exercise": ("TRAINABLE_PARAMS = 784 * 1024 + ", "TRAINABLE_PARAMS = "),  # forgot the learned W_in
}


@pytest.mark.parametrize("name", sorted(WRONG_ANSWERS))
def test_a_wrong_answer_fails_its_check(name, participant_mode, tmp_path):
    if participant_mode:
        pytest.skip("participant mode")
    right, wrong = WRONG_ANSWERS[name]
    source = solution_sources()[name]
    assert right in source, f"the reference solution of {name} changed: update WRONG_ANSWERS"
    (tmp_path / f"{name}.py").write_text(source.replace(right, wrong))
    module = load_module(tmp_path / f"{name}.py", f"workshop_wrong_{name}")
    with pytest.raises(AssertionError):
        CHECKS[name](module)
