# Character-level Shakespeare on one GPU: nanoGPT's shakespeare_char recipe on our LLaMA-style GPT
# (6 layers, 384 wide, 256 context, batch 64). About 10.7M non-embedding parameters.
#   python train.py config/train_shakespeare_char_gpu.py
out_dir = "out-shakespeare-char"
eval_interval = 250
eval_iters = 200
log_interval = 10
dataset = "shakespeare_char"
batch_size = 64
block_size = 256
n_layer = 6
n_head = 6
n_embd = 384
dropout = 0.2
learning_rate = 1e-3
max_iters = 5000
lr_decay_iters = 5000
min_lr = 1e-4
beta2 = 0.99
warmup_iters = 100
# device, dtype and compile are auto: cuda, bfloat16 (float16 + GradScaler on older cards), compiled
