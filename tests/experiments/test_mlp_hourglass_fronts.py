"""experiments/mlp_hourglass_fronts.py: each shape's lr chosen by validation loss (with every seed),
the seeds' spread as error bars, the Pareto fronts drawn as staircases and the gaps printed at each
conventional point (with the seed-paired range), the lrs at an edge flagged, rows with machine paths
read in the sweep's words, the plot."""

import csv
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_here

sys.path.insert(0, str(ROOT / "experiments"))
import mlp_hourglass_fronts as fronts  # noqa: E402

FIELDS = ["task", "data_source", "epochs", "batch_size", "shape", "latent_dim", "hidden_dim",
          "n_blocks", "learning_rate", "seed", "params_total", "params_trainable", "val_loss",
          "test_psnr_batchmse", "test_ssim", "baseline_psnr_batchmse", "train_time_s"]


def row(shape, d_z, d_h, L, lr, seed, params, val_loss, psnr, ssim):
    return dict(task="mnist_denoise", data_source="tiny digits", epochs=1, batch_size=8,
                shape=shape, latent_dim=d_z, hidden_dim=d_h, n_blocks=L, learning_rate=lr,
                seed=seed, params_total=params, params_trainable=params - 100, val_loss=val_loss,
                test_psnr_batchmse=psnr, test_ssim=ssim, baseline_psnr_batchmse=14.0,
                train_time_s=1)


ROWS = [  # two seeds per run; the hourglass at 1000 params beats the conventional at 1500
    row("hourglass", 64, 8, 2, 1e-3, 0, 1000, 0.020, 20.0, 0.80),
    row("hourglass", 64, 8, 2, 1e-3, 1, 1000, 0.022, 20.4, 0.82),
    row("hourglass", 64, 8, 2, 2e-3, 0, 1000, 0.010, 25.0, 0.90),  # lower loss, one seed only
    row("hourglass", 64, 32, 2, 1e-3, 0, 2000, 0.015, 21.0, 0.84),
    row("hourglass", 64, 32, 2, 1e-3, 1, 2000, 0.015, 21.2, 0.85),
    row("conventional", 32, 64, 1, 1e-3, 0, 1500, 0.030, 19.0, 0.70),
    row("conventional", 32, 64, 1, 1e-3, 1, 1500, 0.030, 19.5, 0.72),
    row("conventional", 32, 64, 1, 2e-3, 0, 1500, float("nan"), float("nan"), float("nan")),
    row("conventional", 32, 64, 1, 2e-3, 1, 1500, float("nan"), float("nan"), float("nan")),
]


@pytest.fixture
def sweep_csv(tmp_path):
    path = tmp_path / "sweep.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(ROWS)
    return path


def test_each_shape_at_its_lr_with_the_seeds_spread(sweep_csv):
    results = fronts.shape_results(fronts.read_rows(sweep_csv))
    entries = {(e["family"], e["d_h"]): e for e in results}
    small = entries["hourglass", 8]
    assert small["learning_rate"] == 1e-3 and small["seeds"] == 2  # the one-seed lr does not win
    assert small["test_psnr_batchmse"] == pytest.approx((20.2, 20.0, 20.4))  # mean, min, max
    conventional = entries["conventional", 64]
    assert conventional["learning_rate"] == 1e-3  # the diverged lr (NaN val loss) is never picked
    assert conventional["test_ssim"] == pytest.approx((0.71, 0.70, 0.72))


def pair(entries):
    """The one hourglass form and the one conventional form of a sweep of one input each."""
    return fronts.forms(entries, "hourglass")[0], fronts.forms(entries, "conventional")[0]


def test_fronts_and_the_gap_at_matched_budgets(sweep_csv):
    entries = fronts.shape_results(fronts.read_rows(sweep_csv))
    front = fronts.pareto_front([e for e in entries if e["family"] == "hourglass"],
                                "params_total", "test_psnr_batchmse")
    assert [e["d_h"] for e in front] == [8, 32]
    [(point, hourglass, gap, paired)] = fronts.gaps(entries, "params_total",
                                                    "test_psnr_batchmse", *pair(entries))
    assert point["family"] == "conventional" and gap == pytest.approx(20.2 - 19.25)
    assert hourglass["d_h"] == 8 and paired == pytest.approx((20.4 - 19.5, 20.0 - 19.0))


