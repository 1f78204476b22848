"""cea.py: FFN-Wider, CAA / CEA attention (Inner-FFN, direct pathway, masked, ablation), Inner-MoE,
the parameter split and the shape table. The contribution analysis is tested in
tests/experiments/test_cea_contribution.py."""

import math
import sys

import pytest
import torch

from conftest import ROOT, all_logits, assert_causal, overfit_loss, run_here
import cea
from model import GPT, CausalSelfAttention, GPTConfig
from shapes import build_model

sys.path.insert(0, str(ROOT / "experiments"))
import cea_tables  # noqa: E402
from cea_tables import param_split  # noqa: E402

TINY = dict(vocab_size=50, block_size=16, n_layer=2, n_embd=32, n_head=4, ffn_width_ratio=8)
RULES = ("direct", "masked", "transformed")


def tiny(**overrides):
    torch.manual_seed(0)
    return build_model("cea", **{**TINY, **overrides}).eval()


def test_outer_ratio_one_is_exactly_ffn_wider():
    torch.manual_seed(0)
    wider = GPT(
        GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_embd=32, n_head=4, ffn_hidden=32 * 32)
    ).eval()
    caa = tiny(ffn_width_ratio=32, outer_ratio=1.0)
    assert all(torch.equal(p, q) for p, q in zip(wider.parameters(), caa.parameters()))
    idx = torch.randint(0, 50, (2, 16))
    assert torch.equal(all_logits(wider, idx), all_logits(caa, idx))
    assert wider.param_counts() == caa.param_counts()
    assert wider.flops_per_token(16) == caa.flops_per_token(16)


