"""Config files are data (read, never run) and every setting is checked against its default."""

import pytest

from conftest import ROOT
from shapelab.configurator import (ConfigError, check_train_settings, parse_overrides,
                                   read_config_file)
from shapes import check_model_settings, train_defaults


def executed(path):
    """What running a config file gives (nanoGPT's configurator), its base run first."""
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    own = {k: v for k, v in namespace.items() if not k.startswith("__")}
    base = own.pop("base", None)
    return {**executed(path.parent / base), **own} if base else own


def test_every_config_file_reads_to_the_values_running_it_gives():
    for path in sorted((ROOT / "config").glob("*.py")):
        read, ran = read_config_file(path), executed(path)
        assert read == ran and [type(v) for v in read.values()] == [type(ran[k]) for k in read]


@pytest.mark.parametrize("path", [p.name for p in sorted((ROOT / "config").glob("*.py"))
                                  if not p.name.startswith(("mlp_", "compare_"))])
def test_every_train_config_passes_the_checks_a_run_starts_with(path):
    config = parse_overrides([str(ROOT / "config" / path)], train_defaults())
    check_train_settings(config, here=False)
    check_model_settings(config)  # its model, built on the meta device


def test_literals_arithmetic_on_numbers_and_a_base_are_read(tmp_path):
    (tmp_path / "parent.py").write_text("a = 1\nb = 2\n")
    (tmp_path / "c.py").write_text(
        '"""A docstring."""\nbatch_size = 8 * 4  # 32\nlr = -6e-4 / 2\nsteps = 2 * 10 - 3 + 24\n'
        "args = {'pair': (1, 2), 'on': True, 'names': {'x'}}\nnone = None\n"
        'b = 20\nbase = "parent.py"\n')
    assert read_config_file(tmp_path / "c.py") == dict(
        a=1, b=20, batch_size=32, lr=-3e-4, steps=41,
        args={"pair": (1, 2), "on": True, "names": {"x"}}, none=None)


@pytest.mark.parametrize("source", [
    "n = 2\nimport os\n", "n = float('inf')\n", "n = 2\nm = n\n", "n = 1\nn += 1\n",
    "if True:\n    n = 2\n", "n = 1 // 0\n", "n = 2 ** 10 ** 10\n", "n = [0] * 9\n",
    "n = 'a' + 'b'\n", "n = (64\n", "n = {[1]: 2}\n", 'base = "gone.py"\n', 'base = "bad.py"\n'])
def test_anything_but_literals_and_arithmetic_on_numbers_is_one_line(source, tmp_path):
    (tmp_path / "bad.py").write_text(source)
    with pytest.raises(ConfigError) as error:
        read_config_file(tmp_path / "bad.py")
    assert str(error.value).startswith(str(tmp_path / "bad.py")) and "\n" not in str(error.value)


def test_overrides_are_literals_checked_against_the_defaults_type():
    defaults = dict(n_layer=4, lr=1e-3, compile=False, out_dir="out", seeds=(0,), sigma=None)
    types = dict(sigma=float)
    assert parse_overrides(["--n_layer=6", "--lr=1", "--out_dir=2024", "--seeds=1,2",
                            "--sigma=0.5"], defaults, types=types) == dict(
        n_layer=6, lr=1.0, compile=False, out_dir="2024", seeds=(1, 2), sigma=0.5)
    assert parse_overrides(["--seeds=", "--sigma=None"], defaults, types=types)["seeds"] == ()
    for bad, says in (("--n_layr=6", "Did you mean n_layer?"), ("--compile=1", "must be a bool"),
                      ("--n_layer=True", "must be a int"), ("--n_layer", "--n_layer=value"),
                      ("--sigma=x", "must be a float or None"),
                      ("--x" * 10**5 + "=1", "unknown config key"),
                      ("--lr=" + "[" * 10**5, "float")):
        with pytest.raises(ConfigError, match=says) as error:
            parse_overrides([bad], defaults, types=types)
        assert len(str(error.value)) < 200
