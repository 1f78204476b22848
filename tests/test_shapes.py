"""shapes.py: every mechanism matched to the plain GPT's budget by its own paper's rule, the two
presets, the command lines that read them, the table and the picture of the shapes."""

import functools
import json
import subprocess
import sys

import pytest
import torch

from conftest import run_here
from model import meta_device
from shapelab.configurator import ConfigError
from shapes import MODELS, build_model
from shapes import (MATCHING_KEYS, PRESETS, ROOT, SHAPE_NAMES, baseline_of, check_model_settings,
                    count_budget, describe_shapes, layer_profile, matched_shapes, preset_settings,
                    select_models, shapes_table)
import variable_width


@functools.lru_cache(maxsize=None)
def _preset_shapes(items):
    settings = dict(items)
    return matched_shapes(baseline_of(settings), **{k: settings[k] for k in MATCHING_KEYS})


def preset_shapes(settings):
    """matched_shapes of a preset, computed once per preset for the whole file."""
    shapes = _preset_shapes(tuple(sorted(settings.items())))
    return {name: (model_type, dict(args)) for name, (model_type, args) in shapes.items()}


def budgets(shapes):
    return {
        name: count_budget(model_type, **args)
        for name, (model_type, args) in shapes.items()
    }


def test_cpu_preset_shapes_match_the_budget():
    settings = PRESETS["cpu"]
    shapes = preset_shapes(settings)
    assert list(shapes) == [
        "GPT",
        "hourglass",
        "><former",
        "hourglass+><former",
        "FFN-Wider",
        "CEA",
        "LWS vanilla",
        "LWS framed",
        "LWS reverse",
        "LWS crown",
    ]
    counts = budgets(shapes)
    target = counts["GPT"]
    for name in (
        "hourglass",
        "FFN-Wider",
        "CEA",
        "LWS vanilla",
        "LWS framed",
        "LWS reverse",
        "LWS crown",
    ):
        assert abs(counts[name] / target - 1) < 0.006, name
    assert counts["CEA"] == counts["FFN-Wider"]  # CEA only moves FFN width inside attention
    # the ><formers are matched by Appendix A's rule, which leaves out the endpoint matrices W_end
    with torch.device("meta"):
        former = build_model("variable_width", **shapes["><former"][1])
    matched = variable_width.param_summary(former)["matched"]
    assert abs(matched / target - 1) < 0.02


@pytest.mark.parametrize("preset, tolerance", [("cpu", 0.015), ("gpu", 0.025)])
def test_preset_formers_match_the_budget_without_w_end(preset, tolerance):
    """Appendix A matches the budget less W_end: the ><former rows land within 1.5% of the GPT's on
    the CPU preset. The GPU preset rounds widths to multiples of 96 (12 heads x a head dim that is a
    multiple of 8): rounding each of 12 widths by up to +-48 leaves +1.1% / +2.2% (measured), so
    2.5%."""
    settings = PRESETS[preset]
    shapes = preset_shapes(settings)
    info = describe_shapes(shapes, settings["block_size"])
    target = info["GPT"]["budget"]
    for name in ("><former", "hourglass+><former"):
        assert info[name]["endpoint"] > 0, name
        assert abs((info[name]["budget"] - info[name]["endpoint"]) / target - 1) < tolerance, name
    table = shapes_table(info)
    assert "budget without W_end (vs GPT)" in table.splitlines()[0]


def test_shapes_py_prints_the_budget_without_w_end():
    done = run_here("shapes.py")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    head = [c.strip() for c in rows["model"].split("|")]
    col = head.index("budget without W_end (vs GPT)")
    for name in ("><former", "hourglass+><former"):
        cell = rows[name].split("|")[col]  # e.g. ' 1.597M (+1.4%) '
        assert abs(float(cell.split("(")[1].rstrip("%) "))) < 1.5, cell


def test_gpu_preset_hourglass_is_the_papers_113m_row():
    settings = PRESETS["gpu"]
    shapes = preset_shapes(settings)
    args = shapes["hourglass"][1]
    assert (args["n_embd"], args["bottleneck_dim"], args["n_sub_blocks"], args["n_layer"]) == (
        1032,
        418,
        4,
        12,
    )
    wider = shapes["FFN-Wider"][1]
    # d steps by 12 heads x 8 = 96: d = 288 gives W / d = 36.7, the closest to 32 (d = 384 gives
    # ~20)
    assert 28 <= wider["ffn_hidden"] / wider["n_embd"] <= 38


