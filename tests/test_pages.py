"""Every generated block on every page (README.md, docs/*.md) is what its command computes from
the committed records today: a number typed by hand into a block, or left behind when the records
change, fails here, naming the command that writes it anew. The command a block's marker names
is read as the command line it is (`producer`); a block whose command computes nothing fails too."""

import shlex
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from shapelab.pages import blocks_in, pages, replace_blocks

sys.path.insert(0, str(ROOT / "experiments"))


def producer(command):
    """What `command` (a block's marker) writes into the pages, computed from the committed records
    without running it: {block name: text}; None for a command that writes no blocks."""
    words = shlex.split(command)
    args = [w for w in words[2:] if not w.startswith("--")]
    options = dict(w[2:].split("=", 1) for w in words[2:] if w.startswith("--") and "=" in w)
    if words[:3] == ["python", "-m", "shapelab.looks"] and len(words) == 3:
        from shapelab import looks
        return looks.page_blocks()
    if words[:2] == ["python", "experiments/mlp_hourglass_fronts.py"] and "out" in options:
        import mlp_hourglass_fronts
        return mlp_hourglass_fronts.page_blocks([ROOT / a for a in args],
                                                Path(options["out"]).name)
    if words[:2] == ["python", "experiments/mlp_hourglass_reference.py"] and len(args) == 1:
        import mlp_hourglass_reference
        return mlp_hourglass_reference.page_blocks(ROOT / args[0])
    if words[:2] == ["python", "experiments/cea_ood_verdict.py"] and len(args) == 1:
        import cea_ood_verdict
        return cea_ood_verdict.page_blocks(ROOT / args[0])
    return None


def every_block():
    found = []
    for page in pages(ROOT):
        for name, (command, body) in blocks_in(page.read_text()).items():
            found.append(pytest.param(page, name, command, body,
                                      id=f"{page.relative_to(ROOT)}:{name}"))
    return found


def test_the_pages_hold_generated_blocks():
    """Each kind of block is on a page: the verdicts, the controls and cost, each experiment's."""
    names = {p.values[1] for p in every_block()}
    assert {"readme-verdicts", "verdicts.two_looks", "verdict_cpu.cost", "laptop",
            "paper-hourglass", "paper-variable_width", "paper-cea", "paper-lws",
            "mlp_fashion_denoise_forms_fronts.brief", "mlp_reference.table"} <= names


@pytest.mark.parametrize("page, name, command, body", every_block())
def test_each_generated_block_is_what_its_command_computes_today(page, name, command, body):
    where = Path(page).relative_to(ROOT)
    computed = producer(command)
    assert computed is not None, (
        f"{where}: the block {name!r} names `{command}`, which writes no blocks (tests/"
        f"test_pages.py's producer reads the commands that do)")
    assert name in computed, f"{where}: `{command}` computes no block {name!r}"
    text = computed[name] if computed[name].endswith("\n") else computed[name] + "\n"
    assert body == text, (
        f"{where}: the block {name!r} is not what `{command}` computes from the committed "
        f"records today: run it. It computes:\n{text}")


def test_a_block_is_rewritten_whole_and_the_prose_around_it_kept():
    """replace_blocks: only the named block's body changes; a page with an unclosed block is an
    error, never rewritten."""
    page = ("prose 1.234\n<!-- generated: a by `cmd` -->\nold\n<!-- end generated: a -->\n"
            "<!-- generated: b by `cmd` -->\nkept\n<!-- end generated: b -->\n")
    new = replace_blocks(page, {"a": "new 5.678", "c": "not on the page"})
    assert new == page.replace("old\n", "new 5.678\n")
    with pytest.raises(ValueError, match="without a matching"):
        replace_blocks(page + "<!-- generated: d by `cmd` -->\nopen\n", {"a": "x"})
