"""recipes/cdpcf_*.sh: the synthetic chain runs end to end; the real ones fail clearly."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def _env(**extra):
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def test_cdpcf_synthetic_recipe_prints_table_and_claims(tmp_path):
    # PCB (source) trained on 1,500 source images: the CI-sized run (~2 min on 2 cores)
    proc = subprocess.run(["bash", str(RECIPES / "cdpcf_synthetic.sh"), str(tmp_path)],
                          capture_output=True, text=True, timeout=600,
                          env=_env(COLUMNS="160", PCB_MAX_IMAGES="1500"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    for label in ("C-DPCF", "DPCF", "AvgP+XQDA", "AvgP+pad.+XQDA", "PCB (source)"):
        assert label in out
    assert "PASS  C-DPCF ≥ DPCF" in out          # the camera-specific maps must pay off
    assert (tmp_path / "cdpcf.json").is_file() and not (tmp_path / "cdpcf.h5").exists()
    assert (tmp_path / "pcb_source" / "model.pt").is_file()      # the CNN was trained here


def test_real_recipes_need_their_inputs(tmp_path):
    for name in ("viper", "grid", "prid450s", "cuhk01"):
        env = _env()
        env.pop("REIDCLI_DATA", None)
        proc = subprocess.run(["bash", str(RECIPES / f"cdpcf_{name}.sh"), str(tmp_path)],
                              capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode != 0 and "REIDCLI_DATA" in proc.stderr