def test_a_front_is_a_staircase_and_the_gap_is_its_value_there(sweep_csv, monkeypatch):
    """A Pareto front is the best mean reached with at most x parameters: a step function, level
    until the next front point (a line between points would put the hourglass above a point
    where its staircase is below). The gap at a conventional point is the staircase's value
    there, reached by a smaller hourglass."""
    entries = fronts.shape_results(fronts.read_rows(sweep_csv))
    front = fronts.pareto_front([e for e in entries if e["family"] == "hourglass"],
                                "params_total", "test_psnr_batchmse")
    x, y = fronts.staircase(front, "params_total", "test_psnr_batchmse", right=0.003)
    assert x == pytest.approx([0.001, 0.002, 0.003]) and y == pytest.approx([20.2, 21.1, 21.1])
    [(point, best, gap, _)] = fronts.gaps(entries, "params_total", "test_psnr_batchmse",
                                          *pair(entries))
    line_there = 20.2 + (21.1 - 20.2) * (point["params_total"] - 1000) / (2000 - 1000)
    assert best["d_h"] == 8 and gap == pytest.approx(20.2 - 19.25)  # the step's value at 1500,
    assert gap != pytest.approx(line_there - 19.25)                 # not the line's
    import matplotlib.axes
    steps, lines = [], []
    monkeypatch.setattr(matplotlib.axes.Axes, "step", lambda self, *a, **k: steps.append(a))
    monkeypatch.setattr(matplotlib.axes.Axes, "plot", lambda self, *a, **k: lines.append(a))
    fronts.plot(entries, 14.0, sweep_csv.parent / "f.png", "t")
    assert len(steps) == 8 and not lines  # 2 families x 4 panels, each front a staircase


def test_the_printed_gaps_and_the_edge_lr_flag(sweep_csv):
    """What a write-up may quote is printed: the gap of the means at each conventional point
    with its seed-paired range, on both parameter axes and both metrics; and a Pareto-optimal
    shape whose lr is at an edge of the lrs it was tried at is flagged with the lr to add."""
    rows = fronts.read_rows(sweep_csv)
    text = fronts.report(fronts.shape_results(rows), rows, [sweep_csv], "t")
    # the hourglass's 2e-3 ran one seed of two: no neighbour; the conventional's diverged
    assert ("+0.950 dB (seed-paired +0.900 to +1.000); a side breaks down at every neighbouring "
            "rate (the conventional at 0.002 diverged); the hourglass: hourglass d_z=64 d_h=8 L=2"
            in text)
    assert "+0.10000 (seed-paired +0.10000 to +0.10000)" in text  # SSIM, 4 + 1 digits
    assert text.count("(seed-paired ") == 4  # total / trainable x PSNR / SSIM
    # its 2e-3 ran one seed of two: not yet tried, so 1e-3 is both its top and its bottom
    assert "hourglass d_z=64 d_h=8 L=2: lr 0.001, the bottom of 0.001: add 0.0005" in text
    assert "hourglass d_z=64 d_h=8 L=2: lr 0.001, the top of 0.001: add 0.0015" in text
    top = [row("hourglass", 64, 8, 2, lr, seed, 1000, loss, 20.0, 0.8)
           for lr, loss in ((5e-4, 0.03), (1e-3, 0.02), (2e-3, 0.01)) for seed in (0, 1)]
    inside = [dict(r, val_loss=0.005 if r["learning_rate"] == 1e-3 else 0.02) for r in top]
    for rows_, flagged in ((top, True), (inside, False)):
        rows_ = [{**r, **{k: float(v) for k, v in r.items() if k in fronts.NUMBERS}}
                 for r in rows_]
        text = fronts.report(fronts.shape_results(rows_), rows_, [sweep_csv], "t")
        assert ("lr 0.002, the top of 0.0005, 0.001, 0.002: add 0.003" in text) == flagged
        assert ("with --shapes=hourglass:64:8:2 --learning_rates=0.003" in text) == flagged
        assert ("none: every Pareto-optimal shape chose an lr inside" in text) != flagged


