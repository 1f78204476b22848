# Image MLP, 2x super-resolution: bicubic 14x14 -> 28x28 digits, the paper's protocol
# (arXiv:2510.01796, A.3.2: batch 128, 50 epochs, x4 flip augmentation, AdamW, linear schedule).
# The one place this task's protocol is written: train_mlp.py --task=mnist_sr reads its
# unset (None) settings from here.
#   python train_mlp.py config/mlp_mnist_sr.py
#   python train_mlp.py config/mlp_mnist_sr.py --dataset=fashion_mnist --epochs=5   # a quick run
task = "mnist_sr"
epochs = 50
batch_size = 128
flips = 4  # original, horizontal, vertical, both
learning_rate = 1e-3
eval_interval = 0  # validate once per epoch
dtype = "float32"  # as the reference code trains; --dtype=auto: bf16 where the hardware has it
shape = "hourglass"
latent_dim = 2048
hidden_dim = 128
n_blocks = 4
out_dir = "out/mlp_mnist_sr"
