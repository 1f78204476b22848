"""
Mechanisms composed, and every mechanism at one matched parameter budget.

The four shape papers change different parts of a transformer, so they stack:

    where in the model          what changes                         paper / file
    ------------------------    ---------------------------------    ----------------------
    the layer schedule          width w_l of layer l (one stream)    ><former, variable_width.py
                                or heads / FFN width of layer l      LWS, lws.py
    the FFN slot                K narrow sub-MLPs, eq. (3)           hourglass, hourglass.py
    the attention sublayer      an Inner-FFN on the context k/v      CEA, cea.py

A composed layer l is built from three choices, one per row:

    schedule   -> LayerSpec_l = (heads, kv heads, head_dim, W_l) and width w_l
    FFN slot   -> K sub-blocks  x <- x + SwiGLU_k(n(x)), hidden rho W_l each   (K = 1: plain FFN)
    attention  -> CEA attention with an Inner-FFN of width K (1 - rho) W_l  (rho = 1: plain)

so W_l is the hidden size of one FFN sub-block before CEA's split (hourglass.py's convention:
the spec's ffn_hidden is d_h), and CEA moves the share 1 - rho of the slot's whole FFN width
(K W_l) inside attention, as cea.py does for one FFN. The two schedules do not compose with
each other (both set the per-layer shape); hourglass and CEA compose with either and with each
other. With a ><former schedule the hourglass bottleneck scales with the layer: d_h,l =
round(d_h w_l / d), like the ><former's own FFN (4 w_l).

The ><former's stream logic (variable_width.VariableWidthGPT) runs every composed model; with
constant widths it is exactly model.GPT. So:

    composed(constant widths, K = 1, rho = 1)       == model.GPT            (bit for bit)
    composed(x widths, K = 1)                       == variable_width ><former
    composed(constant, K = 4, d_h)                  == hourglass.HourglassGPT
    composed(constant, rho = 0.125, W = 32 d)       == cea.CEAGPT (CEA)
    composed(LWS schedule)                          == lws.LWSGPT
(tests/test_compose.py checks each of these with the same seed and the same logits.)

The second half of this file, `matched_shapes`, builds the plain GPT and every mechanism at
the baseline's parameter budget (non-embedding parameters without an untied LM head), each
with its own paper's matching rule; compare.py trains them and bench.py times them. The last
part holds the two presets both of them read (CPU: a 6-layer, 128-wide baseline on Shakespeare
characters; GPU: the papers' 12-layer, 768-wide baseline on TinyStories) and the table of shapes
that `python compose.py` prints.

A ><former schedule given as `width_schedule` is solved by Appendix A with the FFN multiple
of this FFN slot, E = K d_h / d, so it matches the constant-width model of the same d, K, d_h.
Appendix A's endpoint count W_end of a composed model (ComposedGPT.endpoint_params) is not K
times one sub-block's: only the last sub-block's rows past d are truncated, and with CEA only
W_q and the Inner-FFN's input read the first layer's zero padding; the solver uses the same
count, and the shapes table shows the budget without W_end. The ><former's init rule
(scale_init_by_width) applies to composed layers too. Not composed: the MoE forms of cea.py
(their router and balancing loss stay in cea.py).

    python compose.py                                   # the matched shapes of the CPU preset
    python compose.py --preset=gpu                      # ... of the GPU preset (meta device)
    python train.py --model_type=composed --model_args="{'width_schedule': 'x', \\
        'width_multiple': 8, 'n_sub_blocks': 4, 'bottleneck_dim': 40}"  # an hourglass ><former
"""

import json
import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import torch

import cea
import hourglass
import lws
import variable_width
from configurator import ConfigError, parse_overrides
from configurator import build_model as build_any
from model import AttentionSublayer, FFNSublayer, GPTConfig, LayerSpec, SwiGLU, padded_vocab_size

ROOT = Path(__file__).resolve().parent

# ----------------------------------------------------------------------------------------
# The composed model


