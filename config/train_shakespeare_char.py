# The default main job (what `python train.py` runs with no arguments), spelled out:
# a 6-layer, 384-wide character-level GPT on Shakespeare, sized for a 2-core CPU.
out_dir = "out"
eval_interval = 250
eval_iters = 20
log_interval = 10
dataset = "shakespeare_char"
batch_size = 32
block_size = 256
n_layer = 6
n_head = 6
n_embd = 384
dropout = 0.1
learning_rate = 2e-3
max_iters = 1500
lr_decay_iters = 1500
min_lr = 2e-4
beta2 = 0.99
warmup_iters = 100
