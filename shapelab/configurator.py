"""
Configuration for train.py, sample.py and the mechanism files' command lines.

    python train.py config/train_shakespeare_char.py --batch_size=32 --compile=False

Arguments are read left to right: a path ending in .py is a config file; `--key=value`
overrides one key. A config file is data, read and never run (`read_config_file`): `name = value`
lines whose values are literals, or + - * / // % ** on literals. Override values are Python
literals too (`--lr=3e-4`, `--compile=False`, `--model_args={'n_sub_blocks': 4}`); anything that
is not a literal is taken as a string (`--device=cuda`); a setting whose default is a tuple takes
a comma-separated list (`--seeds=0,1`, `--seeds=0`, `--variants=frozen,learned`, `--seeds=` for
none). A key that is not a default, or a value whose type does not match the default's, is an
error that names the key: a typo never trains the wrong model silently. (nanoGPT's configurator
exec()s config files into globals; this one reads them and checks.)

It also holds `need` and `check_device`, the settings checks every command words its errors with,
train.py's checks (`check_train_settings`; train.py's defaults are read by shapes.train_defaults,
above this folder: the library never reads a file of the top level), and `build`: a model from its
classes and keywords, a bad keyword worded as one line. Which name is which model
(`--model_type=NAME`) is shapes.py's.
"""

import ast
import dataclasses
import io
import operator
import os
import re
import sys
import textwrap
import tokenize
from pathlib import Path


class ConfigError(ValueError):
    pass


def need(ok, message):
    """A settings check: nothing if ok, else a ConfigError of one line (`message`)."""
    if not ok:
        raise ConfigError(message)


def usage_error(error):
    """End a command line on a setting it cannot use: one line on stderr, exit status 2."""
    print(f"error: {error}", file=sys.stderr)
    raise SystemExit(2)


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
        raise ConfigError(f"{where}: {key}={value!r} is a {type(value).__name__}, but {key} must "
                          f"be a {expected.__name__}{allowed} (default {default!r})")
    return value


def _parse_value(text, default, declared=None):
    """The value of `--key=text` for a key with this default (or, for a None default, this
    declared type): a literal, else the text itself as a string."""
    kind = type(default) if default is not None else declared
    if isinstance(default, tuple):  # a list setting: --seeds=0,1 / --seeds=0 / --names=a,b / --x=
        try:
            value = ast.literal_eval(text)
            if isinstance(value, tuple):
                return value
        except (ValueError, SyntaxError):
            pass
        items = [item.strip() for item in text.strip("()[] ").split(",") if item.strip()]
        return tuple(_parse_value(item, None) for item in items)
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        if kind is float and text.strip().lower() in ("nan", "inf", "+inf", "-inf"):
            return float(text)  # (not Python literals, but floats: the settings checks judge them)
        return text  # not a literal: a bare string such as cuda or resume
    if kind is str and not isinstance(value, str) and not (default is None and value is None):
        return text  # --out_dir=2024 means the string '2024'
    return value


# ----------------------------------------------------------------------------------------
# Config files: data, read without running them

_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
               ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
               ast.Pow: operator.pow}
_SIGNS = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_CONSTANTS = (str, bytes, bool, int, float, complex, type(None))
_WHAT = [  # how a refusal names what it found (the first matching class)
    ((ast.Import, ast.ImportFrom), "an import"), (ast.Call, "a call"), (ast.Name, "a name"),
    (ast.Attribute, "an attribute"), (ast.Subscript, "a subscript"), (ast.Lambda, "a lambda"),
    (ast.AugAssign, "an augmented assignment"), (ast.AnnAssign, "an annotated assignment"),
    (ast.Assign, "an assignment to several names, or to an item or attribute"),
    ((ast.FunctionDef, ast.AsyncFunctionDef), "a function definition"),
    (ast.ClassDef, "a class definition"), (ast.If, "an if statement"),
    ((ast.For, ast.AsyncFor, ast.While), "a loop"), ((ast.With, ast.AsyncWith), "a with statement"),
    (ast.Raise, "a raise statement"), (ast.Try, "a try statement"), (ast.Expr, "an expression "
     "that assigns nothing"), (ast.stmt, "a statement"), (ast.JoinedStr, "an f-string"),
    ((ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp), "a comprehension"),
    ((ast.Compare, ast.BoolOp, ast.IfExp), "a condition"), (ast.NamedExpr, "an assignment (:=)"),
    (ast.Starred, "an unpacking (*)"), ((ast.BinOp, ast.UnaryOp), "an operator other than "
     "+ - * / // % **"), (ast.expr, "an expression that is not a literal")]


