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

The folder: new, empty, or an earlier export's. A re-export replaces only the files the earlier
one's shape_lab.json names (a model card or other file of yours stays) and never believes a
shape_lab.json it did not write; the new files are written beside, then moved in, so a failed
export leaves the folder as it was.

Past its context (block_size tokens), transformers' generate goes on at positions the model never
trained on (transformers warns), while sample.py keeps to the last block_size tokens: from there
on their texts differ. Generate at most block_size tokens in all for the same text from both.
"""

import errno
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError

from shapelab.checkpoint import EXPORT_INFO, CheckpointError, load_checkpoint, to_transformers
from shapelab.configurator import usage_error
from shapelab.tokenizer import GPT2_EOT, GPT2_PAT_STR, Tokenizer, gpt2_ranks_path
from shapes import model_from_checkpoint

USAGE = "usage: python export.py CHECKPOINT FOLDER  (CHECKPOINT: out/ckpt.pt, or the folder of it)"
EOT = "<|endoftext|>"
KEPT = ("model_type", "model_args", "meta", "config", "iter_num", "best_val_loss")  # of the run
EXPORT_FORMAT = 1  # shape_lab.json's export_format: how export.py knows a manifest of its own
MANIFEST_KEYS = {"export_format", "weights", "tied", "checkpoint", "files"}


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
    """model (the plain GPT) as transformers' class_name in folder."""
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
    against ours on a sample. Returns None, or a note why none was written."""
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
    # (verbose=False: a sample longer than a tiny model's context is no cause for a warning)
    if tokenizer.encode(sample, verbose=False) != ours.encode(sample):
        return "no tokenizer written: transformers' version of it encodes differently"
    tokenizer.save_pretrained(folder)
    settings = json.loads((folder / "tokenizer_config.json").read_text())  # (a class name that
    settings["tokenizer_class"] = "PreTrainedTokenizerFast"  # transformers 4 knows too)
    (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=2))
    return None


def plain_name(name):
    """Whether name is a file name of its own: no folder, no path separator, no '..'."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "\0" not in name
            and not any(sep in name for sep in ("/", "\\", os.sep, os.altsep) if sep))


def earlier_export(folder):
    """The files of an earlier export in folder, as its manifest (shape_lab.json) names them ([]:
    no manifest). Only export.py's own manifest is believed - a dict of its keys and format,
    naming plain files of folder, itself among them; any other stops in one line, before anything
    is deleted."""
    manifest = folder / EXPORT_INFO
    if not (manifest.exists() or manifest.is_symlink()):
        return []

    def foreign(why):
        usage_error(f"{manifest} is not a manifest this export.py wrote ({why}), so nothing was "
                    f"deleted: remove the earlier export yourself, or export into a new folder")

    try:
        info = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        foreign(f"{type(e).__name__}: {getattr(e, 'strerror', None) or str(e)[:80]}")
    if not isinstance(info, dict) or info.get("export_format") != EXPORT_FORMAT:
        foreign(f"no export_format {EXPORT_FORMAT}: another program's, or an older export")
    if not MANIFEST_KEYS <= info.keys():
        foreign(f"it lacks {', '.join(sorted(MANIFEST_KEYS - info.keys()))}")
    files = info["files"]
    if not isinstance(files, list) or not all(plain_name(name) for name in files):
        foreign("its files are not a list of file names in the folder")
    if EXPORT_INFO not in files:
        foreign(f"its files do not name {EXPORT_INFO}")
    if folders := [name for name in files if (folder / name).is_dir()]:
        foreign(f"it names a folder, {folders[0]}")
    return files


def prepare_folder(folder):
    """Check folder before anything is written: new, empty, or holding an earlier export (and
    maybe files of the user's, which stay); never a file, a foreign manifest or a folder of other
    files. Returns the earlier export's files and whether folder was made here."""
    if folder.exists() and not folder.is_dir():
        usage_error(f"{folder} is a file: name a folder to export into")
    made = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        cannot_write(folder, e)
    earlier = earlier_export(folder)
    if not earlier and (others := sorted(p.name for p in folder.iterdir())):
        usage_error(f"{folder} holds other files ({', '.join(others[:3])}"
                    f"{', ...' if len(others) > 3 else ''}) and no export: export into a new or "
                    f"empty folder (or over an earlier export)")
    return earlier, made


def cannot_write(folder, error):
    """The one line of a folder the export cannot be written into (read-only, no room, ...)."""
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        usage_error(f"cannot write into {folder} ({error.strerror}): give export.py a FOLDER you "
                    f"can write to, e.g. python export.py CHECKPOINT ~/out-hf")
    raise SystemExit(f"error: writing the export into {folder} failed ({error.strerror or error}): "
                     f"export again once that is mended") from None