@dataclass
class ComposedConfig(GPTConfig):
    """GPTConfig plus one choice per row of the table above. Its __post_init__ turns the schedule
    into explicit per-layer `layers` and `layer_widths`; each layer's ffn_hidden is W_l, the
    hidden size of one FFN sub-block before CEA's split. Every default builds the plain GPT."""

    # the ><former schedule (variable_width.py): explicit widths, or Appendix A's solver
    layer_widths: list[int] = field(default_factory=list)  # w_l; empty: from width_schedule
    width_schedule: str = "constant"  # constant | x | diamond | v | lambda
    bottleneck_layer_ratio: float = 0.75  # r_l: the narrowest layer at r_l L
    bottleneck_width_ratio: float = 0.3  # r_d: its width r_d d
    width_multiple: int = 32  # widths rounded to a multiple of this
    # how a widening layer fills new coordinates (variable_width.EXPANSIONS)
    expansion: str = "carry"
    scale_init_by_width: bool = True  # the ><former's init rule; a no-op at w_l = d
    attention_multiplier: str = "sqrt"  # 'sqrt' (1/sqrt(head_dim)) or the reference's 'head_dim'
    # the LWS schedule (lws.py): beta (FFN) and alpha (attention) per layer
    ffn_scalars: list[float] | None = None
    qkv_scalars: list[float] | None = None
    framed: bool = False
    ffn_multiple: int = 256
    # the hourglass FFN (hourglass.py): K sub-blocks of hidden d_h
    n_sub_blocks: int = 1
    bottleneck_dim: int | None = None  # d_h at width n_embd (None: ffn_hidden or 4 n_embd)
    # CEA attention (cea.py): the FFN slot keeps rho of every sub-block's width
    outer_ratio: float = 1.0
    current_position: str = "direct"  # cea.CURRENT_POSITION_RULES
    attention_impl: str = "causal"  # cea.py's attention paths: 'causal' (fast) or 'reference'
    # ours: round each ><former layer's d_h,l to a multiple (8 feeds a GPU's tensor cores)
    hidden_multiple: int = 1

    def __post_init__(self):
        assert self.bottleneck_dim is None or self.ffn_hidden in (None, self.bottleneck_dim), (
            f"ffn_hidden={self.ffn_hidden} and bottleneck_dim={self.bottleneck_dim} disagree: both "
            f"name the hidden size of one FFN sub-block; give one of them")
        is_former = bool(self.layer_widths) or self.width_schedule != "constant"
        is_lws = self.ffn_scalars is not None or self.qkv_scalars is not None
        assert not (is_former and is_lws), (
            "a ><former schedule (layer_widths / width_schedule) and an LWS schedule (ffn_scalars "
            "/ "
            "qkv_scalars) both set the per-layer shape and do not compose: pick one")
        assert self.n_sub_blocks >= 1, f"n_sub_blocks={self.n_sub_blocks}: K >= 1 sub-blocks"
        assert 0.0 <= self.outer_ratio <= 1.0, (
            f"outer_ratio={self.outer_ratio}: CEA's rho is the FFN slot's share, in [0, 1]")
        assert self.current_position in cea.CURRENT_POSITION_RULES, (
            f"current_position={self.current_position!r}: one of {cea.CURRENT_POSITION_RULES}")
        assert self.expansion in variable_width.EXPANSIONS, (
            f"expansion={self.expansion!r}: one of {', '.join(variable_width.EXPANSIONS)}")
        d, n_head = self.n_embd, self.n_head
        self.n_kv_head = self.n_kv_head or n_head
        self.ffn_hidden = hidden = self.bottleneck_dim or self.ffn_hidden or 4 * d  # W at width d
        if is_lws:
            assert self.ffn_scalars is not None and self.qkv_scalars is not None, (
                "an LWS schedule needs both ffn_scalars (beta) and qkv_scalars (alpha)")
            _, base_head_dim = lws.head_layout(d, n_head, self.n_kv_head, self.head_dim)
            self.layers = lws.layer_specs(d, self.n_layer, self.ffn_scalars, self.qkv_scalars,
                                          self.framed, base_head_dim, n_head // self.n_kv_head,
                                          self.ffn_multiple)
        elif is_former:
            assert self.head_dim is None or self.head_dim * n_head == d, (
                f"head_dim={self.head_dim}: a ><former keeps n_head heads of w_l / n_head")
            if not self.layer_widths:  # Appendix A, with this FFN slot's multiple E = K d_h / d
                kv_ratio = self.n_kv_head / n_head
                self.layer_widths, _ = variable_width.solve_widths(
                    self.width_schedule, self.n_layer, d, self.bottleneck_layer_ratio,
                    self.bottleneck_width_ratio, self.width_multiple,
                    ffn_mult=self.n_sub_blocks * hidden / d, kv_ratio=kv_ratio,
                    **endpoint_multiples(hidden / d, self.n_sub_blocks, self.outer_ratio, kv_ratio))
            variable_width.check_widths(list(self.layer_widths), n_head)
            m = self.hidden_multiple
            self.layers = [LayerSpec(n_head, self.n_kv_head, w // n_head,
                                     max(m, m * round(hidden * w / d / m)))
                           for w in self.layer_widths]
        super().__post_init__()
        variable_width.check_width_rules(self)
        self.layer_widths = list(self.layer_widths) or [d] * self.n_layer
        assert len(self.layer_widths) == self.n_layer, (
            f"{len(self.layer_widths)} layer_widths for {self.n_layer} layers: give one per layer")

    def split(self, spec: LayerSpec):
        """(outer, inner): the hidden size of each of the K FFN sub-blocks (rho W) and of the
        Inner-FFN inside attention (K (1 - rho) W)."""
        outer = round(self.outer_ratio * spec.ffn_hidden)
        return outer, self.n_sub_blocks * (spec.ffn_hidden - outer)


