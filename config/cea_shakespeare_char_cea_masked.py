# CEA paper, CPU scale: as config/cea_shakespeare_char_cea.py, but with appendix C.2's simplified
# current-position rule ('masked': the current position's own key/value is masked instead of taken
# from the direct pathway). Same parameters as _wider and _cea.
#   python train.py config/cea_shakespeare_char_cea_masked.py
#   python bench.py config/cea_shakespeare_char_wider.py config/cea_shakespeare_char_cea.py \
#       config/cea_shakespeare_char_cea_masked.py --modes=eager
out_dir = "out-cea-cea-masked"
eval_interval = 150
eval_iters = 10
log_interval = 10
dataset = "shakespeare_char"
batch_size = 16
block_size = 128
n_layer = 4
n_head = 4
n_embd = 64
dropout = 0.0
learning_rate = 3e-3
max_iters = 300
lr_decay_iters = 300
min_lr = 2e-4
beta2 = 0.99
warmup_iters = 25
sample_tokens = 0
model_type = "cea"
model_args = {"ffn_width_ratio": 32, "outer_ratio": 0.125, "current_position": "masked",
              "attention_impl": "causal"}
