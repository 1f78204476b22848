"""
Numbers on the pages written by the command that computes them. A page (README.md, docs/*.md)
quotes a result only inside a generated block, which its command rewrites each time it runs:

    <!-- generated: verdict-cpu by `python compare.py config/compare_verdict_cpu.py` -->
    ...whatever that command wrote...
    <!-- end generated: verdict-cpu -->
"""

import re
from pathlib import Path

from shapelab.checkpoint import write_atomic

BLOCK = re.compile(
    r"(?P<head><!-- generated: (?P<name>[\w.-]+) by `(?P<command>[^`]+)` -->\n)"
    r"(?P<body>.*?)"
    r"(?P<tail><!-- end generated: (?P=name) -->)", re.S)


def blocks_in(text):
    """{name: (command, body)} of a page's generated blocks; an unclosed or doubled one is an
    error."""
    found = {match["name"]: (match["command"], match["body"]) for match in BLOCK.finditer(text)}
    opened = text.count("<!-- generated: ")
    if opened != len(found):
        raise ValueError(f"{opened - len(found)} generated block(s) without a matching "
                         f"'<!-- end generated: NAME -->' line, or standing twice on the page")
    return found


def replace_blocks(text, blocks):
    """The page's text with each block of `blocks` ({name: body}) that it shows holding its body."""
    def body(match):
        new = blocks.get(match["name"])
        if new is None:
            return match[0]
        return match["head"] + new + "\n" * (not new.endswith("\n")) + match["tail"]
    blocks_in(text)  # a malformed page is an error, never silently rewritten
    return BLOCK.sub(body, text)


def write_blocks(paths, blocks):
    """Writes `blocks` into the pages of `paths` (each whole); returns those that changed."""
    changed = []
    for path in map(Path, paths):
        text = path.read_text()
        new = replace_blocks(text, blocks)
        if new != text:
            write_atomic(path, new)
            changed.append(path)
    return changed


def pages(root):
    root = Path(root)
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]
