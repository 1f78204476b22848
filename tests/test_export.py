"""export.py: a plain GPT loads in transformers (Llama; Qwen3 with QK-norm) with our logits and
our tokenizer's ids; every other shape goes into safetensors and comes back through sample.py with
the same logits and text; a folder that holds anything else is never written into, a re-export
deletes only the earlier export's files (a manifest it did not write deletes nothing), and a
folder it cannot write is one line. CPU, small."""

import errno
import json
import os
import stat

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import export
from shapelab.checkpoint import is_export, load_export, save_checkpoint
from shapes import model_from_checkpoint
from shapes import build_model
from conftest import all_logits, run_here
from shapelab.tokenizer import Tokenizer

CHARS = "\n !',.:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
CHAR_META = {"tokenizer": "char", "vocab_size": len(CHARS), "chars": CHARS}
GPT2_META = {"tokenizer": "gpt2", "vocab_size": 50257, "eot_token": 50256}
TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east.\n"


def checkpoint_of(folder, model_type, meta=CHAR_META, **args):
    """folder/ckpt.pt as train.py saves it, of a model whose norm gains are not all 1 (so that a
    gain put in the wrong place shows in the logits)."""
    torch.manual_seed(0)
    model = build_model(model_type, **args)
    for p in model.parameters():
        if p.dim() == 1:
            p.data.uniform_(0.5, 1.5)
    folder.mkdir()
    save_checkpoint(dict(model=model.state_dict(), model_type=model_type, model_args=args,
                         meta=meta, config={"dataset": "shakespeare_char"}, iter_num=3,
                         best_val_loss=2.0), folder / "ckpt.pt")
    return model.eval()


def ids(n=40, vocab=len(CHARS)):
    return torch.randint(vocab, (2, n), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("shape", [
    dict(n_kv_head=2, tie_embeddings=False, rope_theta=5e5, norm_eps=1e-6),  # Llama, GQA
    dict(qk_norm="head")])  # Qwen3, tied head
def test_a_plain_gpt_loads_in_transformers_with_our_logits_and_tokens(shape, tmp_path, capsys):
    ours = checkpoint_of(tmp_path / "o", "gpt", vocab_size=len(CHARS), block_size=48, n_layer=2,
                         n_embd=64, n_head=4, **shape)
    export.main([str(tmp_path / "o" / "ckpt.pt"), str(tmp_path / "hf")])
    expected = "Qwen3ForCausalLM" if "qk_norm" in shape else "LlamaForCausalLM"
    assert f"as {expected}: transformers' logits are ours" in capsys.readouterr().out
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32).eval()
    assert type(theirs).__name__ == expected
    x = ids()
    with torch.no_grad():
        assert (all_logits(ours, x) - theirs(x).logits).abs().max() < 1e-5
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert tokenizer.encode(TEXT) == Tokenizer.char(CHARS).encode(TEXT)
    assert tokenizer.decode(tokenizer.encode(TEXT)) == TEXT
    back = model_from_checkpoint(load_export(tmp_path / "hf")).eval()  # sample.py's way back
    with torch.no_grad():
        assert torch.equal(all_logits(back, x), all_logits(ours, x))


def test_a_gpt2_vocabulary_model_gets_gpt2s_tokenizer(tmp_path, gpt2_file, monkeypatch):
    monkeypatch.setenv("SHAPE_LAB_CACHE", str(gpt2_file.parent))
    ours = checkpoint_of(tmp_path / "o", "gpt", meta=GPT2_META, vocab_size=50304, block_size=16,
                         n_layer=1, n_embd=32, n_head=2)
    export.main([str(tmp_path / "o"), str(tmp_path / "hf")])
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32).eval()
    x = ids(16, 50304)
    with torch.no_grad():
        assert (all_logits(ours, x) - theirs(x).logits).abs().max() < 1e-5
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "hf")
    text = TEXT + "<|endoftext|> naïve café, 東京 🤖  spaces\t\ttabs 12345 it's we'll\n\n"
    assert tokenizer.encode(text) == Tokenizer.gpt2().encode(text)
    assert tokenizer.eos_token_id == theirs.config.eos_token_id == 50256
    assert tokenizer.model_max_length == 16  # the context it was trained on


def sample(out_dir):
    result = run_here("sample.py", f"--out_dir={out_dir}", "--temperature=0", "--num_samples=1",
                      "--max_new_tokens=30", "--start=ROMEO:", "--dtype=float32")
    assert result.returncode == 0, result.stderr
    return result.stdout.split("\n", 1)[1]  # (the first line names the source)


