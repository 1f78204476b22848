"""bench.py's arithmetic on tiny runs, never a speed: shapes, ratios, MFU, OOM."""

import pytest
import torch
from conftest import ROOT

import bench
from shapes import build_model

TINY = dict(vocab_size=50, block_size=16, n_layer=1, n_head=2, n_embd=32)


def test_config_files_give_the_shape_train_py_trains():
    options, shapes, _, _ = bench.settings([str(ROOT / "config/lws_crown_shakespeare_char.py"),
                                            str(ROOT / "config/train_shakespeare_char.py")])
    model_type, args = shapes["lws_crown_shakespeare_char"]
    assert (model_type, options["batch_size"], args["n_layer"], args["qkv_scalars"]) == (
        "lws", 16, 9, [0.5, 1.0, 0.5]) and shapes["train_shakespeare_char"][0] == "gpt"


def test_ratios_mfu_and_an_out_of_memory_shape(monkeypatch):
    """An OOM shape is tried once; ratios are to the first shape that ran; MFU = 3 x FLOPs/s."""
    real, tried = bench.training_step, []

    def out_of_memory():
        tried.append(1)
        raise torch.OutOfMemoryError("CUDA out of memory")
    monkeypatch.setattr(bench, "training_step", lambda model, *args: out_of_memory
                        if model.config.n_layer == 2 else real(model, *args))
    monkeypatch.setattr(bench, "peak_flops", lambda device_type: (1e9, "test peak"))
    shapes = {"big": ("gpt", dict(TINY, n_layer=2)), "gpt": ("gpt", TINY),
              "hourglass": ("hourglass", dict(TINY, n_sub_blocks=2, bottleneck_dim=8))}
    rows, note = bench.benchmark_shapes(shapes, 2, "cpu", ["float32"], ["eager"], 1, 2)
    assert note == "test peak" and tried == [1] and rows[0]["tokens_per_s"] is None
    for r, (model_type, args) in zip(rows[1:], list(shapes.values())[1:]):
        assert r["ratio"] == pytest.approx(r["tokens_per_s"] / rows[1]["tokens_per_s"])
        flops = 3 * build_model(model_type, **args).flops_per_token(16) * r["tokens_per_s"]
        assert r["mfu"] == pytest.approx(flops / 1e9)
    assert bench.ratio_table(rows).splitlines()[2] == "| big | OOM |"