def read_config_file(path, name=None, _extending=()):
    """{key: value} of a config file, in the file's order, read without running it. A config file
    is data: `name = value` lines (comments and a docstring aside) whose values are literals -
    numbers, strings, True/False/None, lists, tuples, dicts, sets - or + - * / // % ** on them
    (`batch_size = 8 * 4`, `min_lr = 6e-4 / 10`). Anything else (an import, a call, a name, an
    if, ...) or a syntax error is a ConfigError of one line naming the file (as `name`) and line.

    A config may extend another, so that it says only what differs: `base = "other.py"` (a path
    from this file's folder) reads that config first, and every line of this file overrides it,
    wherever `base` stands. A base that is missing, not a string, or leads back to this file is a
    ConfigError of one line. (_extending: the files that extend this one, to find a cycle.)"""
    name = name or str(path)
    settings = _read_literals(path, name)
    if "base" not in settings:
        return settings
    base = settings.pop("base")
    if not isinstance(base, str) or not base.endswith(".py"):
        raise ConfigError(f"{name}: base={base!r}: name the config file it extends, e.g. "
                          f"base = \"train_shakespeare_char.py\" (a path from this file's folder)")
    base_path, here = Path(path).parent / base, Path(path).resolve()
    chain = [*_extending, here]
    if base_path.resolve() in chain:
        cycle = " -> ".join(p.name for p in [*chain, base_path.resolve()])
        raise ConfigError(f"{name}: base {base!r} leads back to itself ({cycle}): a config can "
                          f"extend only a config that does not extend it")
    if not base_path.is_file():
        raise ConfigError(f"{name}: base {base!r} not found (no file {base_path})")
    base_name = str(Path(name).parent / base)
    return {**read_config_file(base_path, base_name, tuple(chain)), **settings}