class ComposedGPT(variable_width.VariableWidthGPT):
    """A ><former stream (constant widths: the plain GPT) whose layer l has the attention
    and FFN sublayers the config asks for, built at the layer's width w_l."""

    config: ComposedConfig

    def make_attention(self, layer_idx, spec):
        width = self.config.layer_widths[layer_idx]
        _, inner = self.config.split(spec)
        if inner == 0:
            return AttentionSublayer(width, spec, self.config)  # rho = 1: plain attention
        # built before the sublayer, as cea.py builds it first inside: same RNG order, same init
        return cea.CEAAttentionSublayer(width, spec, self.config, inner_ffn=SwiGLU(width, inner))

    def make_ffn(self, layer_idx, spec):
        width, K = self.config.layer_widths[layer_idx], self.config.n_sub_blocks
        outer, _ = self.config.split(spec)
        if outer == 0:
            return cea.FFNSlot([])  # rho = 0: the whole FFN lives inside attention
        if K == 1:
            return FFNSublayer(width, outer, self.config)  # the plain FFN sublayer
        # eq. (3): K sub-blocks of width outer
        return hourglass.HourglassFFN(width, outer, K, self.config)

    def endpoint_params(self):
        """Appendix A's W_end for this composition, counted on the modules. First layer (w_1 > d):
        the input columns that read only the zero padding: all QKV rows with plain attention; with
        CEA W_q's rows and the Inner-FFN's W_1, W_3 (they read a = n(x)), but not W_k, W_v, which
        also read t = a + InnerFFN(a), nonzero past d. Last layer (w_L > d): the rows past d of
        the LAST sublayer only (an earlier sub-block's rows feed the sub-blocks after it): the last
        sub-block's W_u, or W_o when rho = 0 leaves the FFN slot empty."""
        d, widths = self.config.n_embd, self.config.layer_widths
        attn = self.blocks[0].attn
        if isinstance(attn, cea.CEAAttentionSublayer):
            cols = attn.q_dim + attn.inner_ffn.gate_up_proj.weight.size(0)
        else:
            cols = attn.attn.qkv_proj.weight.size(0)
        ffn, last_attn = self.blocks[-1].ffn, self.blocks[-1].attn
        if isinstance(ffn, hourglass.HourglassFFN):
            out = ffn.sub_blocks[-1].mlp.out_proj
        elif isinstance(ffn, FFNSublayer):
            out = ffn.mlp.out_proj
        else:  # rho = 0: the attention sublayer writes last
            cea_attention = isinstance(last_attn, cea.CEAAttentionSublayer)
            out = last_attn.out_proj if cea_attention else last_attn.attn.out_proj
        return cols * max(widths[0] - d, 0) + out.weight.size(1) * max(widths[-1] - d, 0)


