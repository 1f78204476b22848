"""
The training loop of the image MLPs (mlp_hourglass.py: "Rethinking the Shape Convention of an
MLP", Chen, Lee, Liao, Shiu 2025, arXiv:2510.01796), read top to bottom like train.py.

    python train_mlp.py                                    # denoising MNIST, the default hourglass
    python train_mlp.py config/mlp_mnist_sr.py --dataset=fashion_mnist --epochs=5
    python train_mlp.py config/mlp_mnist_classify.py       # generative classification + accuracy
    python train_mlp.py --eval_only=True --out_dir=out/mlp_mnist_denoise   # score its ckpt.pt

Every setting below can be set by a config file or by --key=value; a typo or a value of the wrong
type stops with one line naming it. A setting left at None takes its value from
config/mlp_<task>.py, the one place a task's protocol is written (the paper's epochs, batch, flips,
sigma and fp32; our default shape and lr). On a shared machine add --num_threads=1 (two OpenMP
threads fighting other jobs for 2 cores were ~15x slower than one, measured).

Top to bottom: settings and their checks; the data (prepared on first use by data/<name>/
prepare.py; its source is printed and saved with every result); the model and AdamW over the
trainable parameters (a frozen W_in is a buffer, not a parameter); the loop: degraded images, a
step at the linearly decaying learning rate (no warm-up), an evaluation every eval_interval steps
(0 = once per epoch) keeping the best model by validation loss (ckpt.pt, written atomically);
then the test metrics of that model beside the trivial baseline. A run writes out_dir/: data.json,
metrics.json, history.csv, samples.png and ckpt.pt. The sweep and the frozen-vs-learned W_in
comparison call `train` from experiments/mlp_hourglass_{sweep,input_proj}.py. Where each
training choice comes from (the paper / the reference code / ours): docs/mlp_hourglass.md.
"""

import csv
import json
import math
import os
import sys
import time
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from checkpoint import save_checkpoint  # temp file + rename: a kill never leaves a broken file
from configurator import ConfigError, parse_overrides, usage_error
from dataset import load_images
from hardware import auto_dtype, autocast
from image_tasks import (BASELINE_NAMES, MetricAccumulator, baseline_prediction,
                         choose_prototypes, get_task, make_batch)
from mlp_hourglass import check_shape, count_params, image_mlp

# -----------------------------------------------------------------------------------------------
# default config: denoising MNIST; a None takes config/mlp_<task>.py's value (the task's protocol)
# task and data
task = "mnist_denoise"  # mnist_denoise | mnist_sr | mnist_classify | imagenet32_denoise | ..._sr
dataset = ""  # '' = the task's: mnist (offline: the real 5k subset) | mnist5k | fashion_mnist
data_dir = ""  # raw IDX / official npz files to prepare from ('' = the usual sources)
prepared_dir = ""  # '' = data/mnist/, data/mnist/<dataset>/ or data/imagenet32/
max_train_images = 0  # 0 = every training image
noise_sigma = None  # denoising input: clamp(y + N(0, sigma^2), 0, 1) (the noise tasks only)
flips = None  # 1, 2 or 4: the training set enlarged by flips (the paper: x4 for SR, ImageNet-32)
# model: eq. (2)-(4) of the paper
shape = "hourglass"  # hourglass (d_h < d_z) | conventional (d_h > d_z)
input_proj = "frozen"  # W_in: frozen (random, never trained) | learned | identity | none
latent_dim = None  # d_z, the width of the skip path
hidden_dim = None  # d_h, the width of each block's branch
n_blocks = None  # L
# training: AdamW, linear decay to 0 without warm-up
epochs = None
max_steps = 0  # > 0: stop after this many steps (quick runs)
batch_size = None
lr = None
weight_decay = 0.01  # torch's AdamW default, as the reference code
eval_interval = None  # steps between validations; 0 = once per epoch
log_interval = 50
seed = 0  # draws W_in, the init, the data order and the noise
# I/O
out_dir = ""  # '' = out/mlp_<task>
eval_only = False  # True: score out_dir/ckpt.pt on the test split and stop
allow_other_data = False  # True: eval_only scores a checkpoint on another data source than its own
# system
device = "auto"  # auto (cuda if there is one) | cpu | cuda | cuda:<index>
dtype = None  # float32 | auto (hardware's: bf16 where native) | bfloat16 | float16 (GradScaler)
compile = False
num_threads = 0  # 0 = torch's default
# -----------------------------------------------------------------------------------------------
DEFAULTS = {k: v for k, v in globals().items() if not k.startswith("_")
            and isinstance(v, (int, float, bool, str, type(None)))}