def test_four_forms_each_with_its_front_and_every_pair_of_forms_with_its_gaps(tmp_path):
    """Hourglass frozen / learned and conventional direct / learned W_in read together: each form
    its own front, every hourglass form against every conventional form, four staircases a panel."""
    inputs = {("hourglass", "frozen_random"): 0.0, ("hourglass", "learned"): 0.5,
              ("conventional", "direct"): 0.2, ("conventional", "learned"): 0.1}
    rows = [dict(row(family, 64 if family == "hourglass" else 32, 8 if family == "hourglass"
                     else 64, 2, 1e-3, seed, 1000 + 100 * i, 0.02, 20.0 + lift + 0.1 * seed,
                     0.8), input_proj=input_proj)
            for i, ((family, input_proj), lift) in enumerate(inputs.items()) for seed in (0, 1)]
    rows = [{**r, **{k: float(v) for k, v in r.items() if k in fronts.NUMBERS}} for r in rows]
    entries = fronts.shape_results(rows)
    assert fronts.forms(entries) == ["hourglass (frozen W_in)", "hourglass (learned W_in)",
                                     "conventional (direct)", "conventional (learned W_in)"]
    text = fronts.report(entries, rows, [tmp_path / "sweep.csv"], "t")
    assert text.count("staircase there minus it") == 4 * 4  # 2 x 2 pairs, 2 axes x 2 metrics
    assert "- hourglass (learned W_in): d_z=64 d_h=8 L=2 W_in=learned (0.00M, 20.55)" in text
    [(point, best, gap, paired)] = fronts.gaps(entries, "params_total", "test_psnr_batchmse",
                                               "hourglass (learned W_in)",
                                               "conventional (learned W_in)")
    assert best["input_proj"] == "learned" and gap == pytest.approx(0.4)
    assert paired == pytest.approx((0.4, 0.4))
    import matplotlib.axes
    steps = []
    original = matplotlib.axes.Axes.step
    matplotlib.axes.Axes.step = lambda self, *a, **k: steps.append(k["label"])
    try:
        fronts.plot(entries, 14.0, tmp_path / "f.png", "t")
    finally:
        matplotlib.axes.Axes.step = original
    assert len(steps) == 16 and steps[:4] == [f"{f} front" for f in fronts.forms(entries)]


def test_rows_read_in_the_sweeps_words():
    """A row with this machine's absolute cache path and no clamp column (its SR input was
    clamped, its x2 flips were none and horizontal)."""
    old = dict(task="mnist_sr", data_source="f (/work/main/data/mnist/cache/x), split 5/1",
               input_proj="frozen_random", flips="2.0")
    new = fronts.normalized(old)
    assert new["data_source"] == "f (data/mnist/cache/x), split 5/1"
    assert new["input_proj"] == "frozen_random" and new["clamp_sr_input"] == "1.0"
    assert new["flips"] != "2.0"  # not the x2 of flips=2
    assert fronts.normalized(new) == new  # a row in the sweep's words stays as it is