@pytest.mark.parametrize("qk_norm,n_kv_head", [("", None), ("head", 2), ("full", 2)])
def test_zero_inner_ffn_with_direct_pathway_is_the_plain_attention(qk_norm, n_kv_head):
    """InnerFFN(a) = 0 makes t = a, so CEA attention must equal model's attention with the same
    W_qkv, W_o
    (also with QK-norm and grouped-query attention)."""
    model = tiny(outer_ratio=0.5, qk_norm=qk_norm, n_kv_head=n_kv_head)
    # same outer width 128
    plain = tiny(outer_ratio=1.0, ffn_hidden=128, qk_norm=qk_norm, n_kv_head=n_kv_head)
    for bm, bp in zip(model.blocks, plain.blocks):
        bm.attn.inner_ffn.out_proj.weight.data.zero_()
        bp.attn.attn.qkv_proj.weight.data.copy_(bm.attn.qkv_proj.weight)
        bp.attn.attn.out_proj.weight.data.copy_(bm.attn.out_proj.weight)
        bp.ffn.load_state_dict(bm.ffn.state_dict())
    plain.tok_emb.weight.data.copy_(model.tok_emb.weight)
    idx = torch.randint(0, 50, (2, 16))
    torch.testing.assert_close(all_logits(model, idx), all_logits(plain, idx), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("qk_norm", ["", "head", "full"])
def test_cea_attention_is_model_attention_with_the_checkpoints_names(qk_norm):
    """CEA's attention subclasses model.CausalSelfAttention (its projections, QK-norm and RoPE);
    its parameters have the names and order checkpoints hold (n, the Inner-FFN first: init draws
    in that order, so a checkpoint loads and a seed gives the same model)."""
    sub = tiny(outer_ratio=0.25, qk_norm=qk_norm).blocks[0].attn
    assert isinstance(sub, cea.CEAAttentionSublayer) and isinstance(sub, CausalSelfAttention)
    qk = ["q_norm.weight", "k_norm.weight"] if qk_norm else []
    assert list(sub.state_dict()) == ["norm.weight", "inner_ffn.gate_up_proj.weight",
                                      "inner_ffn.out_proj.weight", "qkv_proj.weight",
                                      "out_proj.weight", *qk]


@pytest.mark.parametrize("rule", RULES)
def test_causality(rule):
    assert_causal(
        tiny(outer_ratio=0.25, current_position=rule), vocab_size=50, t=9, batch=1, seq=16
    )


def attention_outputs(sublayer, a, t):
    with torch.no_grad():
        return sublayer.attend(a, t)


@pytest.mark.parametrize("rule", ["direct", "masked"])
def test_output_at_t_ignores_the_inner_ffn_at_t_but_not_earlier(rule):
    sub = tiny(outer_ratio=0.25, current_position=rule).blocks[0].attn
    a = torch.randn(2, 16, 32)
    t = a + torch.randn(2, 16, 32)
    base = attention_outputs(sub, a, t)
    for j in (0, 7, 15):
        perturbed = t.clone()
        perturbed[:, j] += 3 * torch.randn(2, 32)  # change only the Inner-FFN output at position j
        out = attention_outputs(sub, a, perturbed)
        # t <= j: unchanged
        torch.testing.assert_close(out[:, :j + 1], base[:, :j + 1], rtol=0, atol=1e-6)
        if j < 15:
            assert (out[:, j + 1:] - base[:, j + 1:]).abs().amax() > 1e-3  # later positions see it


def test_without_direct_pathway_the_own_inner_ffn_output_leaks():
    sub = tiny(outer_ratio=0.25, current_position="transformed").blocks[0].attn
    a = torch.randn(1, 16, 32)
    t = a + torch.randn(1, 16, 32)
    perturbed = t.clone()
    perturbed[:, 5] += 3.0
    out, base = attention_outputs(sub, a, perturbed), attention_outputs(sub, a, t)
    torch.testing.assert_close(out[:, :5], base[:, :5], rtol=0, atol=1e-6)
    assert (out[:, 5] - base[:, 5]).abs().amax() > 1e-3


def test_direct_pathway_equals_a_reference_softmax():
    """The fused SDPA call equals one explicit softmax over [q.k(t_s) for s < t] + [q.k(a_t)]."""
    sub = tiny(outer_ratio=0.25, n_head=2).blocks[0].attn
    B, T, C = 1, 6, 32
    a, t = torch.randn(B, T, C), torch.randn(B, T, C)
    out = attention_outputs(sub, a, t)
    W_q, W_k, W_v = sub.qkv_proj.weight.split([sub.q_dim, sub.kv_dim, sub.kv_dim])
    hd = sub.head_dim
    for h in range(2):
        sl = slice(h * hd, (h + 1) * hd)
        q = sub.heads(a @ W_q.T, sub.q_norm, pos=0)[0, h]
        kt = sub.heads(t @ W_k.T, sub.k_norm, pos=0)[0, h]
        ka = sub.heads(a @ W_k.T, sub.k_norm, pos=0)[0, h]
        vt, va = (t @ W_v.T)[0, :, sl], (a @ W_v.T)[0, :, sl]
        for i in range(T):
            scores = torch.cat([q[i] @ kt[:i].T, (q[i] @ ka[i])[None]]) / math.sqrt(hd)
            p = torch.softmax(scores, dim=0)
            expected = p[:-1] @ vt[:i] + p[-1] * va[i]
            torch.testing.assert_close(out[0, i, sl], expected, rtol=1e-5, atol=1e-5)


def test_masked_variant_has_no_nan_and_zero_attention_at_position_0():
    model = tiny(outer_ratio=0.125, current_position="masked")
    idx = torch.randint(0, 50, (2, 16))
    logits, loss = model(idx, idx)
    assert torch.isfinite(logits).all() and torch.isfinite(loss)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    sub = model.blocks[0].attn
    out = attention_outputs(sub, torch.randn(1, 16, 32), torch.randn(1, 16, 32))
    assert torch.equal(out[:, 0], torch.zeros_like(out[:, 0]))


def test_moe_routes_each_token_to_one_expert_and_balancing_loss():
    moe = cea.TopOneMoE(8, 4, 16)
    x = torch.randn(3, 5, 8)
    y = moe(x)
    flat = x.reshape(-1, 8)
    probs = torch.softmax(moe.router(flat), dim=-1)
    gate, choice = probs.max(-1)
    for n in range(flat.size(0)):  # output = gate * the chosen expert only
        torch.testing.assert_close(
            y.reshape(-1, 8)[n], gate[n] * moe.experts[choice[n]](flat[n]), rtol=1e-5, atol=1e-6
        )
    # balancing loss: 1 for uniform routing, more when unbalanced
    uniform = torch.full((8, 4), 0.25)
    assert cea.load_balancing_loss(uniform, torch.arange(8) % 4, 4).item() == pytest.approx(1.0)
    skewed = torch.tensor([[0.7, 0.1, 0.1, 0.1]] * 8)
    assert cea.load_balancing_loss(
        skewed, torch.zeros(8, dtype=torch.long), 4
    ).item() == pytest.approx(2.8)


def test_moe_baseline_and_inner_moe_have_the_same_params_and_flops_and_loss_includes_balancing():
    kw = dict(ffn_width_ratio=4, n_experts=4, expert_hidden=64)
    before, inner = tiny(moe_place="before_ffn", **kw), tiny(moe_place="inner", **kw)
    sb, si = param_split(before), param_split(inner)
    assert (
        sb["moe"] == si["inner_ffn"] > 0
        and sb["outer_ffn"] == si["outer_ffn"]
        and sb["attention"] == si["attention"]
    )
    assert sb["active_ffn"] == si["active_ffn"] == 2 * (32 * 4 + 3 * 32 * 64) + 2 * 3 * 32 * 128
    # the baseline's MoE sublayer has its own RMSNorm gain
    assert sb["total"] == si["total"] + 2 * 32
    dense_expert = 2 * 3 * 32 * 64 + 2 * 32 * 4  # FLOPs of one expert + router
    plain = tiny(ffn_width_ratio=4)
    assert before.flops_per_token(16) == plain.flops_per_token(16) + 2 * dense_expert
    idx = torch.randint(0, 50, (2, 16))
    for model in (before, inner):
        model.train()
        logits, loss = model(idx, idx)
        lm = torch.nn.functional.cross_entropy(logits.view(-1, 50), idx.view(-1))
        balancing = model.balancing_loss()
        assert balancing.item() > 0
        # training: LM loss + balance_coef x balancing loss
        torch.testing.assert_close(loss, lm + 0.01 * balancing)


@pytest.mark.parametrize("moe_place", ["before_ffn", "inner"])
def test_eval_mode_loss_is_the_plain_lm_loss_and_training_loss_adds_the_balancing_loss(moe_place):
    """Validation and OOD losses must not include the MoE balancing loss; training must."""
    model = tiny(ffn_width_ratio=4, n_experts=4, expert_hidden=64, moe_place=moe_place,
                 balance_coef=0.5)
    idx = torch.randint(0, 50, (2, 16))
    with torch.no_grad():
        logits, loss = model.eval()(idx, idx)
        lm = torch.nn.functional.cross_entropy(logits.view(-1, 50), idx.view(-1))
        torch.testing.assert_close(loss, lm)
        balancing = model.balancing_loss()  # the MoE modules' unweighted losses, summed
        moes = [m for m in model.modules() if isinstance(m, cea.TopOneMoE)]
        torch.testing.assert_close(balancing, sum(m.balancing_loss for m in moes))
        assert balancing.item() > 0
        # the weighted term in the training loss is exposed for logging
        torch.testing.assert_close(model.aux_loss, 0.5 * balancing)
        logits_train, loss_train = model.train()(idx, idx)  # no dropout: the same logits
        torch.testing.assert_close(logits_train, logits)
        torch.testing.assert_close(loss_train, lm + 0.5 * model.balancing_loss())
    # no MoE: no aux loss
    plain = tiny(ffn_width_ratio=4)
    assert plain(idx, idx) is not None and plain.aux_loss is None


def test_flops_match_flop_counter():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode
    for kw in (dict(outer_ratio=0.25, attention_impl="causal"),
               dict(outer_ratio=0.25, current_position="masked", attention_impl="causal"),
               dict(outer_ratio=0.25), dict(outer_ratio=0.25, current_position="masked"),
               dict(outer_ratio=0.0, current_position="transformed"), dict(outer_ratio=1.0)):
        model = tiny(**kw)
        idx = torch.randint(0, 50, (1, 16))
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            model(idx, idx)  # the math backend: attention as counted matmuls
        # the fast masked path attends 15 queries over 15 shifted keys; the count is for a 16 x 16
        # attention, like the plain causal attention's (2 layers, 4 FLOPs per score and head
        # dimension, 32 = H * hd)
        unrun = (
            2 * 4 * (16 * 16 - 15 * 15) * 32
            if kw.get("current_position") == "masked" and kw.get("attention_impl") == "causal"
            else 0
        )
        assert counter.get_total_flops() == 16 * model.flops_per_token(16) - unrun, kw


@pytest.mark.parametrize(
    "kw", [dict(outer_ratio=0.125), dict(ffn_width_ratio=4, n_experts=2, moe_place="inner")]
)
def test_tiny_model_overfits_a_batch(kw):
    model = tiny(**{"ffn_width_ratio": 4, "n_layer": 1, **kw}).train()
    # from ln(50) = 3.9
    assert overfit_loss(model, vocab_size=50, steps=40, lr=3e-2, batch=2, seq=12) < 0.3


def test_paper_shapes_h768():
    """Paper GPT H=768, 12 layers, FFN-Wider 32x. Our SwiGLU FFN has 3 matrices (d x 32d)."""
    with torch.device("meta"):
        wider = build_model(
            "cea",
            vocab_size=30522,
            block_size=128,
            n_layer=12,
            n_head=12,
            n_embd=768,
            outer_ratio=1.0,
        )
        cea_model = build_model(
            "cea",
            vocab_size=30522,
            block_size=128,
            n_layer=12,
            n_head=12,
            n_embd=768,
            outer_ratio=0.125,
        )
    sw, sc = param_split(wider), param_split(cea_model)
    assert sw["outer_ffn"] == 12 * 3 * 768 * 32 * 768
    assert sc["outer_ffn"] == 12 * 3 * 768 * 3072 and sc["inner_ffn"] == 12 * 3 * 768 * 21504
    assert sw["total"] == sc["total"] and sw["attention"] == sc["attention"] == 12 * 4 * 768 * 768


def test_bad_arguments_say_what_to_do():
    with pytest.raises(ValueError, match="outer_ratio"):
        build_model("cea", **TINY, outer_ratio=1.5)
    with pytest.raises(ValueError, match="current_position"):
        build_model("cea", **TINY, current_position="diagonal")
    with pytest.raises(ValueError, match="moe_place"):
        build_model("cea", **TINY, n_experts=2, moe_place="after")
    with pytest.raises(ValueError, match="outer_ratio=1.0"):
        build_model("cea", **TINY, n_experts=2, outer_ratio=0.5)


def test_config_files_load_and_build():
    from shapelab.configurator import parse_overrides
    from shapes import train_defaults
    from shapes import build_model
    files = sorted((ROOT / "config").glob("cea_*.py"))
    assert len(files) >= 4
    defaults = train_defaults()
    for f in files:
        cfg = parse_overrides([str(f)], defaults)
        args = dict(
            vocab_size=84,
            block_size=cfg["block_size"],
            n_layer=cfg["n_layer"],
            n_head=cfg["n_head"],
            n_kv_head=cfg["n_kv_head"],
            n_embd=cfg["n_embd"],
            head_dim=cfg["head_dim"],
            ffn_hidden=cfg["ffn_hidden"],
            qk_norm=cfg["qk_norm"],
            tie_embeddings=cfg["tie_embeddings"],
            dropout=cfg["dropout"],
        )
        with torch.device("meta"):
            build_model(cfg["model_type"], **args, **cfg["model_args"])


def test_match_ffn_hidden_finds_the_baselines_width():
    shape = dict(vocab_size=50, block_size=16, n_layer=2, n_embd=32, n_head=4, outer_ratio=0.125)
    # FFN-Wider, W = 1024
    target = tiny(ffn_width_ratio=32, outer_ratio=1.0).param_counts()["non_embedding"]
    assert cea.match_ffn_hidden(target, **shape) == 32 * 32


def test_moe_at_the_papers_c2_shape():
    """Appendix C.2's MoE GPT (d=4096, 6 layers, 32 heads, 64 top-1 experts of hidden 4096, FFN 4d,
    vocabulary 32,000, untied): baseline and Inner-MoE have the same matrices; the baseline has one
    RMSNorm gain (d parameters) more per layer. SwiGLU experts have 3 matrices each."""
    shape = dict(
        vocab_size=32000,
        block_size=2048,
        n_layer=6,
        n_head=32,
        n_embd=4096,
        tie_embeddings=False,
        # expert_hidden: the default is C.2's d = 4096
        ffn_width_ratio=4,
        outer_ratio=1.0,
        n_experts=64,
    )
    with torch.device("meta"):
        before = param_split(build_model("cea", **shape, moe_place="before_ffn"))
        inner = param_split(
            build_model("cea", **shape, moe_place="inner", current_position="masked")
        )
    d, L = 4096, 6
    experts_and_routers = L * (64 * 3 * d * 4096 + d * 64)
    assert before["moe"] == inner["inner_ffn"] == experts_and_routers == 19_328_925_696
    assert before["attention"] == inner["attention"] == L * 4 * d * d == 402_653_184
    assert before["outer_ffn"] == inner["outer_ffn"] == L * 3 * d * 4 * d == 1_207_959_552
    assert (
        before["active_ffn"]
        == inner["active_ffn"]
        == L * (3 * d * 4 * d + 3 * d * 4096 + d * 64)
        == 1_511_522_304
    )
    assert before["total"] - inner["total"] == L * d
    # The paper's 14B: its experts are GPT-3 FFNs (2 matrices of d x 4096), 2/3 of our SwiGLU
    # experts, on top of its 1.3B GPT (12 d^2 per layer + a 32,000 x d embedding = 1.34B); with
    # experts of hidden 4d it would be 53B.
    paper_experts = (experts_and_routers - L * d * 64) * 2 // 3
    assert paper_experts == L * 64 * 2 * d * d
    assert round((paper_experts + L * 12 * d * d + 32000 * d) / 1e9) == 14


def test_shape_table_command_prints_the_cea_split_at_the_papers_h768_shape():
    done = run_here("experiments/cea_tables.py")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "split: attention 28.312M, inner_ffn 594.543M, outer_ffn 84.935M" in out
    # the paper's softmax (the default): 2T keys at head dim 64
    assert "total 731.249M" in out and "forward FLOPs/token at T=128: 1500.21M" in out
    with torch.device("meta"):
        fast = build_model("cea", **{**cea_tables.PAPER_H768, "attention_impl": "causal"})
    assert f"{fast.flops_per_token(128) / 1e6:.2f}M" == "1496.08M"  # T keys at head dim 72


# ----------------------------------------------------------------------------------------
# MoE dispatch: every expert in the graph, no host syncs, no graph breaks


def loop_over_experts(moe, x):
    """The dispatch cea.TopOneMoE used before (a reference to compare with): each expert on the rows
    routed to it, found with nonzero() (a host sync and a graph break per expert)."""
    flat = x.reshape(-1, x.size(-1))
    probs = torch.softmax(moe.router(flat).float(), dim=-1)
    gate, expert_index = probs.max(dim=-1)
    out = torch.zeros_like(flat)
    for e, expert in enumerate(moe.experts):
        rows = (expert_index == e).nonzero(as_tuple=True)[0]
        if rows.numel():
            out[rows] = (expert(flat[rows]) * gate[rows, None]).to(out.dtype)
    return out.view_as(x)


def test_moe_dispatch_equals_the_loop_over_experts_in_values_and_gradients():
    torch.manual_seed(0)
    moe = cea.TopOneMoE(8, 4, 16)
    x = torch.randn(3, 7, 8, requires_grad=True)
    y = moe(x)
    assert len(set(moe.router(x).argmax(-1).flatten().tolist())) > 1  # several experts are used
    grads = torch.autograd.grad(y.square().sum(), [x, *moe.parameters()])
    x_ref = x.detach().clone().requires_grad_()
    y_ref = loop_over_experts(moe, x_ref)
    params = list(moe.parameters())
    grads_ref = torch.autograd.grad(y_ref.square().sum(), [x_ref, *params], allow_unused=True)
    torch.testing.assert_close(y, y_ref, rtol=1e-6, atol=1e-6)
    for p, g, g_ref in zip([x, *params], grads, grads_ref):
        torch.testing.assert_close(
            g, torch.zeros_like(p) if g_ref is None else g_ref, rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize("moe_place", ["before_ffn", "inner"])
def test_moe_models_trace_without_graph_breaks(moe_place):
    """No nonzero(), no .numel() branches, no bincount: torch.compile sees one graph (and a GPU
    never waits for the host inside a MoE layer)."""
    model = tiny(ffn_width_ratio=4, n_experts=4, expert_hidden=16, moe_place=moe_place,
                 current_position="masked" if moe_place == "inner" else "direct").train()
    idx = torch.randint(0, 50, (2, 16))
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(idx, idx)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


@pytest.mark.parametrize("moe_place", ["before_ffn", "inner"])
def test_every_expert_gets_a_gradient_even_when_no_token_is_routed_to_it(moe_place):
    """Under DDP (find_unused_parameters=False) a parameter without a .grad would hang the other
    ranks."""
    model = tiny(ffn_width_ratio=4, n_experts=4, expert_hidden=16, moe_place=moe_place).train()
    moes = [m for m in model.modules() if isinstance(m, cea.TopOneMoE)]
    for moe in moes:  # the router sends every token to expert 0
        moe.router.register_forward_hook(
            lambda m, inputs, out: out + torch.tensor([100.0, 0.0, 0.0, 0.0])
        )
    idx = torch.randint(0, 50, (2, 16))
    _, loss = model(idx, idx)
    loss.backward()
    for moe in moes:
        assert moe.experts[0].out_proj.weight.grad.abs().sum() > 0
        for expert in moe.experts[1:]:
            for p in expert.parameters():
                assert p.grad is not None and torch.equal(p.grad, torch.zeros_like(p))
    assert all(p.grad is not None for p in model.parameters())
