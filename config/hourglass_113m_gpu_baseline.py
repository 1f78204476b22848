# The paper's 113M pair (Liao et al. 2026, Tables 2-3), part 1 of 2: the conventional baseline,
# 768 wide, 12 layers, 12 heads, SwiGLU hidden 3072 = 28.3M attention + 84.9M FFN = 113.3M
# non-embedding parameters. Paired with config/hourglass_113m_gpu.py (1032/418/K4/L12, same
# budget). One GPU:  python train.py config/hourglass_113m_gpu_baseline.py
# Deviations from the paper's setup (Appendix A): the paper trains on the first 2.5B tokens of
# OLMo-2's stage-1 corpus with the OLMo-2 tokenizer (~100k vocab), sequence length 2048, 0.5M
# tokens per step, LR 6e-4, 50M warm-up tokens, AdamW (0.9, 0.95, wd 0.1) and a z-loss. We use
# TinyStories with GPT-2 BPE (vocab 50304; prepare with python data/tinystories/prepare.py, or
# set dataset = "shakespeare" for the GPT-2-BPE Shakespeare data), context 1024, 0.5M tokens per
# step (16 x 1024 x 32), no z-loss, tied embeddings. The vocabulary changes only the embedding;
# the non-embedding counts the paper compares are the same.
out_dir = "out-hourglass-113m-baseline"
dataset = "tinystories"
model_type = "gpt"
eval_interval = 250
eval_iters = 100
log_interval = 10
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
beta1 = 0.9
beta2 = 0.95
warmup_iters = 100  # 50M tokens, as the paper's 113M run
weight_decay = 0.1
seed = 6198  # the paper's seed
