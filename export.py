"""
Export the plain GPT from a trained checkpoint into a folder that transformers loads.

    python export.py out/ckpt.pt out-hf          # (out/ works too: its ckpt.pt)

The plain GPT (model_type 'gpt', every layer of one shape) is a LLaMA-style decoder: it goes out
as transformers' LlamaForCausalLM, or Qwen3ForCausalLM with qk_norm='head' (Llama plus an RMSNorm
over each query and key head), with its tokenizer (tokenizer.json), and is loaded back to check
that its logits are ours. Tensors and JSON only: nothing in the folder runs code when loaded.

The folder is new, empty or holds an earlier export (config.json). The export is written in a
folder beside it, then its files are moved in, replacing only those of the same names: a failed
export changes nothing, and no other file is ever replaced or deleted.
"""

import os
import sys
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError

from data.sources import gpt2_tiktoken_file
from shapelab.checkpoint import load_checkpoint
from shapelab.configurator import usage_error
from shapelab.tokenizer import GPT2_EOT, GPT2_PAT_STR
from shapes import model_from_checkpoint

USAGE = "usage: python export.py CHECKPOINT FOLDER  (CHECKPOINT: out/ckpt.pt, or the folder of it)"
EOT = "<|endoftext|>"
# the plain GPT's names -> transformers' Llama / Qwen3 names (fused qkv and gate|up split apart)
LAYER_NAMES = {"attn.norm.weight": "input_layernorm.weight",
               "attn.attn.out_proj.weight": "self_attn.o_proj.weight",
               "attn.attn.q_norm.weight": "self_attn.q_norm.weight",
               "attn.attn.k_norm.weight": "self_attn.k_norm.weight",
               "ffn.norm.weight": "post_attention_layernorm.weight",
               "ffn.mlp.out_proj.weight": "mlp.down_proj.weight"}
OUTER_NAMES = {"tok_emb.weight": "model.embed_tokens.weight", "norm_f.weight": "model.norm.weight",
               "lm_head.weight": "lm_head.weight"}


def to_transformers(state, q_dim, kv_dim):
    """The plain GPT's state dict in transformers' names: the same tensors, qkv_proj split into
    rows of q_dim, kv_dim, kv_dim."""
    out = {}
    for name, tensor in state.items():
        if not name.startswith("blocks."):
            out[OUTER_NAMES[name]] = tensor
            continue
        _, i, rest = name.split(".", 2)
        layer = f"model.layers.{i}."
        if rest == "attn.attn.qkv_proj.weight":
            for part, rows in zip("qkv", tensor.split([q_dim, kv_dim, kv_dim])):
                out[f"{layer}self_attn.{part}_proj.weight"] = rows
        elif rest == "ffn.mlp.gate_up_proj.weight":
            out[f"{layer}mlp.gate_proj.weight"], out[f"{layer}mlp.up_proj.weight"] = tensor.chunk(2)
        else:
            out[layer + LAYER_NAMES[rest]] = tensor
    return out


def transformers_class(model_type, config):
    """'LlamaForCausalLM' or 'Qwen3ForCausalLM'; a one-line error for a shape transformers lacks."""
    why = (f"model_type={model_type!r}" if model_type != "gpt"
           else "layers that differ in shape" if any(s != config.layers[0] for s in config.layers)
           else "qk_norm='full' (one RMSNorm over all heads)" if config.qk_norm == "full" else "")
    if why:
        usage_error(f"{why} has no transformers class: export.py writes the plain GPT only")
    return "Qwen3ForCausalLM" if config.qk_norm == "head" else "LlamaForCausalLM"


