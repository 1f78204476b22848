"""The workshop's self-checks: every check runs against its reference solution, extracted from
docs/workshop_solutions.md, and each unmodified workshop/<exercise>.py must FAIL its check. A
participant runs one check on their own file with `python tests/workshop/check.py <exercise>`.
"""

import importlib.util
from pathlib import Path

import pytest

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
