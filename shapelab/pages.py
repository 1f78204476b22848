"""
Numbers on the pages written by the command that computes them. A page (README.md, docs/*.md)
quotes a result only inside a generated block:

    <!-- generated: verdict-cpu by `python compare.py config/compare_verdict_cpu.py` -->
    ...whatever that command wrote...
    <!-- end generated: verdict-cpu -->

The command that computes the numbers writes the block's text (`write_blocks`) each time it runs;
tests/test_pages.py recomputes every block of every page from the committed records and fails when
a page holds anything else. Text outside the blocks is prose: it may explain a number but never
types one that a record holds.
"""

import re
from pathlib import Path

from shapelab.checkpoint import write_atomic

BLOCK = re.compile(
    r"(?P<head><!-- generated: (?P<name>[\w.-]+) by `(?P<command>[^`]+)` -->\n)"
    r"(?P<body>.*?)"
    r"(?P<tail><!-- end generated: (?P=name) -->)", re.S)


class PageError(ValueError):
    pass


def blocks_in(text):
    """{name: (command, body)} of every generated block of a page's text, in order."""
    found = {}
    for match in BLOCK.finditer(text):
        name = match["name"]
        if name in found:
            raise PageError(f"the block {name!r} stands twice on one page")
        found[name] = (match["command"], match["body"])
    opened = len(re.findall(r"<!-- generated: ", text))
    if opened != len(found):
        raise PageError(f"{opened - len(found)} generated block(s) without a matching "
                        f"'<!-- end generated: NAME -->' line")
    return found


def replace_blocks(text, blocks):
    """The page's text with each block named in `blocks` ({name: body}) holding that body (a
    body ends in a newline, so the end marker keeps its own line). Names the page lacks are left
    out: a command writes only the blocks its pages show."""
    def body(match):
        new = blocks.get(match["name"])
        if new is None:
            return match[0]
        new = new if new.endswith("\n") else new + "\n"
        return match["head"] + new + match["tail"]
    blocks_in(text)  # a malformed page is an error, never silently rewritten
    return BLOCK.sub(body, text)


def write_blocks(paths, blocks):
    """Writes `blocks` ({name: body}) into every page of `paths` that shows them (each file
    whole, atomically); returns the pages that changed."""
    changed = []
    for path in map(Path, paths):
        text = path.read_text()
        new = replace_blocks(text, blocks)
        if new != text:
            write_atomic(path, new)
            changed.append(path)
    return changed


def pages(root):
    """The pages that may hold generated blocks: README.md and every docs/*.md under root."""
    root = Path(root)
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]
