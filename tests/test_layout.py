"""The layout a learner relies on: the papers and the commands at the top, the plumbing in
shapelab/ below them, every import pointing down, mechanism files holding only their mechanism,
and docs that name only files that exist.

Levels, from the bottom: shapelab/ (the library: run folder, checkpoints, data, tokenizer,
hardware, sweeps, verdict, plots; it imports nothing from the top) <- model.py <- the mechanism
files <- compose.py <- shapes.py (every shape by name and at one budget) <- the commands
(train.py, sample.py, export.py, compare.py, bench.py, ...), the experiments and the data scripts.
Imports are read from the AST of every file, function bodies included.
"""

import ast
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

LIBRARY = {"shapelab." + p.stem for p in (ROOT / "shapelab").glob("*.py")} - {"shapelab.__init__"}
PAPERS = {"model", "hourglass", "variable_width", "cea", "lws", "mlp_hourglass"}
MECHANISMS = PAPERS - {"model"}
COMPOSERS = {"compose": "mechanisms in one model", "shapes": "every shape by name, at one budget"}
COMMANDS = {"train", "sample", "export", "train_mlp", "compare", "bench", "gpu_check"}
ENTRY_POINTS = {"train", "sample", "export"}  # a model by name (shapes.py) and the library
DRIVERS = {"compare", "bench"}  # train and time the matched shapes: they import shapes.py
LEAVES = LIBRARY | {"model"}
# Loose alarms, never caps a file must be squeezed under: a file past one probably holds two things
FILE_ALARM_LINES = 450  # every top-level .py (a flat trainer may run longer: see below)
# files that hold one thing at more length, and why
LONGER = {"train": (600, "a flat loop a learner reads top to bottom"),
          "train_mlp": (600, "the image MLP's flat loop"),
          "model": (700, "the GPT, the accounting every model shares, KV-cached generation"),
          "bench": (700, "every speed measurement: training steps and generation"),
          "shapes": (600, "every shape: by name, matched to one budget, presets, table, picture"),
          "compare": (700, "one comparison: the runs of its phases, the command, its report"),
          "shapelab.configurator": (600, "config files as data, --key=value, --help"),
          "shapelab.run": (700, "a run's folder, how it ends, its time limit, resume")}
README_ALARM_LINES = 300
MECHANISM_DOCSTRING_MAX_LINES = 40  # paper, idea, equations, pointers; the deviations: docs/
MODEL_DOCSTRING_MAX_LINES = 25  # model.py: what it is, the equations; the rest on its classes
TRAINERS = {"mlp_hourglass": "train_mlp"}  # a mechanism's own trainer its experiments may call


def repo_files():
    """{name: path} of every Python file outside tests/: top-level modules by module name,
    shapelab's by its dotted name, the others (experiments/, data/) by their path."""
    files = {p.stem: p for p in ROOT.glob("*.py")}
    files.update({f"shapelab.{p.stem}": p for p in ROOT.glob("shapelab/*.py")})
    for p in [*ROOT.glob("experiments/*.py"), *ROOT.glob("data/*.py"), *ROOT.glob("data/*/*.py")]:
        files[str(p.relative_to(ROOT))] = p
    return files


