"""export.py: our logits and tokens in transformers, only its own files written."""

import pytest
import torch
from conftest import all_logits
from transformers import AutoModelForCausalLM, AutoTokenizer

import export
from shapelab.checkpoint import save_checkpoint
from shapelab.tokenizer import Tokenizer
from shapes import build_model

CHARS = "\n !',.:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
CHAR_META = {"tokenizer": "char", "vocab_size": len(CHARS), "chars": CHARS}
TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?\n"
X = torch.randint(len(CHARS), (2, 16), generator=torch.Generator().manual_seed(1))


def checkpoint_of(folder, model_type="gpt", meta=CHAR_META, **shape):
    """folder/ckpt.pt as train.py saves it; no norm gain is 1, so a misplaced one shows."""
    args = {**dict(vocab_size=len(CHARS), block_size=16, n_layer=2, n_embd=32, n_head=2), **shape}
    torch.manual_seed(0)
    model = build_model(model_type, **args)
    for p in model.parameters():
        if p.dim() == 1:
            p.data.uniform_(0.5, 1.5)
    folder.mkdir()
    save_checkpoint(dict(model=model.state_dict(), model_type=model_type, model_args=args,
                         meta=meta, config={}, iter_num=3, best_val_loss=2.0), folder / "ckpt.pt")
    return model.eval()


def refused(capsys, *argv):  # the one line on stderr of an exit with status 2
    with pytest.raises(SystemExit) as stop:
        export.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    return err


@pytest.mark.parametrize("shape, expected", [
    (dict(n_head=4, n_kv_head=2, tie_embeddings=False, rope_theta=5e5), "LlamaForCausalLM"),
    (dict(qk_norm="head"), "Qwen3ForCausalLM"),
    (dict(vocab_size=50304, meta={"tokenizer": "gpt2", "vocab_size": 50257}), "LlamaForCausalLM")])
def test_a_plain_gpt_loads_in_transformers_with_our_logits_and_tokens(shape, expected, tmp_path,
                                                                      request, monkeypatch):
    gpt2 = "meta" in shape
    if gpt2:  # GPT-2's tokenizer, built from its ranks
        monkeypatch.setenv("SHAPE_LAB_CACHE", str(request.getfixturevalue("gpt2_file").parent))
    ours = checkpoint_of(tmp_path / "o", **shape)
    export.main([str(tmp_path / "o"), str(tmp_path / "hf")])
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32).eval()
    assert type(theirs).__name__ == expected
    assert (all_logits(ours, X) - theirs(X).logits).abs().max() < 1e-5
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "hf")
    text = TEXT + "<|endoftext|> naïve café, 東京 🤖  spaces\t\ttabs 12345 we'll\n\n" * gpt2
    ours = Tokenizer.gpt2() if gpt2 else Tokenizer.char(CHARS)
    assert tokenizer.encode(text) == ours.encode(text)
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_another_shape_is_one_line_and_an_export_replaces_only_its_own_files(tmp_path, capsys):
    checkpoint_of(tmp_path / "o", "hourglass", n_sub_blocks=2, bottleneck_dim=16)
    checkpoint_of(tmp_path / "gpt")
    assert "model_type='hourglass' has no transformers class" in refused(
        capsys, tmp_path / "o", tmp_path / "hf")
    folder = tmp_path / "theirs"
    folder.mkdir()
    (folder / "precious.txt").write_text("mine")
    assert "holds other files" in refused(capsys, tmp_path / "gpt", folder)
    assert "cannot write into" in refused(capsys, tmp_path / "gpt", folder / "precious.txt")
    (folder / "config.json").write_text("{}")  # an earlier export, say
    export.main([str(tmp_path / "gpt"), str(folder)])
    assert (folder / "precious.txt").read_text() == "mine"
    assert (folder / "model.safetensors").stat().st_mode & 0o777 == 0o644
    assert not (tmp_path / "hf").exists()


def test_an_unusable_folder_is_one_line_and_a_failed_export_changes_nothing(tmp_path, capsys,
                                                                             monkeypatch):
    ex, new = tmp_path / "ex", tmp_path / "new"
    checkpoint_of(tmp_path / "gpt")
    assert "no checkpoint at" in refused(capsys, tmp_path / "none", ex)
    export.main([str(tmp_path / "gpt"), str(ex)])
    (ex / "README.md").write_text("my model card")
    before = {p.name: p.read_bytes() for p in ex.iterdir()}
    monkeypatch.setattr(export, "to_transformers", lambda *args, real=export.to_transformers: {
        name: t + 0.1 for name, t in real(*args).items()})  # other weights: other logits
    for folder in (ex, new):
        with pytest.raises(SystemExit, match="nothing was exported"):
            export.main([str(tmp_path / "gpt"), str(folder)])
    monkeypatch.setattr("os.mkdir", lambda *args: open("/proc/no-such/file", "w"))  # read-only
    assert "cannot write into" in refused(capsys, tmp_path / "gpt", ex)
    assert {p.name: p.read_bytes() for p in ex.iterdir()} == before and not new.exists()
