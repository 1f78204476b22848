"""The layout a learner relies on: the papers and the commands at the top, the plumbing in
shapelab/, every import pointing down (shapelab/ <- model.py <- the mechanism files <- compose.py
<- shapes.py <- the commands), mechanism files holding only their mechanism, docs naming only
files that exist. The mechanism files are read from shapes.MODELS: a new one is checked as it
is registered."""

import ast
import functools
import graphlib
import re

import pytest
from conftest import ROOT
from shapes import MODELS

LIBRARY = {"shapelab." + p.stem for p in (ROOT / "shapelab").glob("*.py")} - {"shapelab.__init__"}
TRAINERS = {"mlp_hourglass": "train_mlp"}  # a mechanism with its own trainer, outside MODELS
COMPOSERS = {"compose", "shapes"}
MECHANISMS = {cls.__module__ for cls, _, _ in MODELS.values()} - {"model"} - COMPOSERS | {
    *TRAINERS}
COMMANDS = {"train", "sample", "export", "train_mlp", "compare", "bench"}
ENTRY_POINTS = {"train", "sample", "export"}
DRIVERS = {"compare", "bench"}
LEAVES = LIBRARY | {"model", "shapelab"}
FILE_ALARM_LINES = 450  # an alarm, not a cap: past it a file probably holds two things
LONGER = {"train": 600, "train_mlp": 600, "model": 700, "bench": 700, "shapes": 600,
          "compare": 700, "shapelab.configurator": 600, "shapelab.run": 700}
MECHANISM_DOCSTRING_MAX_LINES = 30  # the paper, the idea, its equations; deviations in docs/


def repo_files():
    files = {p.stem: p for p in ROOT.glob("*.py")}
    files.update({f"shapelab.{p.stem}": p for p in ROOT.glob("shapelab/*.py")})
    for p in [*ROOT.glob("experiments/*.py"), *ROOT.glob("data/*.py"), *ROOT.glob("data/*/*.py")]:
        files[str(p.relative_to(ROOT))] = p
    return files


