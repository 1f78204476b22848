"""
The training loop of the image MLPs (mlp_hourglass.py: "Rethinking the Shape Convention of an
MLP", Chen, Lee, Liao, Shiu 2025, arXiv:2510.01796), read top to bottom like train.py.

    python train_mlp.py                                    # denoising MNIST, the default hourglass
    python train_mlp.py config/mlp_mnist_sr.py --dataset=fashion_mnist --epochs=5

A setting left at None takes its value from config/mlp_<task>.py, the task's protocol. AdamW at a
linearly decaying learning rate; the best model by validation loss is tested beside the trivial
baseline. The run folder is train.py's (shapelab/run.py); --init_from=resume on a finished run
tests its checkpoint again.
"""

import json
import math
import os
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from mlp_hourglass import check_shape, count_params, image_mlp, input_projection
from shapelab.checkpoint import write_atomic
from shapelab.configurator import (ConfigError, check_device, check_rules, need, parse_overrides,
                                   usage_error)
from shapelab.images import load_images
from shapelab.hardware import auto_dtype, autocast, pick_device
from shapelab.image_tasks import (BASELINE_NAMES, MetricAccumulator, baseline_prediction,
                                  choose_prototypes, flips_of_copies, get_task, make_batch)
from shapelab.run import RunDir, all_finite, start_run

# -----------------------------------------------------------------------------------------------
# default config: denoising MNIST; a None takes config/mlp_<task>.py's value
# task and data
task = "mnist_denoise"  # mnist_denoise | mnist_sr | mnist_classify | imagenet32_denoise | ..._sr
dataset = ""  # '' = the task's: mnist | fashion_mnist | imagenet32
data_dir = ""  # raw IDX / npz files to prepare from ('' = the usual sources)
prepared_dir = ""  # '' = data/mnist/, data/mnist/<dataset>/ or data/imagenet32/
max_train_images = 0  # 0 = every training image
noise_sigma = None  # denoising input: clamp(y + N(0, sigma^2), 0, 1)
flips = None  # 1, 2 or 4: the set enlarged by flips (x2: none and both, x4: all four)
# model: eq. (2)-(4) of the paper
shape = "hourglass"  # hourglass (d_h < d_z) | conventional (d_h > d_z)
input_proj = ""  # '' = the shape's own (hourglass: frozen_random, conventional: direct)
latent_dim = None  # d_z, the width of the skip path
hidden_dim = None  # d_h, the width of each block's branch
n_blocks = None  # L
# training: AdamW, linear decay to 0 without warm-up
epochs = None
max_iters = 0  # > 0: stop after this many steps
batch_size = None
learning_rate = None
weight_decay = 0.01  # torch's AdamW default, as the reference code's
eval_interval = None  # steps between validations; 0 = once per epoch
seed = 0  # draws W_in, the init, the data order and the noise
# I/O
out_dir = ""  # '' = out/mlp_<task>
init_from = "scratch"  # 'scratch' or 'resume' (from out_dir/ckpt.pt)
overwrite = False  # True: a scratch run deletes the run already in out_dir at its start
# system
device = "auto"  # auto (cuda > mps > cpu) | cpu | cuda | cuda:<index> | mps
dtype = None  # float32 | auto (bf16 where native, else fp32) | bfloat16
num_threads = 0  # 0 = torch's default
# -----------------------------------------------------------------------------------------------
DEFAULTS = {k: v for k, v in globals().items() if not k.startswith("_")
            and isinstance(v, (int, float, bool, str, type(None)))}
# the keys whose default is None (config/mlp_<task>.py's value), with their types
PROTOCOL_KEYS = dict(latent_dim=int, hidden_dim=int, n_blocks=int, epochs=float, batch_size=int,
                     learning_rate=float, flips=int, eval_interval=int, noise_sigma=float,
                     dtype=str)
EVAL_BATCH_SIZE = 128  # the reference code's: psnr_batchmse depends on it
# a resume: where and how it runs is this invocation's; the model and the data it sees are the run's
NOT_RESUMED = ("out_dir", "init_from", "overwrite", "num_threads", "data_dir", "prepared_dir")
SHAPE_KEYS = ("task", "dataset", "shape", "input_proj", "latent_dim", "hidden_dim", "n_blocks",
              "seed", "flips", "noise_sigma", "max_train_images", "batch_size",
              "device")


