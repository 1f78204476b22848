# The paper's 113M pair (Liao et al. 2026, Tables 2-3), part 2 of 2: the hourglass model,
# 1032 wide, 12 layers, 12 heads (head size 86), K = 4 sub-blocks with bottleneck d_h = 418:
# 51.1M attention + 62.1M FFN = 113.3M non-embedding parameters, the baseline's budget
# (`python hourglass.py` finds this shape from ratio 0.4). Same data, tokens, seed and schedule
# as config/hourglass_113m_gpu_baseline.py; only the lines marked "hourglass" differ. See that
# file for the deviations from the paper's setup (TinyStories + GPT-2 BPE vocab 50304 instead of
# OLMo-2's data and tokenizer, context 1024 instead of 2048, no z-loss).
# One GPU:  python train.py config/hourglass_113m_gpu.py
base = "hourglass_113m_gpu_baseline.py"  # every setting not below
out_dir = "out-hourglass-113m"  # hourglass
model_type = "hourglass"  # hourglass
n_embd = 1032  # hourglass: d_model
model_args = {"n_sub_blocks": 4, "bottleneck_dim": 418}  # hourglass: K and d_h
