# Hourglass FFN comparison, CPU scale, part 2 of 2: the hourglass model at the baseline's budget.
# K = 4 sub-blocks per FFN slot, target d_h/d = 0.4 (the paper's best 113M ratio), same 4 layers
# and 6 heads. `python hourglass.py --n_layer=4 --n_head=6 --n_embd=192 --vocab_size=84
# --block_size=128` matches it: d_model 264, d_h 98 -> 2.363M non-embedding parameters vs the
# baseline's 2.361M (+0.1%). Same data, tokens, seed and schedule as
# config/hourglass_shakespeare_cpu_baseline.py; only the lines marked "hourglass" differ.
#   python train.py config/hourglass_shakespeare_cpu.py
out_dir = "out-hourglass-cpu"  # hourglass
dataset = "shakespeare_char"
model_type = "hourglass"  # hourglass
eval_interval = 100
eval_iters = 20
log_interval = 10
batch_size = 16
block_size = 128
n_layer = 4
n_head = 6
n_embd = 264  # hourglass: d_model
dropout = 0.0
learning_rate = 2e-3
max_iters = 400
lr_decay_iters = 400
min_lr = 2e-4
beta2 = 0.99
warmup_iters = 40
weight_decay = 0.1
seed = 1337
sample_tokens = 0
dtype = "bfloat16"
compile = False
model_args = {"n_sub_blocks": 4, "bottleneck_dim": 98}  # hourglass: K and d_h