def test_gpu_preset_shapes_keep_head_dims_and_ffn_widths_at_multiples_of_8():
    """CUDA's fast attention kernels want head_dim % 8 == 0 (otherwise SDPA may fall back to the
    math kernel, which saves the fp32 score matrix), tensor cores want FFN widths in multiples of
    8. Every GPU-preset shape keeps both, except the hourglass paper's own 113M row (d = 1032:
    head dim 86, d_h = 418), kept as the paper has it, and what composes with it."""
    settings = PRESETS["gpu"]
    shapes = preset_shapes(settings)
    for name, (model_type, args) in shapes.items():
        with torch.device("meta"):
            model = build_model(model_type, **dict(args, block_size=2))
        head_dims = {s.head_dim for s in model.config.layers}
        hidden = {s.ffn_hidden for s in model.config.layers} | {
            getattr(model.config, "inner_hidden", 0)
        }
        if name == "hourglass":
            assert head_dims == {86} and hidden == {418, 0}  # the paper's shape
            continue
        assert all(h % 8 == 0 for h in head_dims), (name, head_dims)
        if name != "hourglass+><former":  # its layers' d_h,l are multiples of 8, see below
            assert all(h % 8 == 0 for h in hidden), (name, hidden)
    composed = shapes["hourglass+><former"][1]
    with torch.device("meta"):
        model = build_model("composed", **dict(composed, block_size=2))
    assert all(s.ffn_hidden % 8 == 0 for s in model.config.layers)
    assert shapes["FFN-Wider"][1]["n_embd"] % (8 * settings["n_head"]) == 0


def test_the_shapes_use_the_datasets_vocabulary(char_dataset):
    settings = dict(PRESETS["cpu"], data_dir=str(char_dataset))
    vocab = json.loads((char_dataset / "meta.json").read_text())["vocab_size"]
    assert vocab != 65 and baseline_of(settings)["vocab_size"] == vocab


def test_presets_and_model_selection_on_the_command_line():
    settings = preset_settings(["--preset=gpu", "--max_iters=7"])
    assert settings["n_embd"] == 768 and settings["max_iters"] == 7 and settings["preset"] == "gpu"
    assert set(preset_settings(["--steps=3"], keys=("n_layer",), extra=dict(steps=5))) == {
        "n_layer", "steps", "preset"}
    with pytest.raises(ConfigError, match="choose one of cpu, gpu"):
        preset_settings(["--preset=tpu"])
    with pytest.raises(ConfigError, match="unknown config key"):
        preset_settings(["--n_layers=3"])
    assert select_models("") == SHAPE_NAMES
    # slugs, preset order
    assert list(select_models("lws-crown,GPT")) == ["GPT", "LWS crown"]
    with pytest.raises(ConfigError, match="unknown \\['nope'\\]"):
        select_models("GPT,nope")


def test_a_tool_that_keeps_some_preset_keys_reads_those_and_refuses_the_others(tmp_path):
    """bench.py keeps only some preset keys (keys=): those are read from the command line and
    from a config file, and any other key is unknown."""
    config = tmp_path / "matching.py"
    config.write_text("bottleneck_ratio = 0.3\n")
    settings = preset_settings([str(config), "--n_sub_blocks=3"], keys=MATCHING_KEYS)
    assert settings["n_sub_blocks"] == 3 and settings["bottleneck_ratio"] == 0.3
    with pytest.raises(ConfigError, match="unknown config key"):
        preset_settings(["--n_sub_blocks=3"], keys=("n_layer",))


def test_a_gpt2_vocabulary_is_padded_as_train_py_pads_it():
    """compare.py hands the baseline's vocab_size to train.py in model_args (it has the last word),
    so the shapes must carry the padded size: 50257 -> 50304; a character vocabulary stays."""
    # no meta.json: the known sizes
    settings = dict(PRESETS["gpu"], data_dir="/nonexistent")
    assert baseline_of(settings)["vocab_size"] == 50304
    assert baseline_of(dict(settings, dataset="shakespeare_char"))["vocab_size"] == 65


