# The paper's 113M pair (Liao et al. 2026, Tables 2-3), part 2 of 2: the hourglass model,
# 1032 wide, 12 layers, 12 heads (head size 86), K = 4 sub-blocks with bottleneck d_h = 418:
# 51.1M attention + 62.1M FFN = 113.3M non-embedding parameters, the baseline's budget
# (`python hourglass.py` finds this shape from ratio 0.4). Same data, tokens, seed and schedule
# as config/hourglass_113m_gpu_baseline.py; only the lines marked "hourglass" differ. See that
# file for the deviations from the paper's setup (TinyStories + GPT-2 BPE vocab 50304 instead of
# OLMo-2's data and tokenizer, context 1024 instead of 2048, no z-loss).
# One GPU:  python train.py config/hourglass_113m_gpu.py
out_dir = "out-hourglass-113m"  # hourglass
dataset = "tinystories"
model_type = "hourglass"  # hourglass
eval_interval = 250
eval_iters = 100
log_interval = 10
batch_size = 16
block_size = 1024
gradient_accumulation_steps = 32
n_layer = 12
n_head = 12
n_embd = 1032  # hourglass: d_model
model_args = {"n_sub_blocks": 4, "bottleneck_dim": 418}  # hourglass: K and d_h
dropout = 0.0
learning_rate = 6e-4
max_iters = 2000
lr_decay_iters = 2000
min_lr = 6e-5
beta1 = 0.9
beta2 = 0.95
warmup_iters = 100  # 50M tokens, as the paper's 113M run
weight_decay = 0.1
seed = 6198  # the paper's seed
