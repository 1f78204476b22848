"""Tests for mlp_hourglass.py: parameter counts from the paper, the frozen lift, shape checks,
degradations, metrics against closed forms, the IDX / npz loaders on fixtures written in the
official formats, and a tiny denoiser that must beat the noisy input. CPU, offline, a few seconds."""
import gzip
import math
import os
import struct
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import mlp_hourglass as M  # noqa: E402


# ---------------------------------------------------------------- parameters (paper Tables 1-2, sec. 4.3)

@pytest.mark.parametrize("name,dx,dout,dz,dh,L,paper_total,paper_trainable", M.PAPER_PARAM_ROWS)
def test_param_counts_match_paper(name, dx, dout, dz, dh, L, paper_total, paper_trainable):
    formula = M.param_formula(dx, dz, dh, L, dout, input_proj="frozen")
    assert round(formula["total"] / 1e6, 2) == paper_total
    if paper_trainable is not None:
        assert round(formula["trainable"] / 1e6, 2) == paper_trainable
    shape = "hourglass" if dh < dz else "conventional"
    with torch.device("meta"):       # count a real module without allocating 30M floats
        model = M.ImageMLP(dx, dout, dz, dh, L, shape=shape, input_proj="frozen")
    counted = M.count_params(model)
    assert counted["total"] == formula["total"]
    assert counted["trainable"] == formula["trainable"] == formula["total"] - dx * dz
    assert counted["input_proj"] == dx * dz
    with torch.device("meta"):
        learned = M.ImageMLP(dx, dout, dz, dh, L, shape=shape, input_proj="learned")
    assert M.count_params(learned)["trainable"] == formula["total"]


def test_section_4_3_trainable_counts():
    # (d_z, d_h, L) = (3546, 270, 5) on ImageNet-32 denoising: 20.47M fixed vs 31.36M trainable
    fixed = M.param_formula(3072, 3546, 270, 5, 3072, "frozen")
    learned = M.param_formula(3072, 3546, 270, 5, 3072, "learned")
    assert round(fixed["trainable"] / 1e6, 2) == 20.47
    assert round(learned["trainable"] / 1e6, 2) == 31.36
    assert M.param_formula(784, 784, 2048, 1, 784, "none")["total"] == 2 * 784 * 2048 + 784 * 784


# ---------------------------------------------------------------- synthetic data (digit-like images)

def bar_templates(seed=123, size=28):
    """Ten 'digit' templates (uint8): two or three bright bars each on a black background."""
    rng = np.random.default_rng(seed)
    tmpl = np.zeros((10, 1, size, size), dtype=np.uint8)
    for k in range(10):
        for _ in range(rng.integers(2, 4)):
            r, c = rng.integers(4, size - 8, size=2)
            if rng.random() < 0.5:
                tmpl[k, 0, r:r + 3, c:c + rng.integers(6, 14)] = 255
            else:
                tmpl[k, 0, r:r + rng.integers(6, 14), c:c + 3] = 255
    return tmpl


