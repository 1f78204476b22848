"""experiments/cea_contribution.py: the Token Prediction contribution ratio (section 4.2.2 of the
CEA
paper), the out-of-distribution loss, the plot and the command line."""

import json
import math
import sys

import pytest
import torch

from conftest import ROOT, all_logits
from shapelab.checkpoint import save_checkpoint
from shapes import build_model

sys.path.insert(0, str(ROOT / "experiments"))
import cea_contribution  # noqa: E402

TINY = dict(vocab_size=50, block_size=16, n_layer=2, n_embd=32, n_head=4, ffn_width_ratio=8)


def tiny(**overrides):
    torch.manual_seed(0)
    return build_model("cea", **{**TINY, **overrides}).eval()


def save_tiny_run(out_dir, data_dir, **overrides):
    """An untrained tiny CEA model saved like train.py saves it, reading the dataset in data_dir."""
    vocab = json.loads((data_dir / "meta.json").read_text())["vocab_size"]
    args = dict(TINY, vocab_size=vocab, outer_ratio=0.25, **overrides)
    torch.manual_seed(0)
    model = build_model("cea", **args)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_checkpoint(
        dict(
            model=model.state_dict(),
            model_type="cea",
            model_args=args,
            config=dict(data_dir=str(data_dir), dataset="", block_size=16),
        ),
        out_dir / "ckpt.pt",
    )
    return vocab


def test_contribution_ratio_on_a_hand_built_case():
    # 2 classes x 100 positions in 2-D. Embedding: all (1, 0) -> ties -> class 0 -> accuracy 0.5.
    # After attention: 80 of the class-1 positions move to (0, 1) -> 0.9. After the FFN: all of them
    # -> 1.0.
    targets = torch.tensor([0] * 100 + [1] * 100)
    r0 = torch.tensor([[1.0, 0.0]]).repeat(200, 1)
    r1 = r0.clone()
    r1[100:180] = torch.tensor([0.0, 1.0])
    r2 = r0.clone()
    r2[100:] = torch.tensor([0.0, 1.0])
    acc = cea_contribution.token_prediction_accuracies([r0, r1, r2], targets, min_count=50)
    assert acc == pytest.approx([0.5, 0.9, 1.0])
    result = cea_contribution.contribution_ratio(acc, ["embedding", "attention", "ffn"])
    assert result["ffn_ratio"] == pytest.approx(0.2) and result["attention_ratio"] == pytest.approx(
        0.8
    )
    assert result["gains"] == pytest.approx([0.4, 0.1])
    # a class below min_count is dropped from the prediction and the accuracy
    rare = torch.cat([targets, torch.tensor([2] * 10)])
    reps = [torch.cat([r, torch.randn(10, 2)]) for r in (r0, r1, r2)]
    assert cea_contribution.token_prediction_accuracies(reps, rare, min_count=50) == pytest.approx(
        [0.5, 0.9, 1.0]
    )


def test_no_class_vector_says_what_to_do():
    with pytest.raises(ValueError, match="lower min_count"):
        cea_contribution.token_prediction_accuracies(
            [torch.randn(20, 2)], torch.arange(20), min_count=2
        )


def test_sublayer_representations_follow_the_forward_pass():
    model = tiny(outer_ratio=0.125)
    idx = torch.randint(0, 50, (2, 16))
    reps, kinds = cea_contribution.sublayer_representations(model, idx)
    assert kinds == ["embedding", "attention", "ffn", "attention", "ffn"]
    logits = model.lm_head(model.norm_f(reps[-1]))
    torch.testing.assert_close(logits, all_logits(model, idx).reshape(-1, 50), rtol=1e-5, atol=1e-5)


def test_the_moe_baselines_ffn_slot_is_one_ffn_step():
    """MoE sublayer + FFN form one FFN step; the representations still rebuild the logits."""
    model = tiny(ffn_width_ratio=4, n_experts=2, moe_place="before_ffn")
    idx = torch.randint(0, 50, (2, 16))
    reps, kinds = cea_contribution.sublayer_representations(model, idx)
    assert kinds == ["embedding", "attention", "ffn", "attention", "ffn"]
    logits = model.lm_head(model.norm_f(reps[-1]))
    lm_logits = model(idx, idx)[0].reshape(-1, 50)
    torch.testing.assert_close(logits, lm_logits, rtol=1e-5, atol=1e-5)


