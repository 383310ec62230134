"""reidcli/paper/results.py: the noise-aware claim verdicts (a difference of means below the
larger seed std says so) keep the ``VERDICT  claim…: a vs b`` line the recipes' tests parse."""
from __future__ import annotations

from pathlib import Path

from rich.console import Console

from reidcli.paper.results import check_claims, run_label, within_noise
from tests.recipes.helpers import claim_verdicts


def _result(value: float, std: float, stores: int) -> dict:
    return {"map": value, "map_std": std, "r1": value, "s1": std, "stores": stores}


def test_seed_noise_is_said_on_the_claim_line():
    ours = {"A": _result(30.0, 2.0, 3), "B": _result(29.0, 0.5, 3), "C": _result(20.0, 1.0, 3),
            "D": _result(29.0, 5.0, 1)}                 # one store: its std is not the seeds'
    claims = [("A > B", "A", "B", False), ("B > A", "B", "A", False),
              ("A > C", "A", "C", False), ("A > D", "A", "D", False)]
    console = Console(record=True, width=200)
    verdicts = check_claims(claims, ours, "map", console, " (mAP)", digits=2, noise="seed")
    assert verdicts == [("A > B", True), ("B > A", False), ("A > C", True), ("A > D", True)]
    lines = console.export_text().splitlines()
    assert lines[0] == "PASS  A > B (mAP) (within seed noise, std 2.00): 30.00 vs 29.00"
    assert lines[1] == "FAIL  B > A (mAP) (within seed noise, std 2.00): 29.00 vs 30.00"
    assert lines[2] == "PASS  A > C (mAP): 30.00 vs 20.00"
    assert lines[3] == "PASS  A > D (mAP): 30.00 vs 29.00"
    assert claim_verdicts("\n".join(lines), claims) == {"A > B": "PASS", "B > A": "FAIL",
                                                        "A > C": "PASS", "A > D": "PASS"}
    assert within_noise(ours["A"], ours["B"], "r1") == 2.0
    assert within_noise(ours["A"], ours["C"], "map") is None
    # without noise= the lines are as before
    console = Console(record=True, width=200)
    check_claims(claims[:1], ours, "map", console, " (mAP)", digits=2)
    assert console.export_text().strip() == "PASS  A > B (mAP): 30.00 vs 29.00"


def test_run_label_names_a_seed_run_by_its_variant():
    assert run_label(Path("out/dgvae/seed2")) == "dgvae/seed2"
    assert run_label(Path("work/trial_3")) == "trial_3"
