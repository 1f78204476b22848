"""Every generated block on every page (README.md, docs/*.md) is what its command computes from
the committed records today: a number typed by hand into a block, or left behind when the records
change, fails here, naming the command that writes it anew. The command a block's marker names
finds its producer in PRODUCERS; a block whose command is not there fails too."""

import sys
from pathlib import Path

import pytest

from conftest import ROOT
from shapelab.pages import blocks_in, pages

sys.path.insert(0, str(ROOT / "experiments"))

FAIR_SWEEP = [ROOT / "results/mlp_fashion_denoise_fair" / run / "sweep.csv"
              for run in ("first_sweep", "seed0", "seed1")]  # the glob's order


def frozen_lift_gaps():
    """The fronts script's lines on the fair sweep: at each point of the conventional MLP's front
    (on the image itself), the frozen-lift hourglass's PSNR staircase there minus it."""
    import mlp_hourglass_fronts as fronts
    entries = fronts.fronts(FAIR_SWEEP)[1]
    return "\n".join(fronts.gap_lines(entries, "params_total", "test_psnr_batchmse",
                                      "hourglass (frozen W_in)", "conventional (direct)")) + "\n"


def cea_ood_reading(folder):
    """experiments/cea_ood_verdict.py's reading at the lowest in-domain level, with its seeds."""
    import cea_ood_verdict as ood
    rates, _, verdict_seeds, _ = ood.comparison(ROOT / folder)
    analysis = ood.analyse(ood.runs_at(ROOT / folder, rates, verdict_seeds), verdict_seeds)
    head, seeds = analysis["summaries"][0], analysis["seeds"]
    return (f"{ood.words(head, analysis['levels'][0])} ({head['n']} paired seeds, "
            f"{seeds[0]}-{seeds[-1]})\n")


def compare_blocks():
    import compare
    return compare.readme_blocks(ROOT)


OOD = "python experiments/cea_ood_verdict.py results/"
PRODUCERS = {  # a block's command -> what computes its blocks ({name: text})
    "python compare.py config/compare_verdict_cpu.py --report_only=True": compare_blocks,
    "python experiments/mlp_hourglass_fronts.py results/mlp_fashion_denoise_fair/*/sweep.csv "
    "--out=results/mlp_fashion_denoise_fair_fronts":
        lambda: {"readme-image-mlp-frozen-lift": frozen_lift_gaps()},
    OOD + "compare_verdict_cpu": lambda: {
        "cea-ood-cpu": cea_ood_reading("results/compare_verdict_cpu")},
    OOD + "compare_verdict_cpu_scale_gpu": lambda: {
        "cea-ood-gpu": cea_ood_reading("results/compare_verdict_cpu_scale_gpu")},
}


def every_block():
    found = []
    for page in pages(ROOT):
        for name, (command, body) in blocks_in(page.read_text()).items():
            found.append(pytest.param(page, name, command, body,
                                      id=f"{page.relative_to(ROOT)}:{name}"))
    return found


@pytest.mark.parametrize("page, name, command, body", every_block())
def test_each_generated_block_is_what_its_command_computes_today(page, name, command, body):
    where = Path(page).relative_to(ROOT)
    assert command in PRODUCERS, (
        f"{where}: the block {name!r} names `{command}`, which no producer in tests/test_pages.py "
        f"computes: add it to PRODUCERS")
    computed = PRODUCERS[command]()
    assert name in computed, f"{where}: `{command}` computes no block {name!r}"
    text = computed[name] if computed[name].endswith("\n") else computed[name] + "\n"
    assert body == text, (
        f"{where}: the block {name!r} is not what `{command}` computes from the committed "
        f"records today, which is:\n{text}")
