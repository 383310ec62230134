"""`--epochs 0` / `--max-iters 0`: the initialised model is saved untrained, so weights given
with `--init` (or a fresh trunk) can be extracted without a training step (issue 31)."""
from __future__ import annotations

import pytest
import torch

from tests.faults.helpers import reid_in_process

BOT = ["train", "bot", "--dataset", "synthetic", "--option", "name=tiny", "--preset", "tiny",
       "--ids-per-batch", "4", "--images-per-id", "2", "--quiet"]


@pytest.mark.parametrize("stop", [["--epochs", "0"], ["--max-iters", "0"]])
def test_zero_iterations_save_the_initialised_model(tmp_path, tiny_synthetic_root, capsys, stop):
    first = tmp_path / "first"
    code, _, err = reid_in_process(*BOT, "--root", tiny_synthetic_root, "--epochs", "1",
                                   "--out", first, capsys=capsys)
    assert code == 0, err
    out = tmp_path / "zero"
    code, _, err = reid_in_process(*BOT, "--root", tiny_synthetic_root, *stop, "--init",
                                   first / "model.pt", "--out", out, capsys=capsys)
    assert code == 0, err
    trained = torch.load(first / "model.pt", weights_only=True)["model_state"]
    saved = torch.load(out / "model.pt", weights_only=True)["model_state"]
    trunk = [k for k in trained if k.startswith("backbone.")]
    assert trunk and all(torch.equal(trained[k], saved[k]) for k in trunk)
    rows = (out / "metrics.csv").read_text().strip().splitlines()
    assert len(rows) == 1                                   # the header: no training step
