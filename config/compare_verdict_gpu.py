# The GPU verdict: the same comparison as config/compare_verdict_cpu.py (every shape at its own
# learning rate, 3 rates + 2 more seeds = 50 runs, and a run more each time a shape's best is
# an end of its rates, up to 2 past the list) on one H100, at a size where compute, not
# per-op overhead, sets the pace: an 8-layer, 512-wide GPT (33.6M non-embedding parameters) and
# its matched shapes, 600 steps x 64 x 512 = 19.7M characters per run.
#   python compare.py config/compare_verdict_gpu.py
# The data: data/shakespeare_char (4.55M training characters), which needs no internet and is
# 9.7 MB to copy to a GPU machine that has none; 19.7M characters are 4.3 epochs of it. More would
# repeat the text too often, so the data, not a 40-minute budget, set the size (TinyStories,
# --preset=gpu, is the larger corpus, where it can be prepared).
# Estimate (not measured: no GPU was at hand): training ~3 x 76M forward FLOPs/token (shapes.py
# counts 70-79M for the ten shapes) = 230 MFLOP/token; 19.7M tokens = 4.5 PFLOP per run; at
# 25-35% MFU of the H100's 989 TFLOP/s bf16 peak 13-18 s, plus ~15 s to start, evaluate 7 times
# and save 6 checkpoints of ~0.4 GB: ~30 s per run, 50 runs ~25 min (margin up to 40 min for
# the estimate and ~10 runs past the list's ends). 32k tokens per step keep the GPU's work per
# kernel well above the time Python takes to launch it (eager: compiling each of 50 short runs
# would cost more than it saves).
# In jobs of at most 10 minutes: `timeout --foreground 590 python compare.py <this file>` ends
# one with a SIGTERM to compare.py alone, which stops its train.py at their last checkpoints, and
# the same command in the next job resumes; on a fresh machine only the finished runs' small
# files are needed (their ckpt.pt can go: a finished run is never retrained). Keep the card's
# name with the figures.
preset = "gpu"
out_dir = "out-compare-verdict-gpu"
record_dir = "docs/compare_verdict_gpu"  # each finished run kept there as it finishes: commit it
dataset = "shakespeare_char"
learning_rates = (5e-4, 1e-3, 2e-3)  # around nanoGPT's 1e-3 for a character model this wide
extend_rates = 2  # a shape whose best is an end tries past it (a run more each time)
seeds = (1337, 1338, 1339)
n_layer = 8
n_head = 8
n_embd = 512
block_size = 512
batch_size = 64
max_iters = 600
warmup_iters = 60
eval_interval = 100
eval_iters = 20
dtype = "bfloat16"
compile = False
width_multiple = 64  # the ><formers' widths: 8 heads x head dims in 8s (fast SDPA kernels)