# the keys whose default is None (= config/mlp_<task>.py's value), with their types
PROTOCOL_KEYS = dict(latent_dim=int, hidden_dim=int, n_blocks=int, epochs=float, batch_size=int,
                     lr=float, flips=int, eval_interval=int, noise_sigma=float, dtype=str)
EVAL_BATCH_SIZE = 128  # the reference code's eval / test loaders; psnr_batchmse depends on it


def task_protocol(task_name):
    """The settings of config/mlp_<task>.py: the one place a task's training protocol is written
    (the paper's epochs, batch, flips and sigma; our default shape and lr)."""
    get_task(task_name)  # an unknown task: one line naming the known ones
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config",
                        f"mlp_{task_name}.py")
    return parse_overrides([path], DEFAULTS, types=PROTOCOL_KEYS)


def resolve(config):
    """The settings a run uses: config/mlp_<task>.py's values filled into the Nones, each checked
    (one line naming the key). Returns a namespace: c.lr, c.latent_dim, ..."""
    c = SimpleNamespace(**{**DEFAULTS, **config})
    t = get_task(c.task)
    protocol = task_protocol(c.task)
    for key in PROTOCOL_KEYS:
        if getattr(c, key) is None:
            setattr(c, key, protocol[key])
    for key in ("latent_dim", "hidden_dim", "n_blocks", "batch_size", "log_interval"):
        if getattr(c, key) < 1:  # never replaced by a default, never recorded as something else
            raise ConfigError(f"--{key}={getattr(c, key)}: it must be 1 or more")
    for key in ("max_steps", "max_train_images", "num_threads", "eval_interval"):
        if getattr(c, key) < 0:
            raise ConfigError(f"--{key}={getattr(c, key)}: it must be 0 (off) or more")
    if not c.epochs > 0:
        raise ConfigError(f"--epochs={c.epochs}: it must be more than 0 (a fraction is fine)")
    if not c.lr > 0 or not c.weight_decay >= 0:
        raise ConfigError(f"--lr={c.lr}, --weight_decay={c.weight_decay}: lr must be > 0, "
                          f"weight_decay 0 or more")
    if c.flips not in (1, 2, 4):
        raise ConfigError(f"--flips={c.flips}: it must be 1, 2 or 4")
    if c.flips > 1 and t.target == "prototype":
        raise ConfigError("flip augmentation is not defined for generative classification (the "
                          "target prototype would not flip with the input); use --flips=1")
    if c.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device={c.device}: this machine has no CUDA GPU (torch "
                          f"{torch.__version__}); use --device=cpu or auto")
    if c.data_dir and not os.path.isdir(c.data_dir):
        raise ConfigError(f"--data_dir={c.data_dir}: no such folder (the raw files to prepare "
                          f"from); leave it out to use the prepared data")
    if c.device == "auto":
        c.device = "cuda" if torch.cuda.is_available() else "cpu"
    if c.dtype == "auto":  # bf16 where the hardware has it, fp16 on T4 / V100, else fp32
        c.dtype = auto_dtype(c.device.split(":")[0])
    if c.dtype not in ("bfloat16", "float16", "float32"):
        raise ConfigError(f"--dtype={c.dtype!r}: use float32, auto, bfloat16 or float16")
    c.out_dir = c.out_dir or os.path.join("out", f"mlp_{c.task}")
    check_shape(c.shape, c.latent_dim, c.hidden_dim)
    return c


def make_model(c):
    """The ImageMLP of these settings; a frozen W_in is regenerated from the seed, not stored."""
    return image_mlp(get_task(c.task), c.latent_dim, c.hidden_dim, c.n_blocks, shape=c.shape,
                     input_proj=c.input_proj, w_in_seed=c.seed)


