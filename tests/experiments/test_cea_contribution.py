"""experiments/cea_contribution.py: the Token Prediction and mutual-information contribution
ratios on hand-built cases, the representations that rebuild the logits, the command line."""

import json
import math
import sys

import pytest
import torch

from conftest import ROOT, all_logits
from shapelab.checkpoint import save_checkpoint
from shapes import build_model

sys.path.insert(0, str(ROOT / "experiments"))
import cea_contribution

TINY = dict(vocab_size=50, block_size=16, n_layer=2, n_embd=32, n_head=4, ffn_width_ratio=8)


def save_tiny_run(out_dir, data_dir):
    """An untrained tiny CEA model saved as train.py saves it, reading the dataset in data_dir."""
    vocab = json.loads((data_dir / "meta.json").read_text())["vocab_size"]
    args = dict(TINY, vocab_size=vocab, outer_ratio=0.25)
    torch.manual_seed(0)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_checkpoint(dict(model=build_model("cea", **args).state_dict(), model_type="cea",
                         model_args=args, config=dict(data_dir=str(data_dir), dataset="",
                                                      block_size=16)), out_dir / "ckpt.pt")


def test_contribution_ratio_on_a_hand_built_case():
    # 2 classes x 100 positions. Embedding: all (1, 0), ties -> class 0: accuracy 0.5. After
    # attention 80 of the class-1 positions move to (0, 1): 0.9. After the FFN all of them: 1.0.
    targets = torch.tensor([0] * 100 + [1] * 100 + [2] * 10)  # class 2: below min_count, dropped
    r0 = torch.cat([torch.tensor([[1.0, 0.0]]).repeat(200, 1), torch.randn(10, 2)])
    r1, r2 = r0.clone(), r0.clone()
    r1[100:180] = torch.tensor([0.0, 1.0])
    r2[100:200] = torch.tensor([0.0, 1.0])
    acc = cea_contribution.token_prediction_accuracies([r0, r1, r2], targets, min_count=50)
    assert acc == pytest.approx([0.5, 0.9, 1.0])
    result = cea_contribution.contribution_ratio(acc, ["embedding", "attention", "ffn"])
    assert (result["ffn_ratio"], result["attention_ratio"]) == pytest.approx((0.2, 0.8))
    with pytest.raises(ValueError, match="lower min_count"):
        cea_contribution.token_prediction_accuracies([r0], targets, min_count=500)


@pytest.mark.parametrize("overrides", [
    dict(outer_ratio=0.125), dict(ffn_width_ratio=4, n_experts=2, moe_place="before_ffn")])
def test_sublayer_representations_rebuild_the_logits_with_one_ffn_step_a_block(overrides):
    torch.manual_seed(0)
    model = build_model("cea", **{**TINY, **overrides}).eval()
    idx = torch.randint(0, 50, (2, 16))
    reps, kinds = cea_contribution.sublayer_representations(model, idx)
    assert kinds == ["embedding", "attention", "ffn", "attention", "ffn"]
    logits = model.lm_head(model.norm_f(reps[-1]))
    torch.testing.assert_close(logits, all_logits(model, idx).reshape(-1, 50), rtol=1e-5,
                               atol=1e-5)


def test_mutual_information_of_kmeans_labels():
    torch.manual_seed(0)
    blobs = torch.cat([torch.randn(300, 4) * 0.1 + 5 * i for i in range(3)])
    targets = torch.arange(3).repeat_interleave(300)
    noise = torch.randn(900, 4)
    half = torch.cat([torch.zeros(600, 4), blobs[600:]]) + 0.01 * noise  # blobs 0 and 1 merged
    mi = [cea_contribution.kmeans_mutual_information(r, targets, 3) for r in (noise, half, blobs)]
    assert mi[0] < 0.05 and mi[1] == pytest.approx(0.6365, abs=0.01)
    assert mi[2] == pytest.approx(math.log(3), abs=1e-6)  # three clusters found, one per target


def test_the_command_line(char_dataset, tmp_path, capsys):
    for name in ("run-a", "run-b"):
        save_tiny_run(tmp_path / name, char_dataset)
    plot = tmp_path / "contribution.png"
    cea_contribution.main([f"--out_dirs={tmp_path / 'run-a'},{tmp_path / 'run-b'}",
                           f"--plot={plot}", "--n_batches=2", "--batch_size=8", "--min_count=5"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()
             if line.startswith("{")]
    assert [line["name"] for line in lines] == ["run-a", "run-b"]
    assert lines[0]["ffn_ratio"] + lines[0]["attention_ratio"] == pytest.approx(1.0, abs=1e-3)
    assert plot.stat().st_size > 1000
    with pytest.raises(SystemExit, match="no checkpoint in"):
        cea_contribution.main([f"--out_dirs={tmp_path / 'nothing'}"])
