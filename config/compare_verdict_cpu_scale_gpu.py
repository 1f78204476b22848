# The CPU verdict's comparison (config/compare_verdict_cpu.py: the GPT's 1.58M non-embedding
# parameters, 2.46M characters a run, every shape at its own rate) with 20 verdict seeds, on one
# GPU, in jobs of fixed length. Why this size and not a larger one: a GPU lent for minutes at a
# time, on a fresh machine with no internet, can carry the 10 MB of prepared Shakespeare and train
# hundreds of these small runs side by side, which answers the small-scale question to about
# +-0.005 in val loss (twice as fine as eight seeds on a CPU); a model at 10 tokens per parameter
# on a corpus that size would repeat the text many times (config/compare_verdict_tinystories.py is
# the larger comparison, for a GPU with the internet and hours). Its own table, its own records: a
# GPU's bf16 differs from a CPU's, so its runs never join the CPU verdict's.
#   python data/shakespeare_char/prepare.py && python data/fortunes/prepare.py   # once, online
#   python compare.py config/compare_verdict_cpu_scale_gpu.py --stop_starting_after=7
# Each job starts no run after 7 minutes and lets the running ones finish (a run is well under a
# minute here), then writes the report of what finished; the records (runs/*/config.py and
# result.json, ~10 kB a run) are all the next job needs: a fresh machine copies them in and goes on.
# Measured on one NVIDIA H200 (16 CPU cores, eager bf16, 12 runs side by side): a run takes 15-40 s
# of wall time (median 24, 600 steps and 7 evaluations with the OOD texts, start included; the
# records' elapsed_s); two jobs, --stop_starting_after=7 and then 3.3 on the
# same machine, trained 210 runs: phase 1 (43 runs) and verdict seeds 1338-1353 of every shape
# (results/compare_verdict_cpu_scale_gpu/). A third job of ~4 minutes finishes the 20 seeds.
preset = "cpu"
out_dir = "out-compare-verdict-cpu-scale-gpu"
record_dir = "results/compare_verdict_cpu_scale_gpu"
learning_rates = (1e-3, 2e-3, 4e-3)
extend_rates = 3
refine_gain = 0.002
seeds = (1337,  # the selection seed, then 20 verdict seeds
         1338, 1339, 1340, 1341, 1342, 1343, 1344, 1345, 1346, 1347,
         1348, 1349, 1350, 1351, 1352, 1353, 1354, 1355, 1356, 1357)
jobs = 12  # one CPU core each and some to spare; the card is shared by time
device = "cuda"
dtype = "bfloat16"
# eager: compiling takes longer than one of these runs trains (~40 s against ~10 s)
compile = False
max_iters = 600
warmup_iters = 50
eval_interval = 100
eval_iters = 16
eval_ood = "fortunes"
