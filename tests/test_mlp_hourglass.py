"""Tests for mlp_hourglass.py: parameter counts from the paper, shape checks, the builder,
degradations, prototypes, metrics against closed forms, the shape table of `python
mlp_hourglass.py`,
and the file's imports. The data scripts are tested in test_mlp_data.py, training / sweep /
checkpoints in test_train_mlp.py. CPU, offline, a few seconds."""
import ast
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import mlp_hourglass as M  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "experiments"))
import mlp_hourglass_tables as tables  # noqa: E402


# --------------------------------------------------------- parameters (paper Tables 1-2, sec. 4.3)


@pytest.mark.parametrize(
    "name,dx,dout,dz,dh,L,paper_total,paper_trainable", tables.PAPER_PARAM_ROWS
)
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
    with pytest.raises(ValueError, match="n_blocks"):
        M.ImageMLP(784, 784, 1024, 64, 0)
    with pytest.raises(ValueError, match="latent_dim >= input_dim"):
        M.ImageMLP(784, 784, 512, 64, 2, input_proj="identity")


def test_build_model_takes_dims_from_the_task():
    model = M.build_model("mnist_sr")                       # the task's default (2048, 128, 4)
    assert (model.input_dim, model.output_dim) == (196, 784)
    assert (model.latent_dim, model.hidden_dim, model.n_blocks) == (2048, 128, 4)
    assert model.lift.weight.shape == (2048, 196) and not model.lift.weight.requires_grad
    conv = M.build_model("mnist_denoise", 784, 2048, 1, shape="conventional", input_proj="learned")
    assert conv.lift.weight.requires_grad and len(conv.blocks) == 1
    assert (
        M.count_params(conv)["trainable"]
        == M.param_formula(784, 784, 2048, 1, 784, "learned")["total"]
    )
    with torch.device("meta"):
        # the paper's (3546, 270, 5): 31.36M / 20.47M
        big = M.build_model("imagenet32_denoise")
    p = M.count_params(big)
    assert (round(p["total"] / 1e6, 2), round(p["trainable"] / 1e6, 2)) == (31.36, 20.47)


def test_forward_shapes_and_range_for_every_input_projection():
    x = torch.rand(5, 196)
    for proj, dz in (("frozen", 512), ("learned", 512), ("identity", 512), ("none", 196)):
        shape = "hourglass" if proj != "none" else "conventional"
        dh = 32 if shape == "hourglass" else 400
        y = M.ImageMLP(196, 784, dz, dh, 2, shape=shape, input_proj=proj)(x)
        assert y.shape == (5, 784) and y.min() >= 0 and y.max() <= 1


def test_frozen_w_in_is_a_buffer_regenerated_from_its_seed():
    """The paper's memory argument (section 3.2): a frozen random W_in need not be stored. It is a
    non-persistent buffer rebuilt from its seed: not a parameter (nothing can unfreeze it), not in
    state_dict or a checkpoint, yet counted in the total as the paper's tables count it."""
    torch.manual_seed(0)
    rng_before = torch.get_rng_state()
    a = M.InputProjection(196, 512, seed=7)
    # its own generator, not the global RNG
    assert torch.equal(torch.get_rng_state(), rng_before)
    # regenerated exactly
    assert torch.equal(a.weight, M.InputProjection(196, 512, seed=7).weight)
    assert not torch.equal(a.weight, M.InputProjection(196, 512, seed=8).weight)
    assert a.weight.abs().max() <= 196 ** -0.5 and a.weight.std() > 0.5 * 196 ** -0.5 / math.sqrt(3)
    learned = M.InputProjection(196, 512, seed=7, trainable=True)
    assert torch.equal(learned.weight, a.weight) and isinstance(learned.weight, torch.nn.Parameter)

    model = M.ImageMLP(196, 784, 512, 32, 2, w_in_seed=7)
    assert torch.equal(model.lift.weight, a.weight)
    assert "lift.weight" not in model.state_dict() and "lift.weight" in dict(model.named_buffers())
    assert all(p is not model.lift.weight for p in model.parameters())
    model.requires_grad_(True)  # "unfreeze everything"
    assert not model.lift.weight.requires_grad and all(
        p is not model.lift.weight for p in model.parameters()
    )
    c = M.count_params(model)
    assert (
        c["total"] == M.param_formula(196, 512, 32, 2, 784)["total"]
        and c["input_proj"] == 196 * 512
    )
    assert c["total"] - c["trainable"] == 196 * 512

    rebuilt = M.ImageMLP(196, 784, 512, 32, 2, w_in_seed=7)
    rebuilt.load_state_dict(model.state_dict())                         # strict: no missing W_in
    x = torch.rand(4, 196)
    model.eval(), rebuilt.eval()
    assert torch.equal(model(x), rebuilt(x))
    learned_model = M.ImageMLP(196, 784, 512, 32, 2, input_proj="learned", w_in_seed=7)
    # a learned W_in is stored, of course
    assert "lift.weight" in learned_model.state_dict()


