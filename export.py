"""
Export a trained checkpoint into a folder that transformers and sample.py load.

    python export.py out/ckpt.pt out-hf          # (out/ works too: its ckpt.pt)

The plain GPT (model_type 'gpt', every layer of one shape) is a LLaMA-style decoder: it goes out
as transformers' LlamaForCausalLM, or Qwen3ForCausalLM with qk_norm='head' (Llama plus an RMSNorm
over each query and key head), and is loaded back to check that its logits are ours. Every other
shape goes into model.safetensors under this repo's names. Both get the tokenizer (tokenizer.json)
and shape_lab.json, what sample.py needs beside the weights; `python sample.py --out_dir=out-hf`
reads either. Tensors and JSON only: nothing in the folder runs code when it is loaded.

The folder is new, empty or an earlier export. The export writes the files named in EXPORT_FILES
in a folder beside it, then moves them in, replacing those of the same names: a failed export
changes nothing, and no other file is ever replaced or deleted.
"""

import json
import os
import sys
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError

from shapelab.checkpoint import EXPORT_INFO, load_checkpoint, to_transformers
from shapelab.configurator import usage_error
from data.sources import gpt2_tiktoken_file
from shapelab.tokenizer import GPT2_EOT, GPT2_PAT_STR
from shapes import model_from_checkpoint

USAGE = "usage: python export.py CHECKPOINT FOLDER  (CHECKPOINT: out/ckpt.pt, or the folder of it)"
EOT = "<|endoftext|>"
KEPT = ("model_type", "model_args", "meta", "config", "iter_num", "best_val_loss")  # of the run
EXPORT_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                "tokenizer_config.json", "special_tokens_map.json", EXPORT_INFO)


def transformers_class(model_type, config):
    """('LlamaForCausalLM' or 'Qwen3ForCausalLM', '') for a model transformers has, else
    (None, why not)."""
    if model_type != "gpt":
        return None, f"model_type={model_type!r} has no transformers class"
    if any(spec != config.layers[0] for spec in config.layers):
        return None, "its layers differ in shape"
    if config.qk_norm == "full":
        return None, "qk_norm='full' (one RMSNorm over all heads) has no transformers class"
    return ("Qwen3ForCausalLM" if config.qk_norm == "head" else "LlamaForCausalLM"), ""


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


def export_safetensors(model, folder):
    """model's tensors in folder/model.safetensors under this repo's names, a tied LM head stored
    once (safetensors refuses shared tensors); returns {alias: name stored}."""
    from safetensors.torch import save_file
    tied = {"lm_head.weight": "tok_emb.weight"} if model.config.tie_embeddings else {}
    save_file({name: t.contiguous() for name, t in model.state_dict().items() if name not in tied},
              folder / "model.safetensors")
    return tied


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


def write_export(model, checkpoint, folder):
    """Every file of the export in folder, checked; says what it wrote."""
    class_name, why_not = transformers_class(checkpoint["model_type"], model.config)
    info = {"weights": "transformers" if class_name else "shape_lab", "tied": {},
            "checkpoint": {k: checkpoint[k] for k in KEPT}}
    if class_name:
        diff = export_transformers(model, class_name, checkpoint["meta"], folder)
        if not diff < 1e-4:
            raise SystemExit(f"error: transformers' {class_name} computes other logits from the "
                             f"exported weights (largest difference {diff:.3g}) than this repo's "
                             f"GPT; nothing was exported")
        print(f"as {class_name}: transformers' logits are ours (largest difference {diff:.1e}); "
              f"load it with AutoModelForCausalLM.from_pretrained, score it with lm_eval")
    else:
        info["tied"] = export_safetensors(model, folder)
        print(f"no transformers class: {why_not}; the weights keep this repo's names")
    export_tokenizer(checkpoint["meta"], model.config.block_size, folder)
    (folder / EXPORT_INFO).write_text(json.dumps(info, indent=1))


def install(staging, folder):
    """The export's files from staging into folder, shape_lab.json last; a file of an earlier
    export (EXPORT_FILES) that this one does not write stops it, before anything is moved."""
    written = os.listdir(staging)
    if stale := [name for name in EXPORT_FILES if name not in written and (folder / name).exists()]:
        usage_error(f"{folder / stale[0]} is not part of this export, which writes no such file: "
                    f"remove it, or export into a new folder")
    for name in sorted(written, key=lambda name: name == EXPORT_INFO):
        os.chmod(staging / name, 0o644)  # safetensors writes for its owner only
        os.replace(staging / name, folder / name)


def main(argv):
    if len(argv) != 2 or any(a.startswith("-") for a in argv):
        usage_error(USAGE)
    source, folder = map(Path, argv)
    try:
        checkpoint = load_checkpoint(source / "ckpt.pt" if source.is_dir() else source)
    except FileNotFoundError:
        usage_error(f"no checkpoint at {source}: give export.py a ckpt.pt that train.py wrote, or "
                    f"its folder")
    if not set(KEPT) <= checkpoint.keys():
        usage_error(f"{source} is not a checkpoint of this repo's train.py")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / EXPORT_INFO).is_file():
        usage_error(f"{folder} holds other files and no export: export into a new or empty "
                    f"folder, or over an earlier export")
    try:  # staged beside the folder, so that a failed export leaves no trace
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".export-", dir=folder.parent) as staging:
            write_export(model_from_checkpoint(checkpoint).eval(), checkpoint, Path(staging))
            folder.mkdir(exist_ok=True)
            install(Path(staging), folder)
    except (OSError, SafetensorError) as e:
        usage_error(f"cannot write into {folder} ({getattr(e, 'strerror', None) or e}): give "
                    f"export.py a FOLDER you can write to, e.g. ~/out-hf")
    print(f"exported {checkpoint['model_type']} (step {checkpoint['iter_num']}) to {folder}; "
          f"sample from it: python sample.py --out_dir={folder}")


if __name__ == "__main__":
    main(sys.argv[1:])