RULES = [  # (keys, what each must be, the one line's words)
    ("latent_dim hidden_dim n_blocks batch_size", lambda v: v >= 1,
     "it must be 1 or more"),
    ("max_iters max_train_images num_threads eval_interval weight_decay noise_sigma",
     lambda v: v is None or 0 <= v < math.inf, "it must be 0 or more, a finite number"),
    ("epochs learning_rate", lambda v: 0 < v < math.inf, "it must be more than 0, a finite number"),
    ("init_from", lambda v: v in ("scratch", "resume"), "use scratch or resume"),
    ("flips", lambda v: v in (1, 2, 4), "it must be 1, 2 or 4"),
    ("dtype", lambda v: v in ("float32", "auto", "bfloat16"), "use float32, auto or bfloat16")]


def task_protocol(task_name):
    """The settings of config/mlp_<task>.py, the task's training protocol."""
    get_task(task_name)  # an unknown task: one line
    path = Path(__file__).resolve().parent / "config" / f"mlp_{task_name}.py"
    return parse_overrides([str(path)], DEFAULTS, types=PROTOCOL_KEYS)


def resolve(config):
    """The settings a run uses, the task's protocol filled into the Nones, each checked in one
    line: a namespace."""
    c = SimpleNamespace(**{**DEFAULTS, **config})
    protocol = task_protocol(c.task)
    for key in PROTOCOL_KEYS:
        if getattr(c, key) is None:
            setattr(c, key, protocol[key])
    check_rules(vars(c), RULES)
    need(c.flips == 1 or get_task(c.task).target != "prototype", "flips are not defined for "
         "generative classification (the target prototype would not flip): use --flips=1")
    check_device(c.device)
    need(not c.data_dir or os.path.isdir(c.data_dir), f"--data_dir={c.data_dir}: no such folder")
    c.device = pick_device(c.device)
    if c.dtype == "auto":  # no GradScaler here: fp32 where bf16 is not native
        c.dtype = "bfloat16" if auto_dtype(c.device.split(":")[0]) == "bfloat16" else "float32"
    c.out_dir = c.out_dir or os.path.join("out", f"mlp_{c.task}")
    check_shape(c.shape, c.latent_dim, c.hidden_dim)
    c.input_proj = input_projection(c.input_proj, c.shape, c.latent_dim,
                                    get_task(c.task).input_dim)
    return c


def portable_source(source):
    """A data source as results record it, the same in every checkout: a path in it becomes its
    part from data/<name>/ on, or else its last name (.../<name>)."""
    def short(match):
        path = match.group(0)
        inside = re.search(r"^.*/(data/\w+/.*)$", path)
        return inside.group(1) if inside else ".../" + path.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"(?<![^\s(])/[^\s,()]+", short, source)


def make_model(c):
    """The ImageMLP of these settings; a frozen W_in is drawn again from the seed, not stored."""
    return image_mlp(get_task(c.task), c.latent_dim, c.hidden_dim, c.n_blocks, shape=c.shape,
                     input_proj=c.input_proj, w_in_seed=c.seed)


