# CEA paper, its own small-scale GPT shape (appendix C.1: hidden 128, 12 layers, 2 heads, context
# 128), on character-level Shakespeare (the paper: Wikipedia + BooksCorpus, BERT vocabulary).
# FFN-Wider (FFN 32d = 4096): 19.66M non-embedding parameters. The paper's
# optimiser is Adam, lr 1e-4, batch 512, 10k warm-up steps, linear decay, and it used mid-training
# checkpoints; at CPU scale: AdamW lr 2e-3, batch 8, a constant lr after a short warm-up.
# OMP_NUM_THREADS=1 nice -n 10 python train.py config/cea_paper_small_wider.py --dtype=float32
base = "cea_paper_small_vanilla.py"  # every setting not below
out_dir = "out-cea-small-wider"
model_args = {'ffn_width_ratio': 32, 'outer_ratio': 1.0}  # exactly model.GPT with ffn_hidden = 32 d
