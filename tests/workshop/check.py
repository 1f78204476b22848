"""Check one workshop exercise: the file you edited, workshop/<exercise>.py.

    python tests/workshop/check.py hourglass_exercise

It runs the exercise's check (tests/workshop/workshop_checks.py) on your file in this one process,
prints what it measured, and ends with 'solved' - or with what to change, and exit status 1. An
error in your file (a syntax error, a name that does not exist, a call that fails) is one line
naming its line in your file, not a traceback.
"""

import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workshop_checks import CHECKS, EXERCISES, ROOT, load_module  # noqa: E402


def error_in_file(error, path, shown):
    """One line for an exception raised inside the participant's file (its line there), or None
    when the file is not on its traceback (then it is the check's own error: shown in full)."""
    if isinstance(error, SyntaxError) and Path(error.filename or "").resolve() == path.resolve():
        where = f"{shown}, line {error.lineno}"
        text = (error.text or "").strip()
        return f"{where}: {type(error).__name__}: {error.msg}" + (f"  ->  {text}" if text else "")
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if Path(f.filename).resolve() == path.resolve()]
    if not frames:
        return None
    last = frames[-1]
    return (f"{shown}, line {last.lineno} (in {last.name}): {type(error).__name__}: {error}"
            + (f"  ->  {last.line}" if last.line else ""))


def as_written(result):
    """A check's result as the pages write numbers: 'budget 1,050,600, attention_share 0.609'."""
    def number(v):
        if isinstance(v, list):
            return "[" + ", ".join(map(number, v)) + "]"
        return f"{v:,}" if isinstance(v, int) else f"{v:.3f}" if isinstance(v, float) else str(v)
    return ", ".join(f"{key} {number(value)}" for key, value in result.items())


def run(name, path=None):
    """Check `path` (default workshop/<name>.py) as exercise `name`: print the result or what to
    change; 0 when solved, 1 otherwise."""
    path = Path(path or ROOT / "workshop" / f"{name}.py")
    shown = f"workshop/{name}.py"
    unsolved = "TODO" in path.read_text()
    try:
        result = CHECKS[name](load_module(path, f"workshop_participant_{name}"))
    except AssertionError as e:
        hint = (f"{shown} still has its TODO lines: read its docstring, change what it asks for, "
                f"then run this again" if unsolved else f"change {shown} and run this again")
        print(f"not solved yet: {e}\n{hint}", file=sys.stderr)
        return 1
    except Exception as e:  # an error in the participant's file: its line, not a traceback
        line = error_in_file(e, path, shown)
        if line is None:
            raise
        print(f"not solved yet: {line}\nfix that line of {shown} and run this again",
              file=sys.stderr)
        return 1
    print(f"{name}: {as_written(result)}")
    print(f"solved: {shown} passes its check")
    return 0


def main(argv):
    if len(argv) != 1 or argv[0].removesuffix(".py").split("/")[-1] not in EXERCISES:
        raise SystemExit(f"usage: python tests/workshop/check.py <exercise>, one of: "
                         f"{', '.join(EXERCISES)}")
    return run(argv[0].removesuffix(".py").split("/")[-1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