def test_command_line_writes_the_plot_and_the_table(sweep_csv):
    run = run_here("experiments/mlp_hourglass_fronts.py", sweep_csv)
    assert run.returncode == 0, run.stderr
    assert (sweep_csv.parent / "fronts.png").stat().st_size > 10_000
    table = (sweep_csv.parent / "fronts.md").read_text()
    assert "| hourglass d_z=64 d_h=8 L=2 | 0.001 | 2 |" in table and "+0.950 dB" in table
    assert table.startswith("# mnist_denoise on tiny digits: 9 runs")
    assert "9 runs: 3 shapes at 1-2 of 2 lrs (0.001, 0.002) x 2 seeds (0, 1)" in table
    assert "Noisy input (the baseline every model must beat): 14.00 dB" in table
    out = run_here("experiments/mlp_hourglass_fronts.py", sweep_csv,
                   f"--out={sweep_csv.parent / 'named'}")
    assert out.returncode == 0 and (sweep_csv.parent / "named.md").read_text() == table
    assert (sweep_csv.parent / "named.png").exists()
    missing = run_here("experiments/mlp_hourglass_fronts.py", "nope.csv")
    assert missing.returncode != 0 and "usage:" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_rows_not_written_whole_are_left_out_and_a_run_counts_once(sweep_csv, capsys):
    """A row glued to the next (the first torn exactly at its end: `...,10mnist_denoise,...`), a
    last row cut short, and a run written twice (in one CSV, or in two read together): the fronts
    leave them out with a warning and never crash."""
    header, *rows = sweep_csv.read_text().splitlines(keepends=True)
    sweep_csv.write_text(header + rows[0].rstrip("\r\n") + "".join(rows[1:]) + rows[3]
                         + rows[4][:20])
    assert "1mnist_denoise," in sweep_csv.read_text()  # (the glued row)
    read = fronts.read_rows(sweep_csv)
    err = capsys.readouterr().err
    assert "2 row(s) not written whole" in err and "1 row(s) repeat a run" in err
    assert len(read) == len(ROWS) - 2  # rows 0 and 1 glued into one, dropped; row 3 once
    copy = sweep_csv.with_name("copy.csv")
    copy.write_text(sweep_csv.read_text())
    fronts.main([str(sweep_csv), str(copy)])  # the same runs twice: drawn once
    assert f"{len(ROWS) - 2} runs" in (sweep_csv.parent / "fronts.md").read_text()
    assert "repeat a run" in capsys.readouterr().err


def rate_grid_rows(conventional_at_2e3=21.0):
    """A hourglass at three rates and a conventional MLP at two, two seeds each: the hourglass
    picks 1e-3 (its validation loss lowest there), 5e-4 its runner-up (the lower loss of its two
    neighbours), 2e-3 its worse neighbour; the conventional picks 1e-3, and 2e-3 is its one
    neighbour; 3e-3 ran one seed only (no neighbour: it cannot be compared seed for seed)."""
    hourglass = {5e-4: (0.011, 20.3), 1e-3: (0.010, 20.5), 2e-3: (0.015, 19.0)}
    conventional = {1e-3: (0.012, 20.2), 2e-3: (0.013, conventional_at_2e3)}
    rows = [row("hourglass", 64, 8, 2, lr, seed, 1000, loss, psnr + 0.02 * seed, 0.8)
            for lr, (loss, psnr) in hourglass.items() for seed in (0, 1)]
    rows += [row("conventional", 32, 64, 1, lr, seed, 1500, loss, psnr + 0.02 * seed, 0.7)
             for lr, (loss, psnr) in conventional.items() for seed in (0, 1)]
    rows.append(row("conventional", 32, 64, 1, 3e-3, 0, 1500, 0.020, 25.0, 0.9))
    return [{**r, **{k: float(v) for k, v in r.items() if k in fronts.NUMBERS}} for r in rows]


def test_each_gap_moves_with_either_sides_neighbouring_rate():
    """The gap (hourglass minus conventional, each at its chosen rate) as either side takes the
    rate one step below or above its own among those it was tried at with the same seeds: the
    size of what the rate grid alone can do to a gap, beside the seeds' spread."""
    rows = rate_grid_rows()
    entries = fronts.shape_results(rows)
    [(point, best, gap, paired)] = fronts.gaps(entries, "params_total", "test_psnr_batchmse",
                                               *pair(entries))
    assert gap == pytest.approx(0.3) and paired == pytest.approx((0.3, 0.3))
    assert fronts.neighbouring_rates(best) == [5e-4, 2e-3]
    assert fronts.neighbouring_rates(point) == [2e-3]  # 3e-3: one seed of the two
    moves = fronts.rate_moves(point, best, "test_psnr_batchmse")
    assert [(side, rate) for side, rate, *_ in moves] == [
        ("hourglass", 5e-4), ("hourglass", 2e-3), ("conventional", 2e-3)]
    # 21.0 vs 20.2: +0.8; the hourglass's 2e-3 loses 1.5 dB at 1.5x its chosen validation loss
    assert [m for *_, m, _ in moves] == pytest.approx([-0.2, -1.5, -0.8])
    assert [broke for *_, broke in moves] == [False, True, False]
    text = fronts.report(entries, rows, [Path("sweep.csv")], "t")
    assert ("+0.300 dB (seed-paired +0.300 to +0.300); a neighbouring rate moves it -0.800 to "
            "-0.200 (the hourglass at 0.0005, 20.310: -0.200; the conventional at 0.002, 21.010: "
            "-0.800); a side breaks down at a neighbouring rate (the hourglass at 0.002, 19.010)"
            ) in text
    assert ("One rate step from each shape's chosen lr: where training held (2 shape-rates), test "
            "PSNR moves -0.200 to +0.800 dB; where it broke down (validation loss over 1.25x the "
            "chosen lr's: 1 shape-rates), it falls 1.500 dB or more.") in text


