"""recipes/warca_*.sh: the synthetic chain runs end to end (shrunk); real ones need data."""
from __future__ import annotations

import subprocess

import pytest

from tests.recipes.helpers import ONE_THREAD, RECIPES, recipe_env, run_recipe, shrunk_notice

#: 30 + 30 persons, P = 20 test ids, 2 draws per split, trials 0-1 (split 1's two draws),
#: 100 iterations of WARCA and rPCCA, a 1 × 2 cv grid
SHRUNK = dict(WARCA_SYNTH_IDS="30", WARCA_TEST_IDS="20", WARCA_TRIALS="0,1",
              WARCA_ITERATIONS="100", WARCA_DRAWS="2", WARCA_CV_LAMS="0.001",
              WARCA_CV_LRS="0.1,0.01")


def test_warca_synthetic_recipe_shrunk(tmp_path):
    out = run_recipe("warca_synthetic.sh", tmp_path, **SHRUNK, **ONE_THREAD)
    for label in ("WARCA-χ²", "WARCA-L", "rPCCA-χ²", "LFDA-L", "KISSME", "Euclidean"):
        assert label in out
    assert (tmp_path / "WARCA_L.json").is_file()
    # the header states the protocol that ran and how it departs from the paper's
    assert "WARCA Table 2 protocol on synthetic: 10 splits × 2 draws, P = 20 test ids, one " \
           "probe per test id" in out
    assert "departs from the paper's protocol" in out and "2 draws per split (paper: 10)" in out
    # (λ, η) selected once on split 1 and printed, then used for every split
    assert out.count("cross-validated once on split 1's training ids") == 2       # χ², L
    import json
    report = json.loads((tmp_path / "WARCA_L.json").read_text())
    assert report["aggregation"]["num_splits"] == 1 and report["num_trials"] == 2
    assert "gamma=auto" in out
    notice = shrunk_notice(out)
    assert all(f"{knob}={value}" in notice for knob, value in SHRUNK.items()), notice


def test_real_warca_recipes_need_their_inputs(tmp_path):
    for name in ("viper", "prid450s", "cuhk01", "cuhk03", "ilids", "market1501", "caviar",
                 "3dpes", "opereid", "lomo_viper", "lomo_cuhk01"):
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


@pytest.mark.slow
def test_warca_caviar_recipe_on_a_fake_tree(tmp_path):
    """A real-data recipe end to end on a layout-exact CAVIAR4REID tree (noise images with a
    colour per person), shrunk: header, cv line, table, shrunk notice."""
    import numpy as np
    from PIL import Image

    from tests.data.fake_trees import warca_sets

    # 10 persons × (8 camera-0 + 8 camera-1 images): enough pairs for KISSME at D' = 40
    images = {pid: (*range(1, 9), *range(11, 19)) for pid in range(1, 11)}
    folder = warca_sets.build_caviar4reid(tmp_path / "data", images=images)
    rng = np.random.default_rng(0)
    for path in sorted(folder.iterdir()):
        colour = np.array([37, 91, 173]) * int(path.name[:4]) % 256
        pixels = np.clip(colour + rng.normal(0, 40, (128, 48, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(path)
    knobs = dict(WARCA_TEST_IDS="2", WARCA_DRAWS="2", WARCA_TRIALS="0,1",
                 WARCA_ITERATIONS="20", WARCA_CV_LAMS="0.001", WARCA_CV_LRS="0.1,0.01")
    out = run_recipe("warca_caviar.sh", tmp_path / "run", REIDCLI_DATA=str(tmp_path / "data"),
                     **knobs, **ONE_THREAD)
    assert "WARCA Table 2 protocol on CAVIAR: 10 splits × 2 draws, P = 2 test ids" in out
    assert "same-camera matches kept" in out and "P = 2 test ids (paper: 36)" in out
    assert out.count("cross-validated once on split 1's training ids") == 2
    assert "CAVIAR: ours vs WARCA paper Table 2" in out and "43.44 ± 1.82" in out
    notice = shrunk_notice(out)
    assert all(f"{knob}={value}" in notice for knob, value in knobs.items()), notice