def endpoint_multiples(e_sub, n_sub_blocks, outer_ratio, kv_ratio=1.0):
    """W_end of a composed layer per unit of width, as ComposedGPT.endpoint_params counts it:
    end_in (first-layer columns per padded coordinate, / w_1) and end_out (last-sublayer row
    length, / w_L), for sub-blocks of hidden e_sub w each (before CEA's split)."""
    inner = n_sub_blocks * (1 - outer_ratio) * e_sub  # the Inner-FFN's width / w
    # W_q (+ W_1, W_3) or W_q, W_k, W_v
    end_in = 1 + 2 * inner if outer_ratio < 1 else 1 + 2 * kv_ratio
    end_out = outer_ratio * e_sub if outer_ratio > 0 else 1.0  # the last sub-block's W_u, or W_o
    return dict(end_in=end_in, end_out=end_out)


# ----------------------------------------------------------------------------------------
# Every mechanism at one matched parameter budget


def count_budget(model_type, **model_args):
    """model.budget() of a model_type built on the meta device (instant, no memory): the
    non-embedding parameters without an untied LM head, which every shape is matched on."""
    with torch.device("meta"):
        return build_any(model_type, **dict(model_args, block_size=2)).budget()


def match_ffn_wider(baseline, ffn_mult=32, multiple=8, head_dim_multiple=2):
    """FFN-Wider at the baseline's budget: same depth and heads, a narrower d and an FFN
    about ffn_mult x d wide. For each d (head_dim_multiple x n_head apart: head dims stay even
    for RoPE, or multiples of 8 for the GPU's fast attention kernels) cea.match_ffn_hidden solves
    the FFN width W (a multiple of `multiple`) that matches the budget; the d whose W / d is
    closest to ffn_mult wins. Returns cea.CEAConfig keyword arguments (outer_ratio 1)."""
    if head_dim_multiple % 2:
        raise ValueError(f"head_dim_multiple={head_dim_multiple}: RoPE needs even head dims; use "
                         "2, 8, ...")
    target = count_budget("gpt", **baseline)
    step = head_dim_multiple * baseline["n_head"]
    shape = {k: v for k, v in baseline.items() if k not in ("n_embd", "head_dim", "ffn_hidden")}
    best = None
    for d in range(step, baseline["n_embd"] + 1, step):
        # in non_embedding
        untied_head = 0 if shape.get("tie_embeddings", True) else shape["vocab_size"] * d
        width = cea.match_ffn_hidden(target + untied_head, multiple, **shape, n_embd=d)
        score = abs(width / d - ffn_mult)
        if best is None or score < best[0]:
            best = (score, dict(shape, n_embd=d, ffn_hidden=width, outer_ratio=1.0))
    return best[1]


LWS_SCHEDULES = dict(lws.VARIANTS)  # the paper's 18-layer schedules (Table 2), before matching


SHAPE_NAMES = ("GPT", "hourglass", "><former", "hourglass+><former", "FFN-Wider", "CEA",
               *(f"LWS {name}" for name in LWS_SCHEDULES))


