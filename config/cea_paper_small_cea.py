# CEA paper, its own small-scale GPT shape (appendix C.1: hidden 128, 12 layers, 2 heads, context
# 128), on character-level Shakespeare (the paper: Wikipedia + BooksCorpus, BERT vocabulary).
# FFN-Wider w/ CEA (outer ratio 12.5%: Outer-FFN 512, Inner-FFN 3584, direct pathway): same
# parameters as _wider. The paper's optimiser is Adam, lr 1e-4, batch 512,
# 10k warm-up steps, linear decay, and it used mid-training checkpoints; at CPU scale: AdamW lr
# 2e-3, batch 8, a constant lr after a short warm-up. OMP_NUM_THREADS=1 nice -n 10 python train.py
# config/cea_paper_small_cea.py --dtype=float32
base = "cea_paper_small_vanilla.py"  # every setting not below
out_dir = "out-cea-small-cea"
model_args = {'ffn_width_ratio': 32, 'outer_ratio': 0.125, 'current_position': 'direct'}
