"""export.py: a plain GPT loads in transformers (Llama; Qwen3 with QK-norm) with our logits and
our tokenizer's ids; every other shape goes into safetensors and comes back through sample.py with
the same logits and text; a folder that holds anything else is never written into. CPU, small."""

import json

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
