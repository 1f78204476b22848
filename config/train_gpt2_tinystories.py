# A GPT-2-small-sized LLaMA-style GPT (12 layers, 768 wide, 12 heads, 1024 context) on
# TinyStories with GPT-2 BPE. Prepare the data first (needs the internet):
#   python data/tinystories/prepare.py
# One GPU:  python train.py config/train_gpt2_tinystories.py
# 8 GPUs:   torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_tinystories.py
# 0.5M tokens per step (16 x 1024 x 32). TinyStories is ~0.47B GPT-2 tokens, so 2000 steps
# (~1B tokens) is about two epochs.
out_dir = "out-gpt2-tinystories"
eval_interval = 500
eval_iters = 100
log_interval = 10
dataset = "tinystories"
batch_size = 16
block_size = 1024
gradient_accumulation_steps = 32
n_layer = 12
n_head = 12
n_embd = 768
dropout = 0.0
learning_rate = 6e-4
max_iters = 2000
lr_decay_iters = 2000
min_lr = 6e-5
beta2 = 0.95
warmup_iters = 200
weight_decay = 0.1