def export_transformers(model, class_name, meta, folder):
    """The plain GPT as transformers' class_name in folder: model.py's choices in its words; returns
    the largest |difference| between the logits transformers computes from it and ours."""
    import transformers
    transformers.utils.logging.disable_progress_bar()  # on stderr, where errors are one line
    config, spec = model.config, model.config.layers[0]
    eot = GPT2_EOT if meta["tokenizer"] == "gpt2" else None
    hf_config = getattr(transformers, class_name.replace("ForCausalLM", "Config"))(
        vocab_size=config.vocab_size, hidden_size=config.n_embd, num_hidden_layers=config.n_layer,
        intermediate_size=spec.ffn_hidden, num_attention_heads=spec.n_head,
        num_key_value_heads=spec.n_kv_head, head_dim=spec.head_dim,
        max_position_embeddings=config.block_size, rms_norm_eps=config.norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": config.rope_theta},
        tie_word_embeddings=config.tie_embeddings, bos_token_id=eot, eos_token_id=eot,
        dtype="float32")  # SwiGLU, no biases: transformers' defaults
    hf_model = getattr(transformers, class_name)(hf_config)
    hf_model.load_state_dict(to_transformers(model.state_dict(), spec.n_head * spec.head_dim,
                                             spec.n_kv_head * spec.head_dim))
    hf_model.save_pretrained(folder)
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    idx = torch.randint(model.config.vocab_size, (2, model.config.block_size))
    with torch.no_grad():
        return (model(idx, targets=idx)[0] - hf_model(idx).logits).abs().max().item()


def export_tokenizer(meta, block_size, folder):
    """The run's tokenizer as transformers' tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast
    special = {}
    if meta["tokenizer"] == "char":
        vocab = {c: i for i, c in enumerate(meta["chars"])}
        backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
        backend.decoder = decoders.Fuse()  # characters join without spaces
    else:
        from transformers.convert_slow_tokenizer import TikTokenConverter
        special = dict(bos_token=EOT, eos_token=EOT)
        backend = TikTokenConverter(vocab_file=str(gpt2_tiktoken_file()), pattern=GPT2_PAT_STR,
                                    extra_special_tokens=[EOT]).converted()
    PreTrainedTokenizerFast(tokenizer_object=backend, model_max_length=block_size,
                            **special).save_pretrained(folder)


def main(argv):
    if len(argv) != 2 or any(a.startswith("-") for a in argv):
        usage_error(USAGE)
    source, folder = map(Path, argv)
    try:
        checkpoint = load_checkpoint(source / "ckpt.pt" if source.is_dir() else source)
    except FileNotFoundError:
        usage_error(f"no checkpoint at {source}: give export.py a ckpt.pt that train.py wrote, or "
                    f"its folder")
    if not {"model_type", "model_args", "meta", "iter_num"} <= checkpoint.keys():
        usage_error(f"{source} is not a checkpoint of this repo's train.py")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / "config.json").is_file():
        usage_error(f"{folder} holds other files and no export: export into a new or empty "
                    f"folder, or over an earlier export")
    model = model_from_checkpoint(checkpoint).eval()
    class_name = transformers_class(checkpoint["model_type"], model.config)
    try:  # staged beside the folder, so that a failed export leaves no trace
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".export-", dir=folder.parent) as staging:
            diff = export_transformers(model, class_name, checkpoint["meta"], staging)
            if not diff < 1e-4:
                raise SystemExit(f"error: transformers' {class_name} computes other logits from "
                                 f"the exported weights (largest difference {diff:.3g}) than this "
                                 f"repo's GPT; nothing was exported")
            export_tokenizer(checkpoint["meta"], model.config.block_size, staging)
            folder.mkdir(exist_ok=True)
            for name in sorted(os.listdir(staging), key=lambda name: name == "config.json"):
                os.chmod(Path(staging, name), 0o644)  # safetensors writes for its owner only
                os.replace(Path(staging, name), folder / name)
    except (OSError, SafetensorError) as e:
        usage_error(f"cannot write into {folder} ({getattr(e, 'strerror', None) or e}): give "
                    f"export.py a FOLDER you can write to, e.g. ~/out-hf")
    print(f"exported {checkpoint['model_type']} (step {checkpoint['iter_num']}) to {folder} as "
          f"{class_name}: transformers' logits are ours (largest difference {diff:.1e}); load it "
          f"with AutoModelForCausalLM.from_pretrained, score it with lm_eval")


if __name__ == "__main__":
    main(sys.argv[1:])
