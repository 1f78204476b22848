# The GPU verdict at a larger width: the same comparison as config/compare_verdict_cpu.py (every
# shape at its own learning rate, chosen on the selection seed, then 2 verdict seeds; a run more
# each time a shape's best is an end of its rates, up to 2 past the list) on one H100, at a size
# where compute, not per-op overhead, sets the pace: an 8-layer, 512-wide GPT (33.6M
# non-embedding parameters) and its matched shapes, 600 steps x 64 x 512 = 19.7M characters per
# run: 0.59 tokens per parameter, 4.3 epochs of the data - further from the papers' regime (20-50
# tokens per parameter) than the CPU verdict's 1.56, and said so beside its table. Two smaller
# answers to the same question are config/compare_verdict_cpu_scale_gpu.py (the CPU's size, 20
# seeds) and config/compare_verdict_tinystories.py (10 tokens per parameter, BPE).
#   python compare.py config/compare_verdict_gpu.py
# The data: data/shakespeare_char (4.55M training characters), which needs no internet and is
# 9.7 MB to copy to a GPU machine that has none; more tokens would repeat the text more often.
# Estimate (not measured: no GPU was at hand): training ~3 x 76M forward FLOPs/token (shapes.py
# counts 70-79M for the ten shapes) = 230 MFLOP/token; 19.7M tokens = 4.5 PFLOP per run, and the
# evaluations (7 x 2 splits x 20 batches of 64 x 512, forward only) 0.69 PFLOP more: 5.2 PFLOP;
# at 25-35% MFU of the H100's 989 TFLOP/s bf16 peak 15-21 s, plus ~15 s to start and save 6
# checkpoints of ~0.4 GB: ~35 s per run, 50 runs ~30 min (margin up to 45 min for the estimate
# and ~10 runs past the list's ends). 32k tokens per step keep the GPU's work per kernel well
# above the time Python takes to launch it (eager: compiling each of 50 short runs would cost
# more than it saves).
# In jobs of a fixed length (a machine lent for minutes): `--stop_starting_after=MINUTES` starts
# no run after that and lets the running ones finish, then reports; the same command in the next
# job goes on from the records (a fresh machine needs only their small files). Keep the card's
# name with the figures.
preset = "gpu"
out_dir = "out-compare-verdict-gpu"
record_dir = "results/compare_verdict_gpu"  # each finished run kept there as it finishes: commit it
dataset = "shakespeare_char"
learning_rates = (5e-4, 1e-3, 2e-3)  # around nanoGPT's 1e-3 for a character model this wide
extend_rates = 2  # a shape whose best is an end tries past it (a run more each time)
seeds = (1337, 1338, 1339)  # the first selects the rates
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
