"""The workshop's self-checks run in two modes.

CI (plain `python -m pytest`): every check runs against its reference solution, extracted from
docs/workshop_solutions.md, and each unmodified workshop/<exercise>.py must FAIL its check.
A participant: `python -m pytest tests/workshop --workshop -k <exercise>` runs the same check
against their own workshop/<exercise>.py (WORKSHOP=1 in the environment does the same).
"""

import importlib.util
import os
from pathlib import Path

import pytest

pytest.register_assert_rewrite("workshop_checks")

# Two folders of tests hold a conftest.py, and Python knows only one module named "conftest": a test
# of tests/ that runs `from conftest import ROOT` inside a function would find this file. So this
# file also offers the helpers of tests/conftest.py (its fixtures stay where they are).
_spec = importlib.util.spec_from_file_location("tests_shared_helpers", Path(__file__).resolve().parents[1] / "conftest.py")
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)
globals().update({name: value for name, value in vars(_shared).items()
                  if not name.startswith("_") and "fixture" not in type(value).__name__.lower()
                  and not hasattr(value, "_pytestfixturefunction") and name not in globals()})


def pytest_addoption(parser):
    parser.addoption("--workshop", action="store_true",
                     help="check the participant's workshop/<exercise>.py instead of the reference solutions")


@pytest.fixture
def participant_mode(request):
    """True when the checks should read workshop/*.py (the participant's files)."""
    return bool(request.config.getoption("--workshop", default=False)) or os.environ.get("WORKSHOP", "") not in ("", "0")
