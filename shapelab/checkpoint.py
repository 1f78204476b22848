"""
A checkpoint file: saving it and loading it (the model it holds is rebuilt by
shapes.model_from_checkpoint, which knows every model type). Checkpoints here are
never lost and never run pickled code. (What keeps a training run safe around them - the locked
out_dir, the time plan, resume settings, RNG states - is run.py's.)

- `save_checkpoint` writes to `<path>.tmp.<pid>`, fsyncs it, then renames it over `<path>`.
  A rename within one directory is atomic, so a run killed mid-save leaves the previous
  checkpoint intact; a save cut short by an error, Ctrl-C or SIGTERM removes its temp file (a
  kill -9 leaves one, which the next save removes). A disk that fills up raises DiskFull, one
  line saying what is intact. `write_atomic` writes any other whole file (results, records,
  figures) the same way: every file the repo writes whole goes through it.
- `load_checkpoint` uses `torch.load(weights_only=True)`: only tensors and plain Python
  containers are unpickled, so a checkpoint from someone else cannot execute code.
  That is why everything we store (model arguments, the training config, RNG states)
  is kept as plain dicts, lists, numbers, strings and tensors.
  A file it cannot read (empty, truncated, another program's pickle, not a dict) raises
  CheckpointError, a SystemExit: uncaught, it prints one line and no traceback,
  "<path> (N bytes) is corrupt or truncated: <why>. <what to do>". It never suggests
  loading with weights_only=False, which would run whatever code the file holds.
- `load_checkpoint` reads to the CPU by default, and train.py and sample.py keep it that way: the
  RNG states inside are CPU ByteTensors, which torch.set_rng_state / Generator.set_state and
  torch.cuda.set_rng_state require (mapped to a GPU they raise), and sample.py never needs the
  optimizer state on the device. What must move (the model; the optimizer state, which
  optimizer.load_state_dict moves to its parameters' device) moves after loading.
- `load_export` reads a folder export.py wrote (model.safetensors and shape_lab.json: tensors
  and JSON only, in transformers' names for a plain GPT) as a checkpoint, for sample.py.
"""

import errno
import json
import os
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch


class _RecordedWrites:
    """A file whose write errors are kept: torch.save wraps an OSError from the disk into a
    RuntimeError that no longer says which ('... unexpected pos 704 vs 598' for a full disk)."""

    def __init__(self, file):
        self.file, self.error = file, None

    def write(self, data):
        try:
            return self.file.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self):
        self.file.flush()


class DiskFull(SystemExit):
    """Saving or logging failed for lack of space: one line, what failed and what is intact."""


NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # a full disk, a quota, the file size limit


def no_room(error, folder):
    """(what happened, what to do) for a DiskFull message of an OSError of NO_ROOM in folder."""
    if error.errno == errno.EFBIG:  # (Python ignores SIGXFSZ: the write fails instead)
        return f"the file size limit (ulimit -f) was reached in {folder}", "Raise it (ulimit -f)"
    return f"no space left on the disk of {folder}", "Free some space"


@contextmanager
def _replacing(path):
    """A temporary file beside `path` (`<path>.tmp.<pid>`) to write; renamed over `path` (atomic
    within a folder) once the block ends without an error, and removed whatever ends it (an
    error, Ctrl-C, SIGTERM), so `path` is always whole: the previous file or the new one."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path, data, then="run the same command again"):
    """Write `data` (text or bytes) as the file `path`, whole or not at all (a temporary file
    renamed over it). A disk that fills up raises DiskFull, one line: the file is left as it was,
    free some space, then `then` (the command that goes on)."""
    path = Path(path)
    try:
        with _replacing(path) as tmp, open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
    except OSError as e:
        if e.errno not in NO_ROOM:
            raise
        what, todo = no_room(e, path.parent)
        raise DiskFull(f"error: {what} writing {path} (left as it was): {todo.lower()}, then "
                       f"{then}") from None


def save_checkpoint(state, path, previous=""):
    """Write `state` to `<path>.tmp.<pid>`, fsync it, then rename it over `path` (atomic within a
    folder): a run killed mid-save, or a disk that fills up, leaves the previous file intact.
    `previous` says what that previous file is (e.g. 'step 500'), for the disk-full message."""
    path = Path(path)
    for stale in path.parent.glob(path.name + ".tmp*"):  # left by a killed run (one writer: locked)
        stale.unlink(missing_ok=True)
    try:
        with _replacing(path) as tmp, open(tmp, "wb") as f:  # (closed before the rename)
            recorded = _RecordedWrites(f)
            try:
                torch.save(state, recorded)
                f.flush()
                os.fsync(f.fileno())
            except (OSError, RuntimeError) as e:
                raise (recorded.error or e) from None
    except OSError as e:
        if e.errno not in NO_ROOM:
            raise
        intact = (f"the previous {path.name} ({previous}) is intact" if previous and path.exists()
                  else f"nothing was written to {path}")
        what, todo = no_room(e, path.parent)
        raise DiskFull(f"error: {what} while saving {path.name}: {intact}. {todo}, then continue "
                       f"the run with --init_from=resume") from None


class CheckpointError(SystemExit):
    """A checkpoint file that exists but cannot be used. A SystemExit, so that train.py, sample.py
    and the experiments print its one-line message and exit 1 without a traceback."""


def _why_unreadable(error):
    """A short reason for a torch.load failure, without torch's hint to pass weights_only=False."""
    if "Weights only load failed" in str(error):
        return ("it holds Python objects other than tensors and plain containers (a pickle "
                "written by another program?), and those are never unpickled here because they "
                "can run code")
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if "weights_only" in first or "weights only" in first.lower():
        first = ""
    first = first[:120] + ("..." if len(first) > 120 else "")
    return f"torch.load failed with {type(error).__name__}" + (f" ({first})" if first else "")


