"""experiments/lws_layer_sizes.py: the per-layer parameter counts behind the LWS bar chart, and the
chart itself (one panel per shape, written where asked)."""

import importlib.util
import runpy
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "experiments" / "lws_layer_sizes.py"
spec = importlib.util.spec_from_file_location("lws_layer_sizes", SCRIPT)
lws_layer_sizes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lws_layer_sizes)
tables = lws_layer_sizes.lws_tables  # experiments/lws_tables.py: the shapes it draws


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


def test_the_chart_has_one_panel_per_shape_with_its_layers_bars(tmp_path, monkeypatch, capsys):
    import matplotlib.pyplot as plt
    close, figures = plt.close, []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at it
    models = lws_layer_sizes.build_models("cpu")
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
    runpy.run_path(str(SCRIPT), run_name="__main__")
    assert out.stat().st_size > 10_000 and f"saved {out}" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["lws_layer_sizes.py", "--scale=gpu"])
    with pytest.raises(SystemExit, match="use paper or cpu"):
        runpy.run_path(str(SCRIPT), run_name="__main__")
