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


@pytest.mark.parametrize("method", ["pcb", "bot", "dgvae", "dmgnet"])
def test_the_command_is_generated_from_the_trainers_declaration(capsys, method):
    from reidcli.cli.train_net import command_parameters, option_flag
    from reidcli.training.config import method_info

    code, out, err = run_cli(capsys, "train", method, "--help")
    assert code == 0, err
    shown = command_parameters(method)
    for p in shown:
        assert option_flag(method, p) in out, (method, p.name)
    declared = {p.name for p in method_info(method).parameters if p.cli}
    assert declared <= {p.name for p in shown}                  # every declared option
    hidden = {p.name for p in method_info(method).parameters if not p.cli}
    assert not hidden & {p.name for p in shown}                 # defaults only: no option
