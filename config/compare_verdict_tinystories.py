# The verdict nearer the papers' regime, for a GPU with the internet and an afternoon: every shape
# at a 6-layer, 384-wide GPT's 14.2M non-embedding parameters (`python shapes.py <this file>`),
# trained on 10 tokens per parameter of TinyStories in GPT-2 BPE (4,400 steps x 32 x 1024 = 144M
# tokens a run), context 1024; each shape at its own rate (chosen on the selection seed), 8 verdict
# seeds. The papers train 113M-2B parameters on 20-50 tokens per parameter: this is still ten times
# smaller, and its table says so beside its numbers.
#   python data/tinystories/prepare.py        # needs the internet (Hugging Face)
#   python data/fortunes/prepare.py           # the OOD texts of CEA's claim (a Debian package)
#   python compare.py config/compare_verdict_tinystories.py
# Estimate (not measured: no GPU was at hand), on one H100, bf16, compiled: shapes.py counts 46-93M
# forward FLOPs a token for the ten shapes (the GPT 76M), x 3 with the backward = ~0.23 GFLOP a
# token, 144M tokens = 33 PFLOP a run; at ~30% of the card's 989 TFLOP/s bf16, ~110 s; evaluation
# (11 times, 2 x 40 batches of 32 x 1024, forward only: 2.2 PFLOP) ~8 s; start, compile and
# checkpoints ~60 s: ~3 min a run. 10 shapes x (3 rates + ~1 past an end or around a choice + 8
# seeds) = ~120 runs, ~6 hours. A job can stop and go on at any time (the same command), or run
# in pieces with --stop_starting_after=MINUTES.
preset = "gpu"
out_dir = "out-compare-verdict-tinystories"
record_dir = "results/compare_verdict_tinystories"
dataset = "tinystories"
n_layer = 6
n_head = 6
n_embd = 384
block_size = 1024
batch_size = 32
max_iters = 4400
warmup_iters = 200
eval_interval = 400
eval_iters = 40
learning_rates = (1e-3, 2e-3, 4e-3)
extend_rates = 2
refine_gain = 0.002
seeds = (1337, 1338, 1339, 1340, 1341, 1342, 1343, 1344, 1345)
dtype = "bfloat16"
compile = True
width_multiple = 48  # the ><formers' widths: 6 heads x head dims in 8s
