"""The plain GPT: causality, init, GQA, attention by hand, accounting, FLOPs, sampling."""

import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from conftest import all_logits, assert_causal, tiny_config
from model import GPT, GPTConfig, LayerSpec, closest_size
from shapes import build_model


@pytest.mark.parametrize("qk_norm", ["", "head", "full"])
def test_changing_token_t_leaves_earlier_logits_unchanged(qk_norm):
    assert_causal(GPT(tiny_config(qk_norm=qk_norm, n_kv_head=2)), vocab_size=50, t=17)


def test_the_initial_loss_is_uniform_and_residual_projections_start_small():
    for tie in (True, False):
        model = GPT(tiny_config(vocab_size=65, tie_embeddings=tie))
        _, loss = model(torch.randint(65, (8, 32)), torch.randint(65, (8, 32)))
        assert abs(loss.item() - math.log(65)) < 0.1
    model = GPT(tiny_config(n_layer=8, n_embd=256, n_head=4))
    assert abs(model.blocks[0].attn.attn.qkv_proj.weight.std().item() - 0.02) < 0.001
    assert abs(model.blocks[0].attn.attn.out_proj.weight.std().item() - 0.02 / 4) < 0.0005


def test_gqa_equals_multi_head_attention_with_repeated_kv_heads():
    gqa, mha = GPT(tiny_config(n_kv_head=2)).eval(), GPT(tiny_config(n_kv_head=4)).eval()
    hd, H, Hkv = 16, 4, 2
    state = {}
    for name, p in gqa.state_dict().items():
        if name.endswith("qkv_proj.weight"):
            q, k, v = p.split([H * hd, Hkv * hd, Hkv * hd])
            repeat = lambda w: w.view(Hkv, hd, -1).repeat_interleave(2, dim=0).reshape(H * hd, -1)
            p = torch.cat([q, repeat(k), repeat(v)])
        state[name] = p
    mha.load_state_dict(state)
    idx = torch.randint(50, (2, 32))
    torch.testing.assert_close(all_logits(gqa, idx), all_logits(mha, idx), rtol=1e-5, atol=1e-5)


def test_attention_equals_rope_and_a_causal_softmax_written_out():
    attn = GPT(tiny_config(n_layer=1)).blocks[0].attn.attn
    B, T, H, hd = 2, 32, 4, 16
    x = torch.randn(B, T, 64)
    q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in attn.qkv_proj(x).split(64, dim=-1))
    angle = torch.arange(T).float()[:, None] / 10000 ** (torch.arange(0, hd, 2).float() / hd)

    def rotate(t):
        t1, t2 = t[..., :hd // 2], t[..., hd // 2:]
        return torch.cat([t1 * angle.cos() - t2 * angle.sin(),
                          t1 * angle.sin() + t2 * angle.cos()], dim=-1)

    scores = rotate(q) @ rotate(k).transpose(-1, -2) / math.sqrt(hd)
    scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, H * hd)
    torch.testing.assert_close(attn(x), attn.out_proj(y), rtol=1e-4, atol=1e-5)


def test_param_counts_and_flops_of_non_uniform_layers():
    d, V = 64, 50
    layers = [LayerSpec(4, 2, 16, 128), LayerSpec(6, 3, 16, 256), LayerSpec(2, 1, 32, 64)]
    model = GPT(GPTConfig(vocab_size=V, block_size=32, n_embd=d, n_head=4, layers=layers,
                          tie_embeddings=False, qk_norm="full"))
    attention = sum(d * (s.n_head + 2 * s.n_kv_head) * s.head_dim + s.n_head * s.head_dim * d
                    for s in layers)
    ffn = sum(3 * d * s.ffn_hidden for s in layers)
    norms = sum(2 * d + (s.n_head + s.n_kv_head) * s.head_dim for s in layers) + d
    counts = model.param_counts()
    assert (counts["attention"], counts["ffn"], counts["norms"]) == (attention, ffn, norms)
    assert counts["lm_head"] == V * d and counts["total"] == sum(
        p.numel() for p in model.parameters())
    assert model.budget() == attention + ffn + norms  # the untied head left out
    assert model.kv_cache_bytes_per_token() == 2 * 2 * (2 * 16 + 3 * 16 + 1 * 32)
    idx = torch.randint(50, (2, 32))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx, idx)
    assert counter.get_total_flops() == idx.numel() * model.flops_per_token(32)
    tied = GPT(tiny_config())
    assert tied.param_counts()["total"] == sum(p.numel() for p in tied.parameters())


def test_greedy_is_argmax_and_top_k_draws_only_from_the_top_k():
    model = GPT(tiny_config()).eval()
    start = torch.randint(50, (1, 5))
    greedy = model.generate(start, 10, temperature=0)
    assert torch.equal(greedy, model.generate(start, 10, top_k=1))
    idx = start
    for _ in range(10):
        idx = torch.cat([idx, all_logits(model, idx)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(greedy, idx)
    start = torch.randint(50, (64, 3))
    top3 = all_logits(model, start)[:, -1].topk(3).indices
    out = model.generate(start, 1, temperature=2.0, top_k=3,
                         generator=torch.Generator().manual_seed(0))
    assert (out[:, -1:] == top3).any(dim=1).all()


@pytest.mark.parametrize("kw, match", [(dict(n_embd=100, n_head=6), "not divisible by n_head"),
                                       (dict(n_embd=64, n_head=4, n_kv_head=3), "n_kv_head"),
                                       (dict(qk_norm="yes"), "qk_norm")])
def test_bad_shapes_are_one_line_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        build_model("gpt", **kw)


def test_a_sequence_longer_than_block_size_is_refused():
    with pytest.raises(ValueError, match="block_size"):
        GPT(tiny_config(block_size=8))(torch.zeros(1, 9, dtype=torch.long))


@pytest.mark.slow
def test_compiled_model_matches_eager_and_trains():
    model = GPT(tiny_config())
    compiled = torch.compile(model)
    idx = torch.randint(50, (2, 32))
    torch.testing.assert_close(all_logits(compiled, idx), all_logits(model, idx), rtol=1e-4,
                               atol=1e-4)
    compiled(idx, idx)[1].backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("count, target", [
    (lambda n: 3 * n + 7, 1000), (lambda n: n * n + n // 3, 5000), (lambda n: 10 * n, 3),
    (lambda n: n if n < 50 else 100 * n, 20000), (lambda n: 100 * n if n < 50 else 5000 + n, 5900)])
def test_closest_size_is_the_closest_integer_for_any_growing_count(count, target):
    best = min(range(1, 2000), key=lambda n: abs(count(n) - target))
    assert abs(count(closest_size(count, target)) - target) == abs(count(best) - target)
