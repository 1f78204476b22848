# CEA paper, CPU scale: FFN-Wider GPT (FFN 32x = 2048 hidden) on character-level Shakespeare, H=64,
# 4 layers. nice -n 10 python train.py config/cea_shakespeare_char_wider.py
base = "cea_shakespeare_char_vanilla.py"  # every setting not below
out_dir = "out-cea-wider"
model_args = {"ffn_width_ratio": 32, "outer_ratio": 1.0}