def matched_shapes(baseline, hourglass_k=4, hourglass_ratio=0.4, width_schedule="x",
                   width_multiple=32, ffn_wider_mult=32, cea_outer_ratio=0.125, ffn_multiple=256,
                   head_dim_multiple=2, hidden_multiple=1, models=SHAPE_NAMES):
    """{name: (model_type, model_args)}: the plain GPT `baseline` (GPTConfig keyword arguments) and
    every mechanism at its budget, each matched by its own paper's rule:

    hourglass            same depth and heads, d and d_h found by hourglass.match_baseline
                         (K sub-blocks, d_h / d ~ hourglass_ratio)
    ><former             the x schedule solved against the baseline (Appendix A)
    hourglass+><former   the x schedule solved against the matched hourglass shape
    FFN-Wider            match_ffn_wider: a narrower d with a ~32 d FFN
    CEA                  the FFN-Wider shape with rho = cea_outer_ratio (the same parameters)
    LWS <variant>        the paper's schedules, FFN multipliers scaled by lws.match_params

    Where a paper does not fix a rounding, ours keeps the GPU's kernels fed (the GPU preset):
    head dims multiples of head_dim_multiple (FFN-Wider's d; the ><former's width_multiple is
    given as n_head x 8 there), and FFN hidden sizes multiples of hidden_multiple (the composed
    model's d_h,l, and CEA's Outer- and Inner-FFN: W is then a multiple of hidden_multiple / rho).
    The hourglass shape is the paper's (d = 1032, d_h = 418 for the 12L/768 baseline): not rounded.
    `models`: the names to match (in SHAPE_NAMES' order); the others are never built.
    """
    wanted = lambda *names: any(name in models for name in names)
    shapes = {}
    if wanted("GPT"):
        shapes["GPT"] = ("gpt", dict(baseline))
    if wanted("hourglass", "hourglass+><former"):
        hg = hourglass.match_baseline(baseline, hourglass_k, hourglass_ratio)
        shapes["hourglass"] = ("hourglass", hg)
    former = dict(width_schedule=width_schedule, width_multiple=width_multiple)
    shapes["><former"] = ("variable_width", {**baseline, **former})
    if wanted("hourglass+><former"):
        # (only when it rounds: the CPU preset's model_args stay as before, so finished runs resume)
        rounding = dict(hidden_multiple=hidden_multiple) if hidden_multiple > 1 else {}
        shapes["hourglass+><former"] = ("composed", {**hg, **former, **rounding})
    if wanted("FFN-Wider", "CEA"):
        # W a multiple of 8, and of hidden_multiple / rho, so CEA's split rho W keeps that rounding
        rho = Fraction(cea_outer_ratio).limit_denominator(64)
        multiple = math.lcm(8, rho.denominator * hidden_multiple)
        wider = match_ffn_wider(baseline, ffn_wider_mult, multiple, head_dim_multiple)
        shapes["FFN-Wider"] = ("cea", wider)
        shapes["CEA"] = ("cea", {**wider, "outer_ratio": cea_outer_ratio})
    lws_base = {k: v for k, v in baseline.items() if k != "ffn_hidden"}
    for name, schedule in LWS_SCHEDULES.items():
        if wanted(f"LWS {name}"):
            variant = {**lws_base, **schedule, "ffn_multiple": ffn_multiple}
            shapes[f"LWS {name}"] = ("lws", lws.match_params(lws_base, variant)[0])
    return {name: shapes[name] for name in SHAPE_NAMES if name in models}


def shape_label(model):
    """A short description of a model's shape, for tables."""
    c = model.config
    label = f"L{c.n_layer} d{c.n_embd}"
    widths = getattr(c, "layer_widths", None)
    if widths and len(set(widths)) > 1:
        label += " w" + "/".join(map(str, widths))
    heads = [s.n_head for s in c.layers]
    label += f" h{heads[0]}" if len(set(heads)) == 1 else " h" + "/".join(map(str, heads))
    hidden = [s.ffn_hidden for s in c.layers]
    k = getattr(c, "n_sub_blocks", 1)
    ffn = f"{hidden[0]}" if len(set(hidden)) == 1 else "/".join(map(str, hidden))
    label += f" ffn{'' if k == 1 else f' {k}x'}{ffn}"
    inner = getattr(c, "inner_hidden", 0)  # cea.py's models
    if inner:
        label += f" inner{inner}"
    if getattr(c, "outer_ratio", 1.0) < 1.0:  # composed models with CEA attention
        label += f" rho{c.outer_ratio:g}"
    return label


