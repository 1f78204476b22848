# The CPU verdict: which shape wins at the CPU preset's budget (a 6-layer, 128-wide GPT's 1.58M
# non-embedding parameters, 600 steps x 32 x 128 = 2.46M characters of Shakespeare per run), with
# every shape at its own learning rate and three seeds:
#   phase 1: 10 shapes x 3 rates (seed 1337), and past an end a shape chose up to 3 more;
#   phase 2: 2 more seeds at each shape's chosen rate = 50 runs and the extensions (~55), two
#   one-thread train.py side by side.
#   python compare.py config/compare_verdict_cpu.py
# Every finished run (config.py, result.json) goes to docs/compare_verdict_cpu/runs/ as it finishes,
# the report (results.csv, results.md, verdict.png, ...) to docs/compare_verdict_cpu/ at the end;
# a fresh checkout continues from them.
# Time, measured roughly (one GPT run at this size, a few minutes of CPU on a machine shared with
# other work) on 2 cores of an Intel Xeon with AMX (lscpu: "Intel(R) Xeon(R) Processor"), bf16:
# the GPT trains at 546 ms/step on one thread with a second run beside it (7,500 tokens/s each;
# alone on two threads 341 ms/step, 12,000 tokens/s: two runs side by side are ~25% faster), so a
# GPT run is ~6.2 min (600 steps, 7 evaluations, start); the shapes take 1.13x the GPT's time on
# average (their speeds in docs/compare.md): ~28 pairs x ~7 min = ~3.3 hours. Interrupt it at
# will: the same command resumes.
preset = "cpu"
out_dir = "out-compare-verdict-cpu"
record_dir = "docs/compare_verdict_cpu"  # each finished run kept there as it finishes: commit it
# around the preset's 2e-3, x2 apart; a shape whose best is at an end tries one more rate past it,
# and again, up to 3 (FFN-Wider, d = 48, chose 4e-3, then 8e-3, then stayed at 8e-3 against 1.6e-2;
# the GPT, d = 128, chose 2e-3; the hourglass, d = 176, did better at 1e-3 than at 2e-3: 5e-4)
learning_rates = (1e-3, 2e-3, 4e-3)
extend_rates = 3
seeds = (1337, 1338, 1339)
jobs = 2
dtype = "bfloat16"  # AMX / AVX512-BF16; a CPU without them: dtype = "float32" (~3x slower)
max_iters = 600
warmup_iters = 50
eval_interval = 100
eval_iters = 16  # the final val loss over 16 x 32 x 128 = 65k characters (the same for a seed)
# every new run also scores four English texts at each evaluation (data/fortunes, prepared on first
# use): experiments/cea_ood_verdict.py compares CEA and FFN-Wider along these trajectories at equal
# in-domain loss. A measurement only: the runs recorded without it are the same runs
eval_ood = "fortunes"
