# CEA paper, CPU scale: as config/cea_shakespeare_char_cea.py, but with appendix C.2's simplified
# current-position rule ('masked': the current position's own key/value is masked instead of taken
# from the direct pathway). Same parameters as _wider and _cea.
#   python train.py config/cea_shakespeare_char_cea_masked.py
#   python bench.py config/cea_shakespeare_char_wider.py config/cea_shakespeare_char_cea.py \
#       config/cea_shakespeare_char_cea_masked.py --modes=eager
base = "cea_shakespeare_char_vanilla.py"  # every setting not below
out_dir = "out-cea-cea-masked"
model_args = {"ffn_width_ratio": 32, "outer_ratio": 0.125, "current_position": "masked"}
