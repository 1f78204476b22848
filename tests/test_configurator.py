"""Config files are data: configurator.read_config_file reads `name = literal` lines without running
the file, and anything else stops in one line naming the file and the line."""

import math

import pytest

from conftest import ROOT, run_here
from shapelab.configurator import ConfigError, parse_overrides, read_config_file

CONFIG_FILES = sorted((ROOT / "config").glob("*.py"))


def own_lines(path):
    """What running a config file alone gives (what nanoGPT's configurator did)."""
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


def executed(path):
    """What running a config file gives, with its base run first."""
    own = own_lines(path)
    base = own.pop("base", None)
    return {**executed(path.parent / base), **own} if base else own


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.name)
def test_every_config_file_reads_to_the_values_running_it_gives(path):
    read, ran = read_config_file(path), executed(path)
    assert read == ran
    assert [type(read[k]) for k in read] == [type(ran[k]) for k in read]


@pytest.mark.parametrize("path", [p for p in CONFIG_FILES if "base" in own_lines(p)],
                         ids=lambda p: p.name)
def test_a_config_that_extends_another_says_only_what_differs(path):
    own = own_lines(path)
    base = read_config_file(path.parent / own.pop("base"))
    assert not [k for k, v in own.items() if base.get(k) == v], f"{path.name} repeats its base"


def test_a_base_config_is_read_first_and_every_line_of_the_file_overrides_it(tmp_path):
    (tmp_path / "parent.py").write_text("a = 1\nb = 2\nc = 3\n")
    (tmp_path / "middle.py").write_text('b = 20\nbase = "parent.py"\nd = 4\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "child.py").write_text('c = 300\nbase = "../middle.py"\n')
    assert read_config_file(tmp_path / "middle.py") == dict(a=1, b=20, c=3, d=4)
    assert read_config_file(tmp_path / "sub" / "child.py") == dict(a=1, b=20, c=300, d=4)
    config = parse_overrides([str(tmp_path / "sub" / "child.py"), "--b=7"],
                             dict(a=0, b=0, c=0, d=0))
    assert config == dict(a=1, b=7, c=300, d=4)


@pytest.mark.parametrize("files, says", [
    ({"a.py": 'base = "a.py"\n'}, "base 'a.py' leads back to itself (a.py -> a.py)"),
    ({"a.py": 'base = "b.py"\n', "b.py": 'x = 1\nbase = "a.py"\n'},
     "base 'a.py' leads back to itself (a.py -> b.py -> a.py)"),
    ({"a.py": 'base = "gone.py"\n'}, "base 'gone.py' not found"),
    ({"a.py": "base = 3\n"}, "base=3: name the config file it extends"),
    ({"a.py": 'base = "b.py"\n', "b.py": "import os\n"}, "b.py, line 1: only assignments"),
])
def test_a_missing_base_a_cycle_or_a_bad_base_is_one_line(tmp_path, files, says):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError) as error:
        read_config_file(tmp_path / "a.py", name="a.py")
    assert says in str(error.value) and "\n" not in str(error.value)


def test_literals_and_arithmetic_on_them_are_allowed(tmp_path):
    path = tmp_path / "c.py"
    path.write_text('"""A docstring."""\n# a comment\nbatch_size = 8 * 4  # 32\n'
                    "learning_rate = 6e-4 / 2\nmin_lr = -(1e-5) + 2e-5\n"
                    "steps = 2 ** 10 // 3 % 100\n"
                    "model_args = {'ffn_scalars': [0.5, 4.0], 'pair': (1, 2), 'on': True}\n"
                    "names = {'a'}\nn_kv_head = None\nout_dir = 'out' + '-x'\nlayers = [128] * 3\n"
                    "batch_size = 16\n")  # the last assignment wins
    assert read_config_file(path) == dict(
        batch_size=16, learning_rate=3e-4, min_lr=-(1e-5) + 2e-5, steps=41,
        model_args={"ffn_scalars": [0.5, 4.0], "pair": (1, 2), "on": True}, names={"a"},
        n_kv_head=None, out_dir="out-x", layers=[128, 128, 128])


