"""Training rows: MSMT17 trains on list_train + list_val unless --option says otherwise
(docs/methods/pcb.md; docs/methods/dart3.md)."""
from __future__ import annotations

import json

import pytest

from reidcli.training.config import make_config
from reidcli.training.data import training_options, training_records
from reidcli.training.engine import train_model
from tests.data.fake_trees import msmt17

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_msmt17_training_rows_include_val_unless_the_option_is_given(tmp_path):
    msmt17.build(tmp_path)                 # list_train: 3 images / 2 ids; list_val: 2 / 2
    both = training_records("msmt17", tmp_path)
    assert len(both) == 5 and both["pid"].nunique() == 3
    assert set(both["split"]) == {"train"}
    only_train = training_records("msmt17", tmp_path, {"train_includes_val": False})
    assert len(only_train) == 3 and only_train["pid"].nunique() == 2
    assert training_options("MSMT17", {"version": "v1"}) == {"train_includes_val": True,
                                                             "version": "v1"}
    assert training_options("synthetic", {"name": "tiny"}) == {"name": "tiny"}


def test_train_model_on_msmt17_records_the_effective_option(tmp_path):
    msmt17.build(tmp_path)
    cfg = make_config("pcb", preset="tiny", dataset="msmt17", root=str(tmp_path),
                      batch_size=4, max_iters=1)
    train_model(cfg, tmp_path / "run", progress=False)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["num_images"], config["num_classes"]) == (5, 3)
    assert config["dataset_options"] == {"train_includes_val": True}
