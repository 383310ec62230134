"""recipes/cdpcf_*.sh: the synthetic chain runs end to end (shrunk in the default run, full
size under ``-m slow``); the real ones fail clearly."""
from __future__ import annotations

import json
import re
import subprocess

import pytest

from reidcli.paper.compare import CDPCF_CLAIMS
from tests.recipes.helpers import (FULL_TIMEOUT_S, ONE_THREAD, RECIPES, claim_verdicts,
                                   recipe_env, run_recipe, shrunk_notice)

LABELS = ("C-DPCF", "DPCF", "AvgP+XQDA", "AvgP+pad.+XQDA", "PCB (source)")
#: 40 source persons (~500 images), PCB trained 1 epoch on 200 of them, trial 0 of 10
SHRUNK = dict(CDPCF_SOURCE_IDS="40", PCB_EPOCHS="1", PCB_MAX_IMAGES="200", CDPCF_TRIALS="0")


def _check_table(out: str, work) -> dict[str, str]:
    for label in LABELS:
        assert re.search(rf"^│ {re.escape(label)} +│", out, flags=re.M), label
    assert "paper rank-1" in out                                  # the paper's column
    assert (work / "cdpcf.json").is_file() and not (work / "cdpcf.h5").exists()
    assert (work / "pcb_source" / "model.pt").is_file()          # the CNN was trained here
    return claim_verdicts(out, CDPCF_CLAIMS)


def test_cdpcf_synthetic_recipe_shrunk(tmp_path):
    out = run_recipe("cdpcf_synthetic.sh", tmp_path, **SHRUNK, **ONE_THREAD)
    verdicts = _check_table(out, tmp_path)
    # the camera-specific maps pay off even shrunk (28 vs 5 rank-1 on trial 0)
    assert verdicts["C-DPCF ≥ DPCF"] == "PASS"
    notice = shrunk_notice(out)
    assert all(f"{knob}={value}" in notice for knob, value in SHRUNK.items()), notice
    for method in ("cdpcf", "pcb_source"):                       # only trial 0 was evaluated
        assert json.loads((tmp_path / f"{method}.json").read_text())["num_trials"] == 1
    meta = json.loads((tmp_path / "data" / "synthetic" / "cdpcf" / "meta.json").read_text())
    assert meta["params"]["num_train_ids"] == 40


@pytest.mark.slow
def test_cdpcf_synthetic_recipe_full(tmp_path):
    # PCB (source) trained on 1,500 source images, all 10 trials (minutes on 2 cores)
    out = run_recipe("cdpcf_synthetic.sh", tmp_path, timeout=FULL_TIMEOUT_S,
                     PCB_MAX_IMAGES="1500", **ONE_THREAD)
    assert _check_table(out, tmp_path)["C-DPCF ≥ DPCF"] == "PASS"
    assert json.loads((tmp_path / "cdpcf.json").read_text())["num_trials"] == 10
    assert shrunk_notice(out).startswith("SHRUNK run (PCB_MAX_IMAGES=1500)")


def test_real_recipes_need_their_inputs(tmp_path):
    for name in ("viper", "grid", "prid450s", "cuhk01"):
        env = recipe_env()
        env.pop("REIDCLI_DATA", None)
        proc = subprocess.run(["bash", str(RECIPES / f"cdpcf_{name}.sh"), str(tmp_path)],
                              capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode != 0 and "REIDCLI_DATA" in proc.stderr