def imported_modules(source, known):
    """The names in `known` that `source` imports anywhere (module level or inside functions):
    a top-level module by its name, a library module by its dotted name."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.update({node.module, node.module.split(".")[0]})
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):  # a relative import: only the library has them
            raise AssertionError("a relative import: write `from shapelab.x import y`")
    return found & known


def import_graph():
    files = repo_files()
    modules = {name for name in files if "/" not in name}
    return {name: imported_modules(path.read_text(), modules) for name, path in files.items()}


def find_cycle(graph):
    """A list of names forming an import cycle, or None."""
    state = {}  # name -> 'open' while on the DFS path, 'done' after

    def visit(name, path):
        state[name] = "open"
        for dep in sorted(graph.get(name, ())):
            if state.get(dep) == "open":
                return path[path.index(dep):] + [dep] if dep in path else path + [dep]
            if dep not in state and (cycle := visit(dep, path + [dep])):
                return cycle
        state[name] = "done"
        return None

    for name in sorted(graph):
        if name not in state and (cycle := visit(name, [name])):
            return cycle
    return None


def test_the_checker_sees_imports_inside_functions_and_finds_cycles():
    source = ("import torch\nfrom model import GPT\ndef f():\n    from bench import x\n"
              "    import compose.sub\n    from shapelab import run\n"
              "    from shapelab.lock import FileLock\n")
    known = {"model", "bench", "compose", "cea", "shapelab.run", "shapelab.lock", "shapelab.plot"}
    assert imported_modules(source, known) == {
        "model", "bench", "compose", "shapelab.run", "shapelab.lock"}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_file_imports_a_file_that_imports_it_back():
    graph = import_graph()
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"


def test_the_top_level_holds_the_papers_and_the_commands():
    """`ls *.py` shows what a reader reads and what a user runs; the plumbing is in shapelab/."""
    top, meant = {p.stem for p in ROOT.glob("*.py")}, PAPERS | set(COMPOSERS) | COMMANDS
    assert top == meant, (f"at the top but neither a paper nor a command: {sorted(top - meant)}; "
                          f"missing: {sorted(meant - top)}")


# Each script as `python <script>` starts it from another folder: its own folder first on the path,
# nothing of the repository imported yet. The tests run most scripts in their own process
# (conftest.run_here), where the repository is already on the path; this one interpreter imports
# every script in turn as a fresh start would, so a script that cannot find model.py or shapelab/
# from its own folder fails here. (train.py and sample.py run top to bottom: tests start them as
# processes of their own.)
# The interpreter's own modules stay (torch, numpy: a venv in the repository's folder, as README
# sets one up, puts them under it, and torch imported twice in one process crashes it).
FRESH_STARTS = """
import os, runpy, site, sys, sysconfig
root, scripts = sys.argv[1], sys.argv[2:]
after_its_folder = sys.path[1:]
interpreters = {sys.prefix, sys.base_prefix, *site.getsitepackages(),
                *sysconfig.get_paths().values()}
interpreters = tuple(os.path.join(os.path.realpath(path), "") for path in interpreters)
for script in scripts:
    for name, module in list(sys.modules.items()):
        path = os.path.realpath(getattr(module, "__file__", None) or os.sep)
        if path.startswith(os.path.realpath(root) + os.sep) and not path.startswith(interpreters):
            del sys.modules[name]
    sys.path[:] = [os.path.dirname(script), *after_its_folder]
    runpy.run_path(script, run_name="started_elsewhere")
    print("imported", script)
