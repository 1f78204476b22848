"""experiments/lws_tables.py and lws_layer_sizes.py: every row of the paper's Table 2 (shapes and
counts), the 180M and CPU config files, the CPU shapes matched to their baseline, the per-layer
bar chart, the command lines."""

import importlib.util
import runpy
import sys

import pytest
import torch

from conftest import ROOT
import lws
from model import shape_counts
from shapelab.configurator import parse_overrides
from shapes import build_model, train_defaults

SCRIPT = ROOT / "experiments" / "lws_tables.py"
SIZES = ROOT / "experiments" / "lws_layer_sizes.py"
spec = importlib.util.spec_from_file_location("lws_layer_sizes", SIZES)
lws_layer_sizes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lws_layer_sizes)
tables = lws_layer_sizes.lws_tables

FRAMED_18L_FFN = [3072, 512, 768, 1024, 1024, 1280, 1280, 1536, 1536, 1792, 2048, 2048, 2304,
                  2560, 2560, 2816, 2816, 3072]


def paper_model(row):
    return tables.build(tables.paper_shapes()[row])


@pytest.fixture(scope="module")
def cpu_shapes():
    return tables.cpu_shapes()  # runs match_params for the four variants: once


@pytest.mark.parametrize("row", list(tables.PAPER_TABLE2))
def test_parameter_counts_equal_table_2_on_the_olmo2_base(row):
    n_layer, fnn, qkv, framed, total, non_embedding = tables.PAPER_TABLE2[row]
    assert tables.paper_shapes()[row] == {**tables.PAPER_BASE, "block_size": 1024,
                                          "n_layer": n_layer, "ffn_scalars": fnn,
                                          "qkv_scalars": qkv, "framed": framed}
    model = paper_model(row)
    assert next(model.parameters()).is_meta  # built without memory
    c = model.param_counts()
    assert (round(c["total"] / 1e6, 1), round(c["non_embedding"] / 1e6, 1)) == (
        total, non_embedding)
    assert c["lm_head"] == 50304 * 768  # untied head
    variant = {"Vanilla LWS 18L": "vanilla", "Framed LWS": "framed", "Reverse LWS": "reverse",
               "Crown LWS": "crown"}.get(row)
    if variant:  # lws.py's variants are the paper's 18-layer rows
        assert lws.VARIANTS[variant] == dict(ffn_scalars=fnn, qkv_scalars=qkv, framed=framed)


def test_command_line_prints_table_2_beside_the_paper_and_the_cpu_model_args(monkeypatch, capsys,
                                                                            cpu_shapes):
    monkeypatch.setattr(sys, "argv", ["lws_tables.py"])
    runpy.run_path(str(SCRIPT), run_name="__main__")
    out = capsys.readouterr().out
    for name, (n_layer, _, _, _, total, non_embedding) in tables.PAPER_TABLE2.items():
        assert (f"params: total {total:.1f}M, non-embedding {non_embedding:.1f}M" in out
                and f"paper Table 2: total {total:.1f}M, non-embedding {non_embedding:.1f}M" in out)
    assert "FFN widths: " + str(FRAMED_18L_FFN) in out
    monkeypatch.setattr(sys, "argv", ["lws_tables.py", "--scale=cpu"])
    runpy.run_path(str(SCRIPT), run_name="__main__")
    out = capsys.readouterr().out
    assert all(f"'ffn_scalars': {shape['ffn_scalars']}, 'qkv_scalars': {shape['qkv_scalars']}, "
               f"'framed': {shape['framed']}, 'ffn_multiple': 32" in out
               for shape in cpu_shapes.values())
    monkeypatch.setattr(sys, "argv", ["lws_tables.py", "--scale=gpu"])
    with pytest.raises(SystemExit, match="use paper or cpu"):
        runpy.run_path(str(SCRIPT), run_name="__main__")


def test_cpu_configs_are_the_baseline_and_the_variants_matched_to_it(cpu_shapes):
    target = shape_counts(lws.LWSGPT, lws.LWSConfig(**cpu_shapes["baseline"]))[
        "non_embedding"]
    keys = ("out_dir", "eval_interval", "eval_iters", "log_interval", "sample_tokens", "dataset",
            "batch_size", "block_size", "model_type", "n_layer", "n_embd", "n_head", "n_kv_head",
            "head_dim", "qk_norm", "tie_embeddings", "dropout", "dtype", "model_args",
            "learning_rate", "max_iters", "lr_decay_iters", "min_lr", "beta2", "warmup_iters")
    schedules = {**lws.VARIANTS, "baseline": tables.CPU_BASELINE}
    for name, shape in cpu_shapes.items():
        count = shape_counts(lws.LWSGPT, lws.LWSConfig(**shape))["non_embedding"]
        assert abs(count - target) / target < 0.01, name
        assert shape["qkv_scalars"] == schedules[name]["qkv_scalars"]
        cfg = parse_overrides([str(ROOT / f"config/lws_{name}_shakespeare_char.py")],
                              {k: None for k in keys})
        assert cfg["model_type"] == "lws" and cfg["n_layer"] == shape["n_layer"]
        for key in ("n_embd", "n_head", "n_kv_head", "head_dim", "qk_norm", "tie_embeddings"):
            assert cfg[key] == shape[key], (name, key)
        for key in ("ffn_scalars", "qkv_scalars", "framed", "ffn_multiple"):
            assert cfg["model_args"][key] == shape[key], (name, key)


