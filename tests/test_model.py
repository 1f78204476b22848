"""The plain GPT: causality, init, GQA, accounting, FLOPs, generation, overfitting."""

import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from conftest import all_logits, assert_causal, overfit_loss, tiny_config
from model import GPT, GPTConfig, LayerSpec, closest_size
from shapelab.hardware import peak_flops


def test_causal_changing_token_t_leaves_earlier_logits_unchanged():
    assert_causal(GPT(tiny_config()), vocab_size=50, t=17)


def test_initial_loss_is_close_to_uniform():
    for tie in (True, False):
        model = GPT(tiny_config(vocab_size=65, tie_embeddings=tie))
        idx, targets = torch.randint(65, (8, 32)), torch.randint(65, (8, 32))
        _, loss = model(idx, targets)
        assert abs(loss.item() - math.log(65)) < 0.1


def test_residual_projections_use_scaled_init():
    model = GPT(tiny_config(n_layer=8, n_embd=256, n_head=4))
    out_std = model.blocks[0].attn.attn.out_proj.weight.std().item()
    qkv_std = model.blocks[0].attn.attn.qkv_proj.weight.std().item()
    assert abs(qkv_std - 0.02) < 0.001
    assert abs(out_std - 0.02 / math.sqrt(16)) < 0.0005
    assert model.lm_head.weight is model.tok_emb.weight


def test_gqa_equals_multi_head_attention_with_repeated_kv_heads():
    """GQA with 2 KV heads serving 4 query heads is MHA whose K/V heads are copied per group."""
    torch.manual_seed(1)
    gqa = GPT(tiny_config(n_kv_head=2)).eval()
    mha = GPT(tiny_config(n_kv_head=4)).eval()
    gqa_state = gqa.state_dict()
    mha_state = {}
    hd, H, Hkv = 16, 4, 2
    for name, p in gqa_state.items():
        if name.endswith("qkv_proj.weight"):
            q, k, v = p.split([H * hd, Hkv * hd, Hkv * hd])
            repeat = lambda w: (w.view(Hkv, hd, -1).repeat_interleave(H // Hkv, dim=0)
                                .reshape(H * hd, -1))
            p = torch.cat([q, repeat(k), repeat(v)])
        mha_state[name] = p
    mha.load_state_dict(mha_state)
    idx = torch.randint(50, (2, 32))
    torch.testing.assert_close(all_logits(gqa, idx), all_logits(mha, idx), rtol=1e-5, atol=1e-5)


def test_attention_matches_explicit_softmax_reference():
    """SDPA + RoPE inside the model equals attention written out by hand."""
    model = GPT(tiny_config(n_layer=1)).eval()
    attn = model.blocks[0].attn.attn
    x = torch.randn(2, 32, 64)
    B, T, H, hd = 2, 32, 4, 16
    q, k, v = attn.qkv_proj(x).split(64, dim=-1)
    q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in (q, k, v))
    pos = torch.arange(T).float()[:, None] * (1.0 / 10000 ** (torch.arange(0, hd, 2).float() / hd))
    def rotate(t):  # rotate pairs (i, i + hd/2) by angle pos * freq_i
        t1, t2 = t[..., :hd // 2], t[..., hd // 2:]
        return torch.cat([t1 * pos.cos() - t2 * pos.sin(), t1 * pos.sin() + t2 * pos.cos()], dim=-1)
    scores = rotate(q) @ rotate(k).transpose(-1, -2) / math.sqrt(hd)
    scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, H * hd)
    torch.testing.assert_close(attn(x), attn.out_proj(y), rtol=1e-4, atol=1e-5)