"""


def test_every_script_imports_from_its_own_folder_in_a_fresh_interpreter(tmp_path):
    scripts = [p for p in [*ROOT.glob("*.py"), *(ROOT / "experiments").glob("*.py"),
                           ROOT / "tests" / "workshop" / "check.py"]
               if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")]
    assert len(scripts) >= 25, scripts
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", FRESH_STARTS, str(ROOT), *map(str, scripts)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("imported ") == len(scripts), done.stdout


def test_the_fresh_starts_keep_a_venv_in_the_repository_folder(tmp_path):
    """README makes its venv in the repository's .venv: the fresh starts above must not drop the
    modules installed there (a second import of torch crashed the interpreter). Here a venv in a
    stand-in repository holds a module that refuses a second import, and two scripts import it."""
    import venv

    venv.create(tmp_path / ".venv", with_pip=False)
    python = tmp_path / ".venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site_packages = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / site_packages / "imported_once.py").write_text(
        "import builtins\n"
        "assert not hasattr(builtins, 'imported_once'), 'imported twice'\n"
        "builtins.imported_once = True\n")
    scripts = [tmp_path / "a.py", tmp_path / "b.py"]
    for script in scripts:
        script.write_text("import imported_once\n")
    done = subprocess.run([python, "-c", FRESH_STARTS, str(tmp_path), *map(str, scripts)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.count("imported ") == 2, done.stderr[-2000:]


def test_the_library_imports_nothing_from_the_top_level():
    graph = import_graph()
    top = {name for name in graph if "/" not in name and "." not in name}
    for name in LIBRARY:
        assert not graph[name] & top, (
            f"{name} imports {sorted(graph[name] & top)}: the library sits below the papers and "
            f"the commands (pass what it needs in, as shapes.build_model passes classes to build)")


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_a_mechanism_file_imports_only_model_and_the_configurator(mechanism):
    extra = import_graph()[mechanism] - {"model", "shapelab", "shapelab.configurator"}
    assert not extra, (
        f"{mechanism}.py imports {sorted(extra)}: a mechanism file holds what its paper proposes"
    )


def test_model_and_the_entry_points_import_no_mechanism_or_driver():
    graph = import_graph()
    assert graph["model"] <= LIBRARY | {"shapelab"}, f"model.py imports {sorted(graph['model'])}"
    for name in ENTRY_POINTS:
        allowed = LEAVES | {"shapelab", "shapes"}
        assert graph[name] <= allowed, f"{name}.py imports {sorted(graph[name] - allowed)}"


def test_only_the_data_scripts_use_the_data_side_download_helpers():
    """data/sources.py (registry fallbacks, sha256 pins, .bin writers) is for data/*/prepare.py:
    a training run, a model or an experiment never downloads anything."""
    for name, path in repo_files().items():
        if not name.startswith("data/"):
            assert "data.sources" not in path.read_text(), f"{name} imports data/sources.py"


def test_data_scripts_import_no_model_file_and_experiments_no_driver():
    graph = import_graph()
    for name, deps in graph.items():
        if name.startswith("data/"):
            assert deps <= LIBRARY | {"shapelab"}, (
                f"{name} imports {sorted(deps)}: data never imports a model file"
            )
        # experiments/<mechanism>_<what>.py: its own mechanism (and its trainer) and leaves
        if name.startswith("experiments/"):
            own = {m for m in MECHANISMS if name.startswith(f"experiments/{m}_")}
            assert len(own) == 1, f"{name}: name it experiments/<mechanism>_<what>.py"
            own |= {TRAINERS[m] for m in own if m in TRAINERS} | {"shapelab", "shapes"}
            assert deps <= LEAVES | own, f"{name} imports {sorted(deps - LEAVES - own)}"
            stem = name.rsplit("/", 1)[-1].removesuffix(".py")
            assert stem not in graph, f"{name} would shadow {stem}.py when run from experiments/"


def test_no_python_line_is_wider_than_100_columns():
    """ruff (pyproject.toml) checks this too, but lets a line through that ends in a pragma or a
    URL; a reader's screen does not."""
    files = [*repo_files().values(), *ROOT.glob("config/*.py"), *ROOT.glob("tests/**/*.py"),
             *ROOT.glob("workshop/*.py")]
    wide = [f"{path.relative_to(ROOT)}:{number}" for path in files
            for number, line in enumerate(path.read_text().splitlines(), 1) if len(line) > 100]
    assert not wide, f"lines over 100 columns: {', '.join(wide)}"


def test_no_file_is_long_enough_to_hold_two_things():
    """An alarm, not a target: past it, look for a second thing the file's name does not say."""
    long = []
    for name, path in repo_files().items():
        limit = LONGER.get(name, (FILE_ALARM_LINES,))[0]
        if "/" not in name and len(path.read_text().splitlines()) > limit:
            lines = len(path.read_text().splitlines())
            long.append(f"{path.relative_to(ROOT)} ({lines} lines > {limit})")
    readme = len((ROOT / "README.md").read_text().splitlines())
    if readme > README_ALARM_LINES:
        long.append(f"README.md ({readme} lines > {README_ALARM_LINES}: write-ups go in docs/)")
    assert not long, "; ".join(long)


def module_docstring(name):
    return ast.get_docstring(ast.parse((ROOT / f"{name.replace('.', '/')}.py").read_text())) or ""


