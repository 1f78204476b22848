"""
Settings for every command: config files, then --key=value, left to right. A config file is data,
never run: `name = value` lines of literals or + - * / on numbers; `base = "other.py"` is read
first. A --key=value is a literal, else a string, or for a tuple a comma-separated list.
"""

import ast
import dataclasses
import difflib
import math
import operator
import os
import re
import sys
from pathlib import Path
from reprlib import repr as shown  # a value in a message, its length bounded

OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
             ast.Div: operator.truediv}


class ConfigError(ValueError):
    pass


def need(ok, message):
    if not ok:
        raise ConfigError(message)


def usage_error(error):
    print(f"error: {error}", file=sys.stderr)
    raise SystemExit(2)


def _value(node, where):
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        values = [_value(node.left, where), _value(node.right, where)]
        need(all(type(v) in (int, float) for v in values),
             f"{where}: arithmetic is on numbers only")
        try:
            return OPERATORS[type(node.op)](*values)
        except ArithmeticError as e:
            raise ConfigError(f"{where}: {e}") from None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        raise ConfigError(f"{where}: only assignments of literals are allowed (found "
                          f"{ast.unparse(node)[:60]!r})") from None


def read_config_file(path):
    """{key: value} of a config file, read without running it, its base's settings first."""
    name = str(path)
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=name)
    except SyntaxError as e:
        raise ConfigError(f"{name}, line {e.lineno}: not valid Python ({e.msg})") from None
    except (OSError, ValueError, RecursionError, MemoryError) as e:  # (a UnicodeDecodeError)
        raise ConfigError(f"{name}: not a readable config file ({type(e).__name__})") from None
    settings = {}
    for node in tree.body:
        where = f"{name}, line {node.lineno}"
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring
        one_name = isinstance(node, ast.Assign) and len(node.targets) == 1
        need(one_name and isinstance(node.targets[0], ast.Name),
             f"{where}: only assignments of literals are allowed")
        settings[node.targets[0].id] = _value(node.value, where)
    base = settings.pop("base", None)
    if base is None:
        return settings
    base_path = Path(path).parent / str(base)
    need(isinstance(base, str) and base_path.is_file(), f"{name}: base {shown(base)} not found")
    try:
        return {**read_config_file(base_path), **settings}
    except RecursionError:
        raise ConfigError(f"{name}: base {base!r} leads back to itself") from None


def _parse(text, default, kind):
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = text
    if kind is tuple and not isinstance(value, tuple):
        items = text.strip("()[] ").split(",")
        return tuple(_parse(item.strip(), "", None) for item in items if item.strip())
    if kind is str and not isinstance(value, str) and not (value is None and default is None):
        return text  # --out_dir=2024 is the folder '2024'
    return value


def parse_overrides(argv, defaults, types=None, given=None, more_help=None):
    """`defaults` with argv applied; `types`: the types of the None defaults; `given` gets the keys
    set; `more_help()` prints what --help adds."""
    if "-h" in argv or "--help" in argv:
        print_help(defaults, more_help)
        raise SystemExit(0)
    types = {k: type(v) for k, v in defaults.items() if v is not None} | (types or {})
    config = dict(defaults)
    for arg in argv:
        if arg.startswith("--"):
            key, sep, text = arg[2:].partition("=")
            need(sep, f"argument {shown(arg)}: write it as --{shown(key)[1:-1]}=value")
            pairs, where = [(key, _parse(text, defaults.get(key), types.get(key)))], shown(arg)
        else:
            need(arg.endswith(".py") and os.path.isfile(arg),
                 f"argument {shown(arg)}: expected a config file (config/<name>.py) or --key=value")
            pairs, where = read_config_file(arg).items(), f"config file {arg}"
        for key, value in pairs:
            if key not in defaults:
                close = difflib.get_close_matches(key, defaults, n=3)
                raise ConfigError(f"{where}: unknown config key {shown(key)}"
                                  + (f". Did you mean {', '.join(close)}?" if close else ""))
            expected = types.get(key)
            value = float(value) if expected is float and type(value) is int else value
            need(expected is None or (value is None and defaults[key] is None)
                 or (isinstance(value, expected) and (expected is bool) == (type(value) is bool)),
                 f"{where}: {key}={shown(value)} is a {type(value).__name__}, but {key} must be "
                 f"a {getattr(expected, '__name__', '')}"
                 f"{' or None' if defaults[key] is None else ''}")
            config[key] = value
            if given is not None:
                given.add(key)
    return config


