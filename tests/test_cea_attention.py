"""cea.py's attention paths and KV cache: the fast paths (attention_impl='causal': causal SDPA, no
mask) equal the paper's one softmax (the default, one SDPA with a dense mask) in values and
gradients (fp32 tight, bf16 loose), with GQA, QK-norm and at T = 1; the CUDA guard of the masked
reference; cached generation equals a full recompute for vanilla / CAA / CEA (every
current_position) and the Inner-MoE."""

import pytest
import torch

import cea
from model import KVCache
from shapes import build_model

SHAPE = dict(vocab_size=50, block_size=24, n_layer=2, n_embd=32, n_head=4, ffn_width_ratio=8)
VARIANTS = {"mha": dict(), "gqa_qknorm_head": dict(n_kv_head=2, qk_norm="head"),
            "mqa_qknorm_full": dict(n_kv_head=1, qk_norm="full")}


def build(**kw):
    torch.manual_seed(0)
    return build_model("cea", **{**SHAPE, "outer_ratio": 0.25, **kw}).eval()


def set_impl(model, impl):
    for block in model.blocks:
        block.attn.attention_impl = impl
    return model


def loss_and_grads(model, idx):
    params = list(model.parameters())
    logits, loss = model(idx, idx)
    # T = 1, masked: no key is ever attended
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return logits, [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]


@pytest.mark.parametrize("T", [1, 2, 16])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("rule", ["direct", "masked"])
def test_fast_attention_equals_the_reference_in_values_and_gradients_fp32(rule, variant, T):
    model = build(current_position=rule, **VARIANTS[variant])
    assert all(b.attn.attention_impl == "reference" for b in model.blocks)  # the default
    idx = torch.randint(0, 50, (2, T))
    logits_ref, grads_ref = loss_and_grads(model, idx)
    logits, grads = loss_and_grads(set_impl(model, "causal"), idx)
    torch.testing.assert_close(logits, logits_ref, rtol=1e-5, atol=1e-5)
    for g, g_ref in zip(grads, grads_ref):
        torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("rule", ["direct", "masked"])
def test_fast_attention_equals_the_reference_in_bf16(rule):
    """The attention functions alone on bf16 tensors: both land within bf16 rounding of the fp32
    result."""
    sub = build(current_position=rule, n_kv_head=2).blocks[0].attn
    torch.manual_seed(1)
    B, H, Hkv, T, hd = 2, 4, 2, 16, 8
    q, k_own, v_own = (
        torch.randn(B, H, T, hd),
        torch.randn(B, Hkv, T, hd),
        torch.randn(B, Hkv, T, hd),
    )
    k_ctx, v_ctx = torch.randn(B, Hkv, T, hd), torch.randn(B, Hkv, T, hd)
    fast = (
        cea.direct_pathway_attention
        if rule == "direct"
        else (lambda q, k, v, ko, vo: cea.masked_current_attention(q, k, v))
    )
    results = {}
    for impl, dtype in (
        ("fast", torch.bfloat16),
        ("reference", torch.bfloat16),
        ("reference", torch.float32),
    ):
        inputs = [x.to(dtype).requires_grad_() for x in (q, k_ctx, v_ctx, k_own, v_own)]
        out = fast(*inputs) if impl == "fast" else sub.reference_attention(*inputs, pos=0)
        weights = torch.linspace(-1, 1, out.numel()).view_as(out).to(dtype)
        grads = torch.autograd.grad((out * weights).sum(), inputs, allow_unused=True)
        results[impl, dtype] = [out] + [
            torch.zeros_like(x) if g is None else g for x, g in zip(inputs, grads)
        ]
    for fast_bf16, ref_bf16, ref_fp32 in zip(*results.values()):
        torch.testing.assert_close(fast_bf16.float(), ref_fp32, rtol=3e-2, atol=3e-2)
        torch.testing.assert_close(fast_bf16.float(), ref_bf16.float(), rtol=3e-2, atol=3e-2)


