# Layer-wise scaling (lws.py), the paper's shape: "Baseline 12L" of Table 2 (Baroian & Notebomer
# 2025), 12 layers, d=768, head dim 64, group 3, fnn_scalar [4.0, 4.0], qkv_scalar [1.0, 1.0],
# framing False: 181.1M / 142.5M parameters (total / non-embedding) with the paper's vocab of 50304.
# As config/lws_baseline_180m.py otherwise (TinyStories, GPT-2 BPE). One GPU:
#   python data/tinystories/prepare.py && python train.py config/lws_baseline_12l_180m.py
out_dir = "out-lws-baseline-12l-180m"
eval_interval = 500
eval_iters = 100
log_interval = 10
dataset = "tinystories"
batch_size = 24
block_size = 1024
gradient_accumulation_steps = 16
model_type = "lws"
n_layer = 12
n_embd = 768
n_head = 12
n_kv_head = 4
qk_norm = "full"
tie_embeddings = False
dropout = 0.0
# rope_theta and the RMSNorm eps are OLMo-2 190M's (500000, 1e-6); the norms stay pre-norm
# (see docs/lws.md)
model_args = {"ffn_scalars": [4.0, 4.0], "qkv_scalars": [1.0, 1.0], "framed": False,
              "rope_theta": 500000.0, "norm_eps": 1e-6}
learning_rate = 6e-4
max_iters = 2500
lr_decay_iters = 2500
min_lr = 6e-5
beta2 = 0.95
warmup_iters = 250
weight_decay = 0.1