def test_param_counts_equal_hand_count_for_non_uniform_layers():
    d, V = 64, 50
    layers = [LayerSpec(n_head=4, n_kv_head=2, head_dim=16, ffn_hidden=128),
              LayerSpec(n_head=6, n_kv_head=3, head_dim=16, ffn_hidden=256),
              LayerSpec(n_head=2, n_kv_head=1, head_dim=32, ffn_hidden=64)]
    model = GPT(GPTConfig(vocab_size=V, block_size=32, n_embd=d, n_head=4, layers=layers,
                          tie_embeddings=False, qk_norm="full"))
    attention = sum(d * (s.n_head + 2 * s.n_kv_head) * s.head_dim + s.n_head * s.head_dim * d
                    for s in layers)
    ffn = sum(3 * d * s.ffn_hidden for s in layers)
    norms = sum(2 * d + s.n_head * s.head_dim + s.n_kv_head * s.head_dim for s in layers) + d
    counts = model.param_counts()
    assert counts["attention"] == attention
    assert counts["ffn"] == ffn
    assert counts["norms"] == norms
    assert counts["embedding"] == V * d and counts["lm_head"] == V * d
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    assert counts["non_embedding"] == counts["total"] - V * d
    assert counts["other"] == 0
    # the matched budget leaves the untied head out
    assert model.budget() == attention + ffn + norms
    # keys and values of every layer, bf16: 2 (k, v) x n_kv_head x head_dim x 2 bytes
    assert model.kv_cache_bytes_per_token() == 2 * 2 * (2 * 16 + 3 * 16 + 1 * 32)
    assert (model.kv_cache_bytes_per_token(bytes_per_element=4)
            == 2 * model.kv_cache_bytes_per_token())


def test_tied_head_is_counted_once():
    model = GPT(tiny_config())
    counts = model.param_counts()
    assert counts["lm_head"] == 0
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    assert model.budget() == counts["non_embedding"]


def test_peak_flops_are_named_for_the_device_and_measured_on_a_cpu():
    peak, note = peak_flops("cpu")
    assert peak > 1e9 and "matmul peak measured now" in note
    assert peak_flops("xla") == (None, "no peak FLOP/s known for xla")


def test_a_busy_machine_cannot_make_the_cpu_peak_read_low(monkeypatch):
    """The peak was timed on the wall clock alone: a laptop that left the run a few percent of a
    core read "0.00 TFLOP/s", and the run's MFU 304.8%. Here the wall clock runs 10x the CPU time
    the process gets (other programs take the cores): the peak stays within a factor 3 of the
    quiet one, and the share of the time it got is said."""
    import time
    from types import SimpleNamespace

    from shapelab import hardware
    hardware._cpu_peak_cache.clear()
    quiet, _ = hardware.measure_cpu_peak_flops(size=256, seconds=0.1)
    hardware._cpu_peak_cache.clear()
    monkeypatch.setattr(hardware, "time", SimpleNamespace(
        perf_counter=lambda: 10 * time.perf_counter(), process_time=time.process_time))
    busy, share = hardware.measure_cpu_peak_flops(size=256, seconds=0.1)
    hardware._cpu_peak_cache.clear()
    assert busy > quiet / 3 and share < 0.2


@pytest.mark.parametrize("device_name, peak_tflops", [
    ("NVIDIA H100 80GB HBM3", 989), ("NVIDIA H100 PCIe", 756), ("NVIDIA H100 NVL", 835),
    ("NVIDIA H200", 989), ("NVIDIA H200 NVL", 835), ("NVIDIA GH200 480GB", 989),
    ("NVIDIA B200", 2250), ("NVIDIA GB200", 2500),
    ("NVIDIA A100-SXM4-80GB", 312), ("NVIDIA A100-PCIE-40GB", 312), ("NVIDIA A10", 125),
    ("NVIDIA A10G", 70),
    ("NVIDIA L40S", 362), ("NVIDIA L40", 181), ("NVIDIA L4", 121), ("NVIDIA GeForce RTX 4090", 165),
    ("Tesla V100-SXM2-16GB", 125), ("Tesla V100-PCIE-32GB", 112), ("Tesla T4", 65),
])
def test_gpu_peak_is_matched_by_whole_model_name_most_specific_first(monkeypatch, device_name,
                                                                     peak_tflops):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: device_name)
    peak, note = peak_flops("cuda")
    assert peak == peak_tflops * 1e12 and device_name in note


@pytest.mark.parametrize("device_name", ["NVIDIA B300", "NVIDIA RTX 6000 Ada Generation",
                                         "NVIDIA GeForce RTX 4080"])
def test_an_unknown_gpu_has_no_peak_and_says_where_to_add_it(monkeypatch, device_name):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: device_name)
    assert peak_flops("cuda") == (
        None, f"{device_name}: peak unknown, add it to GPU_BF16_PEAK in hardware.py")