def install(staging, folder, earlier):
    """Move the finished export from staging into folder, in place of the earlier export's files:
    its manifest goes first and comes back last, so a half-replaced export is never taken for a
    whole one. A file of the user's is never replaced nor deleted. Returns the files kept."""
    written = sorted(p.name for p in staging.iterdir())
    if clash := [name for name in written if name not in earlier and (
            (folder / name).exists() or (folder / name).is_symlink())]:
        usage_error(f"{folder / clash[0]} is not a file of the earlier export, and the export "
                    f"writes one of that name; nothing was changed. Move it, or export into a new "
                    f"folder")
    for name in written:  # (safetensors writes its file for its owner only: the export is shared)
        os.chmod(staging / name, 0o644)
    if EXPORT_INFO in earlier:  # first: a half-replaced export is never taken for a whole one
        (folder / EXPORT_INFO).unlink()
    for name in written:
        if name != EXPORT_INFO:
            os.replace(staging / name, folder / name)
    for name in set(earlier) - set(written):  # the earlier export's files this one lacks
        (folder / name).unlink(missing_ok=True)
    os.replace(staging / EXPORT_INFO, folder / EXPORT_INFO)  # last: the export is whole
    return sorted({p.name for p in folder.iterdir()} - {*written, staging.name})


def write_export(model, checkpoint, folder):
    """Every file of the export of checkpoint's model (built: `model`) in folder, the manifest
    last. Returns (the transformers class or None, why none, the largest logit difference, the
    tokenizer's note or None)."""
    class_name, why_not = transformers_class(checkpoint["model_type"], model.config)
    info = {"export_format": EXPORT_FORMAT, "weights": "transformers" if class_name else
            "shape_lab", "tied": {}, "checkpoint": {k: checkpoint[k] for k in KEPT}}
    diff = None
    if class_name:
        export_transformers(model, class_name, checkpoint["meta"], folder)
        diff = check_transformers(model, folder)
        if not diff < 1e-4:
            raise SystemExit(f"error: transformers' {class_name} computes other logits from the "
                             f"exported weights (largest difference {diff:.3g}) than this repo's "
                             f"GPT; nothing was exported")
    else:
        info["tied"] = export_safetensors(model, folder)
    note = export_tokenizer(checkpoint["meta"], model.config.block_size, folder)
    # every file written, whichever transformers wrote them: what a re-export replaces
    info["files"] = [*sorted(p.name for p in folder.iterdir()), EXPORT_INFO]
    (folder / EXPORT_INFO).write_text(json.dumps(info, indent=1))
    return class_name, why_not, diff, note


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
        if not all(k in checkpoint for k in (*KEPT, "model")):
            raise SystemExit(f"error: {source} is not a checkpoint of this repo's train.py")
        model = model_from_checkpoint(checkpoint).eval()
    except FileNotFoundError:
        usage_error(f"no checkpoint at {source}: give export.py a ckpt.pt that train.py wrote (or "
                    f"its folder), e.g. python export.py out/ckpt.pt out-hf")
    except CheckpointError as e:  # (its advice names --out_dir: export.py's is CHECKPOINT)
        raise SystemExit(f"error: {e.code.replace('point --out_dir at', 'give export.py')}") \
            from None
    earlier, made = prepare_folder(folder)
    staging = None
    try:  # (written beside the folder's files, then moved in: nothing changes until it is whole)
        staging = Path(tempfile.mkdtemp(prefix=".export-", dir=folder))
        class_name, why_not, diff, note = write_export(model, checkpoint, staging)
        kept = install(staging, folder, earlier)
    except (OSError, SafetensorError) as e:
        cannot_write(folder, e if isinstance(e, OSError) else OSError(str(e)))
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
        if made and not any(folder.iterdir()):  # (a folder made here for an export that failed)
            folder.rmdir()
    files = json.loads((folder / EXPORT_INFO).read_text())["files"]
    print(f"exported {checkpoint['model_type']} (step {checkpoint['iter_num']}, val loss "
          f"{checkpoint['best_val_loss']:.4f}) to {folder}: {', '.join(files)}")
    if kept:
        print(f"kept in {folder}, not the export's: {', '.join(kept)}")
    if note:
        print(f"note: {note}")
    print(f"sample from it: python sample.py --out_dir={folder}")
    if not class_name:
        print(f"(no transformers class: {why_not}; the weights keep this repo's names)")
        return
    print(f"as {class_name}: transformers' logits are ours (largest difference {diff:.1e})\n"
          f"load it: AutoModelForCausalLM.from_pretrained({str(folder)!r}); score it: lm_eval "
          f"--model hf --model_args pretrained={folder} --tasks <task>")


if __name__ == "__main__":
    main(sys.argv[1:])
