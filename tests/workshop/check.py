"""Check one workshop exercise: the file you edited, workshop/<exercise>.py.

    python tests/workshop/check.py hourglass_exercise

It runs the exercise's check (tests/workshop/workshop_checks.py) on your file in this one process,
prints what it measured, and ends with 'solved' - or with what to change, and exit status 1.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workshop_checks import CHECKS, EXERCISES, ROOT, load_exercise  # noqa: E402


def main(argv):
    if len(argv) != 1 or argv[0].removesuffix(".py").split("/")[-1] not in EXERCISES:
        raise SystemExit(f"usage: python tests/workshop/check.py <exercise>, one of: "
                         f"{', '.join(EXERCISES)}")
    name = argv[0].removesuffix(".py").split("/")[-1]
    path = ROOT / "workshop" / f"{name}.py"
    unsolved = "TODO" in path.read_text()
    try:
        result = CHECKS[name](load_exercise(name))
    except AssertionError as e:
        hint = (f"workshop/{name}.py still has its TODO lines: read its docstring, change what it "
                f"asks for, then run this again" if unsolved else
                f"change workshop/{name}.py and run this again")
        print(f"not solved yet: {e}\n{hint}", file=sys.stderr)
        return 1
    print(f"{name}: {result}")
    print(f"solved: workshop/{name}.py passes its check")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