def test_every_file_opens_with_what_it_is_and_docstrings_stay_short():
    missing = [name for name in repo_files() if "/" not in name and not module_docstring(name)]
    assert not missing, f"no module docstring in {missing}: a file opens with what it is"
    for name in MECHANISMS | {"compose"}:
        doc = module_docstring(name).splitlines()
        assert len(doc) <= MECHANISM_DOCSTRING_MAX_LINES, (
            f"{name}.py's docstring has {len(doc)} lines: the deviations belong in docs/{name}.md")
    doc = module_docstring("model").splitlines()
    assert len(doc) <= MODEL_DOCSTRING_MAX_LINES, (
        f"model.py's docstring has {len(doc)} lines: move passages onto what they describe")
    tree = ast.parse((ROOT / "model.py").read_text())
    gpt = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GPT")
    assert ast.get_docstring(gpt), "model.GPT has no docstring"


def top_level_names(name):
    """The functions, classes and module-level assignments of a top-level file."""
    names = set()
    for node in ast.parse((ROOT / f"{name.replace('.', '/')}.py").read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


# what a mechanism file never holds: the comparison's library, the paper's tables, a plot
NOT_A_MECHANISM = re.compile(r"PRESET|preset|_table$|^table|TABLE|plot|^matched_shapes$|^main$")


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS | {"compose"}))
def test_a_mechanism_file_holds_no_preset_table_plot_or_command_line(mechanism):
    """A mechanism file holds what its paper proposes. Presets and the matched shapes live in
    shapes.py, the papers' tables in experiments/<mechanism>_tables.py, plots with the scripts
    that draw them. A mechanism may end in a short `__main__` that prints its shape (model.py's
    describe); compose.py has none (shapes.py prints the composed shapes)."""
    source = (ROOT / f"{mechanism}.py").read_text()
    found = sorted(n for n in top_level_names(mechanism) if NOT_A_MECHANISM.search(n))
    assert not found, f"{mechanism}.py defines {found}: they belong in shapes.py or experiments/"
    for module in ("argparse", "matplotlib", "csv"):
        assert not re.search(rf"^\s*(import|from) {module}\b", source, re.M), (
            f"{mechanism}.py imports {module}: a command line or a plot lives elsewhere")
    main = source.split('if __name__ == "__main__":')
    if mechanism == "compose":
        assert len(main) == 1, "compose.py has a command line: `python shapes.py` prints shapes"
    elif len(main) == 2:
        assert len(main[1].splitlines()) <= 30, f"{mechanism}.py's __main__ is more than a print"


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS | {"compose"}))
def test_a_mechanism_file_opens_on_its_mechanism(mechanism):
    """After the docstring and the imports a reader meets what the paper proposes (hourglass.py's
    HourglassFFN, variable_width.py's VariableWidthGPT, lws.py's layer_specs), then its config,
    then matching and checks: not a table of names, a validator or the config first."""
    body = [n for n in ast.parse((ROOT / f"{mechanism}.py").read_text()).body
            if not isinstance(n, (ast.Import, ast.ImportFrom, ast.Expr))]
    first = body[0]
    assert isinstance(first, (ast.FunctionDef, ast.ClassDef)), (
        f"{mechanism}.py opens on line {first.lineno} with a table or setting: the mechanism first")
    is_config = any(getattr(d, "id", None) == "dataclass" for d in first.decorator_list)
    assert not is_config and not first.name.startswith(("check", "match", "count")), (
        f"{mechanism}.py opens on {first.name}: the mechanism first, then its config and checks")