def print_help(defaults, more_help=None):
    main = sys.modules["__main__"]
    source = Path(main.__file__).read_text(encoding="utf-8")
    comments = dict(re.findall(r"^(\w+) = .*?  # (.*)$", source, re.MULTILINE))
    print((main.__doc__ or "").strip() + "\n\nsettings (config file lines or --key=value):")
    for key, value in defaults.items():
        print_entry(f"  --{key}={shown(value)}", comments.get(key, ""), 32)
    if more_help is not None:
        more_help()


def print_entry(left, text, column):
    print(f"{left:<{column}} {text}".rstrip())


def build(model_type, model_cls, config_cls, **model_args):
    known = {f.name for f in dataclasses.fields(config_cls) if f.init}
    unknown = sorted(set(model_args) - known)
    need(not unknown, f"model_type={model_type!r} has no setting {', '.join(unknown)}; its "
         f"settings: {', '.join(sorted(known - {'layers'}))}")
    try:
        return model_cls(config_cls(**model_args))
    except (AssertionError, ValueError, TypeError) as e:  # the models' own checks, in one line
        raise ConfigError(f"model_type={model_type!r}: {e}") from None


def check_device(device):
    """A ConfigError unless this machine has `device`."""
    import torch

    kind, _, index = device.partition(":")
    need(device in ("auto", "cpu", "cuda", "mps") or (kind == "cuda" and index.isdigit()),
         f"device={device!r}: use auto, cpu, cuda, cuda:<index> or mps")
    here = (int(index or 0) < torch.cuda.device_count() if kind == "cuda"
            else kind != "mps" or torch.backends.mps.is_available())
    need(here, f"device={device!r}: this machine has no {'MPS' if kind == 'mps' else 'CUDA GPU'}"
         f"{index and ' ' + index}: use --device=cpu or --device=auto")


RULES = [  # train.py's settings: (keys, what each must be, the one line's words)
    ("batch_size block_size eval_interval log_interval eval_iters gradient_accumulation_steps "
     "learning_rate", lambda v: v > 0, "it must be more than 0"),
    ("max_iters max_minutes warmup_iters lr_decay_iters min_lr weight_decay grad_clip "
     "sample_tokens seed", lambda v: v >= 0, "it must be 0 or more"),
    ("beta1 beta2 dropout", lambda v: 0 <= v < 1, "it must be in [0, 1)"),
    ("init_from", lambda v: v in ("scratch", "resume"), "use 'scratch' or 'resume'"),
    ("dtype", lambda v: v in ("auto", "float32", "bfloat16", "float16"),
     "use auto, float32, bfloat16 or float16"),
    ("out_dir", bool, "name a folder for the run")]


def check_rules(config, rules):
    """Each rule (keys, ok, what) on its keys' values; the first that fails is one line."""
    for keys, ok, what in rules:
        for key in keys.split():
            need(ok(config[key]), f"{key}={shown(config[key])}: {what}")


def check_train_settings(config, here=True):
    """train.py's settings no run can use; here=False: the device need not be this machine's."""
    import torch

    for key, value in config.items():
        need(type(value) is not float or math.isfinite(value), f"{key}={value}: not finite")
    check_rules(config, RULES)
    world = int(os.environ.get("WORLD_SIZE", 1))
    need(config["gradient_accumulation_steps"] % world == 0, f"gradient_accumulation_steps: it "
         f"must be a multiple of the number of processes ({world})")
    need(config["max_iters"] > 0 or config["max_minutes"] > 0,
         "max_iters=0 and max_minutes=0: give the run a length or a time limit")
    if here:
        check_device(config["device"])
        need(config["dtype"] != "float16" or config["device"].startswith("cuda")
             or (config["device"] == "auto" and torch.cuda.is_available()),
             "dtype='float16' needs a CUDA GPU (it trains with a GradScaler); use bfloat16")
