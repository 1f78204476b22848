"""CEA's attention kernels: the mask-free path (attention_impl='causal') equals the paper's one
softmax in values and gradients, and the CUDA guard of the masked form. (The KV cache of every
form: tests/test_generate.py.)"""

import pytest
import torch

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