def imported_modules(source, known):
    """The names in `known` that `source` imports anywhere, function bodies included."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, "a relative import: write `from shapelab.x import y`"
            found.update({node.module, node.module.split(".")[0]})
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found & known


@functools.cache
def import_graph():
    files = repo_files()
    modules = {name for name in files if "/" not in name}
    return {name: imported_modules(path.read_text(), modules) for name, path in files.items()}


def test_no_file_imports_a_file_that_imports_it_back():
    graphlib.TopologicalSorter(import_graph()).prepare()  # a CycleError names the cycle


def test_imports_point_down_and_never_back_up():
    graph = import_graph()
    top = {name for name in graph if "/" not in name and "." not in name}
    for name in LIBRARY:
        assert not graph[name] & top, f"{name} imports {sorted(graph[name] & top)}"
    assert graph["model"] <= LEAVES, f"model.py imports {sorted(graph['model'])}"
    for name in MECHANISMS:
        extra = graph[name] - {"model", "shapelab", "shapelab.configurator"}
        assert not extra, f"{name}.py imports {sorted(extra)}: it holds only its paper's mechanism"
    assert graph["compose"] <= LEAVES | MECHANISMS
    assert graph["shapes"] <= LEAVES | MECHANISMS | {"compose"}
    for name in ENTRY_POINTS:
        assert graph[name] <= LEAVES | {"shapes"}, f"{name}.py imports {sorted(graph[name])}"
    for name in DRIVERS:
        assert "shapes" in graph[name] and "compose" not in graph[name], name
    for name, deps in graph.items():
        if name.startswith("data/"):
            assert deps <= LEAVES, f"{name} imports {sorted(deps)}: data imports no model file"
        if name.startswith("experiments/"):  # experiments/<mechanism>_<what>.py
            own = {m for m in MECHANISMS if name.startswith(f"experiments/{m}_")}
            assert len(own) == 1, f"{name}: name it experiments/<mechanism>_<what>.py"
            own |= {TRAINERS[m] for m in own if m in TRAINERS} | {"shapes"}
            assert deps <= LEAVES | own, f"{name} imports {sorted(deps - LEAVES - own)}"


def test_the_top_level_holds_the_papers_and_the_commands():
    top, meant = {p.stem for p in ROOT.glob("*.py")}, {"model"} | MECHANISMS | COMPOSERS | COMMANDS
    assert top == meant, f"neither a paper nor a command: {sorted(top - meant)}; " \
                         f"missing: {sorted(meant - top)}"


def test_no_file_is_too_wide_or_long_enough_to_hold_two_things():
    files = [*repo_files().values(), *ROOT.glob("config/*.py"), *ROOT.glob("tests/**/*.py"),
             *ROOT.glob("workshop/*.py")]
    wide = [f"{path.relative_to(ROOT)}:{number}" for path in files
            for number, line in enumerate(path.read_text().splitlines(), 1) if len(line) > 100]
    assert not wide, f"lines over 100 columns: {', '.join(wide)}"
    long = [name for name, path in repo_files().items()
            if "/" not in name and len(path.read_text().splitlines()) > LONGER.get(
                name, FILE_ALARM_LINES)]
    assert not long, f"past the alarm: {long}"
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300, "write-ups go in docs/"


def top_level_names(name):
    names = set()
    for node in ast.parse((ROOT / f"{name.replace('.', '/')}.py").read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS | {"compose"}))
def test_a_mechanism_file_is_its_paper_a_builder_and_a_shape_table(mechanism):
    source = (ROOT / f"{mechanism}.py").read_text()
    tree = ast.parse(source)
    doc = (ast.get_docstring(tree) or "").splitlines()
    assert 0 < len(doc) <= MECHANISM_DOCSTRING_MAX_LINES, f"{mechanism}.py's docstring"
    found = sorted(n for n in top_level_names(mechanism)
                   if re.search(r"PRESET|preset|_table$|TABLE|plot|^matched_shapes$", n))
    assert not found, f"{mechanism}.py defines {found}: they belong in shapes.py or experiments/"
    assert not re.search(r"^\s*(import|from) (argparse|matplotlib)\b", source, re.M)
    first = next(n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom, ast.Expr)))
    assert isinstance(first, (ast.FunctionDef, ast.ClassDef)) and not first.decorator_list, (
        f"{mechanism}.py opens on line {first.lineno}: the mechanism first, then its config")
    if mechanism not in TRAINERS | {"compose": 0}:
        assert "matched_args" in top_level_names(mechanism)
        assert 'if __name__ == "__main__":' in source, f"{mechanism}.py prints no shape"


def doc_files():
    return [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md")),
            *sorted(ROOT.glob("data/*/readme.md")), *sorted(ROOT.glob("workshop/*.py"))]


def test_docs_name_only_files_that_exist():
    missing = []
    for doc in doc_files():
        text = doc.read_text()
        for script in re.findall(r"python (?:-m \w+ )?((?:[\w./-]+/)?\w+\.py)", text):
            if not (ROOT / script).exists():
                missing.append(f"{doc.name}: python {script}")
        for config in re.findall(r"\b(config/\w+\.py)", text):
            if not (ROOT / config).exists():
                missing.append(f"{doc.name}: {config}")
        for link in re.findall(r"\]\(([^)#:]+)\)", text):
            if not (doc.parent / link).exists():
                missing.append(f"{doc.name}: link {link}")
    assert not missing, "\n".join(missing)


# Notes a reader cannot see (this file names them)
ELSEWHERE = re.compile(r"DESIGN[.]md|REFERENCE[_]FACTS|DATA[.]md|[.][.]/shared|[/]shared/|"
                       r"shared[/]papers|\bthe issue\b|issue #?\d")


def test_the_repo_stands_alone():
    tests = [p for p in ROOT.glob("tests/**/*.py") if p.name != "test_layout.py"]
    hits = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
            for path in sorted({*repo_files().values(), *ROOT.glob("config/*.py"), *tests,
                                *doc_files()})
            for i, line in enumerate(path.read_text().splitlines(), 1) if ELSEWHERE.search(line)]
    assert not hits, "\n".join(hits)
