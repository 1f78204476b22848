# CEA paper, GPU scale: FFN-Wider GPT, H=768, 12 layers, FFN 32x (SwiGLU: 3 x 768 x 24576 per
# layer).
#   python train.py config/cea_gpt_h768_wider.py
base = "cea_gpt_h768_vanilla.py"  # every setting not below
out_dir = "out-cea-h768-wider"
model_args = {"ffn_width_ratio": 32, "outer_ratio": 1.0}
