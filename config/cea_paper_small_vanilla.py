# CEA paper, its own small-scale GPT shape (appendix C.1: hidden 128, 12 layers, 2 heads, context
# 128), on character-level Shakespeare (the paper: Wikipedia + BooksCorpus, BERT vocabulary). the
# vanilla GPT (FFN 4d = 512): 3.15M non-embedding parameters. The paper's
# optimiser is Adam, lr 1e-4, batch 512, 10k warm-up steps, linear decay, and it used mid-training
# checkpoints; at CPU scale: AdamW lr 2e-3, batch 8, a constant lr after a short warm-up.
# OMP_NUM_THREADS=1 nice -n 10 python train.py config/cea_paper_small_vanilla.py --dtype=float32
out_dir = "out-cea-small-vanilla"
eval_interval = 10
eval_iters = 4
log_interval = 10
dataset = "shakespeare_char"
batch_size = 8
block_size = 128  # the paper's maximum sequence length
n_layer = 12
n_head = 2
n_embd = 128
dropout = 0.0
learning_rate = 2e-3
# constant after the warm-up: a checkpoint is a mid-training one, as in the paper
decay_lr = False
warmup_iters = 20
max_iters = 400
lr_decay_iters = 400
min_lr = 2e-4
weight_decay = 0.01  # the paper's L2 weight
beta2 = 0.99
sample_tokens = 0
model_type = "cea"
model_args = {'ffn_width_ratio': 4, 'outer_ratio': 1.0}  # exactly model.GPT