def test_masked_reference_with_a_small_head_dim_is_refused_on_cuda(monkeypatch):
    """head_dim 6: CUDA SDPA with a boolean mask would fall back to the math kernel (an fp32 (B,
    H, T, 2T)
    tensor saved per layer). The check runs at the first forward pass on a CUDA tensor."""
    shape = dict(n_embd=24, n_head=4)  # head_dim 6
    for rule in ("direct", "masked"):
        model = set_impl(build(current_position=rule, **shape), "reference")
        monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
        with pytest.raises(
            ValueError, match=r"head_dim % 8 == 0 on CUDA \(head_dim=6\).*attention_impl=.causal."
        ):
            model(torch.randint(0, 50, (1, 8)))
        monkeypatch.undo()
        model.blocks[0].attn.check_kernels(on_cuda=False)  # the CPU is fine
    # no mask
    for kw in (dict(shape, current_position="direct", attention_impl="causal"),
               dict(shape, current_position="masked", attention_impl="causal"),
               dict(shape, current_position="transformed"),  # is_causal, no mask
               dict(current_position="masked")):  # head_dim 8
        build(**kw).blocks[0].attn.check_kernels(on_cuda=True)  # fine


# ----------------------------------------------------------------------------------------
# KV cache: the keys/values of t (what later positions attend to)

CACHED_MODELS = {
    "vanilla": dict(ffn_width_ratio=4, outer_ratio=1.0),
    "caa_direct": dict(outer_ratio=0.5),
    "cea_direct_gqa_qknorm": dict(outer_ratio=0.125, n_kv_head=2, qk_norm="head"),
    "cea_masked": dict(outer_ratio=0.125, current_position="masked"),
    "cea_transformed": dict(outer_ratio=0.125, current_position="transformed"),
    "cea_direct_causal": dict(outer_ratio=0.125, attention_impl="causal"),
    "cea_masked_causal": dict(outer_ratio=0.125, current_position="masked",
                              attention_impl="causal"),
    "inner_moe_masked": dict(
        ffn_width_ratio=4,
        outer_ratio=1.0,
        n_experts=3,
        expert_hidden=16,
        moe_place="inner",
        current_position="masked",
    ),
    "inner_moe_direct": dict(
        ffn_width_ratio=4, outer_ratio=1.0, n_experts=3, expert_hidden=16, moe_place="inner"
    ),
}


@pytest.mark.parametrize("name", CACHED_MODELS)
@torch.no_grad()
def test_cached_generation_equals_the_full_recompute(name):
    model = build(**CACHED_MODELS[name])
    # masked: position 0 alone first
    prompt = torch.randint(0, 50, (2, 1 if "masked" in name else 5))
    cache = KVCache(model)
    logits, _ = model(prompt, cache=cache)  # prefill
    idx = prompt
    for _ in range(8):  # one token at a time
        full, _ = model(idx, targets=idx)  # every position's logits, recomputed
        torch.testing.assert_close(logits[:, -1], full[:, -1], rtol=0, atol=1e-5)
        idx = torch.cat((idx, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
        logits, _ = model(idx[:, -1:], cache=cache)
    # several new tokens after a cache: the shifted causal mask
    chunk = torch.randint(0, 50, (2, 4))
    chunk_logits, _ = model(chunk, targets=chunk, cache=cache)
    idx = torch.cat((idx, chunk), dim=1)
    full, _ = model(idx, targets=idx)
    torch.testing.assert_close(chunk_logits, full[:, -4:], rtol=0, atol=1e-5)
    # the cache holds t's keys/values: the bytes model.kv_cache_bytes_per_token counts (fp32: 4
    # bytes), batch 2
    assert cache.nbytes == 2 * cache.length * model.kv_cache_bytes_per_token(bytes_per_element=4)
    greedy = dict(max_new_tokens=10, temperature=0)
    assert torch.equal(
        model.generate(prompt, **greedy), model.generate(prompt, **greedy, use_cache=False)
    )
