"""
Every model type by name (MODELS), and every shape matched to one parameter budget.

`matched_shapes` puts each mechanism at a plain GPT's budget by its own paper's rule;
compare.py trains these shapes and bench.py times them, from the cpu or gpu preset.

    python shapes.py                       # the CPU preset's shapes, counted (seconds)
    python shapes.py --preset=gpu          # the GPU preset's (meta device: no memory)
    python shapes.py --models=GPT,CEA --n_layer=4 --n_embd=96    # some shapes, any preset key
"""

import ast
import dataclasses
import functools
import json
import math
import sys
from fractions import Fraction
from pathlib import Path

import cea
import compose
import hourglass
import lws
from model import (GPT, GPTConfig, closest_size, default_args, meta_device, padded_vocab_size,
                   shape_counts)
from shapelab.checkpoint import CheckpointError
from shapelab.configurator import (ConfigError, build, need, parse_overrides, print_entry,
                                   read_config_file)
import variable_width

ROOT = Path(__file__).resolve().parent

# ----------------------------------------------------------------------------------------
# Every mechanism at one matched parameter budget


SHAPE_NAMES = ("GPT", "hourglass", "><former", "hourglass+><former", "FFN-Wider", "CEA",
               *(f"LWS {name}" for name in lws.VARIANTS))
# Controls that split the hourglass's gain in two: "GPT wide" the reallocation alone (a GPT at the
# hourglass's d, a narrow FFN), "hourglass same-d" the FFN swap alone (Table 1's form)
CONTROL_NAMES = ("GPT wide", "hourglass same-d")
CONTROL_SUB_BLOCKS = 8  # Table 1's best row
ALL_NAMES = SHAPE_NAMES + CONTROL_NAMES


def matched_shapes(baseline, n_sub_blocks=4, bottleneck_ratio=0.4, width_schedule="x",
                   width_multiple=32, ffn_wider_width_ratio=32, outer_ratio=0.125,
                   ffn_multiple=256, head_dim_multiple=2, hidden_multiple=1, models=SHAPE_NAMES):
    """{name: (model_type, model_args)} of `models`, each at the plain GPT baseline's budget;
    head_dim_multiple and hidden_multiple round what no paper rounds."""
    hg = functools.cache(lambda: hourglass.match_baseline(baseline, n_sub_blocks, bottleneck_ratio))
    former = dict(width_schedule=width_schedule, width_multiple=width_multiple)
    # only when it rounds, so that the CPU preset's recorded runs resume
    rounding = dict(hidden_multiple=hidden_multiple) if hidden_multiple > 1 else {}
    # W a multiple of 8, and of hidden_multiple / rho, so CEA's split rho W keeps that rounding
    rho = Fraction(outer_ratio).limit_denominator(64)
    multiple = math.lcm(8, rho.denominator * hidden_multiple)
    wider = functools.cache(lambda: cea.match_ffn_wider(
        baseline, ffn_wider_width_ratio, multiple, head_dim_multiple))
    lws_base = {k: v for k, v in baseline.items() if k != "ffn_hidden"}
    shapes = {
        "GPT": lambda: ("gpt", dict(baseline)),
        "hourglass": lambda: ("hourglass", hg()),
        "><former": lambda: ("variable_width", {**baseline, **former}),
        "hourglass+><former": lambda: ("composed", {**hg(), **former, **rounding}),
        "FFN-Wider": lambda: ("cea", wider()),
        "CEA": lambda: ("cea", {**wider(), "outer_ratio": outer_ratio}),
        "GPT wide": lambda: ("gpt", match_gpt_at_width(baseline, hg()["n_embd"])),
        "hourglass same-d": lambda: (
            "hourglass", hourglass.match_ffn_at_fixed_width(baseline, CONTROL_SUB_BLOCKS)),
    }
    for name, schedule in lws.VARIANTS.items():
        variant = {**lws_base, **schedule, "ffn_multiple": ffn_multiple}
        shapes[f"LWS {name}"] = lambda v=variant: ("lws", lws.match_params(lws_base, v)[0])
    return {name: shapes[name]() for name in ALL_NAMES if name in models}


def match_gpt_at_width(baseline, n_embd):
    target = shape_counts(GPT, GPTConfig(**baseline))["budget"]
    args = dict(baseline, n_embd=n_embd)

    def count(width):
        return shape_counts(GPT, GPTConfig(**dict(args, block_size=2, ffn_hidden=width)))["budget"]

    return dict(args, ffn_hidden=closest_size(count, target))


def per_layer(values):
    return str(values[0]) if len(set(values)) == 1 else "/".join(map(str, values))


def shape_label(config):
    widths = getattr(config, "layer_widths", None) or [config.n_embd]
    label = f"L{config.n_layer} d{config.n_embd}"
    if len(set(widths)) > 1:
        label += " w" + per_layer(widths)
    label += " h" + per_layer([s.n_head for s in config.layers])
    k = getattr(config, "n_sub_blocks", 1)
    label += f" ffn{'' if k == 1 else f' {k}x'}" + per_layer([s.ffn_hidden for s in config.layers])
    if getattr(config, "inner_hidden", 0):
        label += f" inner{config.inner_hidden}"
    if getattr(config, "outer_ratio", 1.0) < 1.0:
        label += f" rho{config.outer_ratio:g}"
    return label


