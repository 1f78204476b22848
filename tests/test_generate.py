"""KV-cached generation (model.KVCache, GPT.generate(use_cache=True)) for every model type:
the cache gives the same logits as recomputing the whole context, the same greedy tokens, the
bytes that kv_cache_bytes_per_token counts, and long samples past block_size. sample.py's edges:
a temperature float32 cannot divide by samples greedily, and Ctrl-C is one line."""

import pytest
import torch
from conftest import all_logits, assert_causal, run_here

import model as model_file
from model import KVCache, LayerKVCache, padded_vocab_size
from shapelab.checkpoint import save_checkpoint
from shapes import build_model

VOCAB, BLOCK = 50, 32
COMMON = dict(vocab_size=VOCAB, block_size=BLOCK)

MODELS = {
    "gpt": lambda: build_model("gpt", **COMMON, n_layer=2, n_embd=64, n_head=4),
    "gpt_gqa_qknorm_head": lambda: build_model(
        "gpt", **COMMON, n_layer=2, n_embd=64, n_head=4, n_kv_head=2, qk_norm="head"
    ),
    "gpt_qknorm_full_untied": lambda: build_model(
        "gpt",
        **COMMON,
        n_layer=2,
        n_embd=64,
        n_head=4,
        n_kv_head=1,
        qk_norm="full",
        tie_embeddings=False,
    ),
    "lws_framed": lambda: build_model(
        "lws",
        **COMMON,
        n_layer=5,
        n_head=8,
        n_kv_head=4,
        n_embd=64,
        head_dim=8,
        ffn_scalars=[0.5, 4.0],
        qkv_scalars=[0.25, 1.0],
        framed=True,
        ffn_multiple=32,
    ),  # heads 8, 4, 6, 6, 8
    "hourglass": lambda: build_model(
        "hourglass", **COMMON, n_layer=2, n_embd=64, n_head=4, n_sub_blocks=3, bottleneck_dim=24
    ),
    "former_x_project_head_dim": lambda: build_model(
        "variable_width",  # widths 80, 48, 32, 80
        **COMMON,
        n_layer=4,
        n_head=2,
        n_embd=64,
        width_schedule="x",
        bottleneck_width_ratio=0.5,
        width_multiple=16,
        expansion="project",
        attention_multiplier="head_dim",
    ),
    "former_v_carry_gqa": lambda: build_model(
        "variable_width",
        **COMMON,
        n_layer=3,
        n_head=4,
        n_kv_head=2,
        n_embd=64,
        width_schedule="v",
        bottleneck_width_ratio=0.5,
        width_multiple=16,
    ),
    "composed_former_hourglass": lambda: build_model(
        "composed",
        **COMMON,
        n_layer=4,
        n_head=2,
        n_kv_head=1,
        n_embd=64,
        width_schedule="x",
        bottleneck_width_ratio=0.5,
        width_multiple=16,
        n_sub_blocks=2,
        bottleneck_dim=32,
    ),
    "composed_lws": lambda: build_model(
        "composed",
        **COMMON,
        n_layer=3,
        n_head=8,
        n_kv_head=4,
        n_embd=64,
        head_dim=8,
        ffn_scalars=[0.5, 4.0],
        qkv_scalars=[0.25, 1.0],
        ffn_multiple=32,
    ),
}
CEA_MODELS = {
    f"composed_cea_{rule}": (lambda rule=rule: build_model("composed", 
        **COMMON, n_layer=3, n_head=2, n_embd=64, width_schedule="x", bottleneck_width_ratio=0.5,
        width_multiple=16, ffn_hidden=128, outer_ratio=0.5, current_position=rule))
    for rule in ("direct", "masked", "transformed")
}
CEA_MODELS["cea_gpt_gqa"] = lambda: build_model(
    "cea", **COMMON, n_layer=2, n_head=4, n_kv_head=2, n_embd=64, ffn_width_ratio=8,
    outer_ratio=0.25
)
ALL = list(MODELS) + list(CEA_MODELS)  # CEA: the cache keeps the keys/values of t only


def make(name):
    torch.manual_seed(0)
    return {**MODELS, **CEA_MODELS}[name]().eval()


@pytest.mark.parametrize("name", ALL)
@torch.no_grad()
def test_cached_logits_equal_a_full_recompute_at_every_step(name):
    model = make(name)
    prompt = torch.randint(VOCAB, (2, 5))
    cache = KVCache(model)
    logits, _ = model(prompt, cache=cache)  # prefill, (B, 1, V)
    idx = prompt
    for _ in range(12):  # one token at a time
        full = all_logits(model, idx)  # recompute everything, (B, T, V)
        assert torch.allclose(logits[:, -1], full[:, -1], atol=1e-5, rtol=0)
        next_id = logits[:, -1].argmax(-1, keepdim=True)
        idx = torch.cat((idx, next_id), dim=1)
        logits, _ = model(next_id, cache=cache)
    # several new tokens at once after the cache (a causal mask shifted by the cache's length)
    chunk = torch.randint(VOCAB, (2, 6))
    start = cache.length
    chunk_logits, _ = model(chunk, targets=chunk, cache=cache)  # every position's logits
    full = all_logits(model, torch.cat((idx, chunk), dim=1))
    assert cache.length == start + 6
    assert torch.allclose(chunk_logits, full[:, start:], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ALL)
