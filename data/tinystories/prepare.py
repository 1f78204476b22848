"""
TinyStories with GPT-2's BPE: writes train.bin, val.bin (uint16 ids) and meta.json here.

    python data/tinystories/prepare.py                   # the hub, whole dataset (~2.1M stories)
    python data/tinystories/prepare.py --max_docs 20000  # a quick subset: <= 20k stories per split
    python data/tinystories/prepare.py --data_files TinyStoriesV2-GPT4-train.txt \
                                       --val_files TinyStoriesV2-GPT4-valid.txt  # local, offline

Source: the hub dataset roneneldan/TinyStories (Eldan & Li 2023), its "train" and "validation"
splits streamed with `datasets`; no package registry ships it. --data_files and --val_files read
its .txt files (stories separated by lines "<|endoftext|>"). Each story is encoded and followed by
<|endoftext|>, as nanoGPT's openwebtext.
"""

import argparse
import itertools
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: shapelab/, data/
from data.sources import SplitWriter, get_gpt2_encoding, replaced_together, write_meta  # noqa: E402
from shapelab.tokenizer import GPT2_EOT, GPT2_VOCAB_SIZE  # noqa: E402

HUB_DATASET = "roneneldan/TinyStories"


def txt_stories(paths):
    """The stories of TinyStories' .txt files: the blocks between lines "<|endoftext|>"."""
    for path in paths:
        text = Path(path).read_text(encoding="utf-8")
        yield from (s.strip() for s in re.split(r"^<\|endoftext\|>$", text, flags=re.M)
                    if s.strip())


def hub_texts(split):
    from datasets import load_dataset
    try:
        return (row["text"] for row in load_dataset(HUB_DATASET, split=split, streaming=True))
    except (ConnectionError, OSError) as e:
        sys.exit(f"error: the Hugging Face hub could not be read ({type(e).__name__}): run this "
                 f"with internet access, or download TinyStories' .txt files elsewhere and pass "
                 f"--data_files <train files> --val_files <validation files>")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--data_files", nargs="+", help="local train files; no network")
    p.add_argument("--val_files", nargs="+", help="local validation files, with --data_files")
    p.add_argument("--max_docs", type=int, default=None, help="at most this many stories a split")
    p.add_argument("--out_dir", default=str(Path(__file__).resolve().parent))
    args = p.parse_args(argv)
    if bool(args.data_files) != bool(args.val_files):
        p.error("--data_files and --val_files go together")
    if args.data_files:
        source = f"local files {' '.join(args.data_files)}; val: {' '.join(args.val_files)}"
        val, train = txt_stories(args.val_files), txt_stories(args.data_files)
    else:
        source = f"Hugging Face hub {HUB_DATASET} (streamed), splits train / validation"
        val, train = hub_texts("validation"), hub_texts("train")
    if args.max_docs is not None:
        source += f", at most {args.max_docs} stories per split"
    print(f"source: {source}")
    meta = {"tokenizer": "gpt2", "vocab_size": GPT2_VOCAB_SIZE, "eot_token": GPT2_EOT,
            "source": source, "splits": {}}
    enc = get_gpt2_encoding()
    with replaced_together(args.out_dir) as stage:
        for split, texts in (("val", val), ("train", train)):
            writer = SplitWriter(stage(f"{split}.bin"))
            texts = itertools.islice(texts, args.max_docs)
            meta[f"{split}_docs"] = 0
            while batch := list(itertools.islice(texts, 1024)):  # memory stays bounded
                ids = enc.encode_ordinary_batch(batch)
                writer.append(list(itertools.chain.from_iterable(s + [GPT2_EOT] for s in ids)))
                meta[f"{split}_docs"] += len(batch)
            if meta[f"{split}_docs"] == 0:
                sys.exit(f"error: the {split} split is empty: give files that hold stories")
            meta["splits"][split] = writer.record()
            print(f"{split}: {meta[f'{split}_docs']:,} stories, {writer.tokens:,} tokens")
        write_meta(stage("meta.json"), meta)
    print(f"wrote {args.out_dir}/{{train.bin,val.bin,meta.json}}")
    return meta


if __name__ == "__main__":
    main()
