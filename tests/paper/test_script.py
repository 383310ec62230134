"""reidcli.paper.script: the output folder of ``reid paper ablation`` stands for its runs."""
from __future__ import annotations

import json

import pytest

from reidcli.errors import InputFileError
from reidcli.paper.script import ablation_runs


def test_an_ablation_folder_expands_to_its_runs_in_row_order(tmp_path):
    out = tmp_path / "ablation"
    out.mkdir()
    rows = [{"variant": "dgvae", "runs": [str(out / "dgvae/seed0"), str(out / "dgvae/seed1")]},
            {"variant": "baseline", "runs": [str(out / "baseline/seed0")]}]
    (out / "ablation.json").write_text(json.dumps({"rows": rows}))
    plain = str(tmp_path / "run")
    assert ablation_runs([plain, str(out)]) == [
        plain, str(out / "dgvae/seed0"), str(out / "dgvae/seed1"), str(out / "baseline/seed0")]


def test_an_unreadable_ablation_index_is_one_clear_error(tmp_path):
    (tmp_path / "ablation.json").write_text('{"rows": 3}')
    with pytest.raises(InputFileError, match="ablation.json.*TypeError"):
        ablation_runs([str(tmp_path)])
