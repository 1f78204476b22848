"""bench.py: it reads train.py config files exactly as train.py does, and times any set of shapes
with ratios to the first. (It measures speed; no test here asserts a speed.)"""

import pytest
import torch
from conftest import ROOT

import bench
from shapelab import hardware
from shapelab.configurator import ConfigError
from shapes import train_defaults


def test_config_files_give_the_shape_train_py_trains():
    shapes, batch_size = bench.config_shapes([str(ROOT / "config/lws_crown_shakespeare_char.py"),
                                              str(ROOT / "config/train_shakespeare_char.py")],
                                             vocab_size=84)
    model_type, args = shapes["lws_crown_shakespeare_char"]
    assert model_type == "lws" and batch_size == 16  # the first file's batch size
    assert (args["n_layer"], args["n_embd"], args["n_head"], args["n_kv_head"],
            args["qk_norm"]) == (9, 128, 8, 4, "full")
    assert (args["framed"] is True and args["qkv_scalars"] == [0.5, 1.0, 0.5]
            and args["vocab_size"] == 84)
    plain_type, plain = shapes["train_shakespeare_char"]
    assert plain_type == "gpt" and plain["tie_embeddings"] == train_defaults()["tie_embeddings"]


def test_a_config_file_with_an_unknown_key_is_refused(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("n_layers = 3\n")
    with pytest.raises(ConfigError, match="unknown key 'n_layers'"):
        bench.config_shapes([str(bad)])


def test_every_shape_gets_a_row_and_a_ratio_to_the_first():
    tiny = dict(vocab_size=50, block_size=16, n_layer=1, n_head=2, n_embd=32)
    shapes = {"gpt": ("gpt", tiny),
              "hourglass": ("hourglass", dict(tiny, n_sub_blocks=2, bottleneck_dim=8))}
    rows, note = bench.benchmark_shapes(shapes, 2, "cpu", [torch.float32], [False], steps=1,
                                        rounds=1)
    assert [(r["model"], r["mode"], r["dtype"]) for r in rows] == [
        ("gpt", "eager", "float32"), ("hourglass", "eager", "float32")]
    assert rows[0]["ratio"] == 1.0 and rows[1]["ratio"] == pytest.approx(
        rows[1]["tokens_per_s"] / rows[0]["tokens_per_s"])
    assert all(r["tokens_per_s"] > 0 and r["mfu"] > 0 for r in rows) and "peak" in note


TINY = dict(vocab_size=50, block_size=16, n_layer=1, n_head=2, n_embd=32)


@pytest.mark.parametrize("error", [
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
    RuntimeError("BackendCompilerFailed: ... CUDA out of memory. Tried to allocate")])
def test_a_model_out_of_memory_gets_oom_in_its_cells_and_the_run_goes_on(monkeypatch, error):
    """On a GPU one shape may not fit: it is reported as OOM, its memory freed, the others timed
    (also when torch.compile wraps the error)."""
    timed, freed = [], []
    real_step = bench.time_training_steps

    def step_that_runs_out_on_two_layers(model, *args, **kwargs):
        timed.append(model.config.n_layer)
        if model.config.n_layer == 2:
            raise error
        return real_step(model, *args, **kwargs)

    monkeypatch.setattr(bench, "time_training_steps", step_that_runs_out_on_two_layers)
    monkeypatch.setattr(bench, "free_memory", lambda device_type: freed.append(device_type))
    shapes = {"big": ("gpt", dict(TINY, n_layer=2)), "gpt": ("gpt", TINY),
              "gqa": ("gpt", dict(TINY, n_kv_head=1))}
    rows, _ = bench.benchmark_shapes(shapes, 2, "cpu", [torch.float32], [False], steps=1, rounds=2)
    assert timed == [2, 1, 1, 1, 1]  # the OOM model is not tried again in the second round
    assert freed and [r["oom"] for r in rows] == [True, False, False]
    # ratios to the first model that ran
    assert rows[0]["tokens_per_s"] is None and rows[1]["ratio"] == 1.0
    assert rows[2]["ratio"] == pytest.approx(rows[2]["tokens_per_s"] / rows[1]["tokens_per_s"])
    assert "| big | eager | float32 | OOM | OOM | OOM | OOM |" in bench.markdown_table(rows)
    assert bench.ratio_table(rows).splitlines()[2] == "| big | OOM |"


def test_an_error_that_is_not_out_of_memory_still_stops_the_run(monkeypatch):
    monkeypatch.setattr(bench, "time_training_steps", lambda *args, **kwargs: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        bench.benchmark_shapes({"gpt": ("gpt", TINY)}, 2, "cpu", [torch.float32], [False], steps=1,
                               rounds=1)
    monkeypatch.setattr(bench, "time_training_steps",
                        lambda *args, **kwargs: torch.ones(2) @ torch.ones(3))
    with pytest.raises(RuntimeError,
                       match="size mismatch|shapes cannot be multiplied|inconsistent"):
        bench.benchmark_shapes({"gpt": ("gpt", TINY)}, 2, "cpu", [torch.float32], [False], steps=1,
                               rounds=1)


def test_fp32_on_cuda_runs_on_tf32_tensor_cores():
    """bench.py and train.py set fp32 matmuls to TF32 on CUDA ('high') and leave torch's IEEE
    default elsewhere. The decision is checked as a function; applying it on this CPU machine must
    leave the global setting at its default (global state: restored whatever happens)."""
    assert hardware.fp32_matmul_precision("cuda") == "high"
    assert hardware.fp32_matmul_precision("cpu") == "highest"
    assert hardware.fp32_matmul_precision("mps") == "highest"
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        bench.prepare_device("cpu")
        assert torch.get_float32_matmul_precision() == "highest"
        bench.prepare_device("cuda:0")  # only sets the precision: no CUDA call
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)


def test_generation_mode_measures_the_kv_cache_the_accounting_counts():
    """Cached and uncached greedy decoding give the same tokens, and the cache's measured bytes per
    token equal model.kv_cache_bytes_per_token() at fp32's 4 bytes, for GQA and per-layer heads
    too."""
    shapes = {"gpt": ("gpt", TINY), "gqa": ("gpt", dict(TINY, n_layer=2, n_head=4, n_kv_head=2)),
              "lws": ("lws", dict(TINY, n_layer=3, n_head=2, n_kv_head=1, ffn_scalars=[0.5, 4.0],
                                  qkv_scalars=[0.5, 1.0], head_dim=8, ffn_multiple=8))}
    rows = bench.benchmark_generation(shapes, "cpu", [torch.float32], prompt_tokens=4,
                                      new_tokens=6, rounds=1)
    assert [r["model"] for r in rows] == ["gpt", "gqa", "lws"]
    for r in rows:
        assert (r["same_tokens"] and r["new_tokens"] == 6 and r["cached_tokens_per_s"] > 0
                and r["speedup"] > 0)
        assert r["kv_measured"] == r["kv_counted"]
    assert rows[0]["kv_counted"] == 2 * 32 * 4  # one layer: keys and values of 32 floats
    assert rows[1]["kv_counted"] == 2 * 2 * (2 * 8) * 4  # two layers of 2 kv heads x 8
    table = bench.generation_table(rows)
    assert "| gqa | float32 |" in table and (
        f"| {rows[1]['kv_measured']:,.0f} | {rows[1]['kv_counted']:,} |" in table)


def test_generate_command_line_prints_the_table_and_fails_on_a_cache_the_accounting_miscounts(
        capsys, monkeypatch):
    argv = [str(ROOT / "config/train_shakespeare_char.py"), "--generate", "--prompt_tokens=4",
            "--dtypes=float32", "--rounds=1", "--vocab_size=50", "--new_tokens=4"]
    bench.main(argv)
    out = capsys.readouterr().out
    assert ("a 4-token prompt" in out and "| train_shakespeare_char | float32 |" in out
            and "(!)" not in out)
    monkeypatch.setattr(bench, "measured_kv_bytes_per_token", lambda *args: 1.0)
    with pytest.raises(SystemExit, match="measured KV cache differs"):
        bench.main(argv)
    assert "| 1 (!) |" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="must fit block_size=128"):
        bench.main(argv[:-1] + ["--new_tokens=125"])


@pytest.mark.parametrize("native, columns", [("bfloat16", ["bfloat16", "float32"]),
                                             ("float32", ["float32"])])
def test_by_default_a_cpu_is_timed_in_what_it_computes_natively_and_fp32(native, columns,
                                                                         capsys, monkeypatch):
    """An emulated bf16 (a CPU without AMX or AVX512-BF16) runs only when asked for by name."""
    monkeypatch.setattr(bench, "auto_dtype", lambda device_type: native)
    bench.main(["--models=GPT", "--n_layer=1", "--n_embd=32", "--n_head=2", "--block_size=16",
                "--batch_size=2", "--modes=eager", "--steps=1", "--rounds=1", "--vocab_size=50",
                "--device=cpu"])
    header = next(line for line in capsys.readouterr().out.splitlines()
                  if line.startswith("| model | eager"))
    assert header == "| model | " + " | ".join(f"eager {d}" for d in columns) + " |"