# ----------------------------------------------------------------------------------------
# Every model type by name

# --model_type=NAME -> (model class, config class, matched_args): Model(Config(**model_args)),
# matched_args(baseline) the shape a bare --model_type=NAME trains at a plain GPT's budget
MODELS = {
    "gpt": (GPT, GPTConfig, dict),
    "hourglass": (hourglass.HourglassGPT, hourglass.HourglassConfig, hourglass.matched_args),
    "variable_width": (variable_width.VariableWidthGPT, variable_width.VariableWidthConfig,
                       variable_width.matched_args),
    "cea": (cea.CEAGPT, cea.CEAConfig, cea.matched_args),
    "lws": (lws.LWSGPT, lws.LWSConfig, lws.matched_args),
    "composed": (compose.ComposedGPT, compose.ComposedConfig, compose.matched_args),
}


def model_classes(model_type):
    need(model_type in MODELS, f"model_type={model_type!r} is unknown; choose one of "
         f"{', '.join(MODELS)}")
    return MODELS[model_type][:2]


def model_keys(settings):
    return [f.name for f in dataclasses.fields(GPTConfig) if f.name in settings]


def train_defaults():
    """train.py's defaults, read (never run) from its `name = literal` lines before config_keys."""
    defaults = {}
    for node in ast.parse((ROOT / "train.py").read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "config_keys":
                break
            defaults[node.targets[0].id] = ast.literal_eval(node.value)
    return defaults


def build_model(model_type, **model_args):
    return build(model_type, *model_classes(model_type), **model_args)


def matched_model_args(model_type, baseline):
    """The model_args of a bare --model_type: its file's matched_args at the baseline's budget."""
    model_classes(model_type)
    try:
        return MODELS[model_type][2](dict(baseline))
    except (AssertionError, ValueError, TypeError) as e:
        raise ConfigError(f"model_type={model_type!r}: no shape of it matches this GPT's budget "
                          f"({e}); give its shape in --model_args") from None


def model_from_checkpoint(checkpoint, path="the checkpoint"):
    """The checkpoint's model with its weights, or a CheckpointError of one line naming path."""
    try:
        model = build_model(checkpoint["model_type"], **checkpoint["model_args"])
        model.load_state_dict(checkpoint["model"])
    except (ConfigError, KeyError, TypeError, RuntimeError) as e:
        why = (str(e).strip() or type(e).__name__).splitlines()[0][:200]
        raise CheckpointError(f"{path} holds a model this repo cannot build ({why}): train it "
                              f"again, or point --out_dir at another checkpoint") from None
    return model


def check_model_settings(config):
    """Build a new run's model on the meta device: a setting it refuses is one ConfigError."""
    if config["init_from"] == "scratch":
        baseline = {"vocab_size": 256, **{k: config[k] for k in model_keys(config)}}
        model_type, model_args = config["model_type"], config["model_args"]
        with meta_device():
            if not model_args:
                baseline = matched_model_args(model_type, baseline)
            build_model(model_type, **{**baseline, **model_args})


def print_model_types(defaults):
    gpt_fields = default_args()
    others = ", ".join(k for k in gpt_fields if k not in defaults)
    print_entry("", f"model types (--model_type=NAME): each takes the model settings above, and "
                f"in --model_args={{...}} GPTConfig's other fields ({others}) and its own:", 0)
    for name, (model_cls, config_cls, _) in MODELS.items():
        own = [k for k in default_args(config_cls) if k not in gpt_fields]
        print_entry(f"  {name} ({model_cls.__module__}.py)",
                    ", ".join(own) or "(none of its own: the plain GPT)", 36)


# ----------------------------------------------------------------------------------------
# The presets of compare.py and bench.py, and the table of shapes

# Keys handed to matched_shapes; the rest of a preset is the baseline and training
MATCHING_KEYS = ("n_sub_blocks", "bottleneck_ratio", "width_schedule", "width_multiple",
                 "ffn_wider_width_ratio", "outer_ratio", "ffn_multiple", "head_dim_multiple",
                 "hidden_multiple")
BASELINE_KEYS = ("n_layer", "n_head", "n_kv_head", "n_embd", "qk_norm", "tie_embeddings")

# 6 layers, so that LWS has inner layers to scale after framing
CPU_PRESET = dict(
    out_dir="out-compare-cpu", dataset="shakespeare_char", data_dir="", models=(), seeds=(1337,),
    learning_rates=(2e-3,), extend_rates=0, min_lr_ratio=0.1, jobs=1, record_dir="",
    refine_gain=0.0, report_only=False, stop_starting_after=0.0,
    n_layer=6, n_head=4, n_kv_head=None, n_embd=128, qk_norm="", tie_embeddings=True,
    block_size=128, batch_size=32, gradient_accumulation_steps=1, max_iters=600,
    warmup_iters=50, eval_interval=50, eval_iters=8, log_interval=25,
    eval_ood="",
    device="auto", dtype="auto", compile=False,
    n_sub_blocks=4, bottleneck_ratio=0.4, width_schedule="x", width_multiple=8,
    ffn_wider_width_ratio=32, outer_ratio=0.125, ffn_multiple=32, head_dim_multiple=2,
    hidden_multiple=1)
# The hourglass paper's 113M row (12L/768, GPT-2 tokens), 131M tokens per model
GPU_PRESET = dict(
    CPU_PRESET, out_dir="out-compare-gpu", dataset="tinystories", n_layer=12, n_head=12, n_embd=768,
    block_size=1024, max_iters=4000, learning_rates=(6e-4,), warmup_iters=200,
    eval_interval=250, eval_iters=50, log_interval=50, compile=True,
    width_multiple=96,  # 8 x 12 heads: head dims multiples of 8
    head_dim_multiple=8,
    hidden_multiple=8,
    ffn_multiple=256)
PRESETS = {"cpu": CPU_PRESET, "gpu": GPU_PRESET}


def preset_settings(argv, keys=None, extra=None):
    """The last --preset=<name>'s settings (default cpu), argv on top; keys: the preset keys
    kept, extra: the tool's own defaults."""
    preset = "cpu"
    for arg in argv:
        if arg.startswith("--preset="):
            preset = arg.split("=", 1)[1]
        elif arg.endswith(".py") and not arg.startswith("-"):
            preset = read_config_file(arg).get("preset", preset)
    need(isinstance(preset, str) and preset in PRESETS,
         f"--preset={preset!r}: choose one of {', '.join(PRESETS)}")
    defaults = {k: v for k, v in PRESETS[preset].items() if keys is None or k in keys}
    defaults.update(extra or {}, preset=preset)
    return parse_overrides(argv, defaults)


def select_models(models):
    wanted = {str(m).strip() for m in (models.split(",") if isinstance(models, str) else models)}
    unknown = sorted(wanted - {"", *ALL_NAMES, *map(slug, ALL_NAMES)})
    need(not unknown, f"--models: unknown {unknown}; choose from {', '.join(ALL_NAMES)} (or "
         f"{', '.join(map(slug, ALL_NAMES))})")
    return tuple(name for name in ALL_NAMES if wanted & {name, slug(name)}) or SHAPE_NAMES


def dataset_vocab_size(dataset, data_dir=""):
    """The vocabulary in data/<dataset>/meta.json, or before preparing, the known size."""
    meta = Path(data_dir or ROOT / "data" / dataset) / "meta.json"
    if meta.exists():
        return json.loads(meta.read_text())["vocab_size"]
    return {"shakespeare_char": 65}.get(dataset, 50257)


def baseline_of(settings):
    vocab_size = dataset_vocab_size(settings["dataset"], settings["data_dir"])
    return dict(vocab_size=padded_vocab_size(vocab_size), block_size=settings["block_size"],
                **{k: settings[k] for k in BASELINE_KEYS})


def slug(name):
    """'><former' -> 'xformer', 'LWS crown' -> 'lws-crown'"""
    return name.replace("><former", "xformer").replace("+", "-").replace(" ", "-").lower()


def describe_shapes(shapes, seq_len):
    out = {}
    for name, (model_type, model_args) in shapes.items():
        with meta_device():
            model = build_model(model_type, **model_args)
        c = variable_width.param_summary(model)
        out[name] = dict(model_type=model_type, shape=shape_label(model.config),
                         embedding=c["embedding"] + c["lm_head"], attention=c["attention"],
                         ffn=c["ffn"], norms=c["norms"] + c["other"], budget=model.budget(),
                         endpoint=c["endpoint"], total=c["total"],
                         flops_per_token=model.flops_per_token(seq_len),
                         kv_bytes_per_token=model.kv_cache_bytes_per_token())
    return out


def shapes_table(shapes_info):
    first = next(iter(shapes_info))

    def vs_first(n):
        return f"{n / 1e6:.3f}M ({100 * (n / shapes_info[first]['budget'] - 1):+.1f}%)"

    head = ["model", "shape", "embedding", "attention", "FFN", f"budget (vs {first})",
            f"budget without W_end (vs {first})", "fwd FLOPs/token", "KV bytes/token"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for name, r in shapes_info.items():
        cells = [name, r["shape"],
                 *(f"{r[k] / 1e6:.3f}M" for k in ("embedding", "attention", "ffn")),
                 vs_first(r["budget"]), vs_first(r["budget"] - r["endpoint"]),
                 f"{r['flops_per_token'] / 1e6:.2f}M", f"{r['kv_bytes_per_token']:,}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    try:
        settings = preset_settings(sys.argv[1:])
        shapes = matched_shapes(baseline_of(settings), **{k: settings[k] for k in MATCHING_KEYS},
                                models=select_models(settings["models"]))
    except (ConfigError, ValueError) as e:
        raise SystemExit(f"error: {e}")
    print(f"{settings['preset']} preset, every shape at the plain GPT's budget:\n")
    print(shapes_table(describe_shapes(shapes, settings["block_size"])))