def test_each_name_lives_in_the_file_that_says_it():
    """Each name below lives in the file that says it (home), not in the file listed with it."""
    homes = [("shapes", "compose", ("matched_shapes", "PRESETS", "shapes_table", "plot_shapes")),
             ("shapelab.run", "shapelab.checkpoint",
              ("RunDir", "TimePlan", "resume_settings", "restore_rng")),
             ("shapes", "shapelab.checkpoint", ("model_from_checkpoint",)),
             ("shapes", "shapelab.configurator", ("MODELS", "build_model", "matched_model_args")),
             ("shapelab.image_tasks", "mlp_hourglass",
              ("ssim", "Task", "TASKS", "degrade", "MetricAccumulator"))]
    for home, other, names in homes:
        here = top_level_names(other)
        assert not here & set(names), f"{other} holds {sorted(here & set(names))}"
        assert set(names) <= top_level_names(home), f"{home} lacks {names}"


def test_imports_run_downward_through_compose_shapes_and_the_drivers():
    """mechanisms <- compose.py <- shapes.py <- compare.py / bench.py, and never back up."""
    graph = import_graph()
    below = LEAVES | {"shapelab"} | MECHANISMS
    assert graph["compose"] <= below, f"compose.py imports {graph['compose']}"
    assert graph["shapes"] <= below | {"compose"}, (
        f"shapes.py imports {sorted(graph['shapes'] - below - {'compose'})}")
    for driver in DRIVERS:
        assert "compose" not in graph[driver], f"{driver}.py imports compose.py: use shapes.py"
        assert "shapes" in graph[driver], f"{driver}.py does not take its shapes from shapes.py"
    for name, deps in graph.items():
        if name in LEAVES | MECHANISMS | {"compose"}:
            assert not deps & (DRIVERS | {"shapes"}), f"{name} imports {deps & DRIVERS}"


def test_one_name_means_one_thing():
    """A name defined at the top level of two files means two things to a reader who greps."""
    clashes = {"build_model": ("shapes",), "load_checkpoint": ("shapelab.checkpoint",),
               "SHAPES": (), "budget": ()}
    for word, owners in clashes.items():
        holders = sorted(n for n in repo_files() if "/" not in n and word in top_level_names(n))
        assert set(holders) <= set(owners), f"{word} is defined in {holders}"


