# Image MLP, denoising: clamp(y + N(0, 0.25^2), 0, 1) -> y on 28x28 digits, the paper's protocol
# (arXiv:2510.01796, A.3.2: batch 128, 30 epochs, AdamW with a linear schedule, no warm-up).
# The default hourglass: d_z 2048, d_h 128, L 4 (5.31M parameters, 3.70M trainable).
# The one place this task's protocol is written: train_mlp.py --task=mnist_denoise reads its
# unset (None) settings from here.
#   python train_mlp.py config/mlp_mnist_denoise.py
#   python train_mlp.py config/mlp_mnist_denoise.py --dataset=fashion_mnist   # full size, offline
base = "mlp_mnist_sr.py"  # every setting not below
task = "mnist_denoise"
noise_sigma = 0.25
epochs = 30
flips = 1
out_dir = "out/mlp_mnist_denoise"
