"""The workshop's self-checks: every check runs against its reference solution, extracted from
docs/workshop_solutions.md, and each unmodified workshop/<exercise>.py must FAIL its check. A
participant runs one check on their own file with `python tests/workshop/check.py <exercise>`.
"""

import contextlib
import importlib.util
import io
import re
from pathlib import Path

import pytest
import torch

pytest.register_assert_rewrite("workshop_checks")

# Two folders of tests hold a conftest.py, and Python knows only one module named "conftest": a test
# of tests/ that runs `from conftest import ROOT` inside a function would find this file. So this
# file also offers the helpers of tests/conftest.py (its fixtures stay where they are).
_spec = importlib.util.spec_from_file_location("tests_shared_helpers",
                                               Path(__file__).resolve().parents[1] / "conftest.py")
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)
globals().update({name: value for name, value in vars(_shared).items()
                  if not name.startswith("_") and "fixture" not in type(value).__name__.lower()
                  and not hasattr(value, "_pytestfixturefunction") and name not in globals()})


# ------------------------------------------------------------------ the CEA check, run once

PRINTED = re.compile(r"outer ratio ([\d.]+): FFN contribution ratio (-?[\d.]+|nan) after 150 steps "
                     r"\(train loss ([\d.]+)\)")


@pytest.fixture(scope="session")
def measured(tmp_path_factory):
    """rho -> dict(ratio, loss, accuracies, printed): what check_cea_exercise prints for the
    reference solution with OUTER_RATIO = rho (its split assertion fails at 1.0 and 0.125, after
    the print; at 0.5, the solution's own setting, the check passes), and the accuracies behind its
    last ratio. Shared by test_workshop_cea_numbers.py and test_workshop_exercises.py's check of
    the solution: their tests are one xdist group, so this runs once (150 steps x 3)."""
    import cea_contribution  # experiments/, on the path once workshop_checks is imported
    from workshop_checks import CHECKS, load_module, solution_sources

    folder = tmp_path_factory.mktemp("cea_numbers")
    source = solution_sources()["cea_exercise"]
    assert "OUTER_RATIO = 0.5" in source, "the reference solution changed: update this test"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the workshop's OMP_NUM_THREADS=1
    results = {}
    try:
        for rho in (1.0, 0.5, 0.125):
            path = folder / f"cea_exercise_{rho}.py"
            path.write_text(source.replace("OUTER_RATIO = 0.5", f"OUTER_RATIO = {rho}"))
            module = load_module(path, f"workshop_cea_numbers_{str(rho).replace('.', '_')}")
            seen, solution = [], module.ffn_contribution

            def recording(model, idx, targets, solution=solution, seen=seen):
                reps, _ = cea_contribution.sublayer_representations(model, idx)
                seen.append(cea_contribution.token_prediction_accuracies(
                    reps, targets.reshape(-1), min_count=50))
                return solution(model, idx, targets)

            module.ffn_contribution = recording
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                try:
                    CHECKS["cea_exercise"](module)
                except AssertionError as e:
                    assert rho != 0.5 and "set OUTER_RATIO" in str(e), e
            found = PRINTED.search(out.getvalue())
            assert found and float(found.group(1)) == rho, out.getvalue()
            results[rho] = dict(ratio=float(found.group(2)), loss=float(found.group(3)),
                                accuracies=seen[-1], printed=out.getvalue())
    finally:
        torch.set_num_threads(threads)
    return results