REFUSED = {  # source -> what the one line says
    "os.system": ('n_layer = 2\nimport os; os.system("touch {touched}")\n',
                  "line 2: only assignments of literals are allowed (found an import: import os)"),
    "call": ('learning_rate = __import__("os").system("touch {touched}")\n',
             "line 1: only assignments of literals are allowed (found a call: __import__"),
    "call inf": ("learning_rate = float('inf')\n", "line 1: only assignments of literals are "
                 "allowed (found a call: float(...))"),
    "syntax error": ("n_layer = 2\nn_embd = (64\n", "line 2: not valid Python"),
    "raise": ('raise SystemExit("stop")\n', "line 1: only assignments of literals are allowed "
              "(found a raise statement: raise SystemExit('stop'))"),
    "import": ("from os import system\n", "line 1: only assignments of literals are allowed "
               "(found an import: from os import system)"),
    "name": ("max_iters = 100\nlr_decay_iters = max_iters\n", "line 2: only assignments of "
             "literals are allowed (found a name: max_iters)"),
    "attribute": ("import_free = 1\nlearning_rate = math.pi\n", "line 2: only assignments of "
                  "literals are allowed (found an attribute: math.pi)"),
    "augmented": ("n_layer = 2\nn_layer += 1\n", "line 2: only assignments of literals are "
                  "allowed (found an augmented assignment: n_layer += 1)"),
    "if": ("if True:\n    n_layer = 2\n", "line 1: only assignments of literals are allowed "
           "(found an if statement: if True:)"),
    "lambda": ("n_layer = lambda: 2\n", "(found a lambda: lambda: 2)"),
    "division by zero": ("n_layer = 1 // 0\n", "line 1: cannot compute 1 // 0 (integer division"),
    "huge power": ("n_layer = 2 ** 10 ** 10\n", "(found a value too large to compute"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_anything_but_literals_stops_in_one_line_naming_file_and_line(case, tmp_path):
    source, message = REFUSED[case]
    touched = tmp_path / "touched"
    path = tmp_path / "bad.py"
    path.write_text(source.format(touched=touched))
    with pytest.raises(ConfigError) as error:
        parse_overrides([str(path)], dict(n_layer=6, n_embd=64, learning_rate=1e-3, max_iters=0,
                                          lr_decay_iters=0))
    assert str(error.value).startswith(f"{path}, line ") and message in str(error.value)
    assert "\n" not in str(error.value)
    assert not touched.exists()  # never run


def test_a_config_file_with_os_system_stops_train_py_with_exit_status_2(tmp_path):
    touched = tmp_path / "touched"
    config = tmp_path / "evil.py"
    config.write_text(f'import os\nos.system("touch {touched}")\nmax_iters = 1\n')
    result = run_here("train.py", config, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (f"error: {config}, line 1: only assignments of literals are allowed "
                             f"(found an import: import os)\n")
    assert not touched.exists()


def test_an_override_of_a_none_default_takes_its_declared_type():
    defaults, types = dict(noise_sigma=None, dtype=None), dict(noise_sigma=float, dtype=str)
    for text in ("nan", "inf", "-inf"):
        value = parse_overrides([f"--noise_sigma={text}"], defaults, types=types)["noise_sigma"]
        assert isinstance(value, float) and (math.isnan(value) or math.isinf(value))
    assert parse_overrides(["--noise_sigma=0.5"], defaults, types=types)["noise_sigma"] == 0.5
    assert parse_overrides(["--noise_sigma=None"], defaults, types=types)["noise_sigma"] is None
    assert parse_overrides(["--dtype=2024"], defaults, types=types)["dtype"] == "2024"
    assert parse_overrides(["--dtype=None"], defaults, types=types)["dtype"] is None
    with pytest.raises(ConfigError, match="noise_sigma='x' is a str"):
        parse_overrides(["--noise_sigma=x"], defaults, types=types)
