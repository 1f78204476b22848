"""The readings of docs/workshop.md and docs/cheatsheet.md still point at their code.

A reading is written `file.py: symbol (lines a-b)`: a function, a class, a method (Class.method) or a
module-level name, and the lines of its definition (decorators included). Other people edit these
files, so the lines move: this test names every reading whose range no longer is its symbol's
definition, with the range it has now, and

    python tests/workshop/test_workshop_readings.py --fix

rewrites the ranges in place (the symbols stay; a symbol that is gone is reported, not guessed).
"""

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs" / "workshop.md", ROOT / "docs" / "cheatsheet.md"]
READING = re.compile(r"`([\w/]+\.py): ([\w.]+) \(lines (\d+)-(\d+)\)`")


def definition_span(path, symbol):
    """(first, last) line of `symbol`'s definition in the Python file at `path`, or None."""
    body = ast.parse(path.read_text()).body
    node = None
    for part in symbol.split("."):
        node = next((n for n in body if defines(n, part)), None)
        if node is None:
            return None
        body = getattr(node, "body", [])
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return first, node.end_lineno


def defines(node, name):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and node.target.id == name
    return False


def readings(doc):
    return [(m, ROOT / m.group(1), m.group(2), int(m.group(3)), int(m.group(4))) for m in READING.finditer(doc.read_text())]


def stale_readings():
    """[(doc, cited text, the range now or None)] of every reading that no longer matches."""
    stale = []
    for doc in DOCS:
        for match, path, symbol, first, last in readings(doc):
            span = definition_span(path, symbol) if path.exists() else None
            if span != (first, last):
                stale.append((doc, match.group(0), span))
    return stale


def test_the_plan_cites_readings():
    assert len(readings(DOCS[0])) >= 12, "docs/workshop.md should cite its readings as `file.py: symbol (lines a-b)`"
    assert len(readings(DOCS[1])) >= 5, "docs/cheatsheet.md should cite each mechanism's code"


def test_every_reading_range_is_its_symbols_definition():
    report = [f"{doc.name}: {cited} -> " + (f"now lines {span[0]}-{span[1]}" if span else "symbol not found")
              for doc, cited, span in stale_readings()]
    assert not report, "\n".join(report) + "\n(python tests/workshop/test_workshop_readings.py --fix)"


def test_the_checker_finds_methods_and_names_and_reports_a_moved_range(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("X = 1\n\nclass A:\n    def f(self):\n        return 1\n\n    @staticmethod\n    def g():\n        pass\n")
    assert definition_span(source, "X") == (1, 1)
    assert definition_span(source, "A.f") == (4, 5)
    assert definition_span(source, "A.g") == (7, 9)
    assert definition_span(source, "A.h") is None


def fix():
    for doc in DOCS:
        if not doc.exists():
            continue
        text = doc.read_text()

        def current(match):
            span = definition_span(ROOT / match.group(1), match.group(2)) if (ROOT / match.group(1)).exists() else None
            if span is None:
                print(f"{doc.name}: {match.group(0)}: symbol not found, left as it is")
                return match.group(0)
            return f"`{match.group(1)}: {match.group(2)} (lines {span[0]}-{span[1]})`"

        new = READING.sub(current, text)
        if new != text:
            doc.write_text(new)
            print(f"updated {doc.relative_to(ROOT)}")


if __name__ == "__main__":
    if "--fix" in sys.argv[1:]:
        fix()
    else:
        for doc, cited, span in stale_readings():
            print(f"{doc.name}: {cited} -> {span}")
