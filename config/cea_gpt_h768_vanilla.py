# CEA paper, GPU scale: the H=768, 12-layer, 12-head GPT (vanilla, FFN 4x). One GPU.
#   python train.py config/cea_gpt_h768_vanilla.py
out_dir = "out-cea-h768-vanilla"
# Data: TinyStories with GPT-2 BPE (the paper used Wikipedia + BooksCorpus and BERT's vocabulary,
# not shipped here). Prepare it first (needs the internet): python data/tinystories/prepare.py. Not
# Shakespeare: its ~0.34M BPE tokens are far too few for a 150-750M model (this budget would read
# them ~1300 times). Tokens: the paper's batch of 1024 sequences of 128 (131k tokens per step) for
# 3500 steps = ~0.46B tokens, about one pass over TinyStories (~0.47B tokens): no story is repeated.
dataset = "tinystories"
eval_interval = 250
eval_iters = 100
log_interval = 20
batch_size = 64
# 64 x 16 = 1024 sequences per step (divisible for 2, 4, 8 or 16 GPUs)
gradient_accumulation_steps = 16
block_size = 128  # the paper's maximum sequence length
n_layer = 12
n_head = 12
n_embd = 768
dropout = 0.0
learning_rate = 3e-4
max_iters = 3500
lr_decay_iters = 3500
min_lr = 3e-5
beta2 = 0.95
warmup_iters = 200
model_type = "cea"
model_args = {"ffn_width_ratio": 4, "outer_ratio": 1.0}