def test_the_shapes_picture_is_drawn_with_tiny_settings(tmp_path):
    """python shapes.py --plot draws every matched shape per layer into shapes_<preset>.png where
    it runs (tiny settings here): the presets' committed pictures, docs/shapes_cpu.png and
    docs/shapes_gpu.png, are redrawn only by naming them (--plot=PATH); a bare --plot in a clone
    replaced them."""
    committed = (ROOT / "docs" / "shapes_cpu.png").read_bytes()
    out = run_here("shapes.py", "--n_layer=4", "--n_embd=128", "--n_head=4",
                   "--models=GPT,hourglass,><former,CEA", "--plot", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    path = "shapes_cpu.png"
    assert f"wrote {path}" in out.stdout and (tmp_path / path).stat().st_size > 10_000
    assert (ROOT / "docs" / "shapes_cpu.png").read_bytes() == committed
    with torch.device("meta"):
        model_type, model_args = matched_shapes(
            dict(vocab_size=65, block_size=32, n_layer=4, n_head=4, n_embd=128),
            models=("GPT", "CEA"))["CEA"]
        rows = layer_profile(build_model(model_type, **model_args))
    assert len(rows) == 4 and all(r["inner"] > 0 and r["stream"] == r["attention"] for r in rows)


def test_a_bare_model_type_is_the_shape_compare_trains():
    """train.py --model_type=X with no model_args builds X by its file's matched_args: the same
    matching the CPU preset's comparison uses (hourglass K = 4, the x schedule, CEA at rho = 0.125
    on the matched FFN-Wider, OpenELM's LWS schedule), within 10% of the GPT's budget."""
    import cea
    import compose
    import hourglass
    import lws

    settings = PRESETS["cpu"]
    shapes = preset_shapes(settings)
    baseline = shapes["GPT"][1]
    same = {"hourglass": (hourglass, "hourglass"), "><former": (variable_width, "variable_width"),
            "hourglass+><former": (compose, "composed"), "CEA": (cea, "cea"),
            "LWS vanilla": (lws, "lws")}
    gpt = count_budget("gpt", **baseline)
    for name, (module, model_type) in same.items():
        args = module.matched_args(baseline)
        assert (model_type, args) == shapes[name], name
        budget = count_budget(model_type, **args)
        assert abs(budget / gpt - 1) < 0.10, (name, budget, gpt)


def test_a_shapes_only_build_of_every_model_type_draws_nothing_and_imports_no_dynamo():
    """model.meta_device: every model type's settings check at the start of a command, in a fresh
    process, leaves torch._dynamo unimported (its import is a large part of a CPU command's
    start), and a build on it gives the counts a real build gives."""
    code = ("import sys, shapes\n"
            "from shapes import train_defaults\n"
            f"for name in {sorted(MODELS)!r}:\n"
            "    shapes.check_model_settings({**train_defaults(), 'model_type': name})\n"
            "print('torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stdout + done.stderr
    for name in sorted(MODELS):
        args = dict(vocab_size=65, n_layer=4, n_embd=64, n_head=4, block_size=16)
        with meta_device():
            on_meta = build_model(name, **args)
        assert all(p.is_meta for p in on_meta.parameters())
        assert on_meta.param_counts() == build_model(name, **args).param_counts(), name


def test_a_bottleneck_ratio_by_hand_that_would_not_re_match_the_budget_is_one_line_saying_how():
    """--model_args={'bottleneck_ratio': r} builds d_h = r d at the GPT's d, which nothing
    re-matches: refused with the command that prints the matched shape; with n_embd given, that
    d is meant and the shape builds."""
    from shapes import train_defaults
    settings = dict(train_defaults(), model_type="hourglass", n_embd=128, n_head=4, n_layer=4)
    with pytest.raises(ConfigError, match="python hourglass.py .*--n_embd=128 .*"
                                          "--bottleneck_ratio=0.25"):
        check_model_settings(dict(settings, model_args={"bottleneck_ratio": 0.25}))
    check_model_settings(dict(settings, model_args={"bottleneck_ratio": 0.25, "n_embd": 128}))


def test_every_recorded_cea_run_is_the_cea_run_the_comparison_plans():
    """The comparison's CEA names cea.py's mask-free kernels (attention_impl='causal'); the
    committed records, which ran on them without naming them, are the same runs
    (sweep.run_identity), so a comparison reuses each; a run of the paper's softmax is not one."""
    from shapelab.configurator import read_config_file
    from shapelab.sweep import run_identity
    preset = PRESETS["cpu"]
    records = sorted(ROOT.glob("results/compare_verdict_*/runs/cea-*/config.py"))
    assert len(records) > 30
    matching = {k: preset[k] for k in MATCHING_KEYS}

    @functools.cache
    def planned_for(vocab_size):
        baseline = dict(baseline_of(preset), vocab_size=vocab_size)
        return matched_shapes(baseline, **matching, models=("CEA",))["CEA"][1]

    for path in records:
        recorded = read_config_file(path)
        planned = planned_for(recorded["model_args"]["vocab_size"])
        assert planned == {**recorded["model_args"], "attention_impl": "causal"}, path
        assert run_identity(dict(recorded, model_args=planned)) == run_identity(recorded)
        paper = dict(planned, attention_impl="reference")
        assert run_identity(dict(recorded, model_args=paper)) != run_identity(recorded)