def digit_like(n, seed):
    """n images: the template of a random class at a random brightness in [0.6, 1]."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=n)
    scale = rng.uniform(0.6, 1.0, size=(n, 1, 1, 1))
    imgs = (bar_templates()[labels] * scale).round().astype(np.uint8)
    return torch.from_numpy(imgs), torch.from_numpy(labels).long()


def digit_splits(n_train=768, n_val=128, n_test=256):
    return M.ImageSplits("synthetic bar digits", *digit_like(n_train, 0), *digit_like(n_val, 1),
                         *digit_like(n_test, 2))


def tiny_config(tmp_path, **kw):
    base = dict(task="mnist_denoise", latent_dim=1024, hidden_dim=64, n_blocks=2, batch_size=64, lr=1e-3,
                max_steps=8, eval_interval=4, dtype="float32", device="cpu", out_dir=str(tmp_path),
                save_checkpoint=False, save_samples=False, quiet=True)
    base.update(kw)
    return M.TrainConfig(**base)


# ---------------------------------------------------------------- frozen W_in

def test_frozen_input_projection_not_in_optimizer_and_unchanged(tmp_path):
    cfg = M.resolve_config(tiny_config(tmp_path))
    torch.manual_seed(cfg.seed)
    initial = M.build_model(cfg).lift.weight.detach().clone()

    model = M.build_model(cfg)
    optimizer = M.make_optimizer(model, cfg)
    in_opt = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert id(model.lift.weight) not in in_opt
    assert all(id(p) in in_opt for n, p in model.named_parameters() if not n.startswith("lift"))

    res = M.train(cfg, digit_splits())
    trained = res["model"]
    assert torch.equal(trained.lift.weight, initial)            # bit-identical after 8 AdamW steps
    assert not torch.equal(trained.out_proj.weight, M.build_model(cfg).out_proj.weight)

    # the same run with a learned W_in does move it (so the check above can fail)
    res_learned = M.train(tiny_config(tmp_path, input_proj="learned"), digit_splits())
    assert not torch.equal(res_learned["model"].lift.weight, initial)


# ---------------------------------------------------------------- shapes and bad input

def test_hourglass_and_conventional_shape_checks():
    M.ImageMLP(784, 784, 1024, 64, 2, shape="hourglass")
    M.ImageMLP(784, 784, 784, 2048, 1, shape="conventional")
    with pytest.raises(ValueError, match="d_h < d_z"):
        M.ImageMLP(784, 784, 1024, 1024, 2, shape="hourglass")
    with pytest.raises(ValueError, match="d_h < d_z"):
        M.ImageMLP(784, 784, 1024, 2048, 2, shape="hourglass")
    with pytest.raises(ValueError, match="d_h > d_z"):
        M.ImageMLP(784, 784, 1024, 512, 2, shape="conventional")
    with pytest.raises(ValueError, match="unknown shape"):
        M.ImageMLP(784, 784, 1024, 64, 2, shape="diamond")
    with pytest.raises(ValueError, match="latent_dim == input_dim"):
        M.ImageMLP(784, 784, 1024, 64, 2, input_proj="none")
    with pytest.raises(ValueError, match="unknown task"):
        M.get_task("cifar_denoise")
    with pytest.raises(ValueError, match="flip augmentation"):
        M.resolve_config(M.TrainConfig(task="mnist_classify", flips=4))
    assert M.sweep_grid([1024], [64, 2048], [2], [784], [512, 2048], [1]) == [
        ("hourglass", 1024, 64, 2), ("conventional", 784, 2048, 1)]


def test_forward_shapes_and_range_for_every_input_projection():
    x = torch.rand(5, 196)
    for proj, dz in (("frozen", 512), ("learned", 512), ("identity", 512), ("none", 196)):
        shape = "hourglass" if proj != "none" else "conventional"
        dh = 32 if shape == "hourglass" else 400
        y = M.ImageMLP(196, 784, dz, dh, 2, shape=shape, input_proj=proj)(x)
        assert y.shape == (5, 784) and y.min() >= 0 and y.max() <= 1


# ---------------------------------------------------------------- degradations

def test_degradations_shapes_and_ranges():
    g = torch.Generator().manual_seed(0)
    grey = torch.full((64, 1, 28, 28), 0.5)
    noisy = M.add_gaussian_noise(grey, 0.25, g)
    assert noisy.shape == grey.shape and noisy.min() >= 0 and noisy.max() <= 1
    assert abs(noisy.mean().item() - 0.5) < 0.005            # clamping is symmetric around 0.5
    assert 0.2 < noisy.std().item() < 0.25                   # ... and shrinks the spread a little
    mild = M.add_gaussian_noise(grey, 0.1, g)                # 5 sigma from both clamps: pure N(0, 0.1^2)
    assert abs(mild.std().item() - 0.1) < 0.002
    white = M.add_gaussian_noise(torch.ones(8, 3, 32, 32), 0.25, g)
    assert white.max() <= 1 and white.min() >= 0 and (white == 1).float().mean() > 0.45

    img = torch.rand(4, 3, 32, 32)
    low = M.bicubic_downsample(img, 2)
    assert low.shape == (4, 3, 16, 16) and low.min() >= 0 and low.max() <= 1
    const = M.bicubic_downsample(torch.full((2, 1, 28, 28), 0.3), 2)
    assert torch.allclose(const, torch.full((2, 1, 14, 14), 0.3), atol=1e-6)
    with pytest.raises(ValueError, match="divisible"):
        M.bicubic_downsample(torch.rand(1, 1, 27, 27), 2)

    codes = torch.tensor([0, 1, 2, 3])
    x = torch.rand(4, 1, 5, 5)
    f = M.flip_images(x, codes)
    assert torch.equal(f[0], x[0]) and torch.equal(f[1], x[1].flip(-1))
    assert torch.equal(f[2], x[2].flip(-2)) and torch.equal(f[3], x[3].flip(-1).flip(-2))

    imgs_u8, labels = digit_like(6, 0)
    protos = torch.rand(10, 784)
    for name, dx in (("mnist_denoise", 784), ("mnist_sr", 196), ("mnist_classify", 784)):
        task = M.get_task(name)
        assert task.input_dim == dx and task.output_dim == 784
        xb, tb = M.make_batch(task, imgs_u8, labels, protos, torch.Generator().manual_seed(0))
        assert xb.shape == (6, dx) and tb.shape == (6, 784)
        assert xb.min() >= 0 and xb.max() <= 1
    assert torch.equal(tb, protos[labels])                 # classification targets are the prototypes
    assert M.get_task("imagenet32_sr").input_dim == 768 and M.get_task("imagenet32_denoise").input_dim == 3072


def test_bicubic_matches_pil_resize():
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    a = rng.random((32, 32)).astype(np.float32)
    ref = np.asarray(Image.fromarray(a, mode="F").resize((16, 16), Image.BICUBIC))
    ours = M.F.interpolate(torch.from_numpy(a)[None, None].double(), size=(16, 16), mode="bicubic",
                           antialias=True, align_corners=False)[0, 0].numpy()
    assert np.abs(ours - ref).max() < 1e-5


# ---------------------------------------------------------------- metrics

def test_psnr_closed_forms_and_conventions():
    t = torch.full((4, 784), 0.5)
    acc = M.MetricAccumulator()
    acc.add(t + 0.1, t)                                    # MSE 0.01 -> 20 dB
    r = acc.result()
    assert r["psnr_batchmse"] == pytest.approx(20.0, abs=1e-4)
    assert r["psnr_per_image"] == pytest.approx(20.0, abs=1e-4)

    # two images with MSE 1e-2 and 1e-4: per-image mean (20 + 40) / 2 = 30 dB, batch MSE 5.05e-3
    pred = torch.stack([torch.full((100,), 0.6), torch.full((100,), 0.51)])
    target = torch.full((2, 100), 0.5)
    acc = M.MetricAccumulator()
    acc.add(pred, target)
    r = acc.result()
    assert r["psnr_per_image"] == pytest.approx(30.0, abs=1e-4)
    assert r["psnr_batchmse"] == pytest.approx(10 * math.log10(1 / 5.05e-3), abs=1e-4)

    # batch-MSE PSNR is a batch-size-weighted mean over batches
    acc = M.MetricAccumulator()
    acc.add(torch.full((3, 10), 0.6), torch.full((3, 10), 0.5))    # 20 dB, 3 images
    acc.add(torch.full((1, 10), 0.51), torch.full((1, 10), 0.5))   # 40 dB, 1 image
    assert acc.result()["psnr_batchmse"] == pytest.approx((3 * 20 + 40) / 4, abs=1e-4)


def test_ssim_closed_forms():
    x = torch.rand(3, 1, 28, 28)
    assert torch.allclose(M.ssim(x, x), torch.ones(3, dtype=torch.float64), atol=1e-10)
    c1 = (0.01) ** 2
    for a, b in ((0.2, 0.7), (0.0, 1.0), (0.5, 0.55)):
        s = M.ssim(torch.full((1, 3, 32, 32), a, dtype=torch.float64), torch.full((1, 3, 32, 32), b, dtype=torch.float64))
        assert s.item() == pytest.approx((2 * a * b + c1) / (a * a + b * b + c1), rel=1e-9)
    # contrast-inverted image: the structure term is -1 where the local variance dominates
    inv = M.ssim(x, 1 - x)
    assert (inv < 0).all()
    w = M.gaussian_window()
    assert w.shape == (11, 11) and w.sum().item() == pytest.approx(1.0)
    assert w[5, 5] / w[5, 6] == pytest.approx(math.exp(1 / (2 * 1.5 ** 2)))


# ---------------------------------------------------------------- loaders on official-format fixtures

def write_idx(path, array):
    """IDX as published: 0x00 0x00, dtype 0x08 (uint8), ndim, big-endian dims, raw bytes."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(">" + "I" * array.ndim, *array.shape)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_idx_reader_and_28x28_loader(tmp_path):
    rng = np.random.default_rng(0)
    tr = rng.integers(0, 256, size=(120, 28, 28), dtype=np.uint8)
    trl = rng.integers(0, 10, size=120).astype(np.uint8)
    te = rng.integers(0, 256, size=(30, 28, 28), dtype=np.uint8)
    tel = rng.integers(0, 10, size=30).astype(np.uint8)
    write_idx(str(tmp_path / "train-images-idx3-ubyte.gz"), tr)
    write_idx(str(tmp_path / "train-labels-idx1-ubyte.gz"), trl)
    write_idx(str(tmp_path / "t10k-images-idx3-ubyte"), te)          # one uncompressed, as some mirrors have
    write_idx(str(tmp_path / "t10k-labels-idx1-ubyte.gz"), tel)
    assert np.array_equal(M.read_idx(str(tmp_path / "train-images-idx3-ubyte.gz")), tr)
    assert np.array_equal(M.read_idx(str(tmp_path / "t10k-labels-idx1-ubyte.gz")), tel)

    splits = M.load_28x28("fashion_mnist", data_dir=str(tmp_path), cache_dir=str(tmp_path / "cache"))
    assert "local IDX" in splits.source
    assert splits.train.shape == (100, 1, 28, 28) and splits.val.shape == (20, 1, 28, 28)
    assert splits.test.shape == (30, 1, 28, 28) and splits.train.dtype == torch.uint8
    assert torch.equal(splits.test[:, 0], torch.from_numpy(te))
    # the train / val split is a permutation of the official training set
    seen = torch.cat([splits.train, splits.val]).flatten(1).numpy()
    assert sorted(map(bytes, seen)) == sorted(map(bytes, tr.reshape(120, -1)))

    bad = tmp_path / "bad-idx"
    bad.write_bytes(b"\x12\x34\x08\x01\x00\x00\x00\x02ab")
    with pytest.raises(ValueError, match="not an IDX"):
        M.read_idx(str(bad))
    short = tmp_path / "short-idx"
    short.write_bytes(bytes([0, 0, 8, 1]) + struct.pack(">I", 5) + b"abc")
    with pytest.raises(ValueError, match="header says"):
        M.read_idx(str(short))


