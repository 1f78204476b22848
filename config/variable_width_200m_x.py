# The paper's 200M shape (Table 1: L = 16, d = 640, 16 heads, SwiGLU 4 w_l, untied head) as a
# ><former, for a GPU: widths [1152, 960, 832, 704, 608, 512, 448, 352, 320, 256, 224, 192, 288,
# 480, 736, 1152] (mean 576, Table 2), parameter-matched to config/variable_width_200m_constant.py.
# TinyStories with GPT-2 BPE instead of the paper's DCLM / cl100k_base, 1024-token context instead
# of 4096, and our standard init + AdamW instead of muP. Prepare the data first (online):
#   python data/tinystories/prepare.py
#   python train.py config/variable_width_200m_x.py
#   torchrun --standalone --nproc_per_node=8 train.py config/variable_width_200m_x.py
base = "variable_width_200m_constant.py"  # every setting not below
out_dir = "out-vw-200m-x"
model_type = "variable_width"
model_args = {"width_schedule": "x", "bottleneck_layer_ratio": 0.75, "bottleneck_width_ratio": 0.3,
              "width_multiple": 32}
