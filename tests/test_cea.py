"""CEA: rho = 1 is FFN-Wider (the plain GPT), the direct pathway, the masked and transformed
current positions, the Inner-MoE, the paper's shapes, FLOPs of every form."""

import math
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from conftest import ROOT, all_logits
import cea
from model import GPT, GPTConfig
from shapes import build_model

sys.path.insert(0, str(ROOT / "experiments"))
from cea_tables import param_split  # noqa: E402

TINY = dict(vocab_size=50, block_size=16, n_layer=2, n_embd=32, n_head=4, ffn_width_ratio=8)
MOE = dict(ffn_width_ratio=4, n_experts=4, expert_hidden=64)


def tiny(**overrides):
    torch.manual_seed(0)
    return build_model("cea", **{**TINY, **overrides}).eval()


def test_outer_ratio_one_is_exactly_ffn_wider_the_plain_gpt():
    torch.manual_seed(0)
    wider = GPT(GPTConfig(**{k: v for k, v in TINY.items() if k != "ffn_width_ratio"},
                          ffn_hidden=32 * 32)).eval()
    caa = tiny(ffn_width_ratio=32, outer_ratio=1.0)
    idx = torch.randint(0, 50, (2, 16))
    assert torch.equal(all_logits(wider, idx), all_logits(caa, idx))


@pytest.mark.parametrize("qk_norm, n_kv_head", [("", None), ("full", 2)])
def test_a_zero_inner_ffn_with_the_direct_pathway_is_the_plain_attention(qk_norm, n_kv_head):
    model = tiny(outer_ratio=0.5, qk_norm=qk_norm, n_kv_head=n_kv_head)
    plain = tiny(outer_ratio=1.0, ffn_hidden=128, qk_norm=qk_norm, n_kv_head=n_kv_head)
    for bm, bp in zip(model.blocks, plain.blocks):
        bm.attn.inner_ffn.out_proj.weight.data.zero_()
        bp.attn.attn.load_state_dict(bm.attn.state_dict(), strict=False)
        bp.ffn.load_state_dict(bm.ffn.state_dict())
    plain.tok_emb.weight.data.copy_(model.tok_emb.weight)
    idx = torch.randint(0, 50, (2, 16))
    torch.testing.assert_close(all_logits(model, idx), all_logits(plain, idx))


@pytest.mark.parametrize("rule, leaks", [("direct", False), ("masked", False),
                                         ("transformed", True)])
def test_position_t_sees_its_own_inner_ffn_only_without_the_direct_pathway(rule, leaks):
    sub = tiny(outer_ratio=0.25, current_position=rule).blocks[0].attn
    a = torch.randn(2, 16, 32)
    t = a + torch.randn(2, 16, 32)
    with torch.no_grad():
        base = sub.attend(a, t)
        for j in (0, 7):
            perturbed = t.clone()
            perturbed[:, j] += 3 * torch.randn(2, 32)
            out = sub.attend(a, perturbed)
            torch.testing.assert_close(out[:, :j], base[:, :j], rtol=0, atol=1e-6)
            assert ((out[:, j] - base[:, j]).abs().amax() > 1e-3) == leaks
            assert (out[:, j + 1:] - base[:, j + 1:]).abs().amax() > 1e-3
    if rule == "masked":  # position 0 sees nothing: its output is 0
        assert torch.equal(base[:, 0], torch.zeros_like(base[:, 0]))


def test_the_direct_pathway_is_one_softmax_over_earlier_t_and_the_own_a():
    sub = tiny(outer_ratio=0.25, n_head=2).blocks[0].attn
    T, hd = 6, sub.head_dim
    a, t = torch.randn(1, T, 32), torch.randn(1, T, 32)
    with torch.no_grad():
        out = sub.attend(a, t)
    W_q, W_k, W_v = sub.qkv_proj.weight.split([sub.q_dim, sub.kv_dim, sub.kv_dim])
    for h in range(2):
        sl = slice(h * hd, (h + 1) * hd)
        q = sub.heads(a @ W_q.T, sub.q_norm, pos=0)[0, h]
        kt, ka = (sub.heads(x @ W_k.T, sub.k_norm, pos=0)[0, h] for x in (t, a))
        vt, va = (t @ W_v.T)[0, :, sl], (a @ W_v.T)[0, :, sl]
        for i in range(T):
            p = torch.softmax(torch.cat([q[i] @ kt[:i].T, (q[i] @ ka[i])[None]]) / math.sqrt(hd), 0)
            torch.testing.assert_close(out[0, i, sl], p[:-1] @ vt[:i] + p[-1] * va[i])