def test_an_exported_hourglass_comes_back_through_sample_py(tmp_path, capsys):
    ours = checkpoint_of(tmp_path / "o", "hourglass", vocab_size=len(CHARS), block_size=48,
                         n_layer=2, n_embd=64, n_head=4, n_sub_blocks=2, bottleneck_dim=16)
    export.main([str(tmp_path / "o"), str(tmp_path / "ex")])
    assert "no transformers class: model_type='hourglass'" in capsys.readouterr().out
    assert is_export(tmp_path / "ex") and not (tmp_path / "ex" / "config.json").exists()
    info = json.loads((tmp_path / "ex" / "shape_lab.json").read_text())
    assert info["weights"] == "shape_lab" and info["tied"] == {"lm_head.weight": "tok_emb.weight"}
    back = model_from_checkpoint(load_export(tmp_path / "ex")).eval()
    x = ids()
    with torch.no_grad():
        assert torch.equal(all_logits(back, x), all_logits(ours, x))
    start = torch.tensor([Tokenizer.char(CHARS).encode("ROMEO:")])
    greedy = Tokenizer.char(CHARS).decode(ours.generate(start, 30, temperature=0)[0].tolist())
    assert sample(tmp_path / "ex") == f"{greedy}\n{'-' * 40}\n"


def test_export_writes_only_into_a_new_empty_or_exported_folder(tmp_path, capsys):
    checkpoint_of(tmp_path / "o", "gpt", vocab_size=len(CHARS), block_size=16, n_layer=1,
                  n_embd=32, n_head=2, qk_norm="full")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    for folder, why in (("mine", "holds other files"), ("mine/notes.txt", "is a file")):
        with pytest.raises(SystemExit) as stop:
            export.main([str(tmp_path / "o"), str(tmp_path / folder)])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1 and why in err, err
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine"
    checkpoint_of(tmp_path / "gpt", "gpt", vocab_size=len(CHARS), block_size=16, n_layer=1,
                  n_embd=32, n_head=2)
    export.main([str(tmp_path / "gpt"), str(tmp_path / "ex")])  # as Llama: config.json
    export.main([str(tmp_path / "o"), str(tmp_path / "ex")])  # over it: QK-norm 'full', ours
    assert "qk_norm='full'" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "ex").iterdir()) == [
        "model.safetensors", "shape_lab.json", "tokenizer.json", "tokenizer_config.json"]
    with pytest.raises(SystemExit) as stop:
        export.main([str(tmp_path / "o")])
    assert stop.value.code == 2 and "usage: python export.py" in capsys.readouterr().err


def small_gpt(folder, **shape):
    return checkpoint_of(folder, "gpt", vocab_size=len(CHARS), block_size=16, n_layer=1, n_embd=32,
                         n_head=2, **shape)


def refused(capsys, *argv):
    """export.main(argv) must stop with exit status 2 and one line on stderr; return the line."""
    with pytest.raises(SystemExit) as stop:
        export.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    return err


def contents(folder):
    """{name: bytes} of folder's files ({name: None} for a folder in it)."""
    return {p.name: None if p.is_dir() else p.read_bytes() for p in folder.iterdir()}


def test_a_re_export_replaces_only_the_earlier_exports_files(tmp_path, capsys):
    """A model card and a folder of the user's beside an export stay through a re-export of
    another shape; the earlier export's files it does not write again go; every file is 0644."""
    small_gpt(tmp_path / "gpt")
    small_gpt(tmp_path / "full", qk_norm="full")  # no transformers class: no config.json
    ex = tmp_path / "ex"
    export.main([str(tmp_path / "gpt"), str(ex)])
    assert "config.json" in contents(ex)
    (ex / "README.md").write_text("# my model card")
    (ex / "eval").mkdir()
    (ex / "eval" / "scores.txt").write_text("0.31")
    export.main([str(tmp_path / "full"), str(ex)])
    assert "kept in" in capsys.readouterr().out
    assert sorted(contents(ex)) == ["README.md", "eval", "model.safetensors", "shape_lab.json",
                                    "tokenizer.json", "tokenizer_config.json"]
    assert (ex / "README.md").read_text() == "# my model card"
    assert (ex / "eval" / "scores.txt").read_text() == "0.31"
    assert json.loads((ex / "shape_lab.json").read_text())["files"] == [
        "model.safetensors", "tokenizer.json", "tokenizer_config.json", "shape_lab.json"]
    written = [p for p in ex.iterdir() if p.name not in ("README.md", "eval")]
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in written} == {
        p.name: 0o644 for p in written}
    back = model_from_checkpoint(load_export(ex)).eval()
    assert back.config.qk_norm == "full"


