"""The parameter formulas printed in docs/cheatsheet.md are the code's counts.

Each formula is read from the sheet (a code span `name = expression` on a **Parameters** line) and
evaluated with one shape's numbers; it must equal what the code counts for that shape
(model.budget(),
param_summary()['matched'], count_params()...). So the printed formula cannot drift from the code.
"""

import re

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
    from configurator import build_model
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
    m = build("cea", vocab_size=65, block_size=32, n_layer=4, n_head=4, n_embd=64, ffn_mult=32,
              outer_ratio=0.125)
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
    from image_tasks import get_task
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