# ----------------------------------------------------------------------------------------
# The presets of compare.py and bench.py, and the table of shapes

# Keys handed to compose.matched_shapes; the rest of a preset is the baseline and training.
MATCHING_KEYS = ("hourglass_k", "hourglass_ratio", "width_schedule", "width_multiple",
                 "ffn_wider_mult", "cea_outer_ratio", "ffn_multiple", "head_dim_multiple",
                 "hidden_multiple")
BASELINE_KEYS = ("n_layer", "n_head", "n_kv_head", "n_embd", "qk_norm", "tie_embeddings")

# 6 layers so that LWS has inner layers to scale after framing; ~2.5M tokens per model.
# Measured: ~45 min for all ten on a 2-core CPU (see README, Results).
CPU_PRESET = dict(
    out_dir="out-compare-cpu", dataset="shakespeare_char", data_dir="", models="", seeds="1337",
    n_layer=6, n_head=4, n_kv_head=None, n_embd=128, qk_norm="", tie_embeddings=True,
    block_size=128, batch_size=32, gradient_accumulation_steps=1, max_iters=600, learning_rate=2e-3,
    min_lr=2e-4, warmup_iters=50, eval_interval=50, eval_iters=8, log_interval=25,
    device="auto", dtype="auto", compile=False,
    hourglass_k=4, hourglass_ratio=0.4, width_schedule="x", width_multiple=8, ffn_wider_mult=32,
    cea_outer_ratio=0.125, ffn_multiple=32, head_dim_multiple=2, hidden_multiple=1)
# The papers' smallest shapes: the 12L/768 GPT of the hourglass paper's 113M row (the matcher
# gives its K=4 hourglass, d=1032, d_h=418), the LWS 12-layer baseline width, GPT-2 tokens.
# 32 x 1024 tokens per step, 4000 steps = 131M tokens per model. Not run here (no GPU).
GPU_PRESET = dict(
    CPU_PRESET, out_dir="out-compare-gpu", dataset="tinystories", n_layer=12, n_head=12, n_embd=768,
    block_size=1024, max_iters=4000, learning_rate=6e-4, min_lr=6e-5, warmup_iters=200,
    eval_interval=250, eval_iters=50, log_interval=50, compile=True,
    width_multiple=96,  # widths: multiples of 8 x 12 heads, so every head dim is a multiple of 8
    # FFN-Wider / CEA: d = 12 heads x a multiple of 8 (fast SDPA kernels on CUDA)
    head_dim_multiple=8,
    hidden_multiple=8,  # hourglass+><former: each layer's d_h,l a multiple of 8 (tensor cores)
    ffn_multiple=256)  # the LWS paper's FFN divisor
PRESETS = {"cpu": CPU_PRESET, "gpu": GPU_PRESET}


def preset_settings(argv, keys=None, extra=None):
    """The settings of --preset=<name> (default cpu) with argv's config files and --key=value
    on top (compare.py, compose.py and bench.py read their command lines this way).
    keys: keep only these preset keys; extra: the calling tool's own options and defaults."""
    preset = next((a.split("=", 1)[1] for a in argv if a.startswith("--preset=")), "cpu")
    if preset not in PRESETS:
        raise ConfigError(f"--preset={preset!r}: choose one of {', '.join(PRESETS)}")
    defaults = {k: v for k, v in PRESETS[preset].items() if keys is None or k in keys}
    defaults.update(extra or {}, preset=preset)
    return parse_overrides(argv, defaults)


