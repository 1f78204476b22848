# 2x super-resolution at full size (bicubic 14x14 -> 28x28; MNIST is not reachable offline, so
# Fashion-MNIST, 50k train images): the same 14 shapes as config/mlp_sweep_fashion_denoise_fair.py,
# each family with its own input - a hourglass lifts the 196 low-resolution pixels with the frozen
# random W_in, a conventional MLP (d_z = 784 > d_x = 196, so it cannot take them directly) learns
# its W_in, as the reference code's conventional model for super-resolution does. The paper's x4
# flips (none, horizontal, vertical, both), so an epoch is 4 x 390 steps; 10 epochs (the paper: 50).
# The SR input is the reference's bicubic F.interpolate, not clamped.
# Its cost, measured for one epoch of one shape of each family (docs/mlp_hourglass.md): far more
# than the ~2 hours of the denoising sweep; run it where there is time (or a GPU: --device=cuda).
#   python experiments/mlp_hourglass_sweep.py config/mlp_sweep_fashion_sr.py --seeds=0 \
#       --out_dir=out/mlp_sweep_fashion_sr_seed0 &
#   python experiments/mlp_hourglass_sweep.py config/mlp_sweep_fashion_sr.py --seeds=1 \
#       --out_dir=out/mlp_sweep_fashion_sr_seed1
#   python experiments/mlp_hourglass_fronts.py out/mlp_sweep_fashion_sr_seed{0,1}/sweep.csv
task = "mnist_sr"
dataset = "fashion_mnist"
epochs = 10
batch_size = 128
flips = 4  # the paper's, as the reference code's aug_num=4
input_proj = ""  # each shape's own: hourglass frozen_random, conventional learned (d_z != d_x)
dtype = "float32"
num_threads = 1  # one thread per process: two processes share the 2 cores
learning_rates = (5e-4, 1e-3, 2e-3)
seeds = (0, 1)
shapes = (  # (family, d_z, d_h, L), smallest first: a sweep stopped early holds both families
    ("hourglass", 1024, 64, 2),
    ("hourglass", 1024, 256, 2),
    ("conventional", 784, 1024, 1),
    ("hourglass", 2048, 32, 4),
    ("hourglass", 1024, 256, 4),
    ("conventional", 784, 1024, 2),
    ("conventional", 784, 2048, 1),
    ("hourglass", 2048, 128, 4),
    ("hourglass", 2048, 256, 4),
    ("hourglass", 2048, 128, 8),
    ("hourglass", 3072, 128, 4),
    ("conventional", 784, 2048, 2),
    ("hourglass", 2048, 512, 4),
    ("conventional", 784, 3072, 2),
)
