# The image-MLP sweep of the forms the paper plotted: the fair sweep's setting (Fashion-MNIST
# denoising, sigma 0.25, 10 epochs, float32, 2 seeds, every shape at 1e-3, 2e-3 and 3e-3, then
# past an end where a Pareto-optimal shape chose one), but every W_in learned:
#   - a hourglass lifts the image with a learned W_in (from the same random start as the frozen
#     one): the reference code's default (its scripts never pass --fix_Win);
#   - a conventional MLP (d_z = 784) gets a learned square W_in, counted: the reference's
#     `conventional_w_Win`, the baseline of the paper's figures;
#   - also, shapes from the reference's own MNIST front that fall in this sweep's parameter range
#     (d_z = 785 with d_h = 115, and 1470-2120 / 115: hourglass_mlp/ of the reference code), and
#     its wide one-block conventional MLPs (784/1470/L1, 784/2870/L1).
# The frozen-lift hourglass and the direct conventional MLP are the fair sweep's rows
# (config/mlp_sweep_fashion_denoise_fair.py); mlp_hourglass_fronts.py reads all four families.
# One process per seed, one per core (one thread each), each resuming where it stopped:
#   python experiments/mlp_hourglass_sweep.py config/mlp_sweep_fashion_denoise_learned.py \
#       --seeds=0 --out_dir=results/mlp_fashion_denoise_learned/seed0 &
#   python experiments/mlp_hourglass_sweep.py config/mlp_sweep_fashion_denoise_learned.py \
#       --seeds=1 --out_dir=results/mlp_fashion_denoise_learned/seed1
task = "mnist_denoise"
dataset = "fashion_mnist"
noise_sigma = 0.25
epochs = 10
batch_size = 128
flips = 1
input_proj = "learned"  # every shape's W_in is trained
dtype = "float32"
num_threads = 1  # one thread per process: two processes share the 2 cores
learning_rates = (1e-3, 2e-3, 3e-3)  # the grid every form runs on (the fair sweep's too)
seeds = (0, 1)
shapes = (  # the conventional MLPs behind a learned W_in first (the comparison's thin side), then
    # the reference's own MNIST front hourglasses (hourglass_mlp/ of the reference code), then the
    # fair sweep's hourglasses
    ("conventional", 784, 1024, 1),
    ("conventional", 784, 1024, 2),
    ("conventional", 784, 1470, 1),
    ("conventional", 784, 2048, 1),
    ("conventional", 784, 2048, 2),
    ("conventional", 784, 2870, 1),
    ("conventional", 784, 3072, 2),
    ("hourglass", 785, 115, 5),
    ("hourglass", 785, 115, 10),
    ("hourglass", 1470, 115, 6),
    ("hourglass", 2120, 115, 8),
    ("hourglass", 1024, 64, 2),
    ("hourglass", 1024, 256, 2),
    ("hourglass", 1024, 256, 4),
    ("hourglass", 2048, 32, 4),
    ("hourglass", 2048, 128, 4),
    ("hourglass", 2048, 256, 4),
    ("hourglass", 2048, 128, 8),
    ("hourglass", 3072, 128, 4),
    ("hourglass", 2048, 512, 4),
)
