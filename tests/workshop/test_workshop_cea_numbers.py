"""The CEA numbers the workshop quotes are the ones its exercise's check measures.

docs/workshop.md (Part 3) and docs/workshop_solutions.md (Part 3) quote the FFN contribution ratio
and the train loss of the exercise's 2-layer models at rho = 1.0, 0.5 and 0.125. Here the check
(workshop_checks.check_cea_exercise: 150 steps in fp32, on one thread as the workshop sets
OMP_NUM_THREADS=1) runs on the reference solution at each rho, and every quoted number is compared
with what it printed, so a number edited by hand, or a code change that moves one, fails here.

Tolerances (the last digits follow the CPU's rounding and the thread count): a ratio within 0.01,
a loss within 0.02. On a 2-core Intel Xeon with AVX512 the check printed 0.533 / 0.551 (rho 1.0 /
0.5) with one thread and 0.532 / 0.557 with two; train loss 2.570 / 2.569 and 3.032 at rho 0.125.

At rho = 0.125 the ratio itself is not quoted: after 150 steps that model is still on its plateau,
its accuracy after the last sublayer is below the embedding's, so the ratio divides by a negative
total gain near zero and its value (-0.03 with one thread, 0.49 with two, on that Xeon) means
nothing. What the texts say instead is checked: that plateau loss, and the negative total gain.

One test, so that the three checks run once (under pytest-xdist too); the run at rho = 0.5 is also
the check of the exercise's reference solution that test_workshop_exercises.py runs for the others.
"""

import contextlib
import io
import re

import torch
from workshop_checks import CHECKS, ROOT, load_module, solution_sources

RATIO_TOLERANCE = 0.01
LOSS_TOLERANCE = 0.02
PRINTED = re.compile(r"outer ratio ([\d.]+): FFN contribution ratio (-?[\d.]+|nan) after 150 steps "
                     r"\(train loss ([\d.]+)\)")


def part3(doc):
    """The Part 3 section of docs/<doc>, whitespace collapsed (quotes break across lines)."""
    text = (ROOT / "docs" / doc).read_text()
    start = text.index("## Part 3")
    return " ".join(text[start:text.index("## Part 4", start)].split())


def measure(folder):
    """rho -> dict(ratio, loss, accuracies): what check_cea_exercise prints for the reference
    solution with OUTER_RATIO = rho (its split assertion fails at 1.0 and 0.125, after the print;
    at 0.5, the solution's own, the check passes), and the accuracies behind its last ratio."""
    import cea_contribution  # experiments/, on the path once workshop_checks is imported

    source = solution_sources()["cea_exercise"]
    assert "OUTER_RATIO = 0.5" in source, "the reference solution changed: update this test"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the workshop's OMP_NUM_THREADS=1
    results = {}
    try:
        for rho in (1.0, 0.5, 0.125):
            path = folder / f"cea_exercise_{rho}.py"
            path.write_text(source.replace("OUTER_RATIO = 0.5", f"OUTER_RATIO = {rho}"))
            module = load_module(path, f"workshop_cea_numbers_{str(rho).replace('.', '_')}")
            seen, solution = [], module.ffn_contribution

            def recording(model, idx, targets, solution=solution, seen=seen):
                reps, _ = cea_contribution.sublayer_representations(model, idx)
                seen.append(cea_contribution.token_prediction_accuracies(
                    reps, targets.reshape(-1), min_count=50))
                return solution(model, idx, targets)

            module.ffn_contribution = recording
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                try:
                    CHECKS["cea_exercise"](module)
                except AssertionError as e:
                    assert rho != 0.5 and "set OUTER_RATIO" in str(e), e
            found = PRINTED.search(out.getvalue())
            assert found and float(found.group(1)) == rho, out.getvalue()
            results[rho] = dict(ratio=float(found.group(2)), loss=float(found.group(3)),
                                accuracies=seen[-1])
    finally:
        torch.set_num_threads(threads)
    return results


def close(quoted, value, tolerance):
    return abs(float(quoted) - value) <= tolerance + 1e-9


