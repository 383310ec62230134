"""recipes/warca_*.sh: the synthetic chain runs end to end (shrunk); real ones need data."""
from __future__ import annotations

import subprocess

from tests.recipes.test_cdpcf_recipes import RECIPES, _env


def test_warca_synthetic_recipe_shrunk(tmp_path):
    env = _env(COLUMNS="160", WARCA_SYNTH_IDS="30", WARCA_TEST_IDS="20", WARCA_TRIALS="0",
               WARCA_ITERATIONS="100", OMP_NUM_THREADS="1")
    proc = subprocess.run(["bash", str(RECIPES / "warca_synthetic.sh"), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for label in ("WARCA-χ²", "WARCA-L", "rPCCA-χ²", "LFDA-L", "KISSME", "Euclidean"):
        assert label in proc.stdout
    assert (tmp_path / "WARCA_L.json").is_file()


def test_real_warca_recipes_need_their_inputs(tmp_path):
    for name in ("viper", "prid450s", "cuhk01", "cuhk03", "ilids", "market1501",
                 "lomo_viper", "lomo_cuhk01"):
        env = _env()
        env.pop("REIDCLI_DATA", None)
        proc = subprocess.run(["bash", str(RECIPES / f"warca_{name}.sh"), str(tmp_path)],
                              capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode != 0 and "REIDCLI_DATA" in proc.stderr
