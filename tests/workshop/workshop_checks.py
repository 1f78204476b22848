"""The self-checks of the workshop's exercises (docs/workshop.md), one function per exercise.

Each check_<exercise>(module) takes the participant's module (workshop/<exercise>.py) or the
reference solution (the fenced block after `<!-- solution: <exercise> -->` in
docs/workshop_solutions.md) and raises AssertionError with a message a participant can act on.
The checks compute what they compare against from the repo's own code (lws.py, hourglass.py, ...),
so they follow the code when it changes. A participant runs one with tests/workshop/check.py.
"""

import importlib.util
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "experiments"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

EXERCISES = ("hourglass_exercise", "variable_width_exercise", "cea_exercise", "lws_exercise",
             "mlp_exercise")
SOLUTIONS = ROOT / "docs" / "workshop_solutions.md"
SOLUTION_BLOCK = re.compile(r"<!-- solution: (\w+) -->\s*```python\n(.*?)```", re.S)


# ----------------------------------------------------------------------------------------
# Loading a participant's file or a reference solution


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def solution_sources():
    """{exercise: source} of every solution block in docs/workshop_solutions.md."""
    return {name: source for name, source in SOLUTION_BLOCK.findall(SOLUTIONS.read_text())}


def load_solution(name, folder):
    """The reference solution of `name`, written to folder/<name>.py and imported from there (as a
    participant would after pasting it over workshop/<name>.py)."""
    sources = solution_sources()
    assert name in sources, (
        f"docs/workshop_solutions.md has no block after <!-- solution: {name} -->"
    )
    path = Path(folder) / f"{name}.py"
    path.write_text(sources[name])
    return load_module(path, f"workshop_solution_{name}")


def load_exercise(name):
    return load_module(ROOT / "workshop" / f"{name}.py", f"workshop_participant_{name}")


def relative_gap(value, target):
    return abs(value - target) / target


def keyword_arguments(module, function):
    """module.<function>(), which must return a dict of config keyword arguments; anything else is
    named (the usual slip: returning a (kwargs, count) pair such as lws.match_params' whole)."""
    got = getattr(module, function)()
    if isinstance(got, tuple) and got and isinstance(got[0], dict):
        kinds = ", ".join(type(g).__name__ for g in got)
        raise AssertionError(
            f"{function}() returned a tuple of {len(got)} ({kinds}): return the keyword-argument "
            f"dict alone - a helper that returns a pair (like lws.match_params: (kwargs, count)) "
            f"is unpacked first, `matched, _ = ...`")
    assert isinstance(got, dict), (
        f"{function}() returned a {type(got).__name__}: return a dict of config keyword arguments")
    return got


# ----------------------------------------------------------------------------------------
# Part 1: hourglass with K = 2 matched to the main job's GPT


def build(model_type, args):
    """The model the keyword arguments describe; arguments that build none fail the check, with
    the configurator's one line (an unknown key, a shape its checks refuse)."""
    from shapelab.configurator import ConfigError
    from shapes import build_model
    try:
        return build_model(model_type, **args)
    except ConfigError as e:
        raise AssertionError(f"these keyword arguments build no model: {e}") from None


def check_hourglass_exercise(module):
    args = keyword_arguments(module, "hourglass_k2")
    model = build("hourglass", args)
    cfg, baseline = model.config, build("gpt", module.BASELINE)
    d, d_h = cfg.n_embd, cfg.layers[0].ffn_hidden
    assert cfg.n_sub_blocks == 2, (
        f"K = n_sub_blocks is {cfg.n_sub_blocks}: the exercise asks for K = 2"
    )
    assert d_h < d, f"d_h = {d_h} >= d = {d}: an hourglass sub-block is wide-narrow-wide (d_h < d)"
    assert (cfg.n_layer, cfg.n_head) == (baseline.config.n_layer, baseline.config.n_head), \
        "keep the baseline's layers and heads (the paper keeps the head count; match_baseline does)"
    assert d % (2 * cfg.n_head) == 0, (
        f"d = {d} must be a multiple of 2 x {cfg.n_head} heads (even head size for RoPE)")
    gap = relative_gap(model.budget(), baseline.budget())
    assert gap <= 0.005, (f"budget {model.budget():,} vs the baseline's {baseline.budget():,}: "
                          f"{gap:.2%} apart (at most 0.5%): use hourglass.match_baseline")
    share = model.param_counts()["attention"] / model.budget()
    assert abs(module.ATTENTION_SHARE - share) < 0.005, (  # two decimals: 0.60 is not 0.609
        f"ATTENTION_SHARE = {module.ATTENTION_SHARE}: count again, to two decimals (attention is "
        f"4 d^2 per layer here, model.param_counts()['attention'])")
    return dict(
        n_embd=d, bottleneck_dim=d_h, budget=model.budget(), attention_share=round(share, 3)
    )


