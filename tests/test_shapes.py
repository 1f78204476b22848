"""Every model type in MODELS passes the same checks (a newcomer's parallel block included):
causality, generation, FLOPs, budget matching, checkpoints, overfitting. Then the presets: each
paper's rule at the GPT's budget, the GPU preset's roundings, the command lines."""

import functools
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from conftest import all_logits, assert_causal, overfit_loss, run_here
from model import GPT, CausalSelfAttention, GPTConfig, RMSNorm, SwiGLU, meta_device, shape_counts
from shapelab.configurator import ConfigError
from shapes import (MATCHING_KEYS, MODELS, PRESETS, ROOT, SHAPE_NAMES, baseline_of, build_model,
                    check_model_settings, describe_shapes, matched_model_args,
                    matched_shapes, model_from_checkpoint, preset_settings, select_models,
                    shapes_table, train_defaults)

TINY = dict(vocab_size=32, block_size=16, n_layer=4, n_embd=96, n_head=4)


class ParallelBlock(nn.Module):
    """x + Attn(n(x)) + FFN(n(x)): one norm, both sublayers side by side (GPT-J, PaLM)."""

    def __init__(self, dim, spec, config):
        super().__init__()
        self.norm = RMSNorm(dim, config.norm_eps)
        self.attn = CausalSelfAttention(dim, spec, config)
        self.ffn = SwiGLU(dim, spec.ffn_hidden)

    def forward(self, x):
        h = self.norm(x)
        return x + self.attn(h) + self.ffn(h)


class ParallelGPT(GPT):
    def make_block(self, layer_idx, spec):
        return ParallelBlock(self.config.n_embd, spec, self.config)


@pytest.fixture(params=[*MODELS, "parallel"])
def model_type(request, monkeypatch):
    """Every model type, and a parallel-block mechanism registered as a newcomer registers one."""
    monkeypatch.setitem(MODELS, "parallel", (ParallelGPT, GPTConfig, dict))
    return request.param


def tiny_matched(model_type):
    torch.manual_seed(0)
    return build_model(model_type, **matched_model_args(model_type, TINY)).eval()


@torch.no_grad()
def test_every_model_type_is_causal_and_generates_past_its_block(model_type):
    model = tiny_matched(model_type)
    assert_causal(model, vocab_size=32, t=9, seq=16)
    # a one-token prompt: CEA's masked position 0 alone
    assert model.generate(torch.randint(32, (2, 1)), 1, temperature=0).shape == (2, 2)
    seen, forward = [], model.forward  # each step reads the last block_size = 16 tokens
    model.forward = lambda idx, targets=None: seen.append(idx) or forward(idx, targets)
    out = model.generate(torch.randint(32, (2, 10)), 12, temperature=0)
    assert [x.tolist() for x in seen] == [out[:, :t][:, -16:].tolist() for t in range(10, 22)]


def test_every_model_types_flops_and_budget(model_type):
    model = tiny_matched(model_type)
    idx = torch.randint(32, (1, 16))
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx, idx)
    assert counter.get_total_flops() == 16 * model.flops_per_token(16)
    counts = model.param_counts()
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    assert counts["attention"] > 0 and counts["ffn"] > 0
    if model_type == "parallel":  # built through make_block: one norm a layer
        assert all(isinstance(block, ParallelBlock) for block in model.blocks)
        assert counts["norms"] == (TINY["n_layer"] + 1) * TINY["n_embd"]
    endpoint = model.endpoint_params() if hasattr(model, "endpoint_params") else 0
    target = shape_counts(GPT, GPTConfig(**TINY))["budget"]
    assert abs((model.budget() - endpoint) / target - 1) < 0.05


def test_every_model_type_rebuilds_from_a_checkpoint_and_overfits_a_batch(model_type):
    model = tiny_matched(model_type)
    checkpoint = dict(model=model.state_dict(), model_type=model_type,
                      model_args=matched_model_args(model_type, TINY))
    idx = torch.randint(32, (2, 16))
    loaded = model_from_checkpoint(checkpoint).eval()
    assert torch.equal(all_logits(model, idx), all_logits(loaded, idx))
    assert overfit_loss(model.train(), vocab_size=32, steps=60, lr=3e-3, batch=2) < 0.3


