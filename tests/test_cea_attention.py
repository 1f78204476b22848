"""CEA's attention kernels and KV cache: the mask-free path (attention_impl='causal') equals the
paper's one softmax in values and gradients, the CUDA guard of the masked form, and cached
generation equals a full recompute for every form."""

import pytest
import torch

from model import KVCache
from shapes import build_model

SHAPE = dict(vocab_size=50, block_size=24, n_layer=2, n_embd=32, n_head=4, ffn_width_ratio=8)


def build(**kw):
    torch.manual_seed(0)
    return build_model("cea", **{**SHAPE, "outer_ratio": 0.25, **kw}).eval()


def loss_and_grads(model, idx):
    params = list(model.parameters())
    logits, loss = model(idx, idx)
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return logits, [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]


@pytest.mark.parametrize("T", [1, 16])
@pytest.mark.parametrize("heads", [dict(), dict(n_kv_head=2, qk_norm="head")])
@pytest.mark.parametrize("rule", ["direct", "masked"])
def test_the_mask_free_path_equals_the_papers_softmax_in_values_and_gradients(rule, heads, T):
    model = build(current_position=rule, **heads)
    idx = torch.randint(0, 50, (2, T))
    logits_ref, grads_ref = loss_and_grads(model, idx)
    for block in model.blocks:
        block.attn.attention_impl = "causal"
    logits, grads = loss_and_grads(model, idx)
    torch.testing.assert_close(logits, logits_ref, rtol=1e-5, atol=1e-5)
    for g, g_ref in zip(grads, grads_ref):
        torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-6)


def test_the_masked_softmax_with_a_small_head_dim_is_refused_on_cuda(monkeypatch):
    model = build(n_embd=24)  # head_dim 6: CUDA's masked SDPA would fall back to the math kernel
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    with pytest.raises(ValueError, match=r"head_dim % 8 == 0 on CUDA.*attention_impl=.causal."):
        model(torch.randint(0, 50, (1, 8)))
    build(n_embd=24, attention_impl="causal").blocks[0].attn.check_kernels(on_cuda=True)


CACHED = {
    "caa_direct": dict(outer_ratio=0.5),
    "cea_direct_gqa_qknorm": dict(outer_ratio=0.125, n_kv_head=2, qk_norm="head"),
    "cea_masked": dict(outer_ratio=0.125, current_position="masked"),
    "cea_transformed": dict(outer_ratio=0.125, current_position="transformed"),
    "cea_masked_causal": dict(outer_ratio=0.125, current_position="masked",
                              attention_impl="causal"),
    "inner_moe_masked": dict(ffn_width_ratio=4, outer_ratio=1.0, n_experts=3, expert_hidden=16,
                             moe_place="inner", current_position="masked"),
}


@pytest.mark.parametrize("name", CACHED)
@torch.no_grad()
def test_cached_steps_and_chunks_equal_the_full_recompute(name):
    model = build(**CACHED[name])
    idx = torch.randint(0, 50, (2, 1 if "masked" in name else 5))  # masked: position 0 alone
    cache = KVCache(model)
    logits, _ = model(idx, cache=cache)
    for _ in range(6):
        full, _ = model(idx, targets=idx)
        torch.testing.assert_close(logits[:, -1], full[:, -1], rtol=0, atol=1e-5)
        idx = torch.cat((idx, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
        logits, _ = model(idx[:, -1:], cache=cache)
    chunk = torch.randint(0, 50, (2, 4))  # several tokens after a cache: the shifted mask
    chunk_logits, _ = model(chunk, targets=chunk, cache=cache)
    idx = torch.cat((idx, chunk), dim=1)
    torch.testing.assert_close(chunk_logits, model(idx, targets=idx)[0][:, -4:], rtol=0, atol=1e-5)
    assert cache.nbytes == 2 * cache.length * model.kv_cache_bytes_per_token(bytes_per_element=4)
