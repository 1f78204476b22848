# CEA paper, CPU scale: the vanilla GPT (FFN 4x) on character-level Shakespeare, H=64, 4 layers.
# Same training length (steps, batch, context) as cea_shakespeare_char_wider.py and _cea.py. A
# few minutes on a 2-core CPU. nice -n 10 python train.py config/cea_shakespeare_char_vanilla.py
out_dir = "out-cea-vanilla"
eval_interval = 150
eval_iters = 10
log_interval = 10
dataset = "shakespeare_char"
batch_size = 16
block_size = 128
n_layer = 4
n_head = 4
n_embd = 64
dropout = 0.0
learning_rate = 3e-3
max_iters = 300
lr_decay_iters = 300
min_lr = 2e-4
beta2 = 0.99
warmup_iters = 25
sample_tokens = 0
model_type = "cea"
model_args = {"ffn_width_ratio": 4, "outer_ratio": 1.0}  # exactly model.GPT
