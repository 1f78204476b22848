# Image MLP, denoising: clamp(y + N(0, 0.25^2), 0, 1) -> y on 28x28 digits, the paper's protocol
# (arXiv:2510.01796, A.3.2: batch 128, 30 epochs, AdamW with a linear schedule, no warm-up).
# The default hourglass: d_z 2048, d_h 128, L 4 (5.31M parameters, 3.70M trainable).
# The one place this task's protocol is written: train_mlp.py --task=mnist_denoise reads its
# unset (None) settings from here.
#   python train_mlp.py config/mlp_mnist_denoise.py
#   python train_mlp.py config/mlp_mnist_denoise.py --dataset=fashion_mnist   # full size, offline
task = "mnist_denoise"
noise_sigma = 0.25
epochs = 30
batch_size = 128
flips = 1
learning_rate = 1e-3  # inside the paper's grid {1e-4, 5e-4, 1e-3, 5e-3}
eval_interval = 0  # validate once per epoch
dtype = "float32"  # as the reference code trains; --dtype=auto: bf16 where the hardware has it
shape = "hourglass"
latent_dim = 2048
hidden_dim = 128
n_blocks = 4
out_dir = "out/mlp_mnist_denoise"
