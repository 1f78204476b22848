# The paper's Table 1 on a GPU: ImageNet-32 denoising (sigma 0.25), its 27 Pareto-optimal shapes
# (21 hourglass, 6 conventional; "Rethinking the Shape Convention of an MLP", arXiv:2510.01796)
# at its protocol (A.3.2: batch 512, 2 epochs, x4 flips; its lr grid; float32, as the reference
# code trains), 3 seeds where the paper ran 5 ("each configuration repeated 5 times": three
# seeds at the chosen rate is the least a comparison here is read from, and five cost 5/3 of
# the hours below; --seeds=0,1,2,3,4 runs the paper's), each shape at every lr (its rate: the
# lowest mean validation loss).
# Each family in both of its forms, one sweep folder per input:
#   - each shape's own (this file): a hourglass lifts the image with the frozen random W_in, a
#     conventional MLP takes the image itself (direct: d_z = d_x = 3072, no W_in);
#   - --input_proj=learned: a hourglass with a learned W_in (the form the paper plotted: the
#     reference code's default) and a conventional MLP with a learned square W_in, counted (the
#     reference's conventional_w_Win, the paper's plotted baseline: Table 1's 37.77M counts it).
# It needs the data (data/imagenet32/readme.md) and a GPU:
#   python experiments/mlp_hourglass_sweep.py config/mlp_sweep_imagenet32_denoise.py \
#       --data_dir=/path/to/imagenet32 --out_dir=out/mlp_imagenet32_table1/own
#   python experiments/mlp_hourglass_sweep.py config/mlp_sweep_imagenet32_denoise.py \
#       --data_dir=/path/to/imagenet32 --input_proj=learned \
#       --out_dir=out/mlp_imagenet32_table1/learned
#   python experiments/mlp_hourglass_fronts.py out/mlp_imagenet32_table1/*/sweep.csv \
#       --out=out/mlp_imagenet32_table1/fronts
# Time, computed (no GPU has run it yet): 324 runs per form, 20,018 steps each. Their matmul
# FLOPs, each shape's training step and forward pass written out (train_step_flops, which the tests
# check against torch's FlopCounterMode) times its steps and evaluations,
# are 0.78 EFLOP for the own inputs and 0.89 EFLOP learned. At an
# assumed 40 TFLOP/s (about 60% of an H100 SXM's 67 TFLOP/s fp32 peak: float32 matmuls here do not
# use tensor cores) plus an assumed 1 ms per step for everything else, that is 7.2 + 8.0 = 15.2
# hours on one H100, 0.7 to 2.4 min per run; a run prints its it/s, the check on both guesses.
# 40 TFLOP/s is optimistic for the narrow hourglasses (d_h 8-128): matmuls with so small an
# inner dimension run well below peak, so expect 1-2x these hours. The runs go seed by seed:
# after the first third (seed 0) every shape has run at every rate.
task = "imagenet32_denoise"
noise_sigma = 0.25
epochs = 2
batch_size = 512
flips = 4
input_proj = ""  # each shape's own: hourglass frozen_random, conventional direct
dtype = "float32"
eval_interval = 1000
learning_rates = (1e-4, 3e-4, 5e-4, 7e-4)  # the paper's ImageNet-32 grid (A.3.2)
seeds = (0, 1, 2)
shapes = (  # Table 1, in its Params order: a sweep stopped early holds both families
    ("hourglass", 3546, 8, 5),
    ("hourglass", 3546, 16, 5),
    ("hourglass", 3546, 64, 5),
    ("hourglass", 3546, 128, 5),
    ("hourglass", 3546, 270, 3),
    ("hourglass", 3075, 765, 2),
    ("hourglass", 3546, 270, 4),
    ("hourglass", 3546, 270, 5),
    ("hourglass", 3075, 765, 3),
    ("hourglass", 3546, 270, 7),
    ("hourglass", 3546, 270, 8),
    ("hourglass", 3075, 765, 4),
    ("conventional", 3072, 3075, 1),
    ("hourglass", 3075, 765, 5),
    ("conventional", 3072, 4012, 1),
    ("hourglass", 3075, 1146, 4),
    ("hourglass", 3075, 1146, 5),
    ("conventional", 3072, 3075, 2),
    ("hourglass", 3075, 1560, 4),
    ("hourglass", 3546, 1146, 5),
    ("hourglass", 3546, 1560, 4),
    ("hourglass", 3075, 1560, 5),
    ("conventional", 3072, 4012, 2),
    ("conventional", 3072, 3075, 3),
    ("hourglass", 3546, 1560, 5),
    ("hourglass", 3075, 2014, 5),
    ("conventional", 3072, 3546, 3),
)
