"""The parameter formulas printed in docs/cheatsheet.md are the code's counts.

Each formula is read from the sheet (a code span `name = expression` on a **Parameters** line) and
evaluated with one shape's numbers; it must equal what the code counts for that shape
(model.budget(),
param_summary()['matched'], count_params()...). So the printed formula cannot drift from the code.
"""

import dataclasses
import re
import sys

import pytest

from workshop_checks import ROOT

SHEET = ROOT / "docs" / "cheatsheet.md"
FORMULA = re.compile(r"`(\w+) = ([^`]+)`")


def sections():
    """{heading: [(name, expression), ...]} of the formulas on each section's Parameters lines."""
    found, heading = {}, None
    for line in SHEET.read_text().splitlines():
        if line.startswith("## "):
            heading = line[3:]
            found[heading] = []
        elif heading and ("**Parameters**" in line or line.startswith("  ")):
            found[heading] += FORMULA.findall(line)
    return found


def formulas(keyword):
    matching = [f for heading, f in sections().items() if keyword in heading and f]
    assert len(matching) == 1, (
        f"one section of docs/cheatsheet.md with formulas should name {keyword!r}"
    )
    return matching[0]


def evaluate(keyword, **variables):
    """Run the section's formulas in order (a later one may use an earlier one's name)."""
    names = dict(variables)
    for name, expression in formulas(keyword):
        # globals: seen inside sum(...)
        names[name] = eval(expression, {"sum": sum, "max": max, **names})
    return names


def build(model_type, **args):
    from shapes import build_model
    return build_model(model_type, **args)


def gpt_case():
    m = build("gpt", vocab_size=65, block_size=32, n_layer=4, n_head=4, n_embd=128)
    layers = [(s.n_kv_head, s.head_dim) for s in m.config.layers]
    got = evaluate("Plain GPT", d=128, L=4, d_ff=512, layers=layers)
    return (got["budget"], got["kv_bytes"]), (m.budget(), m.kv_cache_bytes_per_token())


def hourglass_case():
    m = build("hourglass", vocab_size=65, block_size=32, n_layer=4, n_head=4, n_embd=200,
              n_sub_blocks=2, bottleneck_dim=85)
    return evaluate("Hourglass", d=200, L=4, K=2, d_h=85)["budget"], m.budget()


def variable_width_case():
    import variable_width
    m = build("variable_width", vocab_size=65, block_size=32, n_layer=8, n_head=4, n_embd=128,
              width_multiple=8)
    got = evaluate("><former", widths=m.config.layer_widths, d=128)
    return (got["budget"], got["matched"]), (m.budget(), variable_width.param_summary(m)["matched"])


def cea_case():
    m = build("cea", vocab_size=65, block_size=32, n_layer=4, n_head=4, n_embd=64,
              ffn_width_ratio=32, outer_ratio=0.125)
    return evaluate("CEA", d=64, L=4, W=32 * 64)["budget"], m.budget()


def lws_case():
    import lws
    from lws_tables import CPU_BASE
    m = build("lws", **CPU_BASE, n_layer=9, **lws.VARIANTS["crown"])
    layers = [
        (s.n_head * s.head_dim, s.n_kv_head * s.head_dim, s.ffn_hidden) for s in m.config.layers
    ]
    return evaluate("Layer-wise", d=128, layers=layers)["budget"], m.budget()


def mlp_case():
    import mlp_hourglass
    from shapelab.image_tasks import get_task
    m = mlp_hourglass.image_mlp(get_task("mnist_denoise"), latent_dim=2048, hidden_dim=128,
                                n_blocks=4)
    got = evaluate("Image MLP", d_x=784, d_z=2048, d_h=128, L=4, d_out=784)
    counts = mlp_hourglass.count_params(m)
    return (got["P"], got["trainable"]), (counts["total"], counts["trainable"])


@pytest.mark.parametrize("case", [gpt_case, hourglass_case, variable_width_case, cea_case,
                                  lws_case, mlp_case], ids=lambda f: f.__name__)
def test_the_sheets_formula_is_the_codes_count(case):
    formula, code = case()
    assert formula == code, f"docs/cheatsheet.md's formula gives {formula}, the code counts {code}"


def test_the_sheet_fits_a_page():
    lines = SHEET.read_text().splitlines()
    assert len(lines) <= 75, f"docs/cheatsheet.md has {len(lines)} lines: one printed page is ~75"


# ----------------------------------------------------------------------------------------
# Every other number on the sheet: the paper's table it names, or what the code does


FLAT = " ".join(SHEET.read_text().split())  # (the sheet's lines wrap anywhere)


def one(pattern):
    found = re.findall(pattern, FLAT)
    assert len(found) == 1, f"docs/cheatsheet.md should say {pattern!r} once, found {len(found)}"
    return found[0]


# The hourglass paper's Table 2 (113M, every shape matched to the conventional one's budget): val
# loss by (d_model, d_h, K, L). The shapes are PAPER_ROWS' "(T2" rows; the losses are the paper's.
TABLE_2_VAL_LOSS = {(768, 3072, 1, 12): 3.464, (1176, 553, 2, 12): 3.426,
                    (1488, 1122, 2, 6): 3.428, (1032, 418, 4, 12): 3.458,
                    (1368, 694, 4, 6): 3.418}
TABLE_4_113M_HOURGLASS = 3.426  # Table 4's val loss of Table 3's 113M shape (Table 2 has 3.458)