def test_a_user_file_named_like_an_export_file_stops_the_re_export(tmp_path, capsys):
    """A config.json of the user's beside an export that has none: the re-export as Llama would
    write one, so it stops in one line and the folder stays as it was."""
    small_gpt(tmp_path / "gpt")
    small_gpt(tmp_path / "full", qk_norm="full")
    ex = tmp_path / "ex"
    export.main([str(tmp_path / "full"), str(ex)])
    (ex / "config.json").write_text("{\"mine\": true}")
    before = contents(ex)
    err = refused(capsys, tmp_path / "gpt", ex)
    assert "config.json" in err
    assert contents(ex) == before


PLANTED = {"a list naming a file of the user's": {"files": ["precious.txt"]},
           "a string": {"files": "abc"},
           "a list of the right format naming ../": {
               "export_format": export.EXPORT_FORMAT, "weights": "shape_lab", "tied": {},
               "checkpoint": {}, "files": ["../precious.txt", "shape_lab.json"]},
           "the right format but a string": {
               "export_format": export.EXPORT_FORMAT, "weights": "shape_lab", "tied": {},
               "checkpoint": {}, "files": "abc"},
           "a list, not a dict": ["precious.txt"],
           "malformed JSON": '{"files": ["precious.txt"'}


@pytest.mark.parametrize("manifest", PLANTED)
def test_a_manifest_export_py_did_not_write_deletes_nothing(manifest, tmp_path, capsys):
    small_gpt(tmp_path / "gpt")
    folder = tmp_path / "theirs"
    folder.mkdir()
    for name in ("precious.txt", "a", "b", "c", "model.safetensors"):
        (folder / name).write_text(f"the user's {name}")
    (tmp_path / "precious.txt").write_text("beside the folder")
    planted = PLANTED[manifest]
    (folder / "shape_lab.json").write_text(planted if isinstance(planted, str) else json.dumps(
        planted))
    before = contents(folder)
    err = refused(capsys, tmp_path / "gpt", folder)
    assert "shape_lab.json" in err and "nothing was deleted" in err
    assert contents(folder) == before
    assert (tmp_path / "precious.txt").read_text() == "beside the folder"


def test_an_export_that_fails_its_check_leaves_the_earlier_export_whole(tmp_path, monkeypatch):
    small_gpt(tmp_path / "gpt")
    ex = tmp_path / "ex"
    export.main([str(tmp_path / "gpt"), str(ex)])
    before = contents(ex)
    monkeypatch.setattr(export, "check_transformers", lambda model, folder: 0.5)
    with pytest.raises(SystemExit, match="nothing was exported"):
        export.main([str(tmp_path / "gpt"), str(ex)])
    assert contents(ex) == before
    with pytest.raises(SystemExit):
        export.main([str(tmp_path / "gpt"), str(tmp_path / "new")])
    assert not (tmp_path / "new").exists()  # (made for the export, gone with it)


def cannot_make_anything(monkeypatch):
    """os.mkdir as a folder this user cannot write answers it (root writes through chmod): the
    export's own folder and its staging folder are both made with it."""
    def refuse(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
    monkeypatch.setattr(os, "mkdir", refuse)


@pytest.mark.parametrize("where", ["a new folder in a read-only one", "a read-only empty folder",
                                   "a read-only earlier export"])
def test_a_folder_it_cannot_write_is_one_line_and_loses_nothing(where, tmp_path, capsys,
                                                                monkeypatch):
    small_gpt(tmp_path / "gpt")
    folder = tmp_path / ("parent/new" if where.startswith("a new") else "ex")
    if where == "a read-only empty folder":
        folder.mkdir()
    elif where == "a read-only earlier export":
        export.main([str(tmp_path / "gpt"), str(folder)])
    before = contents(folder) if folder.exists() else None
    cannot_make_anything(monkeypatch)
    err = refused(capsys, tmp_path / "gpt", folder)
    assert f"cannot write into {folder}" in err
    assert (contents(folder) if folder.exists() else None) == before


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root writes through a folder's mode (the case above simulates it)")
def test_a_read_only_folder_is_one_line(tmp_path, capsys):
    small_gpt(tmp_path / "gpt")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert "cannot write into" in refused(capsys, tmp_path / "gpt", folder)
        assert "cannot write into" in refused(capsys, tmp_path / "gpt", folder / "new")
    finally:
        folder.chmod(0o755)


@pytest.mark.parametrize("checkpoint", ["missing", "damaged"])
def test_a_checkpoint_it_cannot_read_names_export_pys_arguments(checkpoint, tmp_path, capsys):
    source = tmp_path / "ckpt.pt"
    if checkpoint == "damaged":
        source.write_bytes(b"not a checkpoint")
    with pytest.raises(SystemExit) as stop:
        export.main([str(source), str(tmp_path / "ex")])
    message = capsys.readouterr().err if stop.value.code == 2 else stop.value.code
    assert str(source) in message and "export.py" in message and "--out_dir" not in message
    assert not (tmp_path / "ex").exists()
