"""
TinyStories with GPT-2's BPE: writes train.bin, val.bin (uint16 ids) and meta.json here.

    python data/tinystories/prepare.py                   # the hub, whole dataset (~2.1M stories)
    python data/tinystories/prepare.py --max_docs 20000  # a quick subset: <= 20k stories per split
    python data/tinystories/prepare.py --data_files TinyStoriesV2-GPT4-train.txt \
                                       --val_files TinyStoriesV2-GPT4-valid.txt  # local, offline

Source: the hub dataset roneneldan/TinyStories (Eldan & Li 2023), its "train" and "validation"
splits streamed with `datasets`; no package registry ships it. --data_files reads local .parquet
/ .json / .jsonl / .csv files with a "text" column, or .txt files in TinyStories' own format
(stories separated by lines "<|endoftext|>"); without --val_files, the first --val_docs stories
are val. Each story is encoded (tiktoken, in batches) and followed by <|endoftext|>, as nanoGPT's
openwebtext, and appended to the new .bin as it comes: memory stays bounded.
"""

import argparse
import itertools
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: shapelab/, data/
from data.sources import (SplitWriter, check_input_file, file_errors_in_one_line,  # noqa: E402
                          get_gpt2_encoding, hub_unreachable, replaced_together, write_meta)
from shapelab.tokenizer import GPT2_EOT, GPT2_VOCAB_SIZE  # noqa: E402

HUB_DATASET = "roneneldan/TinyStories"
LOCAL_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv"}
OFFLINE_HELP = f"""error: TinyStories ({HUB_DATASET}) comes from the Hugging Face hub only, \
and the hub could not be read: {{why}}. Run this script with internet access, or download the \
files elsewhere and run python data/tinystories/prepare.py --data_files <train files> \
--val_files <validation files>"""


def txt_stories(paths):
    """The stories of TinyStories' .txt files: the blocks between lines "<|endoftext|>"."""
    for path in paths:
        with open(path, encoding="utf-8") as f:
            story = ""
            for line in itertools.chain(f, ["<|endoftext|>"]):
                if line.strip() != "<|endoftext|>":
                    story += line
                elif story.strip():
                    yield story.strip()
                    story = ""


def local_texts(paths):
    """The texts of local files of one kind, streamed."""
    for path in paths:
        check_input_file(path, "--data_files/--val_files")
    suffixes = {Path(p).suffix.lower() for p in paths}
    if len(suffixes) != 1 or not suffixes <= {".txt", *LOCAL_BUILDERS}:
        raise ValueError(f"local files must all be one of .txt {' '.join(LOCAL_BUILDERS)}; "
                         f"got {sorted(suffixes)}")
    if suffixes == {".txt"}:
        return txt_stories(paths)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # (before datasets is imported)
    from datasets import load_dataset
    rows = load_dataset(LOCAL_BUILDERS[suffixes.pop()], data_files=[str(p) for p in paths],
                        split="train", streaming=True)
    return (row["text"] for row in rows)


def hub_texts(split):
    from datasets import load_dataset
    return (row["text"] for row in load_dataset(HUB_DATASET, split=split, streaming=True))


def write_stories(texts, path, enc, max_docs):
    """(how many stories, the split's record) of texts encoded into the file path."""
    writer, n_docs, texts = SplitWriter(path), 0, itertools.islice(texts, max_docs)
    while batch := list(itertools.islice(texts, 1024)):
        ids = enc.encode_ordinary_batch(batch)
        writer.append(list(itertools.chain.from_iterable(story + [GPT2_EOT] for story in ids)))
        n_docs += len(batch)
    return n_docs, writer.record()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data_files", nargs="+", help="local train files; no network")
    p.add_argument("--val_files", nargs="+", help="default: the first --val_docs of --data_files")
    p.add_argument("--val_docs", type=int, default=1000)
    p.add_argument("--max_docs", type=int, default=None, help="at most this many stories a split")
    p.add_argument("--out_dir", default=str(Path(__file__).resolve().parent))
    args = p.parse_args(argv)
    if args.data_files:
        source = f"local files {' '.join(args.data_files)}"
        train = local_texts(args.data_files)
        if args.val_files:
            source += f"; val: {' '.join(args.val_files)}"
            val = local_texts(args.val_files)
        else:
            source += f"; val: their first {args.val_docs} stories"
            val = itertools.islice(train, args.val_docs)  # read first: train is the rest
    else:
        why = hub_unreachable()
        if why is not None:
            sys.exit(OFFLINE_HELP.format(why=why))
        source = f"Hugging Face hub {HUB_DATASET} (streamed), splits train / validation"
        train, val = hub_texts("train"), hub_texts("validation")
    if args.max_docs is not None:
        source += f", at most {args.max_docs} stories per split"
    print(f"source: {source}")
    meta = {"tokenizer": "gpt2", "vocab_size": GPT2_VOCAB_SIZE, "eot_token": GPT2_EOT,
            "source": source}
    enc, splits = get_gpt2_encoding(), {}
    with file_errors_in_one_line(), replaced_together(args.out_dir) as stage:
        for split, texts in (("val", val), ("train", train)):
            n_docs, splits[split] = write_stories(texts, stage(f"{split}.bin"), enc, args.max_docs)
            if n_docs == 0:
                raise SystemExit(f"error: the {split} split is empty; give more stories (or "
                                 f"--val_files / a smaller --val_docs)")
            meta[f"{split}_docs"] = n_docs
            print(f"{split}: {n_docs:,} stories, {splits[split]['tokens']:,} tokens")
        meta["splits"] = {"train": splits["train"], "val": splits["val"]}
        write_meta(stage("meta.json"), meta)
    print(f"wrote {args.out_dir}/{{train.bin,val.bin,meta.json}}")
    return meta


if __name__ == "__main__":
    try:
        main()
    except ValueError as e:  # a local file that cannot be read
        sys.exit(f"error: {e}")