def test_imagenet32_npz_loader(tmp_path, monkeypatch):
    monkeypatch.setattr(M, "_reachable", lambda *a, **k: False)       # never touch the network
    with pytest.raises(FileNotFoundError, match="Imagenet32_train_npz"):
        M.load_imagenet32(str(tmp_path))

    def batch(n, offset):
        data = np.empty((n, 3072), dtype=np.uint8)
        data[:, :1024], data[:, 1024:2048], data[:, 2048:] = 10, 20, 30    # R, G, B planes
        data[:, 0] = np.arange(n) + offset                                    # tag each image
        return data, list(range(1, n + 1))                                     # labels 1..n
    (tmp_path / "Imagenet32_train_npz").mkdir()
    (tmp_path / "Imagenet32_val_npz").mkdir()
    for i, (n, off) in enumerate(((6, 0), (4, 100)), start=1):
        d, lab = batch(n, off)
        np.savez(tmp_path / "Imagenet32_train_npz" / f"train_data_batch_{i}.npz", data=d, labels=lab,
                 mean=d.mean(0))
    d, lab = batch(10, 200)
    np.savez(tmp_path / "Imagenet32_val_npz" / "val_data.npz", data=d, labels=lab)

    s = M.load_imagenet32(str(tmp_path))
    assert s.train.shape == (10, 3, 32, 32) and s.train.dtype == torch.uint8
    assert (s.train[:, 1] == 20).all() and (s.train[:, 2] == 30).all()
    assert s.train[:, 0, 0, 0].tolist() == [0, 1, 2, 3, 4, 5, 100, 101, 102, 103]   # batch order kept
    assert s.train_labels.tolist() == [0, 1, 2, 3, 4, 5, 0, 1, 2, 3]                 # labels - 1
    assert len(s.val) == 5 and len(s.test) == 5
    assert sorted(s.val[:, 0, 0, 0].tolist() + s.test[:, 0, 0, 0].tolist()) == list(range(200, 210))
    assert len(M.load_imagenet32(str(tmp_path), max_train_images=7).train) == 7


