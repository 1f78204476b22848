# Hourglass FFN comparison, CPU scale, part 2 of 2: the hourglass model at the baseline's budget.
# K = 4 sub-blocks per FFN slot, target d_h/d = 0.4 (the paper's best 113M ratio), same 4 layers
# and 6 heads. `python hourglass.py --n_layer=4 --n_head=6 --n_embd=192 --vocab_size=84
# --block_size=128` matches it: d_model 264, d_h 98 -> 2.363M non-embedding parameters vs the
# baseline's 2.361M (+0.1%). Same data, tokens, seed and schedule as
# config/hourglass_shakespeare_cpu_baseline.py; only the lines marked "hourglass" differ.
#   python train.py config/hourglass_shakespeare_cpu.py
base = "hourglass_shakespeare_cpu_baseline.py"  # every setting not below
out_dir = "out-hourglass-cpu"  # hourglass
model_type = "hourglass"  # hourglass
n_embd = 264  # hourglass: d_model
model_args = {"n_sub_blocks": 4, "bottleneck_dim": 98}  # hourglass: K and d_h
