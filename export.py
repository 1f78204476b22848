"""
Export a trained checkpoint into a folder that other tools (and other people) can load.

    python export.py out/ckpt.pt out-hf          # (out/ works too: its ckpt.pt)

The plain GPT (model_type 'gpt') is a LLaMA-style decoder, and transformers has it: it is
written as LlamaForCausalLM (Qwen3ForCausalLM with qk_norm='head': Qwen3 is Llama plus an
RMSNorm over each query and key head), config.json and model.safetensors, the same tensors under
transformers' names. export.py loads the folder back with transformers and checks that its
logits are ours before it says done. Then:

    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained("out-hf")       # and AutoTokenizer, the same
    lm_eval --model hf --model_args pretrained=out-hf --tasks hellaswag   # lm-evaluation-harness
    hf upload <you>/<name> out-hf                                # share it on the Hub

Every other shape (hourglass, ><former, CEA, LWS, composed; a GPT with qk_norm='full' or layers
of different shapes) has no transformers class: its weights go into model.safetensors under this
repo's names, and `python sample.py --out_dir=out-hf` reads the folder back (so does sample.py
for an exported plain GPT).

Both: the tokenizer as transformers' tokenizer.json (GPT-2's BPE, built from the ranks the
prepare script saved, or the character vocabulary: one token per character), and shape_lab.json,
what sample.py needs beside the weights (the shape, the data's meta.json, the run's settings).
Tensors and JSON only: nothing in the folder runs code when it is loaded.
"""

import json
import sys
from pathlib import Path

import torch

from shapelab.checkpoint import EXPORT_INFO, load_checkpoint, to_transformers
from shapelab.configurator import usage_error
from shapelab.tokenizer import GPT2_EOT, GPT2_PAT_STR, Tokenizer, gpt2_ranks_path
from shapes import model_from_checkpoint

USAGE = "usage: python export.py CHECKPOINT FOLDER  (CHECKPOINT: out/ckpt.pt, or the folder of it)"
EOT = "<|endoftext|>"


def transformers_class(model_type, config):
    """('LlamaForCausalLM' or 'Qwen3ForCausalLM', '') for a model transformers has, else
    (None, why not)."""
    if model_type != "gpt":
        return None, f"model_type={model_type!r} has no transformers class"
    if any(spec != config.layers[0] for spec in config.layers):
        return None, "its layers differ in shape"
    if config.qk_norm == "full":  # (OLMo-2 has it, but normalizes after each sublayer, not before)
        return None, "qk_norm='full' (one RMSNorm over all heads) has no transformers class"
    return ("Qwen3ForCausalLM" if config.qk_norm == "head" else "LlamaForCausalLM"), ""


def transformers_config(class_name, config, meta):
    """The transformers config of the plain GPT `config` (model.GPTConfig): every choice model.py
    makes, in transformers' words (RoPE's theta, RMSNorm's eps, tied head, GQA, head size)."""
    import transformers
    spec = config.layers[0]
    eot = GPT2_EOT if meta["tokenizer"] == "gpt2" else None
    settings = dict(
        vocab_size=config.vocab_size, hidden_size=config.n_embd, num_hidden_layers=config.n_layer,
        intermediate_size=spec.ffn_hidden, num_attention_heads=spec.n_head,
        num_key_value_heads=spec.n_kv_head, head_dim=spec.head_dim, hidden_act="silu",
        max_position_embeddings=config.block_size, rms_norm_eps=config.norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": config.rope_theta},
        tie_word_embeddings=config.tie_embeddings, attention_bias=False, bos_token_id=eot,
        eos_token_id=eot, dtype="float32")
    if class_name == "LlamaForCausalLM":
        return transformers.LlamaConfig(**settings, mlp_bias=False)
    return transformers.Qwen3Config(**settings, use_sliding_window=False)


def export_transformers(model, class_name, meta, folder):
    """model (the plain GPT) as transformers' class_name in folder; returns the files written."""
    import transformers
    transformers.utils.logging.disable_progress_bar()  # (its bars for a one-file model: noise)
    config = model.config
    hf_model = getattr(transformers, class_name)(transformers_config(class_name, config, meta))
    spec = config.layers[0]
    hf_model.load_state_dict(to_transformers(model.state_dict(), spec.n_head * spec.head_dim,
                                             spec.n_kv_head * spec.head_dim))
    hf_model.save_pretrained(folder)
    written = json.loads((folder / "config.json").read_text())  # + where transformers 4 reads it:
    (folder / "config.json").write_text(json.dumps({**written, "rope_theta": config.rope_theta},
                                                   indent=2))
    return ["config.json", "generation_config.json", "model.safetensors"]


def check_transformers(model, folder):
    """The largest |difference| between the exported model's logits, as transformers computes
    them, and ours, on one block of random tokens (float32)."""
    from transformers import AutoModelForCausalLM
    hf_model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    idx = torch.randint(model.config.vocab_size, (2, model.config.block_size),
                        generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours, _ = model(idx, targets=idx)
        theirs = hf_model(idx).logits
    return (ours - theirs).abs().max().item()


def export_safetensors(model, folder):
    """model's state dict in folder/model.safetensors under this repo's names. A tensor shared by
    two names (a tied LM head) is stored once; returns {alias: name stored}."""
    from safetensors.torch import save_file
    stored, tied = {}, {}
    for name, tensor in model.state_dict().items():
        where = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tensor.shape)
        if where in stored:
            tied[name] = stored[where]
        else:
            stored[where] = name
    state = {name: t.contiguous() for name, t in model.state_dict().items() if name not in tied}
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    return tied