def test_a_rate_where_a_side_breaks_down_bounds_the_grid_but_moves_no_gap():
    """A neighbouring rate whose mean validation loss is over 1.25x the chosen rate's (or NaN) is
    one where that side's training broke down: it is listed apart from the moves (a gap's
    sensitivity is read where training held) and is never the runner-up a sign flip is judged
    by - here the conventional's only neighbour breaks down, so no runner-up can flip the gap."""
    for loss_at_2e3, broke in ((0.0149, False), (0.0151, True)):  # 1.25x its 0.012 is 0.015
        rows = [r if not (r["shape"] == "conventional" and r["learning_rate"] == 2e-3)
                else {**r, "val_loss": loss_at_2e3} for r in rate_grid_rows(21.0)]
        entries = fronts.shape_results(rows)
        point, best, gap, _ = fronts.gaps(entries, "params_total", "test_psnr_batchmse",
                                          *pair(entries))[0]
        assert fronts.breaks_down(point, 2e-3) is broke
        flips = any((gap + m > 0) != (gap > 0)
                    for m in fronts.runner_up_moves(point, best, "test_psnr_batchmse"))
        assert flips is not broke  # 21.0 at 2e-3 would flip the +0.3 dB gap, where it held
        bullet = fronts.gap_bullet(entries, "params_total", "test_psnr_batchmse", *pair(entries))
        assert ("the conventional 0.002 breaks down" in bullet) is broke


def test_the_gap_bullet_says_whether_a_runner_up_rate_flips_its_sign():
    """The page's gap bullet: ahead or behind at each point, whether the seed-paired ranges cross
    zero, and whether either side's runner-up rate (its better neighbour by validation loss, not
    by test) flips the sign - here the conventional's one neighbour is 0.8 dB better on test, and
    flips the +0.3 dB gap; where it is worse, no sign flips."""
    for at_2e3, flips in ((21.0, "a side's runner-up rate flips the sign at 1 of 1 points"),
                          (20.0, "no side's runner-up rate flips a sign")):
        entries = fronts.shape_results(rate_grid_rows(at_2e3))
        bullet = fronts.gap_bullet(entries, "params_total", "test_psnr_batchmse", *pair(entries))
        assert "ahead at every point; every seed-paired range on the side of its mean" in bullet
        assert flips in bullet
    assert ("0.00M +0.300 dB (seed-paired +0.300 to +0.300; neighbouring rates: the hourglass "
            "0.0005 -0.200, 0.002 breaks down; the conventional 0.002 +0.200)") in bullet


def test_a_side_is_named_only_where_no_seed_and_no_runner_up_rate_turns_a_gap_around():
    """side(): 'ahead' needs every gap, every seed-paired gap and every gap with a side at its
    runner-up rate above zero. The +0.3 dB gap here keeps its sign across the seeds; whether the
    conventional's runner-up (2e-3) turns it around decides between 'ahead' and no side."""
    for at_2e3, expected in ((21.0, "no clear side"), (20.0, "ahead")):
        entries = fronts.shape_results(rate_grid_rows(at_2e3))
        found = fronts.gaps(entries, "params_total", "test_psnr_batchmse", *pair(entries))
        assert fronts.side(found, "test_psnr_batchmse") == expected
        # the conventional's 3e-3 ran one seed of two: its grid is not whole, so not yet a verdict
        assert f"so far {expected}; +0.300 to +0.300 dB" in "\n".join(fronts.brief_lines(entries))
    flipped = [{**r, "test_psnr_batchmse": -r["test_psnr_batchmse"]} for r in rate_grid_rows(20.0)]
    entries = fronts.shape_results(flipped)  # every PSNR negated: the hourglass behind everywhere
    found = fronts.gaps(entries, "params_total", "test_psnr_batchmse", *pair(entries))
    assert fronts.side(found, "test_psnr_batchmse") == "behind"