# ----------------------------------------------------------------------------------------
# Part 2: the ><former's bottleneck at layer 2 of 8


def check_variable_width_exercise(module):
    import variable_width
    args = keyword_arguments(module, "early_bottleneck")
    model = build("variable_width", args)
    widths = model.config.layer_widths
    baseline = build("gpt", module.BASELINE)
    assert model.config.width_multiple <= 8, (
        f"width_multiple={model.config.width_multiple}: widths in steps of "
        f"{model.config.width_multiple} are too coarse at d = 128 (the docstring asks for 8)")
    assert len(widths) == 8 and model.config.n_embd == 128, (
        "keep the baseline's 8 layers and d = 128"
    )
    narrowest = [i + 1 for i, w in enumerate(widths) if w == min(widths)]
    assert narrowest == [2], (
        f"widths {widths}: the narrowest layer (1-indexed) is {narrowest}, not [2]"
    )
    falls, rises = widths[:2], widths[1:]
    assert falls == sorted(falls, reverse=True) and rises == sorted(rises), \
        f"widths {widths}: they should fall to layer 2 and rise after it (the ><former's shape)"
    matched = variable_width.param_summary(model)["matched"]
    gap = relative_gap(matched, baseline.budget())
    assert gap <= 0.02, (f"Appendix A's matched count {matched:,} is {gap:.1%} away from the "
                         f"constant width's {baseline.budget():,} (at most 2%): let the solver "
                         f"choose the widths, width_multiple=8")
    return dict(widths=widths, matched=matched, baseline=baseline.budget())


# ----------------------------------------------------------------------------------------
# Part 3: CEA's outer ratio moved, the contribution ratio measured


def small_corpus():
    """Python's own documentation (pydoc_data, shipped with CPython) as character ids, and its
    vocabulary size."""
    from pydoc_data.topics import topics
    text = "".join(topics[k] for k in sorted(topics))[:200_000]
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    return torch.tensor([index[c] for c in text]), len(chars)


def windows(tokens, n, block):
    """n evenly spaced windows of `block` tokens (n, block) and their next tokens (n, block)."""
    starts = torch.arange(n) * ((len(tokens) - block - 1) // n)
    return (torch.stack([tokens[s:s + block] for s in starts]),
            torch.stack([tokens[s + 1:s + block + 1] for s in starts]))


def measured_ffn_ratio(model, idx, targets):
    import cea_contribution
    reps, kinds = cea_contribution.sublayer_representations(model, idx)
    accuracies = cea_contribution.token_prediction_accuracies(
        reps, targets.reshape(-1), min_count=50
    )
    return cea_contribution.contribution_ratio(accuracies, kinds)["ffn_ratio"]


def check_cea_exercise(module, steps=150):
    import math

    tokens, vocab_size = small_corpus()
    torch.manual_seed(0)
    model = module.build(vocab_size)
    block = model.config.block_size
    width = 32 * model.config.n_embd  # W of the 32x FFN-Wider
    outer, inner = model.config.layers[0].ffn_hidden, model.config.inner_hidden
    wider = build("cea", dict(vocab_size=vocab_size, block_size=block, n_layer=2, n_head=2,
                              n_embd=32, ffn_width_ratio=32, outer_ratio=1.0))
    assert model.param_counts()["non_embedding"] == wider.param_counts()["non_embedding"], (
        "the split should move FFN parameters into attention, not add any: build() must stay a "
        "2-layer FFN-Wider")
    idx, targets = windows(tokens, 64, block)  # 64 x 64 = 4,096 positions
    # 1. the participant's measurement is the measurement (on the untrained model: quick)
    model.eval()
    expected = measured_ffn_ratio(model, idx, targets)
    got = participant_ratio(module, model, idx, targets)
    assert isinstance(got, float) and (
        got == expected or math.isnan(got) and math.isnan(expected)
    ), (
        f"ffn_contribution returned {got!r}; the FFN's Token Prediction contribution ratio of this "
        f"model measures {expected!r} (gains per sublayer, FFN share; every digit counts: a "
        f"number typed in is not a measurement): see experiments/cea_contribution.py"
    )
    # 2. train it a little (a few seconds) so that the ratio means something, and show it
    model.train()
    generator = torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        starts = torch.randint(len(tokens) - block - 1, (8,), generator=generator)
        x = torch.stack([tokens[s:s + block] for s in starts])
        y = torch.stack([tokens[s + 1:s + block + 1] for s in starts])
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    ratio = participant_ratio(module, model, idx, targets)
    print(f"outer ratio {outer / width}: FFN contribution ratio {ratio:.3f} after {steps} steps "
          f"(train loss {loss.item():.3f})", flush=True)
    # 3. the split the exercise asks for
    assert outer == width // 2 and inner == width // 2, (
        f"Outer-FFN {outer}, Inner-FFN {inner} of W = {width}: set OUTER_RATIO so that each holds "
        "half"
    )
    return dict(ffn_ratio=ratio, loss=loss.item())


