# CPU comparison, the ><former (x shape: l* = round(0.75 L), d_l* = 0.3 d), 6 layers x 128 wide, 4
# heads, char-level Shakespeare, 200 steps of 16 x 128 tokens (~4 minutes on a shared 2-core CPU).
# Its constant-width twin is config/variable_width_shakespeare_char_constant.py. OMP_NUM_THREADS=1
# nice -n 10 python train.py config/variable_width_shakespeare_char_x.py
out_dir = "out-vw-x"
eval_interval = 100
eval_iters = 10
log_interval = 10
sample_tokens = 0
dataset = "shakespeare_char"
batch_size = 16
block_size = 128
model_type = "variable_width"
# widths [200, 112, 64, 40, 88, 200]: multiples of 2 x 4 heads
model_args = {"width_schedule": "x", "width_multiple": 8}
n_layer = 6
n_head = 4
n_embd = 128
tie_embeddings = True
dropout = 0.0
learning_rate = 2e-3
max_iters = 200
lr_decay_iters = 200
warmup_iters = 20
min_lr = 2e-4
beta2 = 0.99
device = "cpu"
dtype = "bfloat16"
compile = False