def test_page_blocks_are_what_the_command_writes_into_the_pages(sweep_csv, tmp_path,
                                                                 monkeypatch):
    """page_blocks gives the numbers a page quotes about one set of fronts, named after its
    output; the command writes them into the pages that show those blocks only when its output
    is one of the repo's (results/NAME): a run elsewhere leaves every page as it was."""
    blocks = fronts.page_blocks([sweep_csv], "tiny_fronts")
    assert set(blocks) == {f"tiny_fronts.{part}" for part in ("runs", "shapes", "gaps",
                                                               "fronts", "brief", "grid")}
    entries = fronts.shape_results(fronts.sweep_rows([sweep_csv]))
    gaps = [g for _, _, g, _ in fronts.gaps(entries, "params_total", "test_psnr_batchmse",
                                            *pair(entries)) if g is not None]
    assert blocks["tiny_fronts.brief"].count("\n") == 0 and (
        f"{min(gaps):+.3f} to {max(gaps):+.3f} dB test PSNR at the {len(gaps)} points"
        in blocks["tiny_fronts.brief"])
    assert blocks["tiny_fronts.runs"].startswith("- 9 runs: 3 shapes")
    assert "| hourglass d_z=64 d_h=8 L=2 | 0.001 | 2 |" in blocks["tiny_fronts.shapes"]
    assert blocks["tiny_fronts.gaps"].count("parameters:** ahead at every point; ") == 4
    assert "1500" not in blocks["tiny_fronts.fronts"]  # shapes by d_z/d_h/L, params in M
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "results").mkdir()
    (root / "README.md").write_text("no blocks\n")
    command = "python experiments/mlp_hourglass_fronts.py sweep.csv --out=results/tiny_fronts"
    page = (f"# x\n<!-- generated: tiny_fronts.gaps by `{command}` -->\nold\n"
            f"<!-- end generated: tiny_fronts.gaps -->\nprose\n")
    (root / "docs" / "page.md").write_text(page)
    monkeypatch.setattr(fronts, "ROOT", root)
    fronts.main([str(sweep_csv), f"--out={tmp_path / 'tiny_fronts'}"])  # not the repo's
    assert (root / "docs" / "page.md").read_text() == page
    fronts.main([str(sweep_csv), f"--out={root / 'results' / 'tiny_fronts'}"])
    assert (root / "docs" / "page.md").read_text() == page.replace(
        "\nold\n", "\n" + blocks["tiny_fronts.gaps"] + "\n")
    assert (root / "README.md").read_text() == "no blocks\n"


def test_page_blocks_read_the_same_from_any_working_folder(monkeypatch):
    """The blocks name the repo's CSVs from its root, whichever folder the command ran in (two
    CSVs of one folder name are shown by their whole path)."""
    csvs = [f"results/mlp_fashion_denoise_{sweep}/seed0/sweep.csv" for sweep in ("fair",
                                                                                 "learned")]
    monkeypatch.chdir(ROOT)
    from_root = fronts.page_blocks([Path(p) for p in csvs], "x")
    monkeypatch.chdir(ROOT / "experiments")
    assert fronts.page_blocks([Path("..") / p for p in csvs], "x") == from_root
    assert "(results/mlp_fashion_denoise_fair/seed0/sweep.csv: " in from_root["x.runs"]