def test_degradations_shapes_and_ranges():
    g = torch.Generator().manual_seed(0)
    grey = torch.full((64, 1, 28, 28), 0.5)
    noisy = M.add_gaussian_noise(grey, 0.25, g)
    assert noisy.shape == grey.shape and noisy.min() >= 0 and noisy.max() <= 1
    assert abs(noisy.mean().item() - 0.5) < 0.005            # clamping is symmetric around 0.5
    assert 0.2 < noisy.std().item() < 0.25                   # ... and shrinks the spread a little
    # 5 sigma from both clamps: pure N(0, 0.1^2)
    mild = M.add_gaussian_noise(grey, 0.1, g)
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

    imgs_u8 = torch.randint(0, 256, (6, 1, 28, 28), dtype=torch.uint8)
    labels = torch.tensor([0, 3, 3, 9, 1, 5])
    protos = torch.rand(10, 784)
    for name, dx in (("mnist_denoise", 784), ("mnist_sr", 196), ("mnist_classify", 784)):
        task = M.get_task(name)
        assert task.input_dim == dx and task.output_dim == 784
        xb, tb = M.make_batch(task, imgs_u8, labels, protos, torch.Generator().manual_seed(0))
        assert xb.shape == (6, dx) and tb.shape == (6, 784)
        assert xb.min() >= 0 and xb.max() <= 1
    # classification targets are the prototypes
    assert torch.equal(tb, protos[labels])
    assert (
        M.get_task("imagenet32_sr").input_dim == 768
        and M.get_task("imagenet32_denoise").input_dim == 3072
    )


def test_prototypes_are_one_training_image_per_class():
    images = torch.arange(40, dtype=torch.uint8).view(40, 1, 1, 1).expand(40, 1, 2, 2).contiguous()
    # image i has pixel value i, class i % 4
    labels = torch.arange(40) % 4
    protos = M.choose_prototypes(images, labels)
    assert protos.shape == (4, 4)
    for c in range(4):
        value = round(protos[c, 0].item() * 255)
        assert value % 4 == c and torch.all(protos[c] == protos[c, 0])   # an image of its own class
    # seeded: the same every run
    assert torch.equal(protos, M.choose_prototypes(images, labels))
    with pytest.raises(ValueError, match="class 1 has no training image"):
        M.choose_prototypes(images[labels != 1], labels[labels != 1])


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
        s = M.ssim(torch.full((1, 3, 32, 32), a, dtype=torch.float64),
                   torch.full((1, 3, 32, 32), b, dtype=torch.float64), data_range=1.0)
        assert s.item() == pytest.approx((2 * a * b + c1) / (a * a + b * b + c1), rel=1e-9)
    # contrast-inverted image: the structure term is -1 where the local variance dominates
    inv = M.ssim(x, 1 - x)
    assert (inv < 0).all()
    w = M.gaussian_window()
    assert w.shape == (11, 11) and w.sum().item() == pytest.approx(1.0)
    assert w[5, 5] / w[5, 6] == pytest.approx(math.exp(1 / (2 * 1.5 ** 2)))



# ---------------------------------------------------------- the shape table and the file's imports


