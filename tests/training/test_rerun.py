"""`reid train --config RUN/config.json` (docs/training.md): a recorded run trained again gives
the same weights bit for bit; options given override it; a bad or foreign config is a
one-line error naming the file."""
from __future__ import annotations

import csv
import json

import pytest
import torch

from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PCB = ["train", "pcb", "--dataset", "synthetic", "--option", "name=tiny", "--preset", "tiny",
       "--batch-size", "8", "--epochs", "1", "--quiet"]


@pytest.fixture(scope="module")
def recorded(tiny_synthetic_root, tmp_path_factory):
    """A finished one-epoch PCB run (its data root given by absolute path)."""
    from reidcli.cli.main import main

    run = tmp_path_factory.mktemp("rerun") / "run"
    assert main([*PCB, "--root", str(tiny_synthetic_root), "--out", str(run)]) in (0, None)
    return run


def _weights(run):
    return torch.load(run / "model.pt", weights_only=True)["model_state"]


def test_a_run_trained_again_from_its_config_has_the_same_weights(recorded, tmp_path, capsys):
    again = tmp_path / "again"
    code, _, err = reid_in_process("train", "--config", recorded / "config.json", "--out",
                                   again, "--quiet", capsys=capsys)
    assert code == 0, err
    a, b = _weights(recorded), _weights(again)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    first = json.loads((recorded / "config.json").read_text())["config"]
    second = json.loads((again / "config.json").read_text())["config"]
    assert first == second


def test_options_given_override_the_recorded_ones(recorded, tmp_path, capsys):
    out = tmp_path / "short"
    code, _, err = reid_in_process("train", "pcb", "--config", recorded, "--max-iters", "1",
                                   "--log-every", "1", "--out", out, "--quiet", capsys=capsys)
    assert code == 0, err
    with open(out / "metrics.csv", newline="") as f:
        assert [r["iteration"] for r in csv.DictReader(f)] == ["1"]
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["max_iters"] == 1 and config["batch_size"] == 8


def test_bad_or_foreign_configs_are_one_line_errors_naming_the_file(recorded, tmp_path,
                                                                    capsys):
    record = json.loads((recorded / "config.json").read_text())
    cases = {
        "missing.json": None,
        "notjson.json": "{",
        "foreign.json": json.dumps({"model": {"name": "resnet50"}}),
        "method.json": json.dumps({**record, "method": "nope"}),
        "unknown.json": json.dumps({**record, "config": {**record["config"], "zap": 1}}),
        "invalid.json": json.dumps({**record, "config": {**record["config"], "lr": -1}}),
    }
    for name, text in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        result = reid_in_process("train", "--config", path, "--out", tmp_path / "x",
                                 capsys=capsys)
        assert_one_line_error_in_process(result, name)
    assert not (tmp_path / "x").exists()
    result = reid_in_process("train", "bot", "--config", recorded, "--out", tmp_path / "x",
                             capsys=capsys)
    assert_one_line_error_in_process(result, "pcb run, not bot")
    result = reid_in_process("train", "--config", recorded, capsys=capsys)
    assert_one_line_error_in_process(result, "--out")
    result = reid_in_process("train", "pcb", "--config", recorded, "--resume", recorded,
                             capsys=capsys)
    assert_one_line_error_in_process(result, "--config", "--resume")