def export_tokenizer(meta, block_size, folder):
    """The tokenizer of the run (its data's meta.json) as transformers' tokenizer.json; checked
    against ours on a sample. Returns the files written, or a note why none was."""
    from tokenizers import Tokenizer as Backend, decoders, models
    from transformers import PreTrainedTokenizerFast
    special = {}
    if meta["tokenizer"] == "char":
        ours = Tokenizer.char(meta["chars"])
        backend = Backend(models.BPE(vocab={c: i for i, c in enumerate(meta["chars"])}, merges=[]))
        backend.decoder = decoders.Fuse()  # characters join without spaces
        sample = meta["chars"]
    else:
        if not gpt2_ranks_path().exists():
            return (f"no tokenizer written: GPT-2's ranks are not in {gpt2_ranks_path()}; run "
                    f"python data/shakespeare/prepare.py (it saves them), then export again")
        from transformers.convert_slow_tokenizer import TikTokenConverter
        ours = Tokenizer.gpt2()
        backend = TikTokenConverter(vocab_file=str(gpt2_ranks_path()), pattern=GPT2_PAT_STR,
                                    extra_special_tokens=[EOT]).converted()
        special = dict(bos_token=EOT, eos_token=EOT)
        sample = f"ROMEO:\nBut soft, what light through yonder window breaks?{EOT} It's 1592.\n"
    # model_max_length: the context the model was trained on (a harness truncates to it)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, model_max_length=block_size,
                                        **special)
    if tokenizer.encode(sample) != ours.encode(sample):
        return "no tokenizer written: transformers' version of it encodes differently"
    tokenizer.save_pretrained(folder)
    settings = json.loads((folder / "tokenizer_config.json").read_text())  # (a class name that
    settings["tokenizer_class"] = "PreTrainedTokenizerFast"  # transformers 4 knows too)
    (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=2))
    return ["tokenizer.json", "tokenizer_config.json"]


def prepare_folder(folder):
    """folder, new or empty, or a previous export's (whose files go first): never a folder that
    holds anything else."""
    if folder.exists() and not folder.is_dir():
        usage_error(f"{folder} is a file: name a folder to export into")
    previous = folder / EXPORT_INFO
    if previous.is_file():
        files = json.loads(previous.read_text()).get("files", [])
        previous.unlink()  # first: a half-replaced export is never taken for a whole one
        for name in files:
            (folder / Path(name).name).unlink(missing_ok=True)
    if folder.is_dir() and any(folder.iterdir()):
        usage_error(f"{folder} holds other files: export into a new or empty folder (or over an "
                    f"earlier export)")
    folder.mkdir(parents=True, exist_ok=True)


def main(argv):
    if argv in (["-h"], ["--help"]):
        print(__doc__.strip())
        return
    if len(argv) != 2 or any(a.startswith("-") for a in argv):
        usage_error(USAGE)
    source, folder = Path(argv[0]), Path(argv[1])
    if source.is_dir():
        source = source / "ckpt.pt"
    try:
        checkpoint = load_checkpoint(source)
    except FileNotFoundError as e:
        raise SystemExit(f"error: {e}") from None
    kept = ("model_type", "model_args", "meta", "config", "iter_num", "best_val_loss")
    if not all(k in checkpoint for k in (*kept, "model")):
        raise SystemExit(f"error: {source} is not a checkpoint of this repo's train.py")
    model = model_from_checkpoint(checkpoint).eval()
    prepare_folder(folder)
    class_name, why_not = transformers_class(checkpoint["model_type"], model.config)
    info = {"weights": "transformers" if class_name else "shape_lab", "tied": {},
            "checkpoint": {k: checkpoint[k] for k in kept}}
    if class_name:
        files = export_transformers(model, class_name, checkpoint["meta"], folder)
        diff = check_transformers(model, folder)
        if not diff < 1e-4:
            raise SystemExit(f"error: transformers' {class_name} computes other logits from the "
                             f"exported weights (largest difference {diff:.3g}) than this repo's "
                             f"GPT; the export in {folder} is incomplete")
    else:
        info["tied"], files = export_safetensors(model, folder), ["model.safetensors"]
    tokenizer = export_tokenizer(checkpoint["meta"], model.config.block_size, folder)
    files += tokenizer if isinstance(tokenizer, list) else []
    info["files"] = [*files, EXPORT_INFO]
    (folder / EXPORT_INFO).write_text(json.dumps(info, indent=1))  # last: the export is whole
    print(f"exported {checkpoint['model_type']} (step {checkpoint['iter_num']}, val loss "
          f"{checkpoint['best_val_loss']:.4f}) to {folder}: {', '.join(info['files'])}")
    if isinstance(tokenizer, str):
        print(f"note: {tokenizer}")
    print(f"sample from it: python sample.py --out_dir={folder}")
    if not class_name:
        print(f"(no transformers class: {why_not}; the weights keep this repo's names)")
        return
    print(f"as {class_name}: transformers' logits are ours (largest difference {diff:.1e})\n"
          f"load it: AutoModelForCausalLM.from_pretrained({str(folder)!r}); score it: lm_eval "
          f"--model hf --model_args pretrained={folder} --tasks <task>")


if __name__ == "__main__":
    main(sys.argv[1:])
