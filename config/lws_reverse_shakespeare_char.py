# Layer-wise scaling (lws.py), CPU scale: reverse LWS: layers shrink with depth, framed. One of five
# runs at matched non-embedding parameters (~1.45M; `python experiments/lws_tables.py --scale=cpu`
# prints the shapes; the variants' ffn_scalars come from lws.match_params against the isotropic
# baseline). 9 layers, d=128, head dim 16, group 2, untied head, QK-norm over the full projections,
# as the paper's 18-layer rows but ~100x smaller and trained for minutes on character-level
# Shakespeare.
#   OMP_NUM_THREADS=1 python train.py config/lws_reverse_shakespeare_char.py
base = "lws_baseline_shakespeare_char.py"  # every setting not below
out_dir = "out-lws-reverse-char"
model_args = {"ffn_scalars": [3.363, 0.42], "qkv_scalars": [1.0, 0.5], "framed": True,
              "ffn_multiple": 32}
