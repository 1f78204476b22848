# Layer-wise scaling (lws.py), the paper's shape: "Vanilla LWS 12L" of Table 2 (Baroian & Notebomer
# 2025), 12 layers, d=768, head dim 64, group 3, fnn_scalar [2.0, 5.3], qkv_scalar [0.5, 2.0],
# framing False: 178.8M / 140.1M parameters (total / non-embedding) with the paper's vocab of 50304.
# As config/lws_baseline_180m.py otherwise (TinyStories, GPT-2 BPE). One GPU:
#   python data/tinystories/prepare.py && python train.py config/lws_vanilla_12l_180m.py
base = "lws_baseline_12l_180m.py"  # every setting not below
out_dir = "out-lws-vanilla-12l-180m"
# rope_theta and the RMSNorm eps are OLMo-2 190M's (500000, 1e-6); the norms stay pre-norm
# (see docs/lws.md)
model_args = {"ffn_scalars": [2.0, 5.3], "qkv_scalars": [0.5, 2.0], "framed": False,
              "rope_theta": 500000.0, "norm_eps": 1e-6}