@pytest.mark.parametrize("n_kv_head", [4, 2])
def test_flops_per_token_agree_with_flop_counter(n_kv_head):
    layers = [LayerSpec(4, n_kv_head, 16, 128), LayerSpec(8, n_kv_head, 8, 320),
              LayerSpec(2, 2, 32, 96)]
    model = GPT(GPTConfig(vocab_size=50, block_size=32, n_embd=64, layers=layers,
                          tie_embeddings=False))
    idx = torch.randint(50, (2, 32))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx, idx)  # with targets: the head runs at every position
    measured = counter.get_total_flops() / idx.numel()
    assert abs(measured - model.flops_per_token(32)) / measured < 0.02


def test_greedy_generation_is_deterministic_and_is_argmax():
    model = GPT(tiny_config()).eval()
    start = torch.randint(50, (1, 5))
    a = model.generate(start, 10, temperature=0)
    b = model.generate(start, 10, top_k=1)
    assert torch.equal(a, b)
    idx = start
    for _ in range(10):  # the same thing by hand
        idx = torch.cat([idx, all_logits(model, idx)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(a, idx)


def test_top_k_sampling_only_draws_from_the_top_k():
    model = GPT(tiny_config()).eval()
    start = torch.randint(50, (64, 3))
    logits = all_logits(model, start)[:, -1]
    top3 = logits.topk(3).indices
    out = model.generate(start, 1, temperature=2.0, top_k=3,
                         generator=torch.Generator().manual_seed(0))
    assert (out[:, -1:] == top3).any(dim=1).all()


def test_generation_crops_to_block_size():
    model = GPT(tiny_config(block_size=8)).eval()
    out = model.generate(torch.zeros(1, 6, dtype=torch.long), 10, temperature=0)
    assert out.shape == (1, 16)


def test_tiny_model_overfits_one_batch():
    model = GPT(tiny_config(vocab_size=20, n_layer=2, n_embd=64))
    assert overfit_loss(model, vocab_size=20) < 0.1  # from ln(20) = 3.0


def test_bf16_autocast_runs_and_is_close_to_fp32():
    model = GPT(tiny_config()).eval()
    idx = torch.randint(50, (2, 32))
    _, loss32 = model(idx, idx)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, loss16 = model(idx, idx)
    assert abs(loss16.item() - loss32.item()) < 0.05


@pytest.mark.parametrize("qk_norm", ["head", "full"])
def test_qk_norm_variants_are_causal(qk_norm):
    assert_causal(GPT(tiny_config(qk_norm=qk_norm, n_kv_head=2)), vocab_size=50, t=20)


def test_bad_shapes_give_errors_that_say_what_to_do():
    """Short asserts in the model; the configurator (every command line's boundary) words them
    as a ConfigError, a ValueError of one line."""
    from shapes import build_model
    with pytest.raises(ValueError, match="not divisible by n_head"):
        build_model("gpt", n_embd=100, n_head=6)
    with pytest.raises(ValueError, match="multiple of n_kv_head"):
        build_model("gpt", n_embd=64, n_head=4, n_kv_head=3)
    with pytest.raises(ValueError, match="qk_norm"):
        build_model("gpt", qk_norm="yes")
    with pytest.raises(AssertionError, match="qk_norm"):  # the model itself: a short assert
        GPTConfig(qk_norm="yes")
    model = GPT(tiny_config(block_size=8))
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 9, dtype=torch.long))


@pytest.mark.slow
def test_compiled_model_matches_eager_and_trains():
    model = GPT(tiny_config())
    compiled = torch.compile(model)
    idx = torch.randint(50, (2, 32))
    eager_logits = all_logits(model, idx)
    torch.testing.assert_close(all_logits(compiled, idx), eager_logits, rtol=1e-4, atol=1e-4)
    _, loss = compiled(idx, idx)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("count, target", [
    (lambda n: 3 * n + 7, 1000), (lambda n: n * n + n // 3, 5000), (lambda n: n, 1),
    (lambda n: 10 * n, 3), (lambda n: 100 * n, 1), (lambda n: n if n < 50 else 100 * n, 20000),
    (lambda n: 100 * n if n < 50 else 5000 + n, 5900)])
def test_closest_size_is_the_closest_integer_for_any_growing_count(count, target):
    """model.closest_size searches (doubling, then bisection): the size it returns is the closest
    of every n >= 1, however the count bends."""
    best = min(range(1, 2000), key=lambda n: abs(count(n) - target))
    assert abs(count(closest_size(count, target)) - target) == abs(count(best) - target)