def calls_in(name):
    """{(owner, function)} of every call in a file: ('torch', 'load') for torch.load(...), (None,
    'need') for need(...), ('run', 'diverged') for run.diverged(...) - the owner a plain name."""
    found = set()
    for node in ast.walk(ast.parse((ROOT / f"{name.replace('.', '/')}.py").read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            found.add((None, node.func.id))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value.id if isinstance(node.func.value, ast.Name) else "?"
            found.add((owner, node.func.attr))
    return found


# the plumbing both trainers share (shapelab/), as train_mlp.py calls it: each written once
SHARED_PLUMBING = {"resume_policy": "the resume policy (run.py)",
                   "diverged": "RunDir.diverged: how a diverged run ends (run.py)",
                   "all_finite": "whether every weight is finite (run.py)",
                   "load_checkpoint": "reading a checkpoint (checkpoint.py)",
                   "write_atomic": "writing a whole file (checkpoint.py)",
                   "pick_device": "the device 'auto' picks (hardware.py)",
                   "check_device": "the device settings a machine can use (configurator.py)",
                   "need": "a settings check of one line (configurator.py)"}


def test_both_trainers_take_their_plumbing_from_the_library():
    """train_mlp.py resumes, stops on divergence, reads checkpoints, picks and checks its device
    and writes its files through the functions train.py uses (shapelab/), and holds no copy of
    its own: no torch.load, os.replace, FileLock or Diverged of its own."""
    mlp = {function for _, function in calls_in("train_mlp")}
    missing = {k: v for k, v in SHARED_PLUMBING.items() if k not in mlp}
    assert not missing, f"train_mlp.py does not call {missing}"
    own = top_level_names("train_mlp") & {*SHARED_PLUMBING, "Diverged", "FileLock", "resumed"}
    assert not own, f"train_mlp.py defines its own {sorted(own)}"
    source = (ROOT / "train_mlp.py").read_text()
    copies = [(owner, f) for owner, f in calls_in("train_mlp") if (owner, f) in {
        ("torch", "load"), ("os", "replace"), ("os", "rename"), (None, "FileLock")}]
    assert not copies and "FileLock" not in source and "class Diverged" not in source, copies
    train = {function for _, function in calls_in("train")}
    assert {"diverged", "all_finite", "pick_device", "resume_settings"} <= train
    assert (None, "resume_policy") in calls_in("shapelab.run")  # resume_settings' policy
    assert (None, "check_device") in calls_in("shapelab.configurator")  # train.py's checks


def doc_files():
    """README, docs, the data readmes, and the workshop's exercise files (their docstrings are
    docs)."""
    return (
        [ROOT / "README.md"]
        + sorted(ROOT.glob("docs/*.md"))
        + sorted(ROOT.glob("data/*/readme.md"))
        + sorted(ROOT.glob("workshop/*.py"))
    )


def test_docs_name_only_files_that_exist():
    """Every `python path.py` in a command and every linked file of README.md, docs/ and the data
    readmes exists (a moved script or figure leaves no dead command behind)."""
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


def test_the_repo_stands_alone():
    """Readers have only the repo: it cites papers and public code, never notes they cannot see."""
    # (character classes keep this line from matching itself in a plain grep of the repo)
    pattern = re.compile(
        r"DESIGN[.]md|REFERENCE[_]FACTS|DATA[.]md|[.][.]/shared|[/]shared/|shared[/]papers|"
        r"\bthe issue\b|issue #?\d"
    )
    hits = []
    # this file names them
    tests = [p for p in sorted(ROOT.glob("tests/**/*.py")) if p.name != "test_layout.py"]
    for path in (
        list(repo_files().values()) + doc_files() + sorted(ROOT.glob("config/*.py")) + tests
    ):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, "\n".join(hits)


# Phrases that tell the code's own past ("the old name still works until the next release"): a
# comment says why the code is as it is, never what it was. What happens while a program runs is
# not history ("the rows measured so far", "the verdict so far", "the old run is set aside").
HISTORY = re.compile(
    r"\bthe old name|\bold names?\b|\bthe names before\b|until the next release|\bas before\b"
    r"|\b(it|this|that|which|they) used to\b|\bused to be\b|\b(an|the) old version\b"
    r"|\bolder (version|release|checkout|prepare|train_mlp|sweep|csv|checkpoint|record)s?\b"
    r"|\btoday's\b|\bstill works\b|\bis now --|\bcame later\b"
    r"|\b(checkpoints?|versions?|releases?) so far\b", re.I)


def test_history_checker_flags_the_past_and_not_what_runs():
    past = ["# the old name still works, with a note, until the next release",
            "# (and in every checkpoint so far)", "saved by an older train_mlp.py",
            "a CSV of an older version is read in today's words", "it used to train nothing",
            "# model_args stay as before", "note: --hourglass_k is now --n_sub_blocks"]
    present = ["the rows measured so far", "the CPU verdict so far", "every position so far",
               "sets the old run aside", "float16 on older cards", "the tokenizer used to encode",
               "tokens seen before this step", "where the old plan had it"]
    assert all(HISTORY.search(text) for text in past), [t for t in past if not HISTORY.search(t)]
    assert not any(HISTORY.search(text) for text in present), [
        t for t in present if HISTORY.search(t)]


def test_the_code_and_readme_speak_in_the_present_tense():
    """No comment, docstring, message or README sentence tells what the code was before: there
    are no releases, and a reader needs the why of the code as it is. (docs/ pages tell how each
    result came about; this file names the phrases.)"""
    paths = [*repo_files().values(), *ROOT.glob("config/*.py"), *ROOT.glob("workshop/*.py"),
             *(p for p in ROOT.glob("tests/**/*.py") if p.name != "test_layout.py"),
             ROOT / "README.md", *ROOT.glob("data/*/readme.md")]
    hits = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}" for path in sorted(paths)
            for i, line in enumerate(path.read_text().splitlines(), 1) if HISTORY.search(line)]
    assert not hits, "the code's past told in:\n" + "\n".join(hits)