def test_the_workshop_quotes_what_the_cea_check_measures(tmp_path):
    measured = measure(tmp_path)
    for doc in ("workshop.md", "workshop_solutions.md"):
        the_quoted_ratios_and_losses_are_the_checks(doc, measured)
    the_printed_line_the_workshop_shows_is_the_checks(measured)
    at_rho_one_eighth_the_sublayers_lower_the_accuracy_as_the_texts_say(measured)


def the_quoted_ratios_and_losses_are_the_checks(doc, measured):
    text = part3(doc)
    ratios = re.findall(r"(-?\d+\.\d+) at rho = (\d\.\d+)", text)
    quoted_rhos = {float(rho) for _, rho in ratios}
    assert {1.0, 0.5} <= quoted_rhos, (
        f"docs/{doc} Part 3 no longer quotes '<ratio> at rho = 1.0' and '... at rho = 0.5': "
        f"update this test with the new wording (found {ratios})")
    for quoted, rho in ratios:
        rho = float(rho)
        assert rho != 0.125, (
            f"docs/{doc} quotes a ratio of {quoted} at rho = 0.125: at 150 steps the ratio there "
            f"divides by a negative total gain and means nothing (measured now "
            f"{measured[0.125]['ratio']:.3f})")
        assert close(quoted, measured[rho]["ratio"], RATIO_TOLERANCE), (
            f"docs/{doc} quotes an FFN ratio of {quoted} at rho = {rho}; the check measures "
            f"{measured[rho]['ratio']:.3f} (tolerance {RATIO_TOLERANCE})")
    # two decimals: not the check's printed line, "(train loss 2.569)" (the test below ties it)
    losses = re.findall(r"loss (?:is still )?(\d\.\d\d)(?!\d)( for both)?", text)
    assert any(both for _, both in losses) and any(not both for _, both in losses), (
        f"docs/{doc} Part 3 no longer quotes 'train loss <x> for both' (rho 1.0 and 0.5) and the "
        f"loss at rho = 0.125: update this test with the new wording (found {losses})")
    for quoted, both in losses:
        for rho in (1.0, 0.5) if both else (0.125,):
            assert close(quoted, measured[rho]["loss"], LOSS_TOLERANCE), (
                f"docs/{doc} quotes a train loss of {quoted} at rho = {rho}; the check measures "
                f"{measured[rho]['loss']:.3f} (tolerance {LOSS_TOLERANCE})")


def the_printed_line_the_workshop_shows_is_the_checks(measured):
    found = re.findall(r"outer ratio 0\.5: FFN contribution ratio (-?\d\.\d+) after 150 steps "
                       r"\(train loss (\d\.\d+)\)", " ".join(part3("workshop.md").split()))
    assert found, "docs/workshop.md Part 3 no longer shows the check's printed line: update this"
    for quoted, loss in found:
        assert close(quoted, measured[0.5]["ratio"], RATIO_TOLERANCE), (
            f"docs/workshop.md shows the check printing {quoted} at rho = 0.5; it prints "
            f"{measured[0.5]['ratio']:.3f} (tolerance {RATIO_TOLERANCE})")
        assert close(loss, measured[0.5]["loss"], LOSS_TOLERANCE), (
            f"docs/workshop.md shows the check printing train loss {loss} at rho = 0.5; it "
            f"prints {measured[0.5]['loss']:.3f} (tolerance {LOSS_TOLERANCE})")


def at_rho_one_eighth_the_sublayers_lower_the_accuracy_as_the_texts_say(measured):
    """The texts explain the meaningless ratio at rho = 0.125: after 150 steps the accuracy after
    the last sublayer is below the embedding's, so the ratio's denominator is negative."""
    for doc in ("workshop.md", "workshop_solutions.md"):
        assert "lower than after the embedding" in part3(doc), doc
    accuracies = measured[0.125]["accuracies"]
    assert accuracies[-1] < accuracies[0], (
        f"at rho = 0.125 the accuracies after 150 steps are {[round(a, 4) for a in accuracies]}: "
        f"the last is no longer below the embedding's, so the ratio "
        f"({measured[0.125]['ratio']:.3f}) may mean something now - update both Part 3 texts")
    for rho in (1.0, 0.5):  # where the texts quote a ratio, the sublayers do raise the accuracy
        assert measured[rho]["accuracies"][-1] > measured[rho]["accuracies"][0], rho