# ----------------------------------------------------------------------------------------
# Part 4: a valley schedule, parameter-matched


def participant_ratio(module, model, idx, targets):
    """module.ffn_contribution(...), with the usual shape mistake named instead of a raw error."""
    try:
        return module.ffn_contribution(model, idx, targets)
    except RuntimeError as e:
        if "bincount" in str(e) or "shape" in str(e) or "size" in str(e):
            raise AssertionError(
                f"ffn_contribution raised {type(e).__name__}: {e}. token_prediction_accuracies "
                f"takes the targets flat, one per position: targets.reshape(-1) of the (B, T) "
                f"targets") from None
        raise


def check_lws_exercise(module):
    import lws
    from model import shape_counts
    args = keyword_arguments(module, "valley_shape")
    model = build("lws", args)
    specs = model.config.layers
    widths, heads = [s.ffn_hidden for s in specs], [s.n_head for s in specs]
    assert len(specs) == 9 and model.config.n_embd == 128, "keep CPU_BASE and 9 layers"
    middle = len(specs) // 2
    falls, rises = widths[:middle + 1], widths[middle:]
    assert widths[middle] < min(widths[0], widths[-1]) and falls == sorted(falls, reverse=True) \
        and rises == sorted(rises), (
            f"FFN widths {widths}: not a valley with its minimum in the middle layer")
    assert heads[middle] < min(heads[0], heads[-1]), (
        f"query heads {heads}: the attention should make a valley too")
    target = shape_counts(lws.LWSGPT, lws.LWSConfig(**module.BASELINE))["non_embedding"]
    count = model.param_counts()["non_embedding"]
    gap = relative_gap(count, target)
    assert gap <= 0.015, (f"{count:,} non-embedding parameters vs the baseline's {target:,}: "
                          f"{gap:.2%} apart (at most 1.5%): use lws.match_params")
    return dict(ffn_widths=widths, heads=heads, count=count, target=target)


# ----------------------------------------------------------------------------------------
# Part 5: a learned W_in


def check_mlp_exercise(module):
    import inspect

    import mlp_hourglass
    from shapelab.image_tasks import get_task
    source = inspect.getsource(module.build)
    assert not re.search(r"(image_mlp|ImageMLP)\([^)]*input_proj\s*=\s*['\"]learned", source), (
        "build() asks image_mlp for input_proj='learned': that is the answer the repo already "
        "has. Build the frozen model and make its lift learnable yourself (read InputProjection)")
    torch.manual_seed(0)
    model = module.build()
    frozen = mlp_hourglass.image_mlp(get_task("mnist_denoise"), latent_dim=1024, hidden_dim=32,
                                     n_blocks=2)
    w_in = model.lift.weight if model.lift is not None else None
    assert isinstance(w_in, torch.nn.Parameter) and w_in.requires_grad, \
        "W_in (model.lift.weight) is not a trainable nn.Parameter: the optimizer would never see it"
    assert any(p is w_in for p in model.parameters()), "W_in is not among model.parameters()"
    assert torch.equal(w_in.detach(), frozen.lift.weight), \
        "the learned W_in should start from the frozen one (same seed, same matrix)"
    assert model.input_proj == "learned", (  # read from model.lift: no label to set by hand
        f"model.input_proj is {model.input_proj!r}: the model does not hold W_in as a trainable "
        f"parameter of its own")
    counts = mlp_hourglass.count_params(model)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert counts["total"] == counts["trainable"] == trainable, (
        f"count_params says {counts['total']:,} parameters, {counts['trainable']:,} trainable: "
        f"with a learned W_in every parameter is trainable and W_in counts once")
    assert module.TRAINABLE_PARAMS == trainable, (
        f"TRAINABLE_PARAMS = {module.TRAINABLE_PARAMS}: the formula gives another number (d_x = "
        "784, d_out = 784)"
    )
    before = w_in.detach().clone()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.rand(16, 784)
    loss = torch.nn.functional.mse_loss(model(x), x)
    loss.backward()
    optimizer.step()
    assert not torch.equal(before, model.lift.weight.detach()), "one AdamW step did not move W_in"
    return dict(trainable=trainable)


CHECKS = {name: globals()[f"check_{name}"] for name in EXERCISES}
