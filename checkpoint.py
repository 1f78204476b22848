"""
Checkpoints that are never lost and never run pickled code.

- `save_checkpoint` writes to `<path>.tmp`, fsyncs it, then renames it over `<path>`.
  A rename within one directory is atomic, so a run killed mid-save leaves the previous
  checkpoint intact (and at worst a stray .tmp file, which the next save overwrites).
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
- `model_from_checkpoint` rebuilds whatever model_type the checkpoint names.
"""

import json
import os
import warnings
from pathlib import Path

import torch

from configurator import build_model


def save_checkpoint(state, path):
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


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


def load_checkpoint(path, map_location="cpu"):
    """The dict saved by save_checkpoint, loaded with weights_only=True. Raises FileNotFoundError if
    there is no file, CheckpointError (one line) if the file is empty, truncated or not ours."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: train one first (python train.py) "
                                f"or point --out_dir at the folder that holds ckpt.pt")
    size = path.stat().st_size
    todo = ("Delete it and train again (python train.py), or point --out_dir at a folder "
            "with a good ckpt.pt")
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


def model_from_checkpoint(checkpoint):
    """The model described by checkpoint['model_type'] / ['model_args'], with its weights."""
    model = build_model(checkpoint["model_type"], **checkpoint["model_args"])
    model.load_state_dict(checkpoint["model"])
    return model


# ----------------------------------------------------------------------------------------
# Resuming a run exactly (train.py): settings, RNG streams, the metrics log


def refuse_to_replace(out_dir, init_from, overwrite):
    """A scratch run never replaces a previous run in out_dir by accident."""
    previous = [name for name in ("ckpt.pt", "metrics.jsonl") if (out_dir / name).exists()]
    if init_from == "scratch" and previous and not overwrite:
        raise SystemExit(f"error: {out_dir} already holds a run ({', '.join(previous)}): continue "
                         f"it with --init_from=resume, train into another --out_dir, or pass "
                         f"--overwrite=True to replace it")


def resume_settings(path, config, given, model_keys):
    """Load the checkpoint at `path` for init_from='resume' and return (checkpoint, config), config
    updated so the model is the checkpoint's: model_type, the shape keys and model_args come from
    it. A shape key or model_args entry the user set (in `given`) to another value is refused in one
    line: the run would train one shape and save a config that names another."""
    try:
        checkpoint = load_checkpoint(path)
    except FileNotFoundError as e:
        raise SystemExit(f"error: {e}") from None
    if "model_type" not in checkpoint or "model_args" not in checkpoint:
        raise SystemExit(f"error: {path} is not a checkpoint of this repo's train.py (it has no "
                         f"model_type / model_args; keys: {', '.join(sorted(checkpoint)[:8])})")
    saved_args = checkpoint["model_args"]
    saved = {"model_type": checkpoint["model_type"],
             **{k: saved_args[k] for k in model_keys if k in saved_args}}
    model_args = config["model_args"]
    clashes = [f"{k}={config[k]!r} (the checkpoint has {saved[k]!r})" for k in saved
               if k in given and k not in model_args and config[k] != saved[k]]  # model_args wins
    if "model_args" in given:
        clashes += [f"model_args[{k!r}]={v!r} (the checkpoint has {saved_args.get(k)!r})"
                    for k, v in model_args.items() if saved_args.get(k) != v]
    if clashes:
        raise SystemExit(f"error: resuming {path} with a different model: {'; '.join(clashes)}. "
                         f"Drop these settings to resume, or train the new shape into another "
                         f"--out_dir")
    saved_config = checkpoint.get("config", {})
    config = dict(config, **saved, model_args=dict(saved_config.get("model_args", model_args)))
    return checkpoint, config


def restore_rng(checkpoint, rank, world_size, sampler, seed, device_type):
    """Give this process its batch sampler's and torch's RNG states back (as saved by every
    process at the checkpoint), so that the steps after a resume draw what the uninterrupted run
    drew. Returns a note when the number of processes changed (the run goes on, not exactly)."""
    saved_states = checkpoint["rng"]["ranks"]
    if rank < len(saved_states):
        own = saved_states[rank]
        sampler.set_state(own["sampler"])
        torch.set_rng_state(own["torch"])
        if device_type == "cuda" and "cuda" in own:
            torch.cuda.set_rng_state(own["cuda"])
    else:  # more processes than saved: a fresh stream of its own, not another rank's batches
        sampler.manual_seed(seed + rank + 7919 * checkpoint["iter_num"])
        torch.manual_seed(seed + rank + 7919 * checkpoint["iter_num"])
    if len(saved_states) != world_size:
        return (f"note: the checkpoint holds the RNG states of {len(saved_states)} process(es), "
                f"this run has {world_size}: it continues, but not exactly as the saved run would")
    return None


def all_rng_states(sampler_state, device_type, ddp):
    """Every process's RNG states (its batch sampler's, torch's for dropout, CUDA's), gathered for
    rank 0's checkpoint: a list indexed by rank."""
    states = {"sampler": sampler_state, "torch": torch.get_rng_state()}
    if device_type == "cuda":
        states["cuda"] = torch.cuda.get_rng_state()
    if not ddp:
        return [states]
    gathered = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, states)
    return gathered


def drop_repeated_metrics(path, iter_num):
    """A resume trains the steps after its checkpoint again: drop the rows a killed run logged for
    them (a row of step iter_num itself stays only if it is the evaluation the checkpoint saved)."""
    if not path.exists():
        return
    rows = [line for line in path.read_text().splitlines() if line.strip()]
    kept = [line for line in rows if (r := json.loads(line))["iter"] < iter_num
            or (r["iter"] == iter_num and "loss" not in r)]
    if len(kept) < len(rows):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in kept))
        os.replace(tmp, path)


def log_metrics(path, record):
    """Append one row (a JSON object) to the run's metrics.jsonl."""
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def diverged(step, what, out_dir, last_good_step, config):
    """The one message that ends a diverged run: what went wrong, what to try, and the last good
    checkpoint, if there is one (only finite losses and weights are ever saved)."""
    if last_good_step is not None and (out_dir / "ckpt.pt").exists():
        good = f"The last good checkpoint is {out_dir / 'ckpt.pt'} (step {last_good_step})."
    else:
        good = "No good checkpoint was saved (only finite losses and weights are ever saved)."
    return SystemExit(f"step {step}: {what}. Training diverged; try a lower learning_rate (now "
                      f"{config['learning_rate']}), more warmup_iters (now "
                      f"{config['warmup_iters']}), grad_clip=1.0, "
                      f"or dtype='bfloat16' instead of float16. {good}")