def test_the_lift_block_pairs_each_hourglass_shape_frozen_and_learned():
    rows = [dict(row("hourglass", 64, 8, 2, 1e-3, seed, 1000, 0.02, psnr, 0.8),
                 input_proj=proj) for proj, psnr in (("frozen_random", 20.0), ("learned", 20.5))
            for seed in (0, 1)]
    rows.append(dict(row("hourglass", 64, 32, 2, 1e-3, 0, 2000, 0.02, 21.0, 0.8),
                     input_proj="learned"))  # no frozen twin: not in the list
    rows = [{**r, **{k: float(v) for k, v in r.items() if k in fronts.NUMBERS}} for r in rows]
    assert fronts.lift_bullet(fronts.shape_results(rows)) == (
        "- hourglass test PSNR, frozen -> learned W_in (each at its own lr): 64/8/L2 (0.00M) "
        "20.00 -> 20.50 dB.")


SWEEP_FRONTS = {  # the fronts script's committed output: the committed CSVs it was run on
    "mlp_fashion_denoise_fronts.md": [f"results/mlp_fashion_denoise_sweep_seed{s}.csv"
                                      for s in (0, 1)],
    "mlp_fashion_denoise_fair_fronts.md": [f"results/mlp_fashion_denoise_fair/{run}/sweep.csv"
                                           for run in ("first_sweep", "seed0", "seed1")],
    "mlp_fashion_denoise_forms_fronts.md": [
        *(f"results/mlp_fashion_denoise_fair/{run}/sweep.csv"
          for run in ("first_sweep", "seed0", "seed1")),
        *(f"results/mlp_fashion_denoise_learned/{run}/sweep.csv" for run in ("seed0", "seed1"))],
}


@pytest.mark.parametrize("output, csvs", SWEEP_FRONTS.items())
def test_each_committed_fronts_output_is_the_script_on_its_rows(output, csvs, monkeypatch):
    """results/<sweep>_fronts.md is what `python experiments/mlp_hourglass_fronts.py <its CSVs>`
    gives on the CSVs as committed: rows added without rerunning the script fail here."""
    monkeypatch.chdir(ROOT)  # (the output names the CSVs as the command was given them)
    text = fronts.fronts([Path(p) for p in csvs])[0]
    assert text == (ROOT / "results" / output).read_text(), (
        f"results/{output} is not the fronts script's output on {', '.join(csvs)}: run python "
        f"experiments/mlp_hourglass_fronts.py {' '.join(csvs)} --out=results/{output[:-3]}")


def test_the_fair_sweeps_borrowed_hourglass_runs_are_the_first_sweeps():
    """The fair sweep borrows the first sweep's hourglass rows at 5e-4 (first_sweep/sweep.csv):
    the same runs, row for row."""
    def runs(paths):
        return {(r["latent_dim"], r["hidden_dim"], r["n_blocks"], float(r["learning_rate"]),
                 r["seed"]): float(r["test_psnr_batchmse"]) for path in paths
                for r in csv.DictReader(open(path)) if r["shape"] == "hourglass"}
    first = runs(ROOT / f"results/mlp_fashion_denoise_sweep_seed{s}.csv" for s in (0, 1))
    borrowed = runs([ROOT / "results/mlp_fashion_denoise_fair/first_sweep/sweep.csv"])
    assert borrowed and all(first[k] == v for k, v in borrowed.items())


def grid_rows(seeds_of_conventional_3e3=(0, 1)):
    """Two forms of the hourglass (frozen, learned) and one conventional form, two seeds: the
    learned hourglass lacks a shape the frozen one ran, the frozen 64/32/L2 ran two rates, and the
    conventional's 3e-3 ran with `seeds_of_conventional_3e3`."""
    def at(shape, d_z, d_h, L, lrs, proj, params, psnr, seeds=(0, 1)):
        return [{**row(shape, d_z, d_h, L, lr, seed, params, 0.01 + abs(lr - 2e-3), psnr, 0.8),
                 "input_proj": proj} for lr in lrs for seed in seeds]
    rows = (at("hourglass", 64, 8, 2, (1e-3, 2e-3, 3e-3), "frozen_random", 1000, 20.0)
            + at("hourglass", 64, 32, 2, (1e-3, 2e-3), "frozen_random", 2000, 20.5)
            + at("hourglass", 64, 8, 2, (1e-3, 2e-3, 3e-3), "learned", 1000, 20.6)
            + at("conventional", 32, 64, 1, (1e-3, 2e-3), "direct", 1500, 20.2)
            + at("conventional", 32, 64, 1, (3e-3,), "direct", 1500, 20.2,
                 seeds_of_conventional_3e3))
    return [{**r, **{k: float(v) for k, v in r.items() if k in fronts.NUMBERS}} for r in rows]


