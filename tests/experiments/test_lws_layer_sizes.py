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


@pytest.fixture(scope="module")
def cpu_models():
    return lws_layer_sizes.build_models("cpu")  # matches four variants to the baseline: once


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


def test_build_models_gives_every_shape_of_the_scale(cpu_models):
    paper_models = lws_layer_sizes.build_models("paper")
    assert list(paper_models) == list(tables.PAPER_TABLE2)
    assert list(cpu_models) == ["baseline", "vanilla", "framed", "reverse", "crown"]
    assert [s.ffn_hidden for s in cpu_models["crown"].config.layers] == [
        512, 128, 224, 288, 384, 288, 224, 128, 512]
    for models in (paper_models, cpu_models):
        assert all(next(m.parameters()).is_meta for m in models.values())  # built without memory


def test_chart_has_one_panel_per_shape_with_bars_of_both_parts(tmp_path, monkeypatch, cpu_models):
    import matplotlib.pyplot as plt
    close, figures = plt.close, []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at it
    models = cpu_models
    path = tmp_path / "sizes.png"
    lws_layer_sizes.plot_layer_sizes(models, path, "title")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (fig,) = figures
    axes = [ax for ax in fig.axes if ax.get_title(loc="left")]
    assert [ax.get_title(loc="left") for ax in axes] == list(models)
    for ax, model in zip(axes, models.values()):
        bars = ax.patches  # attention bars, then FFN bars stacked on them
        n_layer = len(model.config.layers)
        assert len(bars) == 2 * n_layer
        sizes = lws_layer_sizes.layer_params(model)
        attention, ffn = [a / 1e6 for a, _ in sizes], [f / 1e6 for _, f in sizes]
        assert [b.get_height() for b in bars[:n_layer]] == pytest.approx(attention)
        assert [b.get_height() for b in bars[n_layer:]] == pytest.approx(ffn)
        assert [b.get_y() for b in bars[n_layer:]] == pytest.approx(attention)  # stacked
        assert [t.get_text() for t in ax.texts] == [str(s.n_head) for s in model.config.layers]
    close(fig)


def test_command_line_writes_the_chart_and_rejects_an_unknown_scale(tmp_path, monkeypatch, capsys):
    out = tmp_path / "paper.png"
    # the default scale: the paper's
    monkeypatch.setattr(sys, "argv", ["lws_layer_sizes.py", f"--out={out}"])
    runpy.run_path(str(SCRIPT), run_name="__main__")
    assert out.stat().st_size > 10_000 and f"saved {out}" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["lws_layer_sizes.py", "--scale=gpu"])
    with pytest.raises(SystemExit, match="use paper or cpu"):
        runpy.run_path(str(SCRIPT), run_name="__main__")


def test_default_outputs_are_the_figures_the_docs_show():
    assert lws_layer_sizes.DEFAULT_OUT == {"paper": ROOT / "docs" / "lws_layer_sizes.png",
                                           "cpu": ROOT / "docs" / "lws_layer_sizes_cpu.png"}
    docs = (ROOT / "docs" / "lws.md").read_text()
    assert "](lws_layer_sizes.png)" in docs and "](lws_layer_sizes_cpu.png)" in docs