def load_checkpoint(path, map_location="cpu", trainer="train.py"):
    """The dict saved by save_checkpoint, loaded with weights_only=True. Raises FileNotFoundError if
    there is no file, CheckpointError (one line) if the file is empty, truncated or not ours.
    `trainer`: the script that writes such checkpoints, named in the messages."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: train one first (python {trainer}) "
                                f"or point --out_dir at the folder that holds ckpt.pt")
    size = path.stat().st_size
    todo = (f"Delete it and train again (python {trainer}), or point --out_dir at a folder "
            f"with a good ckpt.pt")
    if size == 0:
        raise CheckpointError(f"{path} ({size} bytes) is corrupt or truncated: the file is empty. "
                              f"{todo}")
    try:
        with warnings.catch_warnings():  # a foreign pickle also draws torch's protocol warning
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            state = torch.load(path, map_location=map_location, weights_only=True)
    except (PermissionError, IsADirectoryError) as e:
        raise CheckpointError(f"{path} ({size} bytes) cannot be read: {e}") from None
    except Exception as e:  # a damaged file: EOFError, RuntimeError, OSError, UnpicklingError, ...
        raise CheckpointError(f"{path} ({size} bytes) is corrupt or truncated: "
                              f"{_why_unreadable(e)}. {todo}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} ({size} bytes) is corrupt or truncated: it holds a "
                              f"{type(state).__name__}, not the dict a checkpoint is. {todo}")
    return state


# ----------------------------------------------------------------------------------------
# An exported folder (export.py): the weights in safetensors, read back here for sample.py

EXPORT_INFO = "shape_lab.json"  # beside model.safetensors: the shape, the tokenizer, the run
# the plain GPT's names -> transformers' Llama / Qwen3 names: per layer, and outside the layers
# (the fused W_q|W_k|W_v and W_1|W_3 are split apart, see to_transformers)
LAYER_NAMES = {"attn.norm.weight": "input_layernorm.weight",
               "attn.attn.out_proj.weight": "self_attn.o_proj.weight",
               "attn.attn.q_norm.weight": "self_attn.q_norm.weight",
               "attn.attn.k_norm.weight": "self_attn.k_norm.weight",
               "ffn.norm.weight": "post_attention_layernorm.weight",
               "ffn.mlp.out_proj.weight": "mlp.down_proj.weight"}
OUTER_NAMES = {"tok_emb.weight": "model.embed_tokens.weight", "norm_f.weight": "model.norm.weight",
               "lm_head.weight": "lm_head.weight"}


def to_transformers(state, q_dim, kv_dim):
    """The plain GPT's state dict in the names of transformers' LlamaForCausalLM (and of
    Qwen3ForCausalLM, which adds q_norm / k_norm): qkv_proj split into q_proj, k_proj, v_proj (rows
    q_dim, kv_dim, kv_dim) and gate_up_proj into gate_proj, up_proj. The tensors are the same: RoPE
    rotates the halves of each head in both, and both norms are RMSNorm with a gain."""
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


def from_transformers(state):
    """to_transformers undone: transformers' names back to the plain GPT's (a tied LM head, which
    transformers does not store, is the embedding)."""
    ours = {v: k for k, v in OUTER_NAMES.items()}
    layer_names = {v: k for k, v in LAYER_NAMES.items()}
    out = {}
    for name, tensor in state.items():
        if not name.startswith("model.layers."):
            out[ours[name]] = tensor
            continue
        i, rest = name.removeprefix("model.layers.").split(".", 1)
        if rest in layer_names:
            out[f"blocks.{i}.{layer_names[rest]}"] = tensor
    for i in {name.split(".")[2] for name in state if name.startswith("model.layers.")}:
        layer = f"model.layers.{i}."
        out[f"blocks.{i}.attn.attn.qkv_proj.weight"] = torch.cat(
            [state[f"{layer}self_attn.{part}_proj.weight"] for part in "qkv"])
        out[f"blocks.{i}.ffn.mlp.gate_up_proj.weight"] = torch.cat(
            [state[f"{layer}mlp.gate_proj.weight"], state[f"{layer}mlp.up_proj.weight"]])
    out.setdefault("lm_head.weight", out["tok_emb.weight"])
    return out


def is_export(folder):
    return (Path(folder) / EXPORT_INFO).is_file() and not (Path(folder) / "ckpt.pt").exists()


def load_export(folder):
    """A folder export.py wrote, as the dict load_checkpoint returns (model_type, model_args,
    model, meta, config, iter_num, best_val_loss), so that sample.py reads both alike. The
    weights are tensors only (safetensors), in transformers' names for a model exported as one."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    try:
        info = json.loads((folder / EXPORT_INFO).read_text())
        state = load_file(folder / "model.safetensors")
        if info["weights"] == "transformers":
            state = from_transformers(state)
        for alias, source in info.get("tied", {}).items():  # stored once, under source's name
            state[alias] = state[source]
        return {**info["checkpoint"], "model": state}
    except (OSError, ValueError, KeyError, TypeError, SafetensorError) as e:
        raise CheckpointError(f"{folder} is not a whole export of export.py ({type(e).__name__}: "
                              f"{str(e)[:120]}): export the checkpoint again") from None
