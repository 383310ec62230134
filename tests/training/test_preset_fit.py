"""Issue 33 (1): `--preset tiny` on the `tiny` synthetic dataset (6 identities, 24 training
images) — the preset's batch is lowered to what the data holds, with one line; an explicit
batch that does not fit is still refused, and leaves no run folder."""
from __future__ import annotations

import json

import pytest

from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process


def _train(method, root, out, *extra, capsys):
    return reid_in_process("train", method, "--dataset", "synthetic", "--root", root,
                           "--option", "name=tiny", "--preset", "tiny", "--epochs", "1",
                           "--device", "cpu", *extra, "--out", out, capsys=capsys)


@pytest.mark.parametrize("method, note, recorded", [
    ("pcb", "preset tiny: --batch-size 32 lowered to the 24 training images",
     {"batch_size": 24}),
    ("bot", "preset tiny: P=8 identities per batch lowered to the 6 training identities",
     {"p": 6, "batch_size": 24})])
def test_tiny_preset_fits_the_tiny_dataset(tmp_path, tiny_synthetic_root, capsys, method, note,
                                           recorded):
    code, _, err = _train(method, tiny_synthetic_root, tmp_path / "run", capsys=capsys)
    assert code == 0, err
    assert note in err
    config = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert {k: config[k] for k in recorded} == recorded


def test_an_explicit_batch_that_does_not_fit_is_refused(tmp_path, tiny_synthetic_root, capsys):
    result = _train("pcb", tiny_synthetic_root, tmp_path / "run", "--batch-size", "40",
                    capsys=capsys)
    assert_one_line_error_in_process(result, "24 training images cannot fill one batch of 40")
    assert not (tmp_path / "run").exists()