def test_moe_routes_each_token_to_one_expert_and_balances():
    moe = cea.TopOneMoE(8, 4, 16)
    flat = torch.randn(15, 8)
    y = moe(flat)
    gate, choice = torch.softmax(moe.router(flat), dim=-1).max(-1)
    for n in range(15):
        torch.testing.assert_close(y[n], gate[n] * moe.experts[choice[n]](flat[n]))
    uniform, skewed = torch.full((8, 4), 0.25), torch.tensor([[0.7, 0.1, 0.1, 0.1]] * 8)
    assert cea.load_balancing_loss(uniform, torch.arange(8) % 4, 4).item() == pytest.approx(1.0)
    zeros = torch.zeros(8, dtype=torch.long)
    assert cea.load_balancing_loss(skewed, zeros, 4).item() == pytest.approx(2.8)


@pytest.mark.parametrize("moe_place", ["before_ffn", "inner"])
def test_the_training_loss_adds_the_balancing_loss_and_every_expert_gets_a_gradient(moe_place):
    model = tiny(**MOE, moe_place=moe_place, balance_coef=0.5)
    idx = torch.randint(0, 50, (2, 16))
    logits, loss = model.eval()(idx, idx)
    lm = F.cross_entropy(logits.view(-1, 50), idx.view(-1))
    torch.testing.assert_close(loss, lm)
    _, loss = model.train()(idx, idx)
    torch.testing.assert_close(loss, lm + 0.5 * model.balancing_loss())
    moes = [m for m in model.modules() if isinstance(m, cea.TopOneMoE)]
    for moe in moes:  # every token to expert 0: the others still get a (zero) gradient, for DDP
        moe.router.register_forward_hook(lambda m, i, out: out + torch.tensor([100.0, 0, 0, 0]))
    model(idx, idx)[1].backward()
    assert all(p.grad is not None for p in model.parameters())


def test_the_papers_h768_shapes_and_the_moe_of_c2():
    h768 = dict(vocab_size=30522, block_size=128, n_layer=12, n_head=12, n_embd=768)
    with torch.device("meta"):
        wider = param_split(build_model("cea", **h768, outer_ratio=1.0))
        ours = param_split(build_model("cea", **h768, outer_ratio=0.125))
    assert ours["outer_ffn"] == 12 * 3 * 768 * 3072 and ours["inner_ffn"] == 12 * 3 * 768 * 21504
    assert wider["total"] == ours["total"] and ours["attention"] == 12 * 4 * 768 * 768
    c2 = dict(vocab_size=32000, block_size=2048, n_layer=6, n_head=32, n_embd=4096,
              tie_embeddings=False, ffn_width_ratio=4, n_experts=64)
    with torch.device("meta"):
        before = param_split(build_model("cea", **c2, moe_place="before_ffn"))
        inner = param_split(build_model("cea", **c2, moe_place="inner", current_position="masked"))
    assert before["moe"] == inner["inner_ffn"] == 6 * (64 * 3 * 4096 ** 2 + 4096 * 64)
    assert before["active_ffn"] == inner["active_ffn"] == 1_511_522_304
    assert before["total"] - inner["total"] == 6 * 4096  # the baseline's extra norm


@pytest.mark.parametrize("kw", [
    dict(outer_ratio=0.25, attention_impl="causal"), dict(outer_ratio=0.25),
    dict(outer_ratio=0.25, current_position="masked"),
    dict(outer_ratio=0.0, current_position="transformed")])
def test_flops_match_the_flop_counter(kw):
    model = tiny(**kw)
    idx = torch.randint(0, 50, (1, 16))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx, idx)
    assert counter.get_total_flops() == 16 * model.flops_per_token(16), kw
    # a top-1 MoE costs its router and one expert a token, though every expert runs
    expert = 2 * 3 * 32 * 64 + 2 * 32 * 4
    moe, plain = tiny(**MOE), tiny(ffn_width_ratio=4)
    assert moe.flops_per_token(16) == plain.flops_per_token(16) + 2 * expert


@pytest.mark.parametrize("kw, match", [
    (dict(outer_ratio=1.5), "outer_ratio"), (dict(current_position="diagonal"), "current_position"),
    (dict(n_experts=2, moe_place="after"), "moe_place"),
    (dict(n_experts=2, outer_ratio=0.5), "outer_ratio=1.0")])
def test_bad_settings_are_one_line_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        build_model("cea", **TINY, **kw)
