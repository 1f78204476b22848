"""Generation: padding ids are never sampled, whatever the temperature."""

import torch

from shapes import build_model

VOCAB, BLOCK = 50, 32


@torch.no_grad()
def test_padding_ids_are_never_sampled():
    model = build_model("gpt", vocab_size=64, block_size=BLOCK, n_layer=1, n_embd=32,
                        n_head=2).eval()
    model.lm_head.register_forward_hook(  # the 14 padding rows with huge logits
        lambda module, inputs, logits: torch.cat((logits[..., :VOCAB],
                                                  logits[..., VOCAB:] + 1e4), dim=-1))
    prompt, generator = torch.randint(VOCAB, (8, 3)), torch.Generator().manual_seed(0)
    for kwargs in (dict(temperature=0), dict(temperature=1.0), dict(temperature=2.0, top_k=20)):
        out = model.generate(prompt, 2 * BLOCK, generator=generator, vocab_size=VOCAB, **kwargs)
        assert out.max() < VOCAB, kwargs
