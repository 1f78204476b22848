"""experiments/lws_tables.py: the paper's Table 2 and its 180M configs,
the CPU shapes and configs matched to their baseline, the per-layer bars, the command line."""

import runpy
import sys

import pytest
import torch

from conftest import ROOT
import lws
from model import shape_counts
from shapelab.configurator import parse_overrides
from shapes import build_model, train_defaults

sys.path.insert(0, str(ROOT / "experiments"))
import lws_tables as tables

SCRIPT = ROOT / "experiments" / "lws_tables.py"
FRAMED_18L_FFN = [3072, 512, 768, 1024, 1024, 1280, 1280, 1536, 1536, 1792, 2048, 2048, 2304,
                  2560, 2560, 2816, 2816, 3072]
CONFIG_OF = {"Baseline 12L": "baseline_12l", "Vanilla LWS 12L": "vanilla_12l",
             "Baseline 18L": "baseline", "Vanilla LWS 18L": "vanilla", "Framed LWS": "framed",
             "Reverse LWS": "reverse", "Crown LWS": "crown"}


@pytest.fixture(scope="module")
def cpu_shapes():
    return tables.cpu_shapes()  # runs match_params for the four variants: once


@pytest.mark.parametrize("row", list(tables.PAPER_TABLE2))
def test_table_2_counts_on_the_olmo2_base_and_its_180m_config(row):
    n_layer, fnn, qkv, framed, total, non_embedding = tables.PAPER_TABLE2[row]
    model = tables.build(tables.paper_shapes()[row])
    c = model.param_counts()
    assert (round(c["total"] / 1e6, 1), round(c["non_embedding"] / 1e6, 1)) == (
        total, non_embedding)
    assert c["lm_head"] == 50304 * 768  # untied head
    if CONFIG_OF[row] in lws.VARIANTS:  # lws.py's variants are the paper's 18-layer rows
        assert lws.VARIANTS[CONFIG_OF[row]] == dict(ffn_scalars=fnn, qkv_scalars=qkv,
                                                    framed=framed)
    cfg = parse_overrides([str(ROOT / f"config/lws_{CONFIG_OF[row]}_180m.py")], train_defaults())
    keys = ("block_size", "n_layer", "n_head", "n_kv_head", "n_embd", "head_dim", "ffn_hidden",
            "qk_norm", "tie_embeddings", "dropout")
    with torch.device("meta"):
        built = build_model(cfg["model_type"], vocab_size=50304, **{k: cfg[k] for k in keys},
                            **cfg["model_args"])
    assert built.config.layers == model.config.layers
    assert (built.config.rope_theta, built.config.norm_eps) == (500_000.0, 1e-6)  # OLMo-2 190M's


def test_cpu_configs_are_the_baseline_and_the_variants_matched_to_it(cpu_shapes):
    target = shape_counts(lws.LWSGPT, lws.LWSConfig(**cpu_shapes["baseline"]))["non_embedding"]
    for name, shape in cpu_shapes.items():
        count = shape_counts(lws.LWSGPT, lws.LWSConfig(**shape))["non_embedding"]
        assert abs(count - target) / target < 0.01, name
        cfg = parse_overrides([str(ROOT / f"config/lws_{name}_shakespeare_char.py")],
                              train_defaults())
        assert cfg["model_type"] == "lws" and cfg["n_layer"] == shape["n_layer"]
        for key in ("n_embd", "n_head", "n_kv_head", "head_dim", "qk_norm", "tie_embeddings"):
            assert cfg[key] == shape[key], (name, key)
        for key in ("ffn_scalars", "qkv_scalars", "framed", "ffn_multiple"):
            assert cfg["model_args"][key] == shape[key], (name, key)


def test_command_line_prints_the_papers_shapes_and_the_cpu_model_args(monkeypatch, capsys):
    for argv in (["lws_tables.py"], ["lws_tables.py", "--scale=cpu"]):
        monkeypatch.setattr(sys, "argv", argv)
        runpy.run_path(str(SCRIPT), run_name="__main__")
    out = capsys.readouterr().out
    assert "paper Table 2: total 179.4M, non-embedding 140.7M" in out
    assert "FFN widths " + str(FRAMED_18L_FFN) in out
    assert ("model_args = {'ffn_scalars': [0.399, 3.032, 0.399], 'qkv_scalars': [0.5, 1.0, 0.5], "
            "'framed': True, 'ffn_multiple': 32}") in out


def test_the_bars_stack_each_layers_ffn_on_its_attention_with_its_norms(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at it
    model = tables.build(tables.paper_shapes()["Crown LWS"])
    d = model.config.n_embd
    sizes = tables.layer_params(model)
    for (attention, ffn), s in zip(sizes, model.config.layers):
        q, kv = s.n_head * s.head_dim, s.n_kv_head * s.head_dim
        assert attention == d * (q + 2 * kv) + q * d + d + q + kv  # q, k, v, o + norm gains
        assert ffn == 3 * d * s.ffn_hidden + d  # SwiGLU + pre-norm
    tables.plot_layer_sizes({"crown": model, "again": model}, tmp_path / "a.png")
    ax = figures[0].axes[0]
    assert ax.get_title(loc="left") == "crown"
    attention, ffn = zip(*[(a / 1e6, f / 1e6) for a, f in sizes])
    assert [b.get_height() for b in ax.patches] == pytest.approx(attention + ffn)
    assert [b.get_y() for b in ax.patches[18:]] == pytest.approx(attention)  # stacked
    assert [t.get_text() for t in ax.texts] == [str(s.n_head) for s in model.config.layers]