def test_main_prints_paper_checks_and_shape_table():
    run = subprocess.run(
        [sys.executable, "experiments/mlp_hourglass_tables.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    for paper_total in ("37.77M", "22.07M", "31.36M", "30.69M"):
        assert f"total {paper_total} (paper {paper_total})" in run.stdout
    assert "20.47M (paper 20.47M)" in run.stdout
    assert (
        "| mnist_denoise | hourglass | 784 | 2048 | 128 | 4 | 784 | 1.61M | 2.10M | 1.61M | 5.31M "
        "| 3.70M |"
        in run.stdout
    )
    one = subprocess.run(
        [
            sys.executable,
            "experiments/mlp_hourglass_tables.py",
            "--task=mnist_sr",
            "--latent_dim=1024",
            "--hidden_dim=64",
            "--n_blocks=8",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert one.returncode == 0, one.stderr
    assert (
        "| mnist_sr | hourglass | 196 | 1024 | 64 | 8 | 784 |" in one.stdout
        and "mnist_denoise" not in one.stdout
    )
    bad = subprocess.run(
        [sys.executable, "experiments/mlp_hourglass_tables.py", "--task=cifar"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "unknown task" in bad.stderr and "Traceback" not in bad.stderr


def repo_imports(path):
    """Top-level names of every import in a file, function bodies included."""
    names = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    repo_modules = {f[:-3] for f in os.listdir(ROOT) if f.endswith(".py")}
    return names & repo_modules


# ---------------------------------------------------------------- SSIM and bicubic as the reference


def mnist_like_digits(n, seed):
    """Strokes (thick lines) inside a black 4-pixel border, values in [0, 1], like MNIST digits."""
    g = torch.Generator().manual_seed(seed)
    images = torch.zeros(n, 1, 28, 28)
    yy, xx = torch.meshgrid(torch.arange(28.), torch.arange(28.), indexing="ij")
    for i in range(n):
        for _ in range(3):
            x0, y0, x1, y1 = (4 + 20 * torch.rand(4, generator=g)).tolist()
            t = torch.linspace(0, 1, 40)
            px, py = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
            d = ((xx[None] - px[:, None, None]) ** 2 + (yy[None] - py[:, None, None]) ** 2)
            images[i, 0] = torch.maximum(images[i, 0], (1.6 - d.min(0).values.sqrt()).clamp(0, 1))
    return images


def test_ssim_is_the_reference_codes_torchmetrics_ssim_on_mnist_like_digits():
    """The reference code calls torchmetrics' structural_similarity_index_measure with its
    defaults. Its values on these images, computed once with torchmetrics 1.9.0 (the test
    installs nothing): noisy 0.289849, blurred 0.880769, a sigmoid-squashed copy 0.327502."""
    clean = mnist_like_digits(8, 0)
    g = torch.Generator().manual_seed(1)
    noisy = (clean + 0.25 * torch.randn(clean.shape, generator=g)).clamp(0, 1)
    blurred = torch.nn.functional.avg_pool2d(
        torch.nn.functional.pad(clean, (1, 1, 1, 1), mode="replicate"), 3, 1)
    squashed = torch.sigmoid(4 * (clean - 0.5) + 0.3 * torch.randn(clean.shape, generator=g))
    for x, torchmetrics_value in ((noisy, 0.289849), (blurred, 0.880769), (squashed, 0.327502)):
        assert M.ssim(x, clean).mean().item() == pytest.approx(torchmetrics_value, abs=1e-4)
    # ours, the valid windows only, is the reference's map cropped to them - and far higher here
    full, valid = M.ssim(noisy, clean).mean().item(), M.ssim(noisy, clean, valid=True).mean().item()
    assert valid > full + 0.2, (valid, full)  # the black border: ~0.25-0.3 apart on digits


def test_valid_ssim_is_the_full_map_cropped_to_the_windows_inside_the_image():
    clean = mnist_like_digits(4, 3)
    noisy = (clean + 0.2 * torch.randn(clean.shape)).clamp(0, 1)
    window = M.gaussian_window().to(torch.float64)[None, None]
    x, y = noisy.double(), clean.double()
    pad = lambda t: torch.nn.functional.pad(t, (5,) * 4, mode="reflect")  # noqa: E731
    blur = lambda t: torch.nn.functional.conv2d(t, window)  # noqa: E731
    mx, my = blur(pad(x)), blur(pad(y))
    vx = (blur(pad(x * x)) - mx ** 2).clamp_min(0)
    vy = (blur(pad(y * y)) - my ** 2).clamp_min(0)
    cov = blur(pad(x * y)) - mx * my
    dr = max((x.max() - x.min()).item(), (y.max() - y.min()).item())
    c1, c2 = (0.01 * dr) ** 2, (0.03 * dr) ** 2
    full = (2 * mx * my + c1) * (2 * cov + c2) / ((mx ** 2 + my ** 2 + c1) * (vx + vy + c2))
    torch.testing.assert_close(M.ssim(noisy, clean), full.flatten(1).mean(1), rtol=0, atol=1e-9)
    cropped = full[..., 5:-5, 5:-5].flatten(1).mean(1)
    torch.testing.assert_close(M.ssim(noisy, clean, valid=True), cropped, rtol=0, atol=1e-6)


def test_bicubic_downsampling_is_the_reference_codes_interpolate_without_antialiasing():
    images = torch.rand(3, 1, 28, 28)
    expected = torch.nn.functional.interpolate(images, size=(14, 14), mode="bicubic",
                                               antialias=False, align_corners=False).clamp(0, 1)
    assert torch.equal(M.bicubic_downsample(images, 2), expected)
    pil_like = M.bicubic_downsample(images, 2, antialias=True)  # ours, PIL's resize: not the same
    assert (pil_like - expected).abs().max() > 0.01
