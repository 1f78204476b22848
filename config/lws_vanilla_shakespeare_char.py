# Layer-wise scaling (lws.py), CPU scale: vanilla LWS (OpenELM): layers grow linearly, beta 1.0 ->
# 4.0, alpha 0.5 -> 1.0. One of five runs at matched non-embedding parameters (~1.45M;
# `python experiments/lws_tables.py --scale=cpu` prints the shapes; the variants' ffn_scalars come
# from lws.match_params against the isotropic baseline). 9 layers, d=128, head dim 16, group 2,
# untied head, QK-norm over the full projections, as the paper's 18-layer rows but ~100x smaller and
# trained for minutes on character-level Shakespeare.
#   OMP_NUM_THREADS=1 python train.py config/lws_vanilla_shakespeare_char.py
out_dir = "out-lws-vanilla-char"
eval_interval = 100
eval_iters = 20
log_interval = 10
sample_tokens = 0
dataset = "shakespeare_char"
batch_size = 16
block_size = 128
model_type = "lws"
n_layer = 9
n_embd = 128
n_head = 8
n_kv_head = 4
head_dim = 16
qk_norm = "full"
tie_embeddings = False
dropout = 0.0
# on this shared 2-core CPU, fp32 on one thread beat bf16 for these small matrices
dtype = "float32"
model_args = {"ffn_scalars": [0.969, 3.875], "qkv_scalars": [0.5, 1.0], "framed": False,
              "ffn_multiple": 32}
learning_rate = 2e-3
max_iters = 200
lr_decay_iters = 200
min_lr = 2e-4
beta2 = 0.99
warmup_iters = 20
