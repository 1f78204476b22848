"""The readings of docs/workshop.md and docs/cheatsheet.md still point at their code.

A reading is written `file.py: symbol`: a function, a class, a method (Class.method) or a
module-level name. No line numbers: an edit above a symbol moves nothing a reader is sent to,
while a rename or a move fails this test, which names the reading. For a few readings whose text
says what the code does, the test also checks that the code still does it (a phrase inside it).
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs" / "workshop.md", ROOT / "docs" / "cheatsheet.md"]
READING = re.compile(r"`([\w/]+\.py): ([\w.]+)`")

# reading -> a phrase its definition must hold (what the plan says the code there does)
WHAT_IT_DOES = {
    "model.py: Block": "self.ffn(self.attn(x)",
    "hourglass.py: HourglassGPT": "def make_ffn",
    "cea.py: CEAAttentionSublayer.forward": "a + self.inner_ffn(a)",
    "cea.py: CEAConfig": "self.inner_hidden = width - outer",
    "lws.py: match_params": "bisection",
    "variable_width.py: VariableWidthGPT.layer_step": "R[..., w:]",
}


def definition(path, symbol):
    """The source of `symbol`'s definition in the Python file at `path`, or None."""
    source = path.read_text()
    body, node = ast.parse(source).body, None
    for part in symbol.split("."):
        node = next((n for n in body if defines(n, part)), None)
        if node is None:
            return None
        body = getattr(node, "body", [])
    return ast.get_source_segment(source, node)


def defines(node, name):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and node.target.id == name
    return False


def readings(doc):
    return [(m.group(0).strip("`"), ROOT / m.group(1), m.group(2))
            for m in READING.finditer(doc.read_text())]


def test_the_plan_and_the_sheet_cite_readings_by_symbol():
    assert len(readings(DOCS[0])) >= 12, "docs/workshop.md cites its readings as `file.py: symbol`"
    assert len(readings(DOCS[1])) >= 5, "docs/cheatsheet.md should cite each mechanism's code"
    for doc in DOCS:
        assert not re.search(r"\(lines \d+-\d+\)", doc.read_text()), (
            f"{doc.name}: cite `file.py: symbol`, not line ranges (they move with every edit)")


def test_every_reading_names_a_symbol_that_exists():
    missing = [f"{doc.name}: `{cited}`" for doc in DOCS for cited, path, symbol in readings(doc)
               if not path.exists() or definition(path, symbol) is None]
    assert not missing, "readings whose symbol is gone (renamed or moved?):\n" + "\n".join(missing)


def test_the_readings_still_do_what_the_plan_says():
    cited = {c for doc in DOCS for c, _, _ in readings(doc)}
    for reading, phrase in WHAT_IT_DOES.items():
        assert reading in cited, f"WHAT_IT_DOES names {reading!r}, which no doc cites any more"
        file, symbol = reading.split(": ")
        code = definition(ROOT / file, symbol) or ""
        assert phrase in code, f"{reading} no longer has {phrase!r}"


def test_the_finder_finds_methods_and_names(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("X = 1\n\nclass A:\n    def f(self):\n        return 1\n")
    assert definition(source, "X") == "X = 1"
    assert "return 1" in definition(source, "A.f")
    assert definition(source, "A.h") is None