def test_the_sheets_best_113m_hourglass_is_table_2s_best():
    """Table 2's best hourglass (the lowest val loss) is the shape the sheet names, with its loss
    and the conventional GPT's; Table 3's shape (what the paper scales up) is told apart."""
    from hourglass_tables import PAPER_ROWS
    table_2 = {(d, d_h, k, n): label for label, d, d_h, k, n, *_ in PAPER_ROWS if "(T2" in label}
    assert set(table_2) == set(TABLE_2_VAL_LOSS)
    hourglass = {shape: loss for shape, loss in TABLE_2_VAL_LOSS.items() if shape[2] > 1}
    best = min(hourglass, key=hourglass.get)
    gpt = next(loss for shape, loss in TABLE_2_VAL_LOSS.items() if shape[2] == 1)
    k, n, d, d_h, ratio, loss, gpt_loss = one(
        r"paper's best \(Table 2\) is K = (\d+), L = (\d+), d = (\d+), d_h = (\d+) ~ ([\d.]+) d: "
        r"val loss ([\d.]+), the GPT's ([\d.]+);")
    assert (int(d), int(d_h), int(k), int(n)) == best
    assert ratio == f"{best[1] / best[0]:.2f}" and float(loss) == hourglass[best]
    assert float(gpt_loss) == gpt
    scaled = [(d, d_h, k, n) for label, d, d_h, k, n, *_ in PAPER_ROWS
              if label.startswith("113M hourglass") and "T3" in label]
    assert len(scaled) == 1 and scaled[0] != best
    k, ratio, n, loss = one(r"it scales up K = (\d+), d_h ~ ([\d.]+) d \(Table 3; at L = (\d+): "
                            r"([\d.]+) in Table 2")
    d, d_h, k3, n3 = scaled[0]
    assert (int(k), int(n), ratio, float(loss)) == (k3, n3, f"{d_h / d:.1f}",
                                                    TABLE_2_VAL_LOSS[scaled[0]])
    assert float(one(r"in Table 2, ([\d.]+) in Table 4\)")) == TABLE_4_113M_HOURGLASS


def test_the_main_jobs_shape_is_train_pys_default():
    from shapes import train_defaults
    d = train_defaults()
    layers, width, heads = one(r"`python model.py --n_layer=(\d+) --n_embd=(\d+) --n_head=(\d+)` "
                               r"\(the main job's shape\)")
    assert (int(layers), int(width), int(heads)) == (d["n_layer"], d["n_embd"], d["n_head"])


def test_the_variable_width_command_prints_the_mean_width_the_sheet_says(monkeypatch, capsys):
    import runpy
    layers, width, mean = one(r"`python variable_width.py --n_layer=(\d+) --n_embd=(\d+)` \(the "
                              r"200M shape, mean width (\d+);")
    monkeypatch.setattr(sys, "argv", ["variable_width.py", f"--n_layer={layers}",
                                      f"--n_embd={width}"])
    runpy.run_path(str(ROOT / "variable_width.py"), run_name="__main__")
    assert f"(mean {int(mean)}.0, " in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["variable_width.py"])  # its default: the paper's 200M shape
    runpy.run_path(str(ROOT / "variable_width.py"), run_name="__main__")
    assert f"(mean {int(mean)}.0, " in capsys.readouterr().out


def test_the_shape_rules_constants_are_the_codes_defaults():
    import cea
    import lws
    from model import GPTConfig
    from shapes import CPU_PRESET
    import variable_width
    assert GPTConfig(vocab_size=8, n_embd=64, n_head=4).layers[0].ffn_hidden == 4 * 64
    assert "(d_ff = 4 d)" in FLAT
    vw = variable_width.VariableWidthConfig
    ratio, layer_ratio = one(r"geometric down to w_l\* = ([\d.]+) d at l\* = round\(([\d.]+) L\)")
    multiple = one(r"widths rounded to a multiple of (\d+)\.")
    defaults = {f.name: f.default for f in dataclasses.fields(vw)}
    assert (float(ratio), float(layer_ratio), int(multiple)) == (
        defaults["bottleneck_width_ratio"], defaults["bottleneck_layer_ratio"],
        defaults["width_multiple"])
    wider, rho = one(r"one FFN width W = (\d+) d \(FFN-Wider\).* CEA is rho = ([\d.]+)%")
    cea_defaults = {f.name: f.default for f in dataclasses.fields(cea.CEAConfig)}
    assert (int(wider), float(rho) / 100) == (cea_defaults["ffn_width_ratio"],
                                              CPU_PRESET["outer_ratio"])
    paper, cpu = one(r"make_divisible\(beta_i d, (\d+)\) \(the CPU shapes: (\d+)\)")
    lws_defaults = {f.name: f.default for f in dataclasses.fields(lws.LWSConfig)}
    assert (int(paper), int(cpu)) == (lws_defaults["ffn_multiple"], CPU_PRESET["ffn_multiple"])
    beta, alpha = one(r"sets the first and last layer to beta = (\d+), alpha = (\d+);")
    m = build("lws", vocab_size=65, block_size=32, n_layer=6, n_head=4, n_embd=128,
              ffn_multiple=32, **lws.VARIANTS["framed"])
    for spec in (m.config.layers[0], m.config.layers[-1]):
        assert (spec.ffn_hidden, spec.n_head * spec.head_dim) == (int(beta) * 128,
                                                                  int(alpha) * 128)


@pytest.mark.parametrize("section,module", [("Hourglass", "hourglass"),
                                            ("><former", "variable_width"), ("CEA", "cea"),
                                            ("Layer-wise", "lws"), ("Image MLP", "mlp_hourglass")])
def test_each_papers_arxiv_id_is_its_files(section, module):
    text = SHEET.read_text().split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    arxiv = re.search(r"arXiv:(\d{4}\.\d{5})", text).group(1)
    assert f"arXiv:{arxiv}" in (ROOT / f"{module}.py").read_text().split('"""')[1]
