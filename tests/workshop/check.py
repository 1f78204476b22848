"""Check one workshop exercise, the file you edited: workshop/<exercise>.py.

    python tests/workshop/check.py hourglass_exercise

Each check compares your answer with what the repo's own code computes, and ends with 'solved' or
with what to change (exit status 1).
"""

import importlib.util
import math
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments")]

EXERCISES = ("hourglass_exercise", "variable_width_exercise", "cea_exercise", "lws_exercise",
             "mlp_exercise")


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(model_type, args):
    from shapelab.configurator import ConfigError
    from shapes import build_model
    try:
        return build_model(model_type, **args)
    except ConfigError as e:
        raise AssertionError(f"these keyword arguments build no model: {e}") from None


def keyword_arguments(module, function):
    got = getattr(module, function)()
    assert isinstance(got, dict), (
        f"{function}() returned a {type(got).__name__}: return the dict of config keyword "
        f"arguments alone (lws.match_params returns a (kwargs, count) pair: `matched, _ = ...`)")
    return got


def check_hourglass_exercise(module):
    model = build("hourglass", keyword_arguments(module, "hourglass_k2"))
    cfg, baseline = model.config, build("gpt", module.BASELINE)
    d, d_h = cfg.n_embd, cfg.layers[0].ffn_hidden
    assert cfg.n_sub_blocks == 2, f"K = n_sub_blocks is {cfg.n_sub_blocks}: the exercise asks for 2"
    assert d_h < d, f"d_h = {d_h} >= d = {d}: an hourglass sub-block is wide-narrow-wide"
    assert (cfg.n_layer, cfg.n_head) == (baseline.config.n_layer, baseline.config.n_head), \
        "keep the baseline's layers and heads (match_baseline does)"
    gap = abs(model.budget() / baseline.budget() - 1)
    assert gap <= 0.005, (f"budget {model.budget():,} vs the baseline's {baseline.budget():,}: "
                          f"{gap:.2%} apart (at most 0.5%): use hourglass.match_baseline")
    share = model.param_counts()["attention"] / model.budget()
    assert abs(module.ATTENTION_SHARE - share) < 0.005, (
        f"ATTENTION_SHARE = {module.ATTENTION_SHARE}: count again, to two decimals "
        f"(model.param_counts()['attention'] / model.budget())")
    return dict(n_embd=d, bottleneck_dim=d_h, budget=model.budget(),
                attention_share=round(share, 3))


def check_variable_width_exercise(module):
    import variable_width
    model = build("variable_width", keyword_arguments(module, "early_bottleneck"))
    widths, baseline = model.config.layer_widths, build("gpt", module.BASELINE)
    assert model.config.width_multiple <= 8, (
        f"width_multiple={model.config.width_multiple}: too coarse at d = 128, use 8")
    assert len(widths) == 8 and model.config.n_embd == 128, "keep the baseline's 8 layers, d = 128"
    narrowest = [i + 1 for i, w in enumerate(widths) if w == min(widths)]
    assert narrowest == [2], f"widths {widths}: the narrowest layer is {narrowest}, not [2]"
    assert widths[:2] == sorted(widths[:2], reverse=True) and widths[1:] == sorted(widths[1:]), \
        f"widths {widths}: they should fall to layer 2 and rise after it"
    matched = variable_width.param_summary(model)["matched"]
    gap = abs(matched / baseline.budget() - 1)
    assert gap <= 0.02, (f"Appendix A's matched count {matched:,} is {gap:.1%} away from the "
                         f"constant width's {baseline.budget():,} (at most 2%): let the solver "
                         f"choose the widths")
    return dict(widths=widths, matched=matched, baseline=baseline.budget())


def ffn_ratios(module, model, idx, targets):
    """(the participant's ratio, the measured one) for model on idx -> targets."""
    import cea_contribution
    reps, kinds = cea_contribution.sublayer_representations(model, idx)
    accuracies = cea_contribution.token_prediction_accuracies(reps, targets.reshape(-1),
                                                              min_count=50)
    expected = cea_contribution.contribution_ratio(accuracies, kinds)["ffn_ratio"]
    try:
        got = module.ffn_contribution(model, idx, targets)
    except RuntimeError as e:
        raise AssertionError(f"ffn_contribution raised {e}: token_prediction_accuracies takes the "
                             f"targets flat, targets.reshape(-1)") from None
    return got, expected


def check_cea_exercise(module, steps=150):
    from pydoc_data.topics import topics  # Python's own documentation: a corpus on every machine
    text = "".join(topics[k] for k in sorted(topics))[:200_000]
    index = {c: i for i, c in enumerate(sorted(set(text)))}
    tokens = torch.tensor([index[c] for c in text])
    torch.manual_seed(0)
    model = module.build(len(index))
    block, width = model.config.block_size, 32 * model.config.n_embd
    outer, inner = model.config.layers[0].ffn_hidden, model.config.inner_hidden
    wider = build("cea", dict(vocab_size=len(index), block_size=block, n_layer=2, n_head=2,
                              n_embd=32, ffn_width_ratio=32, outer_ratio=1.0))
    assert model.param_counts()["non_embedding"] == wider.param_counts()["non_embedding"], (
        "the split should move FFN parameters into attention, not add any: keep build()")
    starts = torch.arange(64) * ((len(tokens) - block - 1) // 64)
    idx = torch.stack([tokens[s:s + block] for s in starts])
    targets = torch.stack([tokens[s + 1:s + block + 1] for s in starts])
    model.eval()
    got, expected = ffn_ratios(module, model, idx, targets)
    same = got == expected or math.isnan(got) and math.isnan(expected)
    assert isinstance(got, float) and same, (
        f"ffn_contribution returned {got!r}; this model's FFN contribution ratio measures "
        f"{expected!r} (every digit counts: a number typed in is not a measurement)")
    model.train()
    generator = torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        batch = torch.randint(len(tokens) - block - 1, (8,), generator=generator)
        x = torch.stack([tokens[s:s + block] for s in batch])
        y = torch.stack([tokens[s + 1:s + block + 1] for s in batch])
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    ratio, _ = ffn_ratios(module, model, idx, targets)
    print(f"outer ratio {outer / width}: FFN contribution ratio {ratio:.3f} after {steps} steps "
          f"(train loss {loss.item():.3f})", flush=True)
    assert outer == width // 2 and inner == width // 2, (
        f"Outer-FFN {outer}, Inner-FFN {inner} of W = {width}: set OUTER_RATIO so that each holds "
        f"half")
    return dict(ffn_ratio=ratio, loss=loss.item())