def test_a_shapes_only_build_of_every_model_type_draws_nothing_and_imports_no_dynamo():
    code = ("import sys, shapes\n"
            f"for name in {sorted(MODELS)!r}:\n"
            "    shapes.check_model_settings({**shapes.train_defaults(), 'model_type': name})\n"
            "print('torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stdout + done.stderr
    for name in MODELS:
        with meta_device():
            on_meta = build_model(name, **TINY)
        assert on_meta.param_counts() == build_model(name, **TINY).param_counts(), name


def test_every_train_config_builds_its_model():
    from shapelab.configurator import parse_overrides, read_config_file
    defaults = train_defaults()
    configs = [path for path in sorted((ROOT / "config").glob("*.py"))
               if set(read_config_file(path)) <= {*defaults, "preset"}]
    assert len(configs) > 20
    for path in configs:
        check_model_settings(parse_overrides([str(path)], defaults))


# ----------------------------------------------------------------------------------------
# The presets


@functools.cache
def preset_shapes(preset):
    settings = PRESETS[preset]
    return matched_shapes(baseline_of(settings), **{k: settings[k] for k in MATCHING_KEYS})


@pytest.mark.parametrize("preset, tolerance", [("cpu", 0.015), ("gpu", 0.025)])
def test_every_preset_shape_is_at_the_gpts_budget(preset, tolerance):
    """Each by its paper's rule; the ><formers by Appendix A's, which leaves W_end out."""
    shapes = preset_shapes(preset)
    assert list(shapes) == list(SHAPE_NAMES)
    info = describe_shapes(shapes, PRESETS[preset]["block_size"])
    target = info["GPT"]["budget"]
    for name, row in info.items():
        assert abs((row["budget"] - row["endpoint"]) / target - 1) < tolerance, name
    assert info["CEA"]["budget"] == info["FFN-Wider"]["budget"]
    assert "budget without W_end (vs GPT)" in shapes_table(info).splitlines()[0]


def test_the_gpu_preset_has_the_papers_113m_hourglass_and_keeps_other_widths_at_8s():
    shapes = preset_shapes("gpu")
    hg = shapes["hourglass"][1]
    assert (hg["n_embd"], hg["bottleneck_dim"], hg["n_sub_blocks"]) == (1032, 418, 4)
    for name, (model_type, args) in shapes.items():
        if name != "hourglass":  # the paper's own shape, head dim 86
            with meta_device():
                config = build_model(model_type, **args).config
            sizes = {s.head_dim for s in config.layers} | {s.ffn_hidden for s in config.layers}
            assert all(h % 8 == 0 for h in sizes | {getattr(config, "inner_hidden", 0)}), name


def test_a_bare_model_type_is_the_shape_compare_trains():
    shapes = preset_shapes("cpu")
    baseline = shapes["GPT"][1]
    same = {"hourglass": "hourglass", "><former": "variable_width",
            "hourglass+><former": "composed", "CEA": "cea", "LWS vanilla": "lws"}
    for name, model_type in same.items():
        assert (model_type, matched_model_args(model_type, baseline)) == shapes[name], name


def test_the_shapes_use_the_datasets_padded_vocabulary(char_dataset):
    import json
    vocab = json.loads((char_dataset / "meta.json").read_text())["vocab_size"]
    assert baseline_of(dict(PRESETS["cpu"], data_dir=str(char_dataset)))["vocab_size"] == vocab
    assert baseline_of(dict(PRESETS["gpu"], data_dir="/nonexistent"))["vocab_size"] == 50304


def test_presets_and_model_selection_on_the_command_line(tmp_path):
    settings = preset_settings(["--preset=gpu", "--max_iters=7"])
    assert settings["n_embd"] == 768 and settings["max_iters"] == 7
    config = tmp_path / "matching.py"
    config.write_text("bottleneck_ratio = 0.3\n")
    kept = preset_settings([str(config), "--n_sub_blocks=3"], keys=MATCHING_KEYS)
    assert kept["n_sub_blocks"] == 3 and kept["bottleneck_ratio"] == 0.3
    for argv, match in [(["--preset=tpu"], "choose one of cpu, gpu"),
                        (["--n_layers=3"], "unknown config key")]:
        with pytest.raises(ConfigError, match=match):
            preset_settings(argv)
    assert select_models("") == SHAPE_NAMES
    assert list(select_models("lws-crown,GPT")) == ["GPT", "LWS crown"]
    with pytest.raises(ConfigError, match="unknown \\['nope'\\]"):
        select_models("GPT,nope")


def test_shapes_py_prints_the_table():
    out = run_here("shapes.py", "--n_layer=4", "--n_embd=128", "--n_head=4",
                   "--models=GPT,hourglass,><former,CEA")
    assert out.returncode == 0, out.stderr
    assert "| CEA |" in out.stdout


def test_every_recorded_cea_run_is_the_cea_run_the_comparison_plans():
    from shapelab.configurator import read_config_file
    preset = PRESETS["cpu"]
    records = sorted(ROOT.glob("results/compare_verdict_*/runs/cea-*/config.py"))
    assert len(records) > 30

    @functools.cache
    def planned_for(vocab_size):
        baseline = dict(baseline_of(preset), vocab_size=vocab_size)
        return matched_shapes(baseline, **{k: preset[k] for k in MATCHING_KEYS},
                              models=("CEA",))["CEA"][1]

    for path in records:
        recorded = read_config_file(path)
        planned = planned_for(recorded["model_args"]["vocab_size"])
        assert planned == recorded["model_args"], path
