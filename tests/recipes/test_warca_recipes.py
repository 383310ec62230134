"""recipes/warca_*.sh: the synthetic chain runs end to end (shrunk); real ones need data."""
from __future__ import annotations

import subprocess

from tests.recipes.helpers import ONE_THREAD, RECIPES, recipe_env, run_recipe, shrunk_notice

#: 30 + 30 persons, P = 20 test ids, trial 0, 100 iterations of WARCA and rPCCA
SHRUNK = dict(WARCA_SYNTH_IDS="30", WARCA_TEST_IDS="20", WARCA_TRIALS="0",
              WARCA_ITERATIONS="100")


def test_warca_synthetic_recipe_shrunk(tmp_path):
    out = run_recipe("warca_synthetic.sh", tmp_path, **SHRUNK, **ONE_THREAD)
    for label in ("WARCA-χ²", "WARCA-L", "rPCCA-χ²", "LFDA-L", "KISSME", "Euclidean"):
        assert label in out
    assert (tmp_path / "WARCA_L.json").is_file()
    notice = shrunk_notice(out)
    assert all(f"{knob}={value}" in notice for knob, value in SHRUNK.items()), notice


def test_real_warca_recipes_need_their_inputs(tmp_path):
    for name in ("viper", "prid450s", "cuhk01", "cuhk03", "ilids", "market1501",
                 "lomo_viper", "lomo_cuhk01"):
        env = recipe_env()
        env.pop("REIDCLI_DATA", None)
        proc = subprocess.run(["bash", str(RECIPES / f"warca_{name}.sh"), str(tmp_path)],
                              capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode != 0 and "REIDCLI_DATA" in proc.stderr


def test_shrunk_notice_names_only_the_knobs_set():
    script = f'set -euo pipefail; source "{RECIPES / "_shrunk.sh"}"; shrunk_notice KNOB_A KNOB_B'

    def notice(**env) -> str:
        proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                              env=recipe_env(**env), timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert notice() == ""                                # the full-size default: no notice
    assert shrunk_notice(notice(KNOB_B="2")).startswith("SHRUNK run (KNOB_B=2):")
