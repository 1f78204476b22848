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


def papers_softmax(sub, a, t):
    """The attention of section 5.1 (C.2 for 'masked') written out: one softmax over the earlier
    positions' keys of t and, for 'direct', the position's own key of a."""
    W_q, W_kv = sub.qkv_proj.weight.split([sub.q_dim, 2 * sub.kv_dim])
    group, T = sub.n_head // sub.n_kv_head, a.size(1)
    q = sub.heads(a @ W_q.T, sub.q_norm)
    k, v, k_own, v_own = (x.repeat_interleave(group, dim=1) for x in (
        *sub.kv_heads(t @ W_kv.T), *sub.kv_heads(a @ W_kv.T)))
    scores = (q @ k.transpose(-1, -2)).masked_fill(~torch.ones(T, T).tril(-1).bool(), -math.inf)
    own = (q * k_own).sum(-1, keepdim=True)
    if sub.current_position == "masked":
        own = own.masked_fill(torch.arange(T)[:, None] > 0, -math.inf)  # position 0: y = 0 v_0
        v_own = torch.zeros_like(v_own)
    p = torch.softmax(torch.cat([scores, own], dim=-1) / math.sqrt(sub.head_dim), dim=-1)
    y = p[..., :T] @ v + p[..., T:] * v_own
    return y.transpose(1, 2).flatten(2)


@pytest.mark.parametrize("heads", [dict(), dict(n_kv_head=2, qk_norm="head")])
@pytest.mark.parametrize("rule", ["direct", "masked"])
def test_the_mask_free_attention_is_the_papers_softmax_in_values_and_gradients(rule, heads):
    sub = tiny(outer_ratio=0.25, current_position=rule, **heads).blocks[0].attn
    a, t = torch.randn(2, 12, 32, requires_grad=True), torch.randn(2, 12, 32, requires_grad=True)
    y, y_paper = sub.attend(a, t), papers_softmax(sub, a, t)
    torch.testing.assert_close(y, y_paper, rtol=1e-5, atol=1e-6)
    probe = torch.randn_like(y)
    grads = torch.autograd.grad((y * probe).sum(), (a, t))
    for g, g_paper in zip(grads, torch.autograd.grad((y_paper * probe).sum(), (a, t))):
        torch.testing.assert_close(g, g_paper, rtol=1e-4, atol=1e-6)


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
    torch.testing.assert_close(loss, lm + model.aux_loss)
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
    dict(outer_ratio=0.25),
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
