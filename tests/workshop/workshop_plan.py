"""docs/workshop.md read as the tests read it: its fenced blocks, the commands in them, and the
printout each quotes.

- A ```bash block holds commands, one a line (comments stripped); a ```python block is one snippet,
  run as `python -c <snippet>` in the repository's folder.
- A plain ``` (or ```text) block quotes a printout: that of the LAST command of the nearest code
  block before it. Its lines must appear, in order, in what the command prints; `...` inside a line
  stands for any text there (tests/workshop/test_workshop_commands.py compares them).
- A quoted printout that the test suite cannot produce (a command that trains for minutes) is
  labelled in the text between its command and the block: "measured on <the CPU>, ... <bf16 |
  fp32 | float32 | bfloat16>".
"""

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "docs" / "workshop.md"
SOLUTIONS = ROOT / "docs" / "workshop_solutions.md"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
# "measured on" a CPU, then a precision, in the same sentence
MEASURED = re.compile(
    r"measured on [^.]*?(?:Xeon|EPYC|Ryzen|Core|Apple|Graviton|CPU)[^.]*?"
    r"\b(?:bf16|fp32|float32|bfloat16)\b", re.I | re.S)


@dataclass
class Block:
    lang: str  # bash, python, or "" for a quoted printout
    body: str
    start: int  # character offsets of the whole fenced block in the text
    end: int
    line: int  # 1-indexed line of its opening fence

    @property
    def commands(self):
        if self.lang == "python":
            return [f"python -c {self.body.strip()}"]
        found = []
        for line in self.body.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                found.append(line)
        return found


def blocks(text):
    return [Block("" if m.group(1) == "text" else m.group(1), m.group(2), m.start(), m.end(),
                  text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


def plan_commands(text=None):
    """Every command of the plan's bash and python blocks, in order."""
    text = PLAN.read_text() if text is None else text
    return [c for b in blocks(text) if b.lang in ("bash", "python") for c in b.commands]


def quoted_printouts(text=None):
    """[(command, block, the text between the command's block and this one)] for every quoted
    printout of the plan."""
    text = PLAN.read_text() if text is None else text
    found, last = [], None
    for block in blocks(text):
        if block.lang in ("bash", "python"):
            last = block
        elif block.lang == "":
            assert last is not None and last.commands, (
                f"docs/workshop.md line {block.line}: a quoted printout with no command before it")
            found.append((last.commands[-1], block, text[last.end:block.start]))
    return found


def missing_lines(quoted, printed):
    """The quoted lines that do not appear, in order, in `printed` (`...` = any text)."""
    out = printed.splitlines()
    missing, i = [], 0
    for line in quoted.splitlines():
        if not line.strip() or line.strip() == "...":
            continue
        parts = [re.escape(p) for p in line.split("...")]
        pattern = re.compile(".*?".join(parts))
        j = next((k for k in range(i, len(out)) if pattern.search(out[k])), None)
        if j is None:
            missing.append(line)
        else:
            i = j + 1
    return missing


def section(text, heading):
    """(start, end) of the `## heading...` section of a markdown text."""
    start = text.index(f"\n## {heading}")
    following = text.find("\n## ", start + 1)
    return start, following if following >= 0 else len(text)


def offline_shakespeare():
    """(characters, vocabulary) of the offline Shakespeare data, as data/shakespeare_char/readme.md
    states them (its offline row: the data a room without internet trains on)."""
    readme = (ROOT / "data" / "shakespeare_char" / "readme.md").read_text()
    chars, vocab = re.search(r"^\| offline.*\| ([\d,]+) characters, (\d+)-character vocabulary \|",
                             readme, re.M).groups()
    return int(chars.replace(",", "")), int(vocab)
