"""
Checkpoint files: written whole or not at all (a temporary file renamed over the old one), read
with torch.load(weights_only=True), so a checkpoint from someone else cannot run code. They load
to the CPU. to_transformers gives export.py the plain GPT's weights in transformers' names.
"""

import os
import warnings
from pathlib import Path

import torch


class CheckpointError(SystemExit):
    """A checkpoint that exists but cannot be used: one line, exit status 1."""


def write_atomic(path, data, write=None):
    """Write `data` as the file `path`, whole or not at all: text or bytes, or whatever
    `write(data, file)` writes."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            if write is None:
                f.write(data.encode() if isinstance(data, str) else data)
            else:
                write(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def save_checkpoint(state, path):
    write_atomic(path, state, torch.save)


def load_checkpoint(path, map_location="cpu", trainer="train.py"):
    """The dict save_checkpoint wrote, loaded with weights_only=True; FileNotFoundError if there
    is no file, CheckpointError (one line) if it is damaged or not a checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: train one first (python {trainer}) "
                                f"or point --out_dir at the folder that holds ckpt.pt")
    try:
        with warnings.catch_warnings():  # another program's pickle: one line, not torch's warning
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # truncated, empty, another program's pickle, ...
        state = e
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} is damaged or not a checkpoint ({type(state).__name__}; "
                              f"only tensors and plain containers are ever loaded): delete it "
                              f"and train again (python {trainer}), or point --out_dir at a "
                              f"folder with a good ckpt.pt")
    return state


EXPORT_INFO = "shape_lab.json"  # beside model.safetensors: the shape, the tokenizer, the run
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
    """The plain GPT's state dict in the names of transformers' LlamaForCausalLM / Qwen3: the
    same tensors, qkv_proj split into rows of q_dim, kv_dim, kv_dim."""
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