def select_models(models):
    """The shape names that `models` picks: comma-separated names or their folder slugs ('' =
    all), in SHAPE_NAMES' order, checked before anything is matched."""
    if not models:
        return SHAPE_NAMES
    wanted = [m.strip() for m in models.split(",")]
    unknown = [m for m in wanted if m not in SHAPE_NAMES and m not in map(slug, SHAPE_NAMES)]
    if unknown:
        raise ConfigError(f"--models: unknown {unknown}; choose from {', '.join(SHAPE_NAMES)} "
                          f"(or {', '.join(map(slug, SHAPE_NAMES))})")
    return tuple(name for name in SHAPE_NAMES if name in wanted or slug(name) in wanted)


def dataset_vocab_size(dataset, data_dir=""):
    """The vocabulary of data/<dataset> (or data_dir) from its meta.json; before the data is
    prepared (train.py prepares the small datasets), the known sizes."""
    meta = Path(data_dir or ROOT / "data" / dataset) / "meta.json"
    if meta.exists():
        return json.loads(meta.read_text())["vocab_size"]
    return {"shakespeare_char": 65}.get(dataset, 50257)


def baseline_of(settings):
    """The plain GPT's build kwargs from a preset. The vocabulary is the data's, padded as train.py
    pads it (model.padded_vocab_size: GPT-2's 50257 -> 50304), so the tables count what trains."""
    vocab_size = dataset_vocab_size(settings["dataset"], settings["data_dir"])
    return dict(vocab_size=padded_vocab_size(vocab_size), block_size=settings["block_size"],
                **{k: settings[k] for k in BASELINE_KEYS})


def slug(name):
    """A folder name for a model name: '><former' -> 'xformer', 'LWS crown' -> 'lws-crown'."""
    return name.replace("><former", "xformer").replace("+", "-").replace(" ", "-").lower()


# The shapes, counted on the meta device (no memory, no time)


def describe_shapes(shapes, seq_len):
    """{name: dict of shape, parameter counts by component, FLOPs/token, KV-cache bytes/token}."""
    out = {}
    for name, (model_type, model_args) in shapes.items():
        with torch.device("meta"):
            model = build_any(model_type, **model_args)
        c = model.param_counts()
        endpoint = model.endpoint_params() if hasattr(model, "endpoint_params") else 0
        out[name] = dict(model_type=model_type, shape=shape_label(model),
                         embedding=c["embedding"] + c["lm_head"], attention=c["attention"],
                         ffn=c["ffn"], norms=c["norms"] + c["other"], budget=model.budget(),
                         endpoint=endpoint, total=c["total"],
                         flops_per_token=model.flops_per_token(seq_len),
                         # bf16 keys + values, all layers
                         kv_bytes_per_token=model.kv_cache_bytes_per_token())
    return out


def shapes_table(shapes_info, extra_columns=None):
    """Markdown, one row per shape of describe_shapes(). extra_columns: (header cells, {name: row
    cells}) appended on the right (compare.py adds its training results this way)."""
    names = list(shapes_info)
    # the plain GPT, unless --models left it out
    first, base_budget = names[0], shapes_info[names[0]]["budget"]
    head = ["model", "shape", "embedding", "attention", "FFN", f"budget (vs {first})",
            f"budget without W_end (vs {first})", "fwd FLOPs/token", "KV bytes/token"]
    extra_head, extra_cells = extra_columns or ([], {})
    lines = ["| " + " | ".join(head + extra_head) + " |",
             "|---|---|" + "---:|" * (len(head) - 2 + len(extra_head))]
    for name in names:
        r = shapes_info[name]
        matched = r["budget"] - r["endpoint"]  # Appendix A's count: W_end left out
        vs_gpt = 100 * (r["budget"] / base_budget - 1)
        cells = [name, r["shape"], f"{r['embedding'] / 1e6:.3f}M", f"{r['attention'] / 1e6:.3f}M",
                 f"{r['ffn'] / 1e6:.3f}M", f"{r['budget'] / 1e6:.3f}M ({vs_gpt:+.1f}%)",
                 f"{matched / 1e6:.3f}M ({100 * (matched / base_budget - 1):+.1f}%)",
                 f"{r['flops_per_token'] / 1e6:.2f}M", f"{r['kv_bytes_per_token']:,}"]
        lines.append("| " + " | ".join(cells + list(extra_cells.get(name, []))) + " |")
    return "\n".join(lines)


