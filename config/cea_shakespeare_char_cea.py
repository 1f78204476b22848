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
base = "cea_shakespeare_char_vanilla.py"  # every setting not below
out_dir = "out-cea-cea"
model_args = {"ffn_width_ratio": 32, "outer_ratio": 0.125, "current_position": "direct"}
