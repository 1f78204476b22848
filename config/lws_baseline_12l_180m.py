# Layer-wise scaling (lws.py), the paper's shape: "Baseline 12L" of Table 2 (Baroian & Notebomer
# 2025), 12 layers, d=768, head dim 64, group 3, fnn_scalar [4.0, 4.0], qkv_scalar [1.0, 1.0],
# framing False: 181.1M / 142.5M parameters (total / non-embedding) with the paper's vocab of 50304.
# As config/lws_baseline_180m.py otherwise (TinyStories, GPT-2 BPE). One GPU:
#   python data/tinystories/prepare.py && python train.py config/lws_baseline_12l_180m.py
base = "lws_baseline_180m.py"  # every setting not below
out_dir = "out-lws-baseline-12l-180m"
n_layer = 12
# rope_theta and the RMSNorm eps are OLMo-2 190M's (500000, 1e-6); the norms stay pre-norm
# (see docs/lws.md)
model_args = {"ffn_scalars": [4.0, 4.0], "qkv_scalars": [1.0, 1.0], "framed": False,
              "rope_theta": 500000.0, "norm_eps": 1e-6}
