# Hourglass FFN comparison, CPU scale, part 1 of 2: the plain GPT baseline.
# 4 layers, 192 wide, 6 heads, SwiGLU hidden 768: 2.36M non-embedding parameters, on the
# character-level complete works of Shakespeare (data/shakespeare_char). Same data, tokens,
# seed and schedule as config/hourglass_shakespeare_cpu.py (the hourglass at the same budget).
#   python train.py config/hourglass_shakespeare_cpu_baseline.py
# A tiny CPU run (400 steps; minutes on an idle 2-core CPU; the measured losses and speeds are in
# docs/hourglass.md): it checks that both models train, it does not test the paper's 113M claim.
# Speed of the pair:  python bench.py config/hourglass_shakespeare_cpu_baseline.py
#     config/hourglass_shakespeare_cpu.py
out_dir = "out-hourglass-cpu-baseline"
dataset = "shakespeare_char"
model_type = "gpt"
eval_interval = 100
eval_iters = 20
log_interval = 10
batch_size = 16
block_size = 128
n_layer = 4
n_head = 6
n_embd = 192
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
