# The image-MLP sweep against the paper's own baseline: Fashion-MNIST denoising (sigma 0.25), the
# same 14 shapes as config/mlp_sweep_fashion_denoise.py, but each family with its own input: a
# hourglass lifts the image with the frozen random W_in (the paper's), a conventional MLP takes the
# image itself (no W_in, d_z = d_x = 784: the paper's "injecting the input signal directly"). Each
# shape at its own learning rate: every shape at 1e-3, 2e-3 and 3e-3 (the learning_rates below),
# then each Pareto-optimal shape whose choice is an end of the rates it tried at one more past it
# (1.5x the top, half the bottom), until none is at an end: the fronts script prints those runs as
# --shapes=... --learning_rates=... for the same commands (docs/mlp_hourglass.md lists the ones that
# ran; the five smallest shapes also ran at 5e-4 and 3e-3, where the sweep began).
# One process per seed, one per core (one thread each), each resuming where it stopped; the
# CSVs live in docs/ so that the rows are committed as they come and any checkout goes on:
#   python experiments/mlp_hourglass_sweep.py config/mlp_sweep_fashion_denoise_fair.py --seeds=0 \
#       --out_dir=results/mlp_fashion_denoise_fair/seed0 &
#   python experiments/mlp_hourglass_sweep.py config/mlp_sweep_fashion_denoise_fair.py --seeds=1 \
#       --out_dir=results/mlp_fashion_denoise_fair/seed1
#   python experiments/mlp_hourglass_fronts.py results/mlp_fashion_denoise_fair/*/sweep.csv \
#       --out=results/mlp_fashion_denoise_fair_fronts
task = "mnist_denoise"
dataset = "fashion_mnist"
noise_sigma = 0.25
epochs = 10
batch_size = 128
flips = 1
input_proj = ""  # each shape's own: hourglass frozen_random, conventional direct (d_z = d_x)
dtype = "float32"
num_threads = 1  # one thread per process: two processes share the 2 cores
# the first sweep's {5e-4, 1e-3} moved up (every shape there chose 1e-3); 3e-3 added so that every
# form (this sweep's and the learned-lift sweep's) runs on one grid of three rates
learning_rates = (1e-3, 2e-3, 3e-3)
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
    # the reference's own MNIST front (hourglass_mlp/ of the reference code): its hourglasses and
    # its wide one-block conventional MLPs
    ("hourglass", 785, 115, 5),
    ("hourglass", 785, 115, 10),
    ("hourglass", 1470, 115, 6),
    ("hourglass", 2120, 115, 8),
    ("conventional", 784, 1470, 1),
    ("conventional", 784, 2870, 1),
)
