# CEA paper, GPU scale: FFN-Wider GPT w/ CEA (outer ratio 12.5%, section 6.1), H=768, 12 layers.
# For the CAA ratio of appendix I use --model_args="{'ffn_width_ratio': 32, 'outer_ratio': 0.375}".
#   python train.py config/cea_gpt_h768_cea.py
base = "cea_gpt_h768_vanilla.py"  # every setting not below
out_dir = "out-cea-h768-cea"
model_args = {"ffn_width_ratio": 32, "outer_ratio": 0.125, "current_position": "direct"}
