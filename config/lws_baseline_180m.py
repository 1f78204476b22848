# Layer-wise scaling (lws.py), the paper's shape: "Baseline 18L" of Table 2 (Baroian & Notebomer
# 2025), 18 layers, d=768, head dim 64, group 3, fnn_scalar [2.5, 2.5], qkv_scalar [0.75, 0.75],
# framing False: 183.5M parameters / 144.8M non-embedding with the paper's vocab of 50304 (a little
# less with TinyStories' 50257). The paper trained on 5B DCLM tokens (batch 384 x 1024, 13k steps)
# with OLMo-core; this is the same shape on TinyStories (GPT-2 BPE), ~1B tokens. One GPU:
#   python data/tinystories/prepare.py && python train.py config/lws_baseline_180m.py
out_dir = "out-lws-baseline-180m"
eval_interval = 500
eval_iters = 100
log_interval = 10
dataset = "tinystories"
batch_size = 24
block_size = 1024
gradient_accumulation_steps = 16
model_type = "lws"
n_layer = 18
n_embd = 768
n_head = 12
n_kv_head = 4
qk_norm = "full"
tie_embeddings = False
dropout = 0.0
# rope_theta and the RMSNorm eps are OLMo-2 190M's (500000, 1e-6); the norms stay pre-norm
# (see docs/lws.md)
model_args = {"ffn_scalars": [2.5, 2.5], "qkv_scalars": [0.75, 0.75], "framed": False,
              "rope_theta": 500000.0, "norm_eps": 1e-6}
learning_rate = 6e-4
max_iters = 2500
lr_decay_iters = 2500
min_lr = 6e-5
beta2 = 0.95
warmup_iters = 250
weight_decay = 0.1