def make_optimizer(model, c):
    """AdamW over the trainable parameters only: a frozen W_in is not in the optimizer, so neither
    the update nor the decoupled weight decay can touch it."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(trainable, lr=c.lr, weight_decay=c.weight_decay)


@torch.no_grad()
def evaluate(model, c, images, labels, prototypes, with_ssim=False, seed=1234, baseline=False):
    """Metrics on a split, its degraded inputs drawn from `seed` (the same every time).
    baseline=True scores the trivial restorer instead of the model: the noisy input (denoise),
    bicubic upsampling (SR), the input image itself (classification)."""
    t = get_task(c.task)
    was_training = model.training
    model.eval()
    g = torch.Generator(device=c.device).manual_seed(seed)
    acc = MetricAccumulator()
    protos = prototypes.to(c.device) if prototypes is not None else None
    for i in range(0, len(images), EVAL_BATCH_SIZE):
        imgs = images[i:i + EVAL_BATCH_SIZE].to(c.device)
        labs = labels[i:i + EVAL_BATCH_SIZE].to(c.device)
        x, target = make_batch(t, imgs, labs, protos, g, c.noise_sigma)
        if baseline:
            pred = baseline_prediction(t, x)
        else:
            with autocast(c.device.split(":")[0], c.dtype):
                pred = model(x)
        correct = None
        if t.target == "prototype":
            correct = torch.cdist(pred.float(), protos).argmin(1) == labs  # nearest prototype
        acc.add(pred, target, t.image_shape, with_ssim, correct)
    model.train(was_training)
    return acc.result()


def train(config, data=None, quiet=False, save=True):
    """Train one model. config: settings (a dict; missing keys take the defaults above). data:
    ImageSplits (loaded here when None). save=False writes nothing (the sweep). Returns the
    results, with the best model (by validation loss) under "model"."""
    c = resolve(config)
    t = get_task(c.task)
    say = (lambda *a: None) if quiet else print
    if c.num_threads:
        torch.set_num_threads(c.num_threads)
    if data is None:
        data = load_images(t, c.dataset, c.data_dir, c.max_train_images, c.prepared_dir)
    prototypes = choose_prototypes(data.train, data.train_labels) if t.target == "prototype" \
        else None  # generative classification: one training image per class is the target

    torch.manual_seed(c.seed)  # fixes W_in (frozen or not) and the block init
    model = make_model(c).to(c.device)
    params = count_params(model)
    say(f"model: {c.shape} d_z={c.latent_dim} d_h={c.hidden_dim} L={c.n_blocks} "
        f"W_in={c.input_proj} | params total {params['total']:,} "
        f"trainable {params['trainable']:,}")
    optimizer = make_optimizer(model, c)
    scaler = torch.amp.GradScaler(c.device.split(":")[0], enabled=c.dtype == "float16")
    amp = autocast(c.device.split(":")[0], c.dtype)  # the forward passes' precision
    forward = torch.compile(model) if c.compile else model

    n_train = len(data.train)
    steps_per_epoch = n_train * c.flips // c.batch_size
    if steps_per_epoch == 0:
        raise ConfigError(f"{n_train} training images x {c.flips} flips is less than one batch "
                          f"of {c.batch_size}")
    total_steps = max(1, round(c.epochs * steps_per_epoch))
    total_steps = min(total_steps, c.max_steps) if c.max_steps else total_steps
    eval_interval = c.eval_interval or steps_per_epoch
    noise_rng = torch.Generator(device=c.device).manual_seed(c.seed + 1)  # training noise
    order_rng = torch.Generator().manual_seed(c.seed + 2)  # data order
    protos = prototypes.to(c.device) if prototypes is not None else None
    data_record = {"dataset": data.dataset, "source": data.source, "n_train": n_train}
    if save:
        os.makedirs(c.out_dir, exist_ok=True)
        with open(os.path.join(c.out_dir, "data.json"), "w") as f:  # what this run trains on
            json.dump(data_record, f, indent=2)
    train_images = data.train.to(c.device)  # (N, C, H, W) uint8, moved once, not every step
    train_labels = data.train_labels.to(c.device)

    history, best = [], {"val_loss": math.inf, "step": 0, "state": None}
    val_psnr, loss_sum, n_loss = math.nan, 0.0, 0
    t0 = t_last = time.time()
    model.train()
    for step in range(total_steps):
        pos = step % steps_per_epoch
        if pos == 0:  # a new epoch: shuffle the (image, flip) pairs of the enlarged set
            order = torch.randperm(n_train * c.flips, generator=order_rng)
        idx = order[pos * c.batch_size:(pos + 1) * c.batch_size]
        rows = (idx % n_train).to(c.device)
        flip_codes = (idx // n_train).to(c.device) if c.flips > 1 else None
        x, target = make_batch(t, train_images[rows], train_labels[rows], protos, noise_rng,
                               c.noise_sigma, flip_codes)  # (B, d_x), (B, d_out)
        lr = c.lr * (1.0 - step / total_steps)  # linear decay to 0, no warm-up
        for group in optimizer.param_groups:
            group["lr"] = lr
        with amp:
            pred = forward(x)  # (B, d_out)
        loss = F.mse_loss(pred.float(), target)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()  # (float16: loss scaling; otherwise plain backward, step)
        scaler.step(optimizer)
        scaler.update()
        loss_sum, n_loss = loss_sum + loss.detach(), n_loss + 1  # read at evaluations: no sync

        last = step + 1 == total_steps
        if (step + 1) % eval_interval == 0 or last:
            val = evaluate(forward, c, data.val, data.val_labels, prototypes, seed=c.seed + 1000)
            val_psnr = val["psnr_batchmse"]
            history.append({"step": step + 1, "epoch": (step + 1) / steps_per_epoch, "lr": lr,
                            "train_loss": float(loss_sum) / max(n_loss, 1),
                            "val_loss": val["loss"], "val_psnr_batchmse": val_psnr,
                            "val_psnr_per_image": val["psnr_per_image"],
                            "time_s": time.time() - t0})
            loss_sum, n_loss = 0.0, 0
            if val["loss"] < best["val_loss"]:  # a NaN loss is never the best
                state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                best = {"val_loss": val["loss"], "step": step + 1, "state": state}
                if save:
                    save_checkpoint({"model": state, "config": config_record(c),
                                     "step": step + 1, "val_loss": val["loss"],
                                     "prototypes": prototypes, "data": data_record},
                                    os.path.join(c.out_dir, "ckpt.pt"))
        if (step + 1) % c.log_interval == 0 or last:
            now = time.time()
            its = ((step + 1) / (now - t0) if last else c.log_interval / (now - t_last))
            t_last = now
            left = (total_steps - step - 1) * (now - t0) / (step + 1) / 60
            val_text = "--" if math.isnan(val_psnr) else f"{val_psnr:.2f} dB"
            say(f"step {step + 1}/{total_steps} | loss {loss.item():.5f} | val psnr {val_text} | "
                f"lr {lr:.2e} | {its:.1f} it/s | ~{left:.1f} min to go")
    train_time = time.time() - t0

    if best["state"] is None:  # every validation loss was NaN (diverged): NaN metrics, no crash
        say("warning: every validation loss was NaN (the run diverged); its test metrics are NaN")
        metrics = ("loss", "psnr_batchmse", "psnr_per_image", "ssim", "accuracy")
        test = {**dict.fromkeys(metrics[:4 + (t.target == "prototype")], math.nan),
                "n_images": len(data.test)}
        best["val_loss"] = math.nan
    else:
        model.load_state_dict(best["state"])  # test the model with the lowest validation loss
        test = evaluate(model, c, data.test, data.test_labels, prototypes, with_ssim=True,
                        seed=c.seed + 2000)
    baseline = evaluate(model, c, data.test, data.test_labels, prototypes, with_ssim=True,
                        seed=c.seed + 2000, baseline=True)
    result = {"task": c.task, "data": data.source, "dataset": data.dataset,
              "config": config_record(c), "params": params, "steps": total_steps,
              "best_step": best["step"], "best_val_loss": best["val_loss"],
              "train_time_s": train_time, "it_per_s": total_steps / max(train_time, 1e-9),
              "test": test, "baseline": baseline, "baseline_name": BASELINE_NAMES[t.degradation]}
    accuracy = f", nearest-prototype accuracy {test['accuracy']:.4f}" if "accuracy" in test else ""
    say(f"test ({len(data.test)} images): psnr_batchmse {test['psnr_batchmse']:.2f} dB, "
        f"psnr_per_image {test['psnr_per_image']:.2f} dB, ssim {test['ssim']:.4f}{accuracy} | "
        f"{result['baseline_name']}: {baseline['psnr_batchmse']:.2f} dB, ssim "
        f"{baseline['ssim']:.4f} | {train_time:.0f}s")
    if save:
        with open(os.path.join(c.out_dir, "metrics.json"), "w") as f:
            json.dump(result, f, indent=2)
        write_csv(os.path.join(c.out_dir, "history.csv"), history)
        save_samples(model, c, data, protos, test)
    return {**result, "history": history, "model": model}


def config_record(c):
    """The settings as saved with a run: everything a checkpoint needs to rebuild its model."""
    return {k: getattr(c, k) for k in DEFAULTS}


def write_csv(path, rows):
    """rows (dicts) as a CSV, whole or not at all: written to a temporary file, then renamed."""
    if not rows:
        return
    keys = list(dict.fromkeys(k for row in rows for k in row))
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


@torch.no_grad()
def save_samples(model, c, data, protos, test, n=8):
    """out_dir/samples.png: rows of inputs, outputs and targets of the first n test images."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = get_task(c.task)
    ch, h, w = t.image_shape
    g = torch.Generator(device=c.device).manual_seed(c.seed + 2000)
    model.eval()
    x, target = make_batch(t, data.test[:n].to(c.device), data.test_labels[:n].to(c.device),
                           protos, g, c.noise_sigma)
    with autocast(c.device.split(":")[0], c.dtype):
        pred = model(x)
    n = x.shape[0]
    shown = x.float().cpu()
    if t.degradation == "bicubic2x":  # the low-resolution input at full size (nearest)
        shown = F.interpolate(shown.view(n, ch, h // 2, w // 2), size=(h, w)).flatten(1)
    rows = [("input", shown), ("output", pred.float().cpu()), ("target", target.float().cpu())]
    fig, axes = plt.subplots(3, n, figsize=(n * 0.9, 3 * 0.95), squeeze=False)
    for r, (name, images) in enumerate(rows):
        for j in range(n):
            image = images[j].view(ch, h, w).permute(1, 2, 0).clamp(0, 1).numpy()
            axes[r, j].imshow(image[..., 0] if ch == 1 else image, cmap="gray" if ch == 1 else None,
                              vmin=0, vmax=1)
            axes[r, j].set_xticks([])
            axes[r, j].set_yticks([])
        axes[r, 0].set_ylabel(name, fontsize=8)
    fig.suptitle(f"{c.task} {c.shape} ({c.latent_dim},{c.hidden_dim},{c.n_blocks}) test PSNR "
                 f"{test['psnr_batchmse']:.2f} dB", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(c.out_dir, "samples.png"), dpi=60)
    plt.close(fig)


def load_trained_mlp(path, device="cpu"):
    """A train_mlp.py checkpoint -> (model, settings, checkpoint dict), read weights_only=True."""
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist: train a model first (python train_mlp.py "
                          f"--out_dir={os.path.dirname(path) or '.'})") from None
    except Exception as e:  # a truncated or foreign file: torch raises several kinds
        raise ConfigError(f"{path} is not a readable checkpoint (truncated or not a torch file: "
                          f"{type(e).__name__}); train one with python train_mlp.py") from None
    if not isinstance(ckpt.get("config"), dict) or not set(ckpt["config"]) <= set(DEFAULTS):
        raise ConfigError(f"{path} is not a checkpoint of train_mlp.py (an LM checkpoint of "
                          f"train.py? sample it with sample.py)")
    c = resolve({**ckpt["config"], "device": device, "data_dir": ""})  # (no re-preparing)
    model = make_model(c)
    model.load_state_dict(ckpt["model"])
    return model.to(device), c, ckpt


def evaluate_checkpoint(config):
    """--eval_only=True: the test metrics of out_dir/ckpt.pt, printed as JSON; only on the data
    source it was trained on (a dataset's folder can change: full MNIST online, 5k offline)."""
    given = resolve(config)
    path = os.path.join(given.out_dir, "ckpt.pt")
    model, c, ckpt = load_trained_mlp(path, given.device)
    c.data_dir = config["data_dir"]  # scored on the prepared data, unless given raw files
    c.prepared_dir = config["prepared_dir"] or c.prepared_dir
    data = load_images(get_task(c.task), c.dataset, c.data_dir, c.max_train_images,
                       c.prepared_dir)
    trained = (ckpt.get("data") or {}).get("source")
    if trained != data.source:
        message = f"{path} was trained on {trained!r}, but the prepared data now is {data.source!r}"
        if not given.allow_other_data:
            raise ConfigError(f"{message}. Prepare the training source again (python "
                              f"data/mnist/prepare.py ...) or pass --prepared_dir=<the folder "
                              f"holding it>; --allow_other_data=True scores it on this data anyway")
        print(f"warning: {message} (--allow_other_data)", file=sys.stderr)
    test = evaluate(model, c, data.test, data.test_labels, ckpt.get("prototypes"),
                    with_ssim=True, seed=c.seed + 2000)
    print(json.dumps({"checkpoint": path, "step": ckpt["step"], "data": data.source,
                      "test": test}, indent=2))
    return test


def main(argv):
    try:
        config = parse_overrides(argv, DEFAULTS, types=PROTOCOL_KEYS)
        if config["eval_only"]:
            return evaluate_checkpoint(config)
        resolve(config)  # every setting checked before anything is loaded or written
        return train(config)
    except ConfigError as e:
        usage_error(e)


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)  # progress lines show up at once, even piped
    main(sys.argv[1:])
