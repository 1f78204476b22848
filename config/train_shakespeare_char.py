# The default main job (what `python train.py` runs with no arguments), spelled out:
# a 4-layer, 128-wide character-level GPT on Shakespeare (1.05M non-embedding parameters), trained
# for a 5-minute time limit: train.py times a few steps on this machine and fixes max_iters so the
# run ends at 5 minutes, whatever the laptop (set max_iters for a reproducible number of steps). Of
# the shapes we timed for ~6 CPU minutes (4L/128, 4L/192, 6L/256), this one reached the lowest
# validation loss: in a CPU's few minutes a small model that sees more tokens beats a bigger one
# that sees fewer (see README, "CPU quick start").
out_dir = "out"
eval_interval = 100
eval_iters = 20
log_interval = 50
dataset = "shakespeare_char"
batch_size = 32
block_size = 128
n_layer = 4
n_head = 4
n_embd = 128
dropout = 0.0
learning_rate = 2e-3
max_iters = 0  # 0: as many as fit in max_minutes
max_minutes = 5.0
lr_decay_iters = 0  # 0: max_iters
min_lr = 2e-4
beta2 = 0.99
warmup_iters = 50
