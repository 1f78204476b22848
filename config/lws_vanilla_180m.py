# Layer-wise scaling (lws.py), the paper's shape: "Vanilla LWS 18L" of Table 2 (Baroian & Notebomer
# 2025), 18 layers, d=768, head dim 64, group 3, fnn_scalar [1.0, 4.0], qkv_scalar [0.5, 1.0],
# framing False: 179.7M parameters / 141.1M non-embedding with the paper's vocab of 50304 (a little
# less with TinyStories' 50257). The paper trained on 5B DCLM tokens (batch 384 x 1024, 13k steps)
# with OLMo-core; this is the same shape on TinyStories (GPT-2 BPE), ~1B tokens. One GPU:
#   python data/tinystories/prepare.py && python train.py config/lws_vanilla_180m.py
base = "lws_baseline_180m.py"  # every setting not below
out_dir = "out-lws-vanilla-180m"
# rope_theta and the RMSNorm eps are OLMo-2 190M's (500000, 1e-6); the norms stay pre-norm
# (see docs/lws.md)
model_args = {"ffn_scalars": [1.0, 4.0], "qkv_scalars": [0.5, 1.0], "framed": False,
              "rope_theta": 500000.0, "norm_eps": 1e-6}