def make_optimizer(model, c):
    """AdamW over the trainable parameters only: a frozen W_in gets no update, no weight decay."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(trainable, lr=c.learning_rate, weight_decay=c.weight_decay)


@torch.no_grad()
def evaluate(model, c, data, split, prototypes, baseline=False):
    """Metrics on data's "val" or "test" split, its degraded inputs the same every time;
    baseline=True scores the trivial restorer (the noisy input, bicubic upsampling, the input)."""
    t = get_task(c.task)
    images, labels = getattr(data, split), getattr(data, f"{split}_labels")
    model.eval()
    g = torch.Generator(device=c.device).manual_seed(c.seed + (1000 if split == "val" else 2000))
    acc = MetricAccumulator()
    for i in range(0, len(images), EVAL_BATCH_SIZE):
        labs = labels[i:i + EVAL_BATCH_SIZE].to(c.device)
        x, target = make_batch(t, images[i:i + EVAL_BATCH_SIZE].to(c.device), labs, prototypes, g,
                               c.noise_sigma)
        if baseline:
            pred = baseline_prediction(t, x)
        else:
            with autocast(c.device.split(":")[0], c.dtype):
                pred = model(x)
        correct = None
        if t.target == "prototype":
            correct = torch.cdist(pred.float(), prototypes).argmin(1) == labs  # nearest prototype
        acc.add(pred, target, t.image_shape, split == "test", correct)  # SSIM on test only
    model.train()
    return acc.result()


def train(config, data=None, quiet=False, run=None, given=None, results=True):
    """Train one model: the results, with the best model (by validation loss) under "model".
    data: ImageSplits (None: loaded); run: out_dir's RunDir (None: nothing written); given: the
    keys the command line set; results=False: no result.json."""
    c, checkpoint = resolve(config), None
    if run is not None:  # the lock, the refusals and the resume of train.py
        run, checkpoint, settings = start_run(vars(c), DEFAULTS if given is None else given,
                                              SHAPE_KEYS, run, "train_mlp.py", ["best"],
                                              NOT_RESUMED)
        c = resolve(settings)
    ends = run or RunDir(c.out_dir, lock=False)  # how a diverged run ends
    t = get_task(c.task)
    say = (lambda *a: None) if quiet else print
    if c.num_threads:
        torch.set_num_threads(c.num_threads)
    if data is None:
        data = load_images(t, c.dataset, c.data_dir, c.max_train_images, c.prepared_dir)
    data_record = {"dataset": data.dataset, "source": portable_source(data.source),
                   "n_train": len(data.train)}
    trained = checkpoint and checkpoint["data"]
    need(trained in (None, data_record), f"{c.out_dir} was trained on {trained}, but the data now "
         f"is {data_record}: pass --prepared_dir=<the folder holding it>")
    # generative classification: one training image per class is the target
    prototypes = (choose_prototypes(data.train, data.train_labels).to(c.device)
                  if t.target == "prototype" else None)

    torch.manual_seed(c.seed)  # W_in and the init
    model = make_model(c).to(c.device)
    params = count_params(model)
    say(f"{c.shape} d_z={c.latent_dim} d_h={c.hidden_dim} L={c.n_blocks} W_in={c.input_proj}: "
        f"{params['trainable']:,} of {params['total']:,} parameters trained")
    optimizer = make_optimizer(model, c)

    n_train = len(data.train)
    steps_per_epoch = n_train * c.flips // c.batch_size
    need(steps_per_epoch > 0, f"batch_size={c.batch_size}: more than the {n_train} training "
         f"images x {c.flips} flips")
    total_steps = min(max(1, round(c.epochs * steps_per_epoch)), c.max_iters or math.inf)
    noise_rng = torch.Generator(device=c.device).manual_seed(c.seed + 1)  # training noise
    order_rng = torch.Generator().manual_seed(c.seed + 2)  # data order
    train_images, train_labels = data.train.to(c.device), data.train_labels.to(c.device)

    start, elapsed_before = 0, 0.0
    best = {"val_loss": math.inf, "iter": 0, "state": None}
    if checkpoint is not None:  # where the run stopped: weights, AdamW, data order, noise
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        noise_rng.set_state(checkpoint["noise_rng"])
        order = checkpoint["order"]  # this epoch's, and the generator past it
        order_rng.set_state(checkpoint["order_rng"])
        start, elapsed_before, best = (checkpoint[k] for k in ("iter_num", "elapsed_s", "best"))
        run.drop_repeated_metrics(start)
        say(f"resuming from {run.ckpt} at step {start} of {total_steps}")
    elif run is not None and c.overwrite:  # every setting, the data and the model checked
        run.remove_previous_run("result.json")
    checkpoint = None  # free memory

    t0 = time.time()
    run_start = t0 - elapsed_before  # the time counts across resumes
    model.train()
    for iter_num in range(start, total_steps):
        pos = iter_num % steps_per_epoch
        if pos == 0:  # a new epoch: shuffle the (image, flip) pairs of the enlarged set
            order = torch.randperm(n_train * c.flips, generator=order_rng)
        idx = order[pos * c.batch_size:(pos + 1) * c.batch_size]
        rows = (idx % n_train).to(c.device)
        flips = flips_of_copies((idx // n_train).to(c.device), c.flips) if c.flips > 1 else None
        x, target = make_batch(t, train_images[rows], train_labels[rows], prototypes, noise_rng,
                               c.noise_sigma, flips)  # (B, d_x), (B, d_out)
        lr = c.learning_rate * (1.0 - iter_num / total_steps)  # linear decay to 0, no warm-up
        for group in optimizer.param_groups:
            group["lr"] = lr
        with autocast(c.device.split(":")[0], c.dtype):
            pred = model(x)  # (B, d_out)
        loss = F.mse_loss(pred.float(), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

        step = iter_num + 1
        if step % (c.eval_interval or steps_per_epoch) == 0 or step == total_steps:
            val = evaluate(model, c, data, "val", prototypes)
            if not (math.isfinite(loss.item() + val["loss"]) and all_finite(model)):
                raise ends.diverged(step, f"the losses are {loss.item()}, {val['loss']} (val)",
                                    f"a lower --learning_rate (now {c.learning_rate})")
            its = (step - start) / (time.time() - t0)
            say(f"step {step}/{total_steps}: loss {loss.item():.5f}, val loss {val['loss']:.5f}, "
                f"psnr {val['psnr_batchmse']:.2f} dB, lr {lr:.2e}, {its:.1f} it/s, "
                f"~{(total_steps - step) / its / 60:.1f} min to go")
            if run is not None:
                run.log(dict(iter=step, epoch=step / steps_per_epoch, lr=lr, val_loss=val["loss"],
                             val_psnr_batchmse=val["psnr_batchmse"],
                             elapsed_s=round(time.time() - run_start, 2)))
            if val["loss"] < best["val_loss"]:
                state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                best = {"val_loss": val["loss"], "iter": step, "state": state}
            if run is not None:  # the best model so far, and the state a resume goes on from
                run.save(dict(model=model.state_dict(), optimizer=optimizer.state_dict(),
                              noise_rng=noise_rng.get_state(), order=order,
                              order_rng=order_rng.get_state(), best=best, config=vars(c).copy(),
                              data=data_record, iter_num=step,
                              elapsed_s=time.time() - run_start))
    train_time = time.time() - run_start

    model.load_state_dict(best["state"])  # test the model with the lowest validation loss
    test, baseline = (evaluate(model, c, data, "test", prototypes, baseline)
                      for baseline in (False, True))
    result = {"config": vars(c).copy(), "data": data_record, "params": params,
              "steps": total_steps, "best_iter": best["iter"], "best_val_loss": best["val_loss"],
              "train_time_s": train_time, "test": test, "baseline": baseline}
    accuracy = f", nearest-prototype accuracy {test['accuracy']:.4f}" if "accuracy" in test else ""
    say(f"test: psnr {test['psnr_batchmse']:.2f} dB, ssim {test['ssim']:.4f}{accuracy} | "
        f"{BASELINE_NAMES[t.degradation]}: {baseline['psnr_batchmse']:.2f} dB | {train_time:.0f}s")
    if run is not None and results:
        write_atomic(run.dir / "result.json", json.dumps(result, indent=2))
    return {**result, "model": model}


def main(argv, catch_signals=False):
    try:
        given = set()  # the keys the command line sets
        config = parse_overrides(argv, DEFAULTS, types=PROTOCOL_KEYS, given=given)
        c = resolve(config)  # every setting checked before anything is loaded or written
        need(c.init_from == "scratch" or os.path.isfile(os.path.join(c.out_dir, "ckpt.pt")),
             f"--init_from=resume: there is no {c.out_dir}/ckpt.pt to resume")
        run = RunDir(c.out_dir)
        if catch_signals:
            run.catch_signals()
        return train(config, run=run, given=given)
    except ConfigError as e:
        usage_error(e)


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    main(sys.argv[1:], catch_signals=True)