@pytest.mark.parametrize("row, name", [
    ("Baseline 12L", "baseline_12l"), ("Vanilla LWS 12L", "vanilla_12l"),
    ("Baseline 18L", "baseline"), ("Vanilla LWS 18L", "vanilla"), ("Framed LWS", "framed"),
    ("Reverse LWS", "reverse"), ("Crown LWS", "crown")])
def test_paper_scale_configs_build_table_2_on_the_olmo2_base(row, name):
    cfg = parse_overrides([str(ROOT / f"config/lws_{name}_180m.py")], train_defaults())
    keys = ("block_size", "n_layer", "n_head", "n_kv_head", "n_embd", "head_dim", "ffn_hidden",
            "qk_norm", "tie_embeddings", "dropout")
    with torch.device("meta"):
        model = build_model(cfg["model_type"], vocab_size=50304, **{k: cfg[k] for k in keys},
                            **cfg["model_args"])
    assert model.config.layers == paper_model(row).config.layers
    assert (model.config.rope_theta, model.config.norm_eps) == (500_000.0, 1e-6)  # OLMo-2 190M's
    c = model.param_counts()
    assert (round(c["total"] / 1e6, 1), round(c["non_embedding"] / 1e6, 1)) == tuple(
        tables.PAPER_TABLE2[row][4:])


def test_layer_params_are_each_layers_attention_and_ffn_with_their_norms():
    model = tables.build(tables.paper_shapes()["Crown LWS"])  # on the meta device
    d = model.config.n_embd
    sizes = lws_layer_sizes.layer_params(model)
    assert len(sizes) == 18
    for (attention, ffn), s in zip(sizes, model.config.layers):
        q, kv = s.n_head * s.head_dim, s.n_kv_head * s.head_dim
        # q, k, v, o + pre-norm + full QK-norm gains
        assert attention == d * (q + 2 * kv) + q * d + d + q + kv
        assert ffn == 3 * d * s.ffn_hidden + d  # SwiGLU + pre-norm
    counts = model.param_counts()
    in_blocks = counts["attention"] + counts["ffn"] + counts["norms"] - d  # - final norm
    assert sum(a + f for a, f in sizes) == in_blocks


def test_the_chart_has_one_panel_per_shape_with_its_layers_bars(tmp_path, monkeypatch, capsys,
                                                                 cpu_shapes):
    import matplotlib.pyplot as plt
    close, figures = plt.close, []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at it
    models = {name: tables.build(kwargs) for name, kwargs in cpu_shapes.items()}
    assert list(models) == ["baseline", "vanilla", "framed", "reverse", "crown"]
    assert [s.ffn_hidden for s in models["crown"].config.layers] == [
        512, 128, 224, 288, 384, 288, 224, 128, 512]
    lws_layer_sizes.plot_layer_sizes(models, tmp_path / "sizes.png", "title")
    (fig,) = figures
    axes = [ax for ax in fig.axes if ax.get_title(loc="left")]
    assert [ax.get_title(loc="left") for ax in axes] == list(models)
    for ax, model in zip(axes, models.values()):
        n_layer = len(model.config.layers)
        attention, ffn = zip(*[(a / 1e6, f / 1e6) for a, f in lws_layer_sizes.layer_params(model)])
        assert [b.get_height() for b in ax.patches] == pytest.approx(attention + ffn)
        assert [b.get_y() for b in ax.patches[n_layer:]] == pytest.approx(attention)  # stacked
        assert [t.get_text() for t in ax.texts] == [str(s.n_head) for s in model.config.layers]
    close(fig)
    out = tmp_path / "paper.png"  # the default scale: the paper's
    monkeypatch.setattr(sys, "argv", ["lws_layer_sizes.py", f"--out={out}"])
    runpy.run_path(str(SIZES), run_name="__main__")
    assert out.stat().st_size > 10_000 and f"saved {out}" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["lws_layer_sizes.py", "--scale=gpu"])
    with pytest.raises(SystemExit, match="use paper or cpu"):
        runpy.run_path(str(SIZES), run_name="__main__")
