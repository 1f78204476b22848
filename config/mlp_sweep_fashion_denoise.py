# The first full-size image-MLP sweep of docs/mlp_hourglass.md, kept as the record of the
# frozen-square ablation: Fashion-MNIST denoising (sigma 0.25), hourglass and conventional shapes
# over the same parameter range (1.9M-11.6M), EVERY shape fed by a frozen random W_in (the
# conventional ones by a square 784x784 one, not the image itself as the paper's baseline: see
# config/mlp_sweep_fashion_denoise_fair.py), two learning rates, 10 epochs (the paper: 30).
# One process per seed, one per core; each resumes where it stopped:
#   python experiments/mlp_hourglass_sweep.py config/mlp_sweep_fashion_denoise.py --seeds=0 \
#       --out_dir=out/mlp_sweep_fashion_denoise_seed0
#   python experiments/mlp_hourglass_sweep.py config/mlp_sweep_fashion_denoise.py --seeds=1 \
#       --out_dir=out/mlp_sweep_fashion_denoise_seed1
#   python experiments/mlp_hourglass_fronts.py out/mlp_sweep_fashion_denoise_seed{0,1}/sweep.csv
task = "mnist_denoise"
dataset = "fashion_mnist"
noise_sigma = 0.25
epochs = 10
batch_size = 128
flips = 1
input_proj = "frozen_random"  # every shape, the conventional ones too: the ablation
dtype = "float32"
num_threads = 1  # one thread per process: two processes share the 2 cores
learning_rates = (5e-4, 1e-3)  # of the paper's grid {1e-4, 5e-4, 1e-3, 5e-3}
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