# ---------------------------------------------------------------- training end to end

def test_tiny_denoiser_beats_noisy_input_and_checkpoint_roundtrip(tmp_path):
    cfg = tiny_config(tmp_path, max_steps=100, eval_interval=50, save_checkpoint=True)
    res = M.train(cfg, digit_splits())
    gain = res["test"]["psnr_batchmse"] - res["baseline"]["psnr_batchmse"]
    assert res["baseline_name"] == "noisy input"
    assert gain > 3.0, (res["test"], res["baseline"])
    assert res["test"]["ssim"] > res["baseline"]["ssim"]

    model, loaded_cfg, ckpt = M.load_checkpoint(str(tmp_path / "ckpt.pt"))
    assert loaded_cfg.latent_dim == 1024 and ckpt["step"] == res["best_step"]
    x = torch.rand(4, 784)
    model.eval()
    res["model"].eval()
    assert torch.equal(model(x), res["model"](x))
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_generative_classification_reports_accuracy(tmp_path):
    res = M.train(tiny_config(tmp_path, task="mnist_classify", max_steps=60, eval_interval=30), digit_splits())
    assert res["test"]["accuracy"] > 0.9 and "ssim" in res["test"]       # ten well-separated classes
    assert res["test"]["psnr_batchmse"] > res["baseline"]["psnr_batchmse"]


def test_pareto_front():
    pts = [(10, 20.0), (5, 18.0), (20, 19.0), (30, 25.0), (5, 17.0)]
    assert M.pareto_front(pts) == [(5, 18.0), (10, 20.0), (30, 25.0)]