# A picture of every shape


def layer_profile(model):
    """Per layer of a model (built on any device): the residual stream's width, the attention
    width (query heads x head dim), the hidden size of each FFN sub-block (K of them in an
    hourglass) and of an Inner-FFN inside attention (CEA; 0 without)."""
    c = model.config
    rows = []
    for i, (block, spec) in enumerate(zip(model.blocks, c.layers)):
        stream = c.layer_widths[i] if getattr(c, "layer_widths", None) else c.n_embd
        inner = getattr(block.attn, "inner_ffn", None)
        ffns = [m for m in block.ffn.modules() if isinstance(m, SwiGLU)]
        rows.append(dict(stream=stream, attention=spec.n_head * spec.head_dim,
                         ffn=[m.out_proj.in_features for m in ffns],
                         inner=inner.out_proj.in_features if isinstance(inner, SwiGLU) else 0))
    return rows


def plot_shapes(shapes, path, title=""):
    """One panel per matched shape: per layer, the residual width (grey bars), the attention
    width (blue), each FFN sub-block's hidden size (orange; K marks for an hourglass) and CEA's
    Inner-FFN (green), on one log-scaled width axis so that every panel reads alike."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(shapes)
    cols = min(5, n)
    rows_n = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(3.2 * cols, 2.9 * rows_n), sharey=True,
                             squeeze=False)
    for ax, (name, (model_type, model_args)) in zip(axes.flat, shapes.items()):
        with torch.device("meta"):
            layers = layer_profile(build_any(model_type, **model_args))
        x = range(1, len(layers) + 1)
        ax.bar(x, [r["stream"] for r in layers], color="0.85", label="residual width")
        ax.plot(x, [r["attention"] for r in layers], "o-", color="tab:blue", label="attention")
        k = max(len(r["ffn"]) for r in layers)
        ffn = [r["ffn"][0] if r["ffn"] else float("nan") for r in layers]
        ax.plot(x, ffn, "s-", color="tab:orange", label="FFN hidden (per sub-block)")
        if k > 1:
            ax.text(0.03, 0.93, f"{k} FFN sub-blocks per layer", transform=ax.transAxes,
                    fontsize=7, color="tab:orange", va="top")
        if any(r["inner"] for r in layers):
            ax.plot(x, [r["inner"] or float("nan") for r in layers], "^--", color="tab:green",
                    label="Inner-FFN (in attention)")
        ax.set_title(name, fontsize=9)
        ax.set_yscale("log", base=2)
        ax.set_xticks(list(x))
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("width")
    for ax in axes[-1, :]:
        ax.set_xlabel("layer")
    handles = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=len(handles),
               fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    import sys

    args = sys.argv[1:]  # --plot (to docs/shapes_<preset>.png) or --plot=PATH draws the shapes too
    plots = [a.split("=", 1)[1] if "=" in a else "" for a in args if a.split("=")[0] == "--plot"]
    plot = plots[-1] if plots else None  # the last one wins, as for every option
    try:
        settings = preset_settings([a for a in args if a.split("=")[0] != "--plot"])
        shapes = matched_shapes(baseline_of(settings), **{k: settings[k] for k in MATCHING_KEYS},
                                models=select_models(settings["models"]))
        print(f"{settings['preset']} preset, every shape at the plain GPT's budget:\n")
        print(shapes_table(describe_shapes(shapes, settings["block_size"])))
    except (ConfigError, ValueError) as e:
        raise SystemExit(f"error: {e}")
    if plot is not None:
        path = plot or str(ROOT / "docs" / f"shapes_{settings['preset']}.png")
        title = (f"{settings['preset']} preset: every shape at the plain GPT's budget "
                 f"(L{settings['n_layer']}, d{settings['n_embd']})")
        plot_shapes(shapes, path, title)
        print(f"\nwrote {path}")
