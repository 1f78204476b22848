"""notebooks/shape_lab.ipynb runs top to bottom on the CPU, as a notebook runner runs it (a
Jupyter kernel, each cell in order), with tiny settings in place of its settings cell: the main
job, a sample, the loss curve, a comparison of two shapes and its two pictures."""

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import ROOT

NOTEBOOK = ROOT / "notebooks" / "shape_lab.ipynb"
TINY = ["--n_layer=1", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=4",
        "--eval_iters=2", "--dtype=float32"]


@pytest.mark.slow  # about 30 s: a Jupyter kernel, a training run and a comparison
def test_the_notebook_runs_top_to_bottom_on_the_cpu(tmp_path, char_dataset, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # (the kernel and its commands inherit it)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    settings = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(settings) == 1 and settings[0] is notebook.cells[1]
    settings[0].source += "\n" + "\n".join([
        f"OUT_DIR = {str(tmp_path / 'out')!r}", f"COMPARE_DIR = {str(tmp_path / 'compare')!r}",
        f"DATA = ['--data_dir={char_dataset}']",
        f"MAIN_JOB = {[*TINY, '--max_iters=4', '--eval_interval=2', '--sample_tokens=5']!r}",
        f"COMPARE = {['--models=GPT,hourglass', *TINY, '--n_layer=3', '--width_multiple=4']!r}",
        "COMPARE_STEPS = 2", "SAMPLE_START, SAMPLE_TOKENS = 'First', 5"])
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    text = "".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                   for out in cell.outputs)
    assert "no GPU, the CPU" in text and "saved checkpoint to" in text
    pictures = [out for cell in notebook.cells if cell.cell_type == "code"
                for out in cell.outputs if "image/png" in out.get("data", {})]
    assert len(pictures) == 2  # the loss curve and val_loss.png
    assert (tmp_path / "compare-2" / "val_loss.png").exists()
