"""bench.py: it reads train.py config files exactly as train.py does, and times any set of shapes
with ratios to the first. (It measures speed; no test here asserts a speed.)"""

import pytest
import torch
from conftest import ROOT

import bench
from configurator import ConfigError, train_defaults


def test_config_files_give_the_shape_train_py_trains():
    shapes, batch_size = bench.config_shapes([str(ROOT / "config/lws_crown_shakespeare_char.py"),
                                              str(ROOT / "config/train_shakespeare_char.py")], vocab_size=84)
    model_type, args = shapes["lws_crown_shakespeare_char"]
    assert model_type == "lws" and batch_size == 16  # the first file's batch size
    assert (args["n_layer"], args["n_embd"], args["n_head"], args["n_kv_head"], args["qk_norm"]) == (9, 128, 8, 4, "full")
    assert args["framed"] is True and args["qkv_scalars"] == [0.5, 1.0, 0.5] and args["vocab_size"] == 84
    plain_type, plain = shapes["train_shakespeare_char"]
    assert plain_type == "gpt" and plain["tie_embeddings"] == train_defaults()["tie_embeddings"]


def test_a_config_file_with_an_unknown_key_is_refused(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("n_layers = 3\n")
    with pytest.raises(ConfigError, match="unknown key 'n_layers'"):
        bench.config_shapes([str(bad)])


def test_every_shape_gets_a_row_and_a_ratio_to_the_first():
    tiny = dict(vocab_size=50, block_size=16, n_layer=1, n_head=2, n_embd=32)
    shapes = {"gpt": ("gpt", tiny), "hourglass": ("hourglass", dict(tiny, n_sub_blocks=2, bottleneck_dim=8))}
    rows, note = bench.benchmark_shapes(shapes, 2, "cpu", [torch.float32], [False], steps=1, rounds=1)
    assert [(r["model"], r["mode"], r["dtype"]) for r in rows] == [("gpt", "eager", "float32"),
                                                                   ("hourglass", "eager", "float32")]
    assert rows[0]["ratio"] == 1.0 and rows[1]["ratio"] == pytest.approx(rows[1]["tokens_per_s"] / rows[0]["tokens_per_s"])
    assert all(r["tokens_per_s"] > 0 and r["mfu"] > 0 for r in rows) and "peak" in note