def check_lws_exercise(module):
    import lws
    from model import shape_counts
    model = build("lws", keyword_arguments(module, "valley_shape"))
    specs = model.config.layers
    widths, heads = [s.ffn_hidden for s in specs], [s.n_head for s in specs]
    assert len(specs) == 9 and model.config.n_embd == 128, "keep CPU_BASE and 9 layers"
    middle = len(specs) // 2
    falls, rises = widths[:middle + 1], widths[middle:]
    assert widths[middle] < min(widths[0], widths[-1]) and falls == sorted(falls, reverse=True) \
        and rises == sorted(rises), f"FFN widths {widths}: no valley with its minimum in the middle"
    assert heads[middle] < min(heads[0], heads[-1]), (
        f"query heads {heads}: the attention should make a valley too")
    target = shape_counts(lws.LWSGPT, lws.LWSConfig(**module.BASELINE))["non_embedding"]
    count = model.param_counts()["non_embedding"]
    gap = abs(count / target - 1)
    assert gap <= 0.015, (f"{count:,} non-embedding parameters vs the baseline's {target:,}: "
                          f"{gap:.2%} apart (at most 1.5%): use lws.match_params")
    return dict(ffn_widths=widths, heads=heads, count=count, target=target)


def check_mlp_exercise(module):
    import inspect

    import mlp_hourglass
    from shapelab.image_tasks import get_task
    assert not re.search(r"input_proj\s*=\s*['\"]learned", inspect.getsource(module.build)), (
        "build() asks image_mlp for input_proj='learned', the answer the repo already has: make "
        "the frozen model's lift learnable yourself (read InputProjection)")
    torch.manual_seed(0)
    model = module.build()
    frozen = mlp_hourglass.image_mlp(get_task("mnist_denoise"), latent_dim=1024, hidden_dim=32,
                                     n_blocks=2)
    w_in = model.lift.weight if model.lift is not None else None
    assert isinstance(w_in, torch.nn.Parameter) and any(p is w_in for p in model.parameters()), \
        "W_in (model.lift.weight) is not a trainable nn.Parameter: the optimizer would never see it"
    assert torch.equal(w_in.detach(), frozen.lift.weight), \
        "the learned W_in should start from the frozen one (same seed, same matrix)"
    assert model.input_proj == "learned", f"model.input_proj is {model.input_proj!r}"
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert module.TRAINABLE_PARAMS == trainable, (
        f"TRAINABLE_PARAMS = {module.TRAINABLE_PARAMS}: the formula gives another number "
        f"(d_x = d_out = 784)")
    before = w_in.detach().clone()
    x = torch.rand(16, 784)
    torch.nn.functional.mse_loss(model(x), x).backward()
    torch.optim.AdamW(model.parameters(), lr=1e-3).step()
    assert not torch.equal(before, w_in.detach()), "one AdamW step did not move W_in"
    return dict(trainable=trainable)


CHECKS = {name: globals()[f"check_{name}"] for name in EXERCISES}


def as_written(result):
    """A check's result as the pages write numbers: 'budget 1,050,600, attention_share 0.609'."""
    def number(v):
        if isinstance(v, list):
            return "[" + ", ".join(map(number, v)) + "]"
        return f"{v:,}" if isinstance(v, int) else f"{v:.3f}" if isinstance(v, float) else str(v)
    return ", ".join(f"{key} {number(value)}" for key, value in result.items())


def run(name, path=None):
    """Check `path` (default workshop/<name>.py) as exercise `name`: 0 when solved, else 1."""
    path = Path(path or ROOT / "workshop" / f"{name}.py")
    shown = f"workshop/{name}.py"
    try:
        result = CHECKS[name](load_module(path, f"workshop_participant_{name}"))
    except AssertionError as e:
        hint = (f"{shown} still has its TODO lines: read its docstring, change what it asks for"
                if "TODO" in path.read_text() else f"change {shown}")
        print(f"not solved yet: {e}\n{hint}, then run this again", file=sys.stderr)
        return 1
    print(f"{name}: {as_written(result)}")
    print(f"solved: {shown} passes its check")
    return 0


if __name__ == "__main__":
    name = sys.argv[1].removesuffix(".py").split("/")[-1] if len(sys.argv) == 2 else ""
    if name not in EXERCISES:
        raise SystemExit(f"usage: python tests/workshop/check.py <exercise>, one of: "
                         f"{', '.join(EXERCISES)}")
    sys.exit(run(name))
