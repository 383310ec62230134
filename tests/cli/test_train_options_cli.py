"""The options every `reid train METHOD` shares for evaluation during training, the best
checkpoint, TensorBoard and re-runs (docs/training.md), and `reid train --config`."""
from __future__ import annotations

import pytest

from tests.cli.helpers import run_cli

SHARED = ("--eval-every", "--eval-dataset", "--eval-option", "--keep", "--keep-metric",
          "--tensorboard", "--config")


@pytest.mark.parametrize("method", ["pcb", "bot", "dgvae", "dmgnet"])
def test_every_network_trainer_has_the_shared_options(capsys, method):
    code, out, err = run_cli(capsys, "train", method, "--help")
    assert code == 0, err
    for flag in SHARED:
        assert flag in out, (method, flag)


def test_group_level_config_and_misplaced_options(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "train", "--help")
    assert code == 0 and "--config" in out
    code, _, err = run_cli(capsys, "train", "--out", tmp_path / "x", "pcb")
    assert code == 2 and "after it" in err and len(err.strip().splitlines()) == 1
