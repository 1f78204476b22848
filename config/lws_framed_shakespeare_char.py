# Layer-wise scaling (lws.py), CPU scale: framed LWS: vanilla with the first and last layer at the
# full size (beta 4, alpha 1). One of five runs at matched non-embedding parameters (~1.45M;
# `python experiments/lws_tables.py --scale=cpu` prints the shapes; the variants' ffn_scalars come
# from lws.match_params against the isotropic baseline). 9 layers, d=128, head dim 16, group 2,
# untied head, QK-norm over the full projections, as the paper's 18-layer rows but ~100x smaller and
# trained for minutes on character-level Shakespeare.
#   OMP_NUM_THREADS=1 python train.py config/lws_framed_shakespeare_char.py
base = "lws_baseline_shakespeare_char.py"  # every setting not below
out_dir = "out-lws-framed-char"
model_args = {"ffn_scalars": [0.42, 3.363], "qkv_scalars": [0.5, 1.0], "framed": True,
              "ffn_multiple": 32}