def test_the_grid_is_whole_only_with_every_form_at_every_shape_and_rate():
    """grid_holes: a form that has not run a shape its family ran in another form, a shape at
    fewer than three rates with every seed, a rate only some seeds ran - each listed with the
    sweep arguments that fill it; grid_line counts them."""
    entries = fronts.shape_results(grid_rows(seeds_of_conventional_3e3=(0,)))
    holes = {(h["form"], h["shape"]): h for h in fronts.grid_holes(entries)}
    assert holes.keys() == {("hourglass (frozen W_in)", ("hourglass", 64, 32, 2)),
                            ("hourglass (learned W_in)", ("hourglass", 64, 32, 2)),
                            ("conventional (direct)", ("conventional", 32, 64, 1))}
    assert holes["hourglass (frozen W_in)", ("hourglass", 64, 32, 2)]["lacks"] == (
        "2 rates with every seed")
    assert holes["hourglass (learned W_in)", ("hourglass", 64, 32, 2)]["lacks"] == "not run"
    assert holes["conventional (direct)", ("conventional", 32, 64, 1)]["lacks"] == (
        "2 rates with every seed, 0.003 with seed 0 only")
    asks = dict(fronts.grid_asks(fronts.grid_holes(entries)))
    assert asks["conventional (direct)"] == (
        "--shapes=conventional:32:64:1; then --shapes=conventional:32:64:1 --learning_rates=0.003")
    assert asks["hourglass (learned W_in)"] == "--shapes=hourglass:64:32:2"
    assert ("(every form at every shape its family ran, each at 3 rates or more with seeds 0, 1):"
            " 2 of 5 form-shapes whole") in fronts.grid_line(entries)  # 2 x 2 hourglass, 1


def test_no_verdict_until_both_forms_grid_is_whole_and_no_front_shape_at_an_edge():
    """brief_lines names a side as a verdict only where both forms' grid is whole and none of
    their Pareto-optimal shapes chose an edge rate; before, 'no verdict yet' with what is short,
    and the side so far."""
    rows = [r for r in grid_rows() if r["hidden_dim"] != 32]  # the 64/32/L2 hourglasses gone
    brief = "\n".join(fronts.brief_lines(fronts.shape_results(rows)))
    # each shape chose 2e-3, inside 1e-3..3e-3, and every form ran every shape at 3 rates
    assert "- hourglass (learned W_in) minus conventional (direct): **ahead**; +0.400" in brief
    assert "no verdict yet" not in brief
    assert fronts.grid_line(fronts.shape_results(rows)).endswith(
        "whole, and no Pareto-optimal shape at an edge rate")
    short = [r for r in rows if not (r["shape"] == "conventional" and r["learning_rate"] == 3e-3
                                     and r["seed"] == 1)]
    brief = "\n".join(fronts.brief_lines(fronts.shape_results(short)))
    assert ("- hourglass (learned W_in) minus conventional (direct): **no verdict yet** (1 of "
            "their form-shapes short of the grid, 1 Pareto-optimal shape at an edge rate); so far "
            "ahead; +0.400") in brief


def test_a_shape_run_at_one_rate_is_at_both_edges_and_counts_once():
    """A shape run at one rate is flagged at the top and the bottom, but is one shape at an edge."""
    rows = [r for r in grid_rows() if r["input_proj"] == "learned" and r["learning_rate"] == 2e-3]
    entries = fronts.shape_results(rows)
    assert [edge for _, edge, _ in fronts.edge_lrs(entries)] == ["top", "bottom"]
    assert "0 of 1 form-shapes whole, 1 Pareto-optimal shape at an edge rate" in (
        fronts.grid_line(entries))