@torch.no_grad()
def test_greedy_generation_cached_equals_uncached_and_long_samples_work(name):
    model = make(name)
    prompt = torch.randint(VOCAB, (2, BLOCK - 12))
    # 3 x BLOCK tokens: the cache is rebuilt 4 times
    cached = model.generate(prompt, 2 * BLOCK + 12, temperature=0)
    uncached = model.generate(prompt, 13, temperature=0, use_cache=False)
    assert cached.shape == (2, 3 * BLOCK)
    assert torch.equal(cached[:, :BLOCK + 1], uncached)  # as long as every context fits the block
    # the cache fills at BLOCK + 1 tokens; the next token comes from a prefill of the last BLOCK //
    # 2
    rebuilt = all_logits(model, cached[:, BLOCK + 1 - BLOCK // 2:BLOCK + 1])[:, -1].argmax(-1)
    assert torch.equal(cached[:, BLOCK + 1], rebuilt)
    # prefill the last BLOCK, rebuild, then one token a step
    long_prompt = torch.randint(VOCAB, (2, BLOCK + 3))
    sampled = model.generate(
        long_prompt, 4, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(0)
    )
    assert sampled.shape == (2, BLOCK + 7) and torch.equal(sampled[:, :BLOCK + 3], long_prompt)
    assert sampled.max() < VOCAB


@torch.no_grad()
def test_the_cache_prefills_once_then_feeds_one_token_and_is_rebuilt_from_half_a_block_when_full():
    model = make("gpt")
    calls = []  # (tokens fed, positions cached before) of every forward pass

    def recording_forward(idx, targets=None, cache=None, forward=model.forward):
        calls.append((idx.size(1), None if cache is None else cache.length))
        return forward(idx, targets, cache)

    model.forward = recording_forward
    model.generate(torch.randint(VOCAB, (1, 5)), 2 * BLOCK, temperature=0)
    half = BLOCK // 2
    expected, length = [(5, 0)], 5  # prefill the prompt
    while len(expected) < 2 * BLOCK:
        # full: prefill the last half block
        expected.append((half, 0) if length == BLOCK else (1, length))
        length = half if length == BLOCK else length + 1
    assert calls == expected and calls.count((half, 0)) == 3
    calls.clear()
    # a prompt longer than the block
    model.generate(torch.randint(VOCAB, (1, 2 * BLOCK)), 2, temperature=0)
    assert calls == [(BLOCK, 0), (half, 0)]
    calls.clear()
    model.generate(torch.randint(VOCAB, (1, 2 * BLOCK)), 2, temperature=0, use_cache=False)
    assert calls == [(BLOCK, None), (BLOCK, None)]


@pytest.mark.parametrize("name", ALL)
@torch.no_grad()
def test_cache_bytes_per_token_are_what_the_accounting_counts(name):
    model = make(name)
    for dtype, size in ((torch.float32, 4), (torch.bfloat16, 2)):
        cache = KVCache(model)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            model(torch.randint(VOCAB, (3, 7)), cache=cache)
            model(torch.randint(VOCAB, (3, 1)), cache=cache)
        assert all(layer.keys.dtype == dtype for layer in cache.layers)  # the activation dtype
        assert cache.length == 8
        assert cache.nbytes == 3 * 8 * model.kv_cache_bytes_per_token(bytes_per_element=size)


@pytest.mark.parametrize("name", ALL)
@torch.no_grad()
def test_causality_with_and_without_a_cache(name):
    model = make(name)
    assert_causal(model, VOCAB, t=9, seq=BLOCK)  # the training path
    prefix, chunk = torch.randint(VOCAB, (2, 4)), torch.randint(VOCAB, (2, 5))
    changed = chunk.clone()
    changed[:, 3] = (changed[:, 3] + 1) % VOCAB
    outputs = []
    for new in (chunk, changed):
        cache = KVCache(model)
        model(prefix, cache=cache)
        outputs.append(model(new, targets=new, cache=cache)[0])
    assert torch.equal(outputs[0][:, :3], outputs[1][:, :3]), (
        "a cached chunk's query saw a later token"
    )
    assert not torch.allclose(outputs[0][:, 3:], outputs[1][:, 3:])


@pytest.mark.parametrize("use_cache", [True, False])
@torch.no_grad()
def test_padding_ids_are_never_sampled(use_cache):
    torch.manual_seed(0)
    # 50 ids + 14 pad
    model = build_model(
        "gpt", vocab_size=64, block_size=BLOCK, n_layer=1, n_embd=32, n_head=2
    ).eval()

    def favour_padding(module, inputs, logits):  # padded rows with huge logits
        return torch.cat((logits[..., :VOCAB], logits[..., VOCAB:] + 1e4), dim=-1)

    model.lm_head.register_forward_hook(favour_padding)
    prompt = torch.randint(VOCAB, (8, 3))
    generator = torch.Generator().manual_seed(0)
    unmasked = model.generate(prompt, 5, temperature=1.0, generator=generator, use_cache=use_cache)
    # the hook works: without vocab_size only padding comes out
    assert (unmasked[:, 3:] >= VOCAB).all()
    for kwargs in (dict(temperature=0), dict(temperature=1.0), dict(temperature=2.0, top_k=20),
                   dict(temperature=1.0, top_k=1)):
        out = model.generate(
            prompt, 2 * BLOCK, generator=generator, use_cache=use_cache, vocab_size=VOCAB, **kwargs
        )
        assert out.max() < VOCAB, kwargs


def test_layer_cache_is_allocated_once_and_refuses_to_overflow():
    cache = LayerKVCache(max_len=4)
    assert cache.length == 0 and cache.nbytes == 0
    k, v = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)
    keys, values = cache.append(k, v)
    buffer = cache.keys
    assert keys.shape == (1, 2, 3, 8) and torch.equal(keys, k) and torch.equal(values, v)
    keys, _ = cache.append(k[:, :, :1], v[:, :, :1])
    assert cache.keys is buffer and keys.shape == (1, 2, 4, 8) and cache.length == 4
    assert cache.nbytes == 2 * 4 * 2 * 8 * 4
    with pytest.raises(ValueError, match="KV cache full"):
        cache.append(k[:, :, :1], v[:, :, :1])


def test_padded_vocab_size_pads_only_bpe_vocabularies():
    assert padded_vocab_size(50257) == 50304  # GPT-2
    assert padded_vocab_size(100277) == 100288  # cl100k_base
    assert padded_vocab_size(50304) == 50304
    assert padded_vocab_size(65) == 65 and padded_vocab_size(1024) == 1024  # character vocabularies
    assert padded_vocab_size(1025) == 1088 and padded_vocab_size(1025, multiple=128) == 1152


@torch.no_grad()
def test_tiny_blocks_generate_long_samples():
    torch.manual_seed(0)
    prompt = torch.randint(VOCAB, (1, 3))
    for block_size in (1, 2, 3):  # a full cache keeps max(1, block_size // 2) tokens
        model = build_model(
            "gpt", vocab_size=VOCAB, block_size=block_size, n_layer=1, n_embd=32, n_head=2
        ).eval()
        out = model.generate(prompt, 7, temperature=0)
        assert out.shape == (1, 10)
        if block_size == 1:  # both paths see only the newest token
            assert torch.equal(out, model.generate(prompt, 7, temperature=0, use_cache=False))


CHARS = "\n !,.:;?abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@pytest.fixture
def char_checkpoint(tmp_path):
    """A folder with a ckpt.pt of a tiny character-level GPT, as train.py saves one."""
    torch.manual_seed(0)
    args = dict(vocab_size=len(CHARS), block_size=16, n_layer=1, n_embd=32, n_head=2)
    save_checkpoint(dict(model=build_model("gpt", **args).state_dict(), model_type="gpt",
                         model_args=args, iter_num=3, best_val_loss=2.0,
                         meta={"tokenizer": "char", "vocab_size": len(CHARS), "chars": CHARS},
                         config={"dataset": "shakespeare_char"}), tmp_path / "ckpt.pt")
    return tmp_path


def sample(out_dir, *args):
    return run_here("sample.py", f"--out_dir={out_dir}", "--start=ab", "--max_new_tokens=20",
                    "--num_samples=2", "--dtype=float32", "--device=cpu", *args)


@pytest.mark.parametrize("temperature", ["1e-300", "1e-45"])
def test_a_temperature_float32_cannot_divide_by_samples_greedily(char_checkpoint, temperature):
    """--temperature=1e-300 is 0 in float32: the logits divided by it were nan (RuntimeError:
    probability tensor contains inf, nan); greedy is the limit it approaches."""
    tiny = sample(char_checkpoint, f"--temperature={temperature}")
    assert tiny.returncode == 0, tiny.stderr
    assert tiny.stdout == sample(char_checkpoint, "--temperature=0").stdout


def test_ctrl_c_while_sampling_is_one_line_and_exit_status_130(char_checkpoint, monkeypatch):
    generate, calls = model_file.GPT.generate, []

    def interrupted_on_the_second_sample(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(model_file.GPT, "generate", interrupted_on_the_second_sample)
    result = sample(char_checkpoint)
    assert result.returncode == 130 and result.stderr.count("\n") == 1, result.stderr
    assert "1 of 2" in result.stderr
    assert result.stdout.count("-" * 40) == 1  # the first sample, whole
