"""shapelab/image_tasks.py: the tasks, degradations and prototypes, PSNR's closed forms, SSIM as
the reference code's torchmetrics computes it, its bicubic and flips."""
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import digit_like

from shapelab import image_tasks as IT


def test_degradations_targets_and_prototypes():
    g = torch.Generator().manual_seed(0)
    gray = torch.full((64, 1, 28, 28), 128, dtype=torch.uint8)
    noisy, _ = IT.make_batch(IT.get_task("mnist_denoise"), gray, None, None, g, 0.25)
    assert noisy.min() >= 0 and noisy.max() <= 1 and abs(noisy.mean().item() - 128 / 255) < 0.005
    images = torch.arange(40, dtype=torch.uint8).view(40, 1, 1, 1).expand(40, 1, 28, 28)
    labels = torch.arange(40) % 4  # image i: pixel value i, class i % 4
    protos = IT.choose_prototypes(images, labels)  # one seeded training image per class
    assert [round(p[0].item() * 255) % 4 for p in protos] == [0, 1, 2, 3]
    assert torch.equal(protos, IT.choose_prototypes(images, labels))
    for name, dx in (("mnist_denoise", 784), ("mnist_sr", 196), ("mnist_classify", 784)):
        task = IT.get_task(name)
        x, target = IT.make_batch(task, images, labels, protos, g, 0.25)
        assert x.shape == (40, dx) == (40, task.input_dim) and target.shape == (40, 784)
    assert torch.equal(target, protos[labels])  # classification targets are the prototypes
    with pytest.raises(ValueError, match="unknown task"):
        IT.get_task("cifar_denoise")


def test_psnr_closed_forms_and_conventions():
    # two images with MSE 1e-2 and 1e-4: per-image mean (20 + 40) / 2 = 30 dB, batch MSE 5.05e-3
    pred = torch.stack([torch.full((100,), 0.6), torch.full((100,), 0.51)])
    target = torch.full((2, 100), 0.5)
    acc = IT.MetricAccumulator()
    acc.add(pred, target)
    r = acc.result()
    assert r["psnr_per_image"] == pytest.approx(30.0, abs=1e-4)
    assert r["psnr_batchmse"] == pytest.approx(10 * math.log10(1 / 5.05e-3), abs=1e-4)

    acc = IT.MetricAccumulator()  # batch-MSE PSNR: a batch-size-weighted mean over batches
    acc.add(torch.full((3, 10), 0.6), torch.full((3, 10), 0.5))    # 20 dB, 3 images
    acc.add(torch.full((1, 10), 0.51), torch.full((1, 10), 0.5))   # 40 dB, 1 image
    assert acc.result()["psnr_batchmse"] == pytest.approx((3 * 20 + 40) / 4, abs=1e-4)


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
        assert IT.ssim(x, clean).mean().item() == pytest.approx(torchmetrics_value, abs=1e-4)


def test_the_sr_input_is_the_reference_codes_interpolate_exactly():
    images_u8, labels = digit_like(16, seed=3)
    clean = images_u8.float() / 255.0
    expected = F.interpolate(clean, size=(14, 14), mode="bicubic", antialias=False,
                             align_corners=False)
    assert (expected < 0).any() and (expected > 1).any()  # (so a clamp would be seen)
    task = IT.get_task("mnist_sr")
    x, target = IT.make_batch(task, images_u8, labels, None, None, None)
    assert torch.equal(x, expected.flatten(1)) and torch.equal(target, clean.flatten(1))


def test_flips_are_the_reference_codes():
    """x2: each image as it is and flipped both ways (the reference's aug_num=2); x4 all four."""
    assert IT.flips_of_copies(torch.tensor([0, 1, 0, 1]), 2).tolist() == [0, 3, 0, 3]
    codes = IT.flips_of_copies(torch.arange(4), 4)
    x = torch.rand(4, 1, 5, 5)
    f = IT.flip_images(x, codes)
    assert torch.equal(f[0], x[0]) and torch.equal(f[1], x[1].flip(-1))
    assert torch.equal(f[2], x[2].flip(-2)) and torch.equal(f[3], x[3].flip(-1).flip(-2))
