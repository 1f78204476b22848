# The paper's 200M shape (Table 1: L = 16, d = 640, 16 heads, SwiGLU 4 w_l, untied head) as a
# ><former, for a GPU: widths [1152, 960, 832, 704, 608, 512, 448, 352, 320, 256, 224, 192, 288,
# 480, 736, 1152] (mean 576, Table 2), parameter-matched to config/variable_width_200m_constant.py.
# TinyStories with GPT-2 BPE instead of the paper's DCLM / cl100k_base, 1024-token context instead
# of
# 4096, and our standard init + AdamW instead of muP. Prepare the data first (needs the internet):
#   python data/tinystories/prepare.py
#   python train.py config/variable_width_200m_x.py
#   torchrun --standalone --nproc_per_node=8 train.py config/variable_width_200m_x.py
out_dir = "out-vw-200m-x"
eval_interval = 300
eval_iters = 100
log_interval = 10
dataset = "tinystories"
batch_size = 16
block_size = 1024
gradient_accumulation_steps = 32  # 0.5M tokens per step
model_type = "variable_width"
model_args = {"width_schedule": "x", "bottleneck_layer_ratio": 0.75, "bottleneck_width_ratio": 0.3,
              "width_multiple": 32, "expansion": "carry"}
n_layer = 16
n_head = 16
n_embd = 640
tie_embeddings = False
dropout = 0.0
learning_rate = 1e-3
# Tokens: 1800 steps of 0.5M = ~0.94B tokens, two passes over TinyStories (~0.47B GPT-2 tokens). The
# paper trains this size on 10B unique DCLM tokens (50 per parameter); TinyStories cannot give that,
# and 4000 steps (~2B tokens) would read every story ~4.5 times. Repeated tokens are worth less with
# each pass (Muennighoff et al. 2023, "Scaling Data-Constrained Language Models", arXiv:2305.16264),
# so we stop at two passes, under half that GPU time; if the val loss still falls at the end, raise
# max_iters and lr_decay_iters together (up to ~3600 steps = 4 passes).
max_iters = 1800
lr_decay_iters = 1800
warmup_iters = 144  # 8% warm-up, as in the paper
min_lr = 1e-4
beta1 = 0.9
beta2 = 0.95
weight_decay = 0.1