def _read_literals(path, name):
    """The `name = literal` lines of one config file (read_config_file without `base`)."""
    try:
        source = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {name} is not UTF-8 text") from None
    except OSError as e:
        raise ConfigError(f"config file {name}: cannot read it ({e.strerror})") from None
    try:
        tree = ast.parse(source, filename=name)
    except (SyntaxError, ValueError) as e:  # (ValueError: a null byte, before Python 3.12)
        line = f", line {e.lineno}" if getattr(e, "lineno", None) else ""
        raise ConfigError(f"{name}{line}: not valid Python ({getattr(e, 'msg', e)})") from None
    except (RecursionError, MemoryError):  # (a deep nesting takes the parser's stack)
        raise ConfigError(f"{name}: an expression nested too deeply to read") from None
    settings = {}
    for i, node in enumerate(tree.body):
        if (i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            continue  # the docstring
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            _refuse(name, node)
        try:
            settings[node.targets[0].id] = _literal(node.value, name)
        except RecursionError:
            _refuse(name, node, "a value nested too deeply")
    return settings


def _refuse(name, node, what=None):
    if what is None:
        kind = next(text for cls, text in _WHAT if isinstance(node, cls))
        code = ast.unparse(node.func) + "(...)" if isinstance(node, ast.Call) else ast.unparse(node)
        code = code.splitlines()[0] if code else ""
        what = f"{kind}: {code if len(code) <= 60 else code[:57] + '...'}"
    raise ConfigError(f"{name}, line {node.lineno}: only assignments of literals are allowed "
                      f"(found {what})")


def _literal(node, name):
    """The value of a config file's expression: a literal, or arithmetic on literals."""
    value = lambda n: _literal(n, name)  # noqa: E731
    if isinstance(node, ast.Constant) and isinstance(node.value, _CONSTANTS):
        return node.value
    try:
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [value(n) for n in node.elts]
            return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
        if isinstance(node, ast.Dict) and None not in node.keys:  # (a None key: {**other})
            return {value(k): value(v) for k, v in zip(node.keys, node.values)}
    except TypeError as e:  # a list as a dict key or in a set
        raise ConfigError(f"{name}, line {node.lineno}: {e}") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _SIGNS:
        operand = value(node.operand)
        if isinstance(operand, (int, float, complex)):
            return _SIGNS[type(node.op)](operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = value(node.left), value(node.right)
        if _too_large(node.op, left, right):
            _refuse(name, node, f"a value too large to compute: {ast.unparse(node)[:60]}")
        try:
            return _ARITHMETIC[type(node.op)](left, right)
        except (ArithmeticError, TypeError, ValueError) as e:
            raise ConfigError(f"{name}, line {node.lineno}: cannot compute "
                              f"{ast.unparse(node)[:60]} ({e})") from None
    _refuse(name, node)


def _too_large(op, left, right):
    """Arithmetic that would take the memory or the time of the machine (2 ** 10 ** 10)."""
    if isinstance(op, ast.Pow) and all(type(v) is int for v in (left, right)):
        return abs(left) > 1 and right * abs(left).bit_length() > 100_000
    if isinstance(op, ast.Mult):
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (str, bytes, list, tuple)) and type(n) is int:
                return len(seq) * n > 1_000_000
    if isinstance(op, ast.Mod) and isinstance(left, (str, bytes)):  # "%1500000000d" % 0
        text = left if isinstance(left, str) else left.decode("latin-1")
        # a width or precision of a million or more, or one taken from the values (*)
        return re.search(r"%[-#0 +]*(\*|\d{7,})|%[-#0 +\d]*\.(\*|\d{7,})", text) is not None
    return False


def parse_overrides(argv, defaults, apply_to=None, types=None, given=None, more_help=None):
    """Apply config files and --key=value overrides in argv to a copy of `defaults`.
    Returns the new dict; if `apply_to` (e.g. globals()) is given it is updated too.
    `types` gives the type of each key whose default is None (train.py declares them): with it,
    every key is type-checked and a None default must have an entry. If `given` is a set, the keys
    that the arguments set are added to it. `more_help` prints what --help adds at its end."""
    if types is not None:
        untyped = [k for k, v in defaults.items() if v is None and k not in types]
        if untyped:
            raise ValueError(f"no declared type for {', '.join(untyped)} (default None): add it to "
                             f"`types`")
    config = dict(defaults)
    given = set() if given is None else given
    if "-h" in argv or "--help" in argv:
        print_help(defaults, more_help)
        raise SystemExit(0)
    for arg in argv:
        if not arg.startswith("--"):
            path = Path(arg)
            if path.suffix != ".py":
                raise ConfigError(f"argument {arg!r}: expected a config file (path/to/file.py) or "
                                  f"--key=value")
            if not path.is_file():
                raise ConfigError(f"config file {arg} not found (the configs live in config/)")
            for key, value in read_config_file(path, name=arg).items():
                if key not in config:
                    raise ConfigError(f"config file {arg}: unknown key {key!r}. Known keys: "
                                      f"{', '.join(sorted(config))}")
                config[key] = _checked(key, value, defaults[key], f"config file {arg}", types)
                given.add(key)
        else:
            key, sep, text = arg[2:].partition("=")
            if not sep:
                raise ConfigError(f"argument {arg!r}: write overrides as --{key}=value")
            if key not in config:
                close = [k for k in config if k.startswith(key[:3])]
                hint = f" Did you mean {', '.join(close)}?" if close else ""
                raise ConfigError(f"unknown config key {key!r} in {arg!r}.{hint} Known keys: "
                                  f"{', '.join(sorted(config))}")
            declared = (types or {}).get(key) if defaults[key] is None else None
            value = _parse_value(text, defaults[key], declared)
            config[key] = _checked(key, value, defaults[key], f"override {arg}", types)
            given.add(key)
    if apply_to is not None:
        apply_to.update(config)
    return config


def print_help(defaults, more_help=None):
    """--help: the running script's docstring, then every setting with its default and what it
    means (the comment beside it in the script), then what `more_help()` prints (train.py: every
    model type with the model_args it takes)."""
    main = sys.modules.get("__main__")
    if getattr(main, "__doc__", None):
        print(main.__doc__.strip() + "\n")
    script = getattr(main, "__file__", None)
    comments = setting_comments(Path(script)) if script and Path(script).is_file() else {}
    print("settings (a config file of `key = value` lines, or --key=value), with their defaults:")
    in_source = [k for k in comments if k in defaults]
    column = min(32, max((len(f"  --{k}={v!r}") for k, v in defaults.items()), default=0) + 2)
    for key in in_source + sorted(set(defaults) - set(in_source)):
        meaning, heading = comments.get(key, ("", ""))
        if heading:
            print("\n" + heading)
        print_entry(f"  --{key}={defaults[key]!r}", meaning, column)
    if more_help is not None:
        more_help()


def print_entry(left, text, column, width=100):
    """`left`, then `text` from `column` on, wrapped at `width` (below `left` if it is wider)."""
    lines = textwrap.wrap(text, width - column)
    if len(left) >= column or not lines:
        print(left)
        left = ""
    for line in lines:
        print(f"{left:<{column}}{line}".rstrip())
        left = ""


def setting_comments(path):
    """{name: (meaning, heading)} for each `name = value` at the top level of a Python file, in the
    file's order (the first assignment of a name). The meaning is the comment on the assignment's
    line(s), or else the comment lines just above it. Those lines are a heading instead (e.g.
    `# optimizer: AdamW`, starting a group) when the assignment has a comment of its own or the
    next line assigns another name. A line of dashes ends a block of comment lines."""
    source = path.read_text()
    trailing, alone = {}, {}  # line number -> comment text: after code / on a line of its own
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            text = token.string.lstrip("#").strip()
            on_its_own = token.line.strip().startswith("#")
            (alone if on_its_own else trailing)[token.start[0]] = text
    found, assignments = {}, {}
    for node in ast.parse(source).body:
        target = (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                  else node.target if isinstance(node, ast.AnnAssign) else None)
        if isinstance(target, ast.Name):
            assignments[node.lineno] = (node, target.id)
    for node, name in assignments.values():
        if name in found:
            continue
        own = " ".join(trailing[n] for n in range(node.lineno, node.end_lineno + 1)
                       if n in trailing)
        above, n = [], node.lineno - 1
        while n in alone and alone[n].strip("-") != "":
            above.insert(0, alone[n])
            n -= 1
        heading = bool(own) or node.end_lineno + 1 in assignments
        found[name] = (own, "\n".join(above)) if heading else (" ".join(above), "")
    return found


def build(model_type, model_cls, config_cls, **model_args):
    """model_cls(config_cls(**model_args)). A setting the config does not have, or one its checks
    refuse, is a ConfigError of one line naming the model type and the key."""
    known = {f.name for f in dataclasses.fields(config_cls) if f.init}  # not the derived ones
    unknown = sorted(set(model_args) - known)
    if unknown:
        raise ConfigError(
            f"model_type={model_type!r} has no setting {', '.join(unknown)}; its settings: "
            f"{', '.join(sorted(known - {'layers'}))}"
        )
    try:
        return model_cls(config_cls(**model_args))
    except (AssertionError, ValueError, TypeError) as e:  # the models' short asserts, worded here
        raise ConfigError(f"model_type={model_type!r}: {e}") from None


def check_device(device):
    """A device setting this machine can use, or a ConfigError of one line naming it: auto, cpu,
    cuda, cuda:<index> (a GPU this machine has) or mps (where torch has it); 'auto' is
    hardware.pick_device's to resolve."""
    import torch  # (only here: the rest of the configurator needs no torch)

    kind, colon, index = device.partition(":")
    indexed = not colon or (kind == "cuda" and index.isdigit())
    need(kind in ("auto", "cpu", "cuda", "mps") and indexed,
         f"device={device!r}: use auto, cpu, cuda, cuda:<index> or mps")
    need(kind != "cuda" or torch.cuda.is_available(),
         f"device={device!r}, but this machine has no CUDA GPU (torch {torch.__version__} sees "
         f"none): use --device=cpu or --device=auto")
    count = torch.cuda.device_count() if index else 0
    need(not index or int(index) < count,
         f"device={device!r}, but this machine has {count} CUDA GPU(s): cuda:0 to cuda:{count - 1}")
    need(kind != "mps" or torch.backends.mps.is_available(),
         "device='mps', but MPS is not available here: use --device=cpu or --device=auto")


def check_train_settings(config, here=True):
    """train.py's settings that no run can use, each a ConfigError of one line naming the key and
    what it takes (the model's own settings: shapes.check_model_settings). here=False: settings of
    runs trained elsewhere (a report of their records), whose device this machine need not have."""
    import torch  # (only here: the rest of the configurator needs no torch)

    need(config["init_from"] in ("scratch", "resume"),
         f"init_from={config['init_from']!r}: use 'scratch' or 'resume'")
    need(config["out_dir"] != "", "out_dir='': name a folder for the run (default 'out')")
    for key, value in config.items():  # (a huge int's digits could not even be printed)
        if type(value) is int and abs(value) >= 2 ** 63:
            shown = value if value.bit_length() <= 256 else f"a number of {value.bit_length()} bits"
            raise ConfigError(f"{key}={shown}: it must be below 2**63")
    for key, value in config.items():  # inf and nan pass (or break) every comparison below
        need(not isinstance(value, float) or abs(value) < float("inf"),
             f"{key}={value}: it must be a finite number")
    need(0 <= config["seed"] < 2 ** 63, f"seed={config['seed']}: it must be in [0, 2**63)")
    for key in ("batch_size", "block_size", "eval_interval", "log_interval", "eval_iters",
                "gradient_accumulation_steps"):
        need(config[key] >= 1, f"{key}={config[key]}: it must be 1 or more")
    for key in ("max_iters", "max_minutes", "warmup_iters", "lr_decay_iters", "min_lr",
                "weight_decay", "grad_clip", "stop_val_loss", "sample_tokens"):
        need(config[key] >= 0, f"{key}={config[key]}: it must be 0 or more")
    world = int(os.environ.get("WORLD_SIZE", 1))  # torchrun's processes share the accumulation
    need(config["gradient_accumulation_steps"] % world == 0,
         f"gradient_accumulation_steps={config['gradient_accumulation_steps']} must be a multiple "
         f"of the number of processes ({world}): each takes its share")
    need(config["max_iters"] > 0 or config["max_minutes"] > 0,
         "max_iters=0 and max_minutes=0: give the run a length (steps) or a time limit (minutes)")
    need(config["learning_rate"] > 0, f"learning_rate={config['learning_rate']}: it must be > 0")
    for key in ("beta1", "beta2", "dropout"):
        need(0 <= config[key] < 1, f"{key}={config[key]}: it must be in [0, 1)")
    need(config["dtype"] in ("auto", "float32", "bfloat16", "float16"),
         f"dtype={config['dtype']!r}: use one of auto, float32, bfloat16, float16")
    if not here:
        return
    check_device(config["device"])
    kind, cuda = config["device"].split(":")[0], torch.cuda.is_available()
    need(config["dtype"] != "float16" or kind == "cuda" or (kind == "auto" and cuda),
         "dtype='float16' needs a CUDA GPU (it trains with a GradScaler); use bfloat16 or float32")
