"""
Configuration for train.py, sample.py and the mechanism files' command lines.

    python train.py config/train_shakespeare_char.py --batch_size=32 --compile=False

Arguments are read left to right: a path ending in .py is a config file of plain Python
assignments; `--key=value` overrides one key. Values are Python literals (`--lr=3e-4`,
`--compile=False`, `--model_args={'n_sub_blocks': 4}`); anything that is not a literal is
taken as a string (`--device=cuda`). A key that is not a default, or a value whose type
does not match the default's, is an error that names the key: a typo never trains the
wrong model silently. (nanoGPT's configurator exec()s into globals; this one checks.)

It also holds `build_model`, the one place where a `model_type` name becomes a model:
mechanisms compose in this config/build code, never by importing each other.
"""

import ast
import importlib
from pathlib import Path


class ConfigError(ValueError):
    pass


def _checked(key, value, default, where, types=None):
    """Return value converted to the key's type, or raise a ConfigError naming key. The type is the
    default's, or types[key] for a key whose default is None (which may then also be None)."""
    if types is None and (default is None or value is None):
        return value  # no declared types: a None default takes any value (the mechanism CLIs)
    if default is None:
        if value is None:
            return value
        expected = types[key]
    else:
        expected = type(default)
    if expected is bool or isinstance(value, bool):
        ok = isinstance(value, bool) and expected is bool
    elif expected is float and isinstance(value, int):
        return float(value)
    else:
        ok = isinstance(value, expected)
    if not ok:
        allowed = " or None" if default is None else ""
        raise ConfigError(f"{where}: {key}={value!r} is a {type(value).__name__}, but {key} must be a "
                          f"{expected.__name__}{allowed} (default {default!r})")
    return value


def _parse_value(text, default):
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # not a literal: a bare string such as cuda or resume
    if isinstance(default, str) and not isinstance(value, str):
        return text  # --out_dir=2024 means the string '2024'
    return value


def parse_overrides(argv, defaults, apply_to=None, types=None, given=None):
    """Apply config files and --key=value overrides in argv to a copy of `defaults`.
    Returns the new dict; if `apply_to` (e.g. globals()) is given it is updated too.
    `types` gives the type of each key whose default is None (train.py declares them): with it, every
    key is type-checked and a None default must have an entry. If `given` is a set, the keys that the
    arguments set are added to it."""
    if types is not None:
        untyped = [k for k, v in defaults.items() if v is None and k not in types]
        if untyped:
            raise ValueError(f"no declared type for {', '.join(untyped)} (default None): add it to `types`")
    config = dict(defaults)
    given = set() if given is None else given
    for arg in argv:
        if not arg.startswith("--"):
            path = Path(arg)
            if path.suffix != ".py":
                raise ConfigError(f"argument {arg!r}: expected a config file (path/to/file.py) or --key=value")
            if not path.is_file():
                raise ConfigError(f"config file {arg} not found (the configs live in config/)")
            namespace = {}
            exec(compile(path.read_text(), str(path), "exec"), namespace)
            for key, value in namespace.items():
                if key.startswith("_") or key == "__builtins__" or callable(value) or type(value).__name__ == "module":
                    continue
                if key not in config:
                    raise ConfigError(f"config file {arg}: unknown key {key!r}. Known keys: {', '.join(sorted(config))}")
                config[key] = _checked(key, value, defaults[key], f"config file {arg}", types)
                given.add(key)
        else:
            key, sep, text = arg[2:].partition("=")
            if not sep:
                raise ConfigError(f"argument {arg!r}: write overrides as --{key}=value")
            if key not in config:
                close = [k for k in config if k.startswith(key[:3])]
                hint = f" Did you mean {', '.join(close)}?" if close else ""
                raise ConfigError(f"unknown config key {key!r} in {arg!r}.{hint} Known keys: {', '.join(sorted(config))}")
            config[key] = _checked(key, _parse_value(text, defaults[key]), defaults[key], f"override {arg}", types)
            given.add(key)
    if apply_to is not None:
        apply_to.update(config)
    return config


# The train.py settings every model builder takes; `model_args` adds a mechanism's own.
MODEL_KEYS = ("block_size", "n_layer", "n_head", "n_kv_head", "n_embd", "head_dim", "ffn_hidden", "qk_norm",
              "tie_embeddings", "dropout")


def train_defaults():
    """train.py's default settings, read (not run) from its `key = literal` lines above `config_keys`,
    so that other tools read a train.py config file exactly as train.py does."""
    defaults = {}
    for node in ast.parse((Path(__file__).resolve().parent / "train.py").read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "config_keys":
                break
            defaults[node.targets[0].id] = ast.literal_eval(node.value)
    return defaults


# model_type -> the file that defines it. Each file has build_model(**model_args) -> GPT.
MODEL_FILES = {
    "gpt": "model",
    "hourglass": "hourglass",
    "variable_width": "variable_width",
    "cea": "cea",
    "lws": "lws",
    "composed": "compose",  # several mechanisms in one model (hourglass FFNs in a ><former, ...)
}


def build_model(model_type, **model_args):
    """Build a model from a model_type name and the keyword arguments of its builder."""
    if model_type not in MODEL_FILES:
        raise ConfigError(f"model_type={model_type!r} is unknown; choose one of {', '.join(MODEL_FILES)}")
    module = importlib.import_module(MODEL_FILES[model_type])
    try:
        return module.build_model(**model_args)
    except TypeError as e:  # a misspelled model_args key lands here
        raise ConfigError(f"model_type={model_type!r}: {e}. Check model_args against "
                          f"{MODEL_FILES[model_type]}.py's build_model().") from e
