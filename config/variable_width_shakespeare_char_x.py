# CPU comparison, the ><former (x shape: l* = round(0.75 L), d_l* = 0.3 d), 6 layers x 128 wide, 4
# heads, char-level Shakespeare, 200 steps of 16 x 128 tokens (~4 minutes on a shared 2-core CPU).
# Its constant-width twin is config/variable_width_shakespeare_char_constant.py. OMP_NUM_THREADS=1
# nice -n 10 python train.py config/variable_width_shakespeare_char_x.py
base = "variable_width_shakespeare_char_constant.py"  # every setting not below
out_dir = "out-vw-x"
model_type = "variable_width"
# widths [200, 112, 64, 40, 88, 200]: multiples of 2 x 4 heads
model_args = {"width_schedule": "x", "width_multiple": 8}