def test_analysis_and_ood_loss_from_a_checkpoint(char_dataset, tmp_path):
    vocab = save_tiny_run(tmp_path, char_dataset)
    result = cea_contribution.analyze_checkpoint(tmp_path, n_batches=2, batch_size=8, min_count=5)
    assert result["kinds"] == ["embedding", "attention", "ffn", "attention", "ffn"]
    assert len(result["accuracies"]) == 5 and all(0 <= a <= 1 for a in result["accuracies"])
    assert result["ffn_ratio"] + result["attention_ratio"] == pytest.approx(1.0)
    # an untrained model is near-uniform over the vocabulary: loss ~ ln(vocab) on any text
    loss = cea_contribution.char_text_loss(tmp_path, "Speak, speak. " * 40, n_windows=4)
    assert loss == pytest.approx(math.log(vocab), abs=0.3)
    cea_contribution.plot_contributions([result], tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 1000


def test_a_checkpoint_without_data_dir_reads_the_repos_data_folder(char_dataset, tmp_path):
    save_tiny_run(tmp_path, char_dataset)
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    # as train.py saves a run on data/<dataset>
    ckpt["config"].update(data_dir="", dataset="shakespeare_char")
    save_checkpoint(ckpt, tmp_path / "ckpt.pt")
    _, block_size, data_dir = cea_contribution.load_run(tmp_path)
    assert block_size == 16 and data_dir == ROOT / "data" / "shakespeare_char"


SHAKESPEARE_CHARS = (
    "\n !\"&'()*,-./0123456789:;?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]_abcdefghijklmnopqrstuvwxyz{}"
)


def test_ood_texts_are_several_texts_that_are_not_shakespeare_with_enough_in_vocabulary_windows():
    texts = cea_contribution.ood_texts()
    assert {"python_docs", "stdlib_docstrings"} <= set(texts) and len(texts) >= 2
    assert "def " in texts["python_docs"] and "Python" in texts["python_docs"]
    for name, text in texts.items():
        assert "First Citizen" not in text and "ROMEO" not in text, name
        starts = cea_contribution.in_vocab_windows(text, SHAKESPEARE_CHARS, 129, 64)
        assert len(starts) == 64, name  # enough clean windows of the CPU runs' block_size + 1


def test_ood_loss_scores_only_windows_of_the_real_text_whose_characters_are_all_in_the_vocabulary(
    char_dataset, tmp_path
):
    """Out-of-vocabulary characters are not deleted: a window containing one is not scored at
    all."""
    save_tiny_run(tmp_path, char_dataset)
    clean = "Speak, speak. All: First Citizen. " * 8  # every character in the fixture's vocabulary
    # deleting '#' would make it look like the clean text
    dirty = "#S#p#e#a#k#,# #s#p#e#a#k#.# " * 20
    starts = cea_contribution.in_vocab_windows(clean + dirty, clean, 17, 1000)
    assert starts and max(starts) + 17 <= len(clean)  # no window reaches into the dirty part
    assert all(set((clean + dirty)[s:s + 17]) <= set(clean) for s in starts)
    assert starts == list(range(len(clean) - 17 + 1))  # every clean window, and only those
    # evenly spaced
    assert cea_contribution.in_vocab_windows(clean + dirty, clean, 17, 3) == [0, 128, 255]
    # the score of the mixed text is exactly the score of its clean part
    assert cea_contribution.char_text_loss(tmp_path, clean + dirty, n_windows=8) == \
        cea_contribution.char_text_loss(tmp_path, clean, n_windows=8)
    with pytest.raises(ValueError, match="entirely in the vocabulary"):
        cea_contribution.char_text_loss(tmp_path, dirty, n_windows=8)


def test_mutual_information_of_kmeans_labels_and_its_contribution_ratio():
    torch.manual_seed(0)
    blobs = torch.cat([torch.randn(300, 4) * 0.1 + 5 * i for i in range(3)])
    targets = torch.arange(3).repeat_interleave(300)
    labels = cea_contribution.minibatch_kmeans(blobs, 3, batch=128, steps=20)
    assert cea_contribution.mutual_information(labels, targets) == pytest.approx(
        math.log(3), abs=1e-6
    )
    assert cea_contribution.mutual_information(
        torch.zeros(900, dtype=torch.long), targets
    ) == pytest.approx(0.0)
    # embedding: noise; after attention: one blob separated; after the FFN: all three
    noise = torch.randn(900, 4)
    half = torch.cat([torch.zeros(600, 4), blobs[600:]]) + 0.01 * noise  # blobs 0 and 1 merged
    result = cea_contribution.mi_contribution(
        [noise, half, blobs], targets, ["embedding", "attention", "ffn"], k=3
    )
    mi = result["mi"]
    assert (
        mi[0] < 0.05
        and mi[1] == pytest.approx(0.6365, abs=0.01)
        and mi[2] == pytest.approx(math.log(3), abs=1e-6)
    )
    assert result["mi_ffn_ratio"] == pytest.approx((mi[2] - mi[1]) / (mi[2] - mi[0]))


def test_command_line_prints_one_json_line_per_run_and_writes_the_plot(
    char_dataset, tmp_path, capsys
):
    for name in ("run-a", "run-b"):
        save_tiny_run(tmp_path / name, char_dataset)
    plot = tmp_path / "contribution.png"
    results = cea_contribution.main(
        [
            f"--out_dirs={tmp_path / 'run-a'},{tmp_path / 'run-b'}",
            f"--plot={plot}",
            "--n_batches=2",
            "--batch_size=8",
            "--min_count=5",
            "--ood_windows=4",
        ]
    )
    lines = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")
    ]
    assert [line["name"] for line in lines] == ["run-a", "run-b"] == [r["name"] for r in results]
    for line in lines:
        assert set(line) == {
            "name",
            "ffn_ratio",
            "attention_ratio",
            "ood_loss",
            "ood",
            "accuracies",
        }
        assert line["ood_loss"] > 0 and len(line["accuracies"]) == 5
        assert set(line["ood"]) == set(cea_contribution.ood_texts())
        assert line["ood_loss"] == pytest.approx(
            sum(line["ood"].values()) / len(line["ood"]), abs=1e-3
        )
    assert plot.stat().st_size > 1000
    with pytest.raises(SystemExit, match="--out_dirs="):
        cea_contribution.main([])
