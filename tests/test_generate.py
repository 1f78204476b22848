"""KV-cached generation: the cache gives a full recompute's logits for every kind of layer, holds
the bytes the accounting counts, is rebuilt from half a block when full; padding ids are never
sampled."""

import pytest
import torch
from conftest import all_logits

from model import KVCache
from shapes import build_model

VOCAB, BLOCK = 50, 32
COMMON = dict(vocab_size=VOCAB, block_size=BLOCK, n_embd=64)
FORMER = dict(width_schedule="x", bottleneck_width_ratio=0.5, width_multiple=16)
VARIANTS = {  # the matched shapes of every model type: tests/test_shapes.py
    "gpt_mqa_qknorm_full_untied": ("gpt", dict(n_layer=2, n_head=4, n_kv_head=1, qk_norm="full",
                                               tie_embeddings=False)),
    "lws_framed": ("lws", dict(n_layer=5, n_head=8, n_kv_head=4, head_dim=8, framed=True,
                               ffn_scalars=[0.5, 4.0], qkv_scalars=[0.25, 1.0], ffn_multiple=32)),
    "former": ("variable_width", dict(n_layer=4, n_head=2, **FORMER)),
    "composed_former_hourglass_gqa": ("composed", dict(n_layer=4, n_head=2, n_kv_head=1,
                                                       n_sub_blocks=2, bottleneck_dim=32,
                                                       **FORMER)),
    "cea_transformed_gqa_qknorm": ("cea", dict(n_layer=2, n_head=4, n_kv_head=2, qk_norm="head",
                                               ffn_width_ratio=8, outer_ratio=0.125,
                                               current_position="transformed")),
    "cea_masked_causal": ("cea", dict(n_layer=2, n_head=4, ffn_width_ratio=8, outer_ratio=0.125,
                                      current_position="masked")),
    "inner_moe_masked": ("cea", dict(n_layer=2, n_head=4, ffn_width_ratio=4, n_experts=3,
                                     expert_hidden=16, moe_place="inner",
                                     current_position="masked")),
}


def make(name):
    torch.manual_seed(0)
    model_type, args = VARIANTS[name]
    return build_model(model_type, **COMMON, **args).eval()


def cache_bytes(cache):
    return sum(2 * layer.keys[:, :, :layer.length].nbytes for layer in cache.layers)


@pytest.mark.parametrize("name", VARIANTS)
@torch.no_grad()
def test_cached_steps_and_chunks_equal_a_full_recompute(name):
    model = make(name)
    idx = torch.randint(VOCAB, (2, 1))  # position 0 alone first: CEA's masked edge
    cache = KVCache(model)
    logits, _ = model(idx, cache=cache)
    for _ in range(8):
        assert torch.allclose(logits[:, -1], all_logits(model, idx)[:, -1], atol=1e-5, rtol=0)
        idx = torch.cat((idx, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
        logits, _ = model(idx[:, -1:], cache=cache)
    chunk = torch.randint(VOCAB, (2, 6))  # several tokens after the cache: a shifted causal mask
    start = cache.length
    chunk_logits, _ = model(chunk, targets=chunk, cache=cache)
    full = all_logits(model, torch.cat((idx, chunk), dim=1))
    assert torch.allclose(chunk_logits, full[:, start:], atol=1e-5, rtol=0)
    per_token = model.kv_cache_bytes_per_token(bytes_per_element=4)
    assert cache_bytes(cache) == 2 * cache.length * per_token
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the cache takes the activation dtype
        cache = KVCache(model)
        model(idx, cache=cache)
    assert cache_bytes(cache) == 2 * idx.size(1) * model.kv_cache_bytes_per_token()


@torch.no_grad()
def test_the_cache_prefills_once_then_feeds_one_token_and_is_rebuilt_from_half_a_block():
    model = build_model("gpt", **COMMON, n_layer=2, n_head=4).eval()
    prompt = torch.randint(VOCAB, (2, BLOCK - 12))
    cached = model.generate(prompt, 2 * BLOCK + 12, temperature=0)
    uncached = model.generate(prompt, 13, temperature=0, use_cache=False)
    assert torch.equal(cached[:, :BLOCK + 1], uncached)  # while every context fits the block
    calls = []

    def recording_forward(idx, targets=None, cache=None, forward=model.forward):
        calls.append((idx.size(1), None if cache is None else cache.length))
        return forward(idx, targets, cache)

    model.forward = recording_forward
    model.generate(torch.randint(VOCAB, (1, 5)), 2 * BLOCK, temperature=0)
    half, expected, length = BLOCK // 2, [(5, 0)], 5
    while len(expected) < 2 * BLOCK:
        expected.append((half, 0) if length == BLOCK else (1, length))
        length = half if length == BLOCK else length + 1
    assert calls == expected
    calls.clear()
    model.generate(torch.randint(VOCAB, (1, 2 * BLOCK)), 2, temperature=0)  # a long prompt
    assert calls == [(BLOCK, 0), (half, 0)]


@pytest.mark.parametrize("use_cache", [True, False])
@torch.no_grad()
def test_padding_ids_are_never_sampled(use_cache):
    model = build_model("gpt", vocab_size=64, block_size=BLOCK, n_layer=1, n_embd=32,
                        n_head=2).eval()
    model.lm_head.register_forward_hook(  # the 14 padding rows with huge logits
        lambda module, inputs, logits: torch.cat((logits[..., :VOCAB],
                                                  logits[..., VOCAB:] + 1e4), dim=-1))
    prompt, generator = torch.randint(VOCAB, (8, 3)), torch.Generator().manual_seed(0)
    for kwargs in (dict(temperature=0), dict(temperature=1.0), dict(temperature=2.0, top_k=20)):
        out = model.generate(prompt, 2 * BLOCK, generator=generator, use_cache=use_cache,
                             vocab_size=VOCAB, **kwargs)
        assert out.max() < VOCAB, kwargs


def test_a_full_cache_of_a_tiny_block_keeps_at_least_one_token():
    for block_size in (1, 2):  # a full cache keeps max(1, block_size // 2) tokens
        tiny = build_model("gpt", vocab_size=VOCAB, block_size=block_size, n_layer=1, n_embd=32,
                           n_head=2).eval()
        assert tiny.generate(torch.randint(VOCAB, (1, 3)), 7, temperature=0).shape == (1, 10)
