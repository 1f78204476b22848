# CEA paper, CPU scale: FFN-Wider GPT w/ CEA (12.5% of the 32x width outside, 87.5% as the Inner-FFN
# inside attention, direct pathway) on character-level Shakespeare, H=64, 4 layers. Same
# parameters as _wider.
#   nice -n 10 python train.py config/cea_shakespeare_char_cea.py
# The "w/o direct pathway" ablation: add --out_dir=out-cea-cea-nodirect
#   --model_args="{'ffn_width_ratio': 32, 'outer_ratio': 0.125, 'current_position': 'transformed'}"
# After the _vanilla, _wider and _cea runs (docs/cea.md):
#   python experiments/cea_contribution.py --out_dirs=out-cea-vanilla,out-cea-wider,out-cea-cea
#   python bench.py config/cea_shakespeare_char_wider.py config/cea_shakespeare_char_cea.py
#     --modes=eager
out_dir = "out-cea-cea"
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
model_args = {"ffn_width_ratio": 32, "outer_ratio": 0.125, "current_position": "direct",
              "attention_impl": "causal"}
