"""
Your own text: writes train.bin, val.bin (uint16 ids) and meta.json here, from a file you give.

    python data/text/prepare.py --input=my_novel.txt                    # characters
    python train.py --dataset=text --out_dir=out-text                   # a run folder of its own
    python data/text/prepare.py --input=my_novel.txt --tokenizer=gpt2   # or GPT-2's BPE

--input is a UTF-8 text file (a byte-order mark and Windows line ends are fine). The first 90% of
the characters train, the last 10% val. A text train.py cannot use is refused in one line; the
old files stay.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repo root: shapelab/, data/
from shapelab.configurator import ConfigError, need, parse_overrides, usage_error  # noqa: E402
from data.sources import prepare_text  # noqa: E402


def read_text(path):
    """The text of one file, as UTF-8: ConfigError (one line) for one that is not."""
    need(path.is_file(), f"--input={path} is not a file: give a text file")
    try:
        text = path.read_bytes().decode("utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError as e:
        raise ConfigError(f"--input={path} is not UTF-8 text (byte {e.object[e.start]:#04x}): "
                          f"save it as UTF-8, or convert it with iconv") from None
    need(text.strip(), f"--input={path} is empty: give a file that holds text")
    return text


def main(argv):
    defaults = dict(input="", tokenizer="char", data_dir="", block_size=128)
    try:
        args = parse_overrides(argv, defaults)
        need(args["input"], "name your text: python data/text/prepare.py --input=FILE")
        need(args["tokenizer"] in ("char", "gpt2"),
             f"tokenizer={args['tokenizer']!r}: use char or gpt2")
        data_dir = Path(args["data_dir"]) if args["data_dir"] else HERE
        path = Path(args["input"])
        text = read_text(path)
        meta = prepare_text(text, args["tokenizer"], data_dir, f"your text: {path.resolve()}, "
                            f"{len(text):,} characters", args["block_size"], f"--input={path}")
    except (ConfigError, OSError, RuntimeError, ValueError) as e:  # a folder not writable, no BPE
        usage_error(e)
    splits = meta["splits"]
    print(f"{meta['source']}; vocabulary {meta['vocab_size']:,} ({args['tokenizer']})")
    print(f"train tokens: {splits['train']['tokens']:,}  val tokens: {splits['val']['tokens']:,}")
    print(f"wrote {data_dir}/{{train.bin,val.bin,meta.json}}")
    data = "--dataset=text" if data_dir == HERE else f"--data_dir={data_dir}"
    out_dir = "out-text" if data_dir == HERE else f"out-{data_dir.resolve().name}"
    print(f"train on it in a run folder of its own: python train.py {data} --out_dir={out_dir}")
    print(f"sample it: python sample.py --out_dir={out_dir}")
    print(f"export it for transformers: python export.py {out_dir} {out_dir}-hf")
    return meta


if __name__ == "__main__":
    main(sys.argv[1:])
