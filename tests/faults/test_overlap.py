"""A model is not silently scored on its own training identities (trial-based datasets:
RegDB, VIPeR, PRID …): `reid extract --model` picks the model's trial, refuses overlapping
trials unless --allow-overlap, and `reid eval` warns about an overlap the store records."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import pytest
import torch

from reidcli.models.checkpoint import ModelSpec, build_model, read_model_file, save_model
from reidcli.models.training_identities import (PROVENANCE_KEY, overlap_record, rows_overlap,
                                                training_identities)
from reidcli.store import open_store
from tests.data.fake_trees import regdb as fake
from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def regdb(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(data root, trial-0 model, model without an identity record) on a fake RegDB whose
    10 trials alternate: even trials train on persons 1, 2 and test on 3, 4; odd swap."""
    root = tmp_path_factory.mktemp("regdb")
    folder = fake.build(root)
    for t in range(3, 11):
        for part in ("train", "test"):
            for modality in ("visible", "thermal"):
                shutil.copy(folder / "idx" / f"{part}_{modality}_{2 - t % 2}.txt",
                            folder / "idx" / f"{part}_{modality}_{t}.txt")
    torch.manual_seed(0)
    spec = ModelSpec(kind="bot", backbone="tiny", num_classes=2, input_size=(64, 32))
    module = build_model(spec)
    # what reid train records (reidcli.training.engine): identity keys, dataset, options
    meta = {"classes": [["regdb", "regdb", "all", 1], ["regdb", "regdb", "all", 2]],
            "dataset": "regdb", "options": {"direction": "v2t"}, "config": {"sources": []}}
    (root / "run").mkdir()
    model = save_model(root / "run" / "model.pt", module, spec, meta)
    legacy = save_model(root / "legacy.pt", module, spec, {"classes": [1, 2]})
    return root, model.parent, legacy


def _extract(capsys, root, model, out, *args):
    return reid_in_process("extract", "--model", model, "--dataset", "regdb", "--root", root,
                           "--out", out, *args, capsys=capsys)


def _trials(store) -> int:
    with h5py.File(store, "r") as h5:
        return int(h5["protocol"].attrs["num_trials"])


def test_default_trial_is_the_models(capsys, regdb, tmp_path):
    # case: `reid extract` defaulted to --trials all and scored trials 1, 3 … on training ids
    root, run, _ = regdb
    code, _, err = _extract(capsys, root, run, tmp_path / "s.h5")
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and "trained on trial 0" in notes[0] and "--trials" in notes[0]
    assert "trials 1 (2 of its 2 test identities)" in notes[0]
    assert _trials(tmp_path / "s.h5") == 1
    with open_store(tmp_path / "s.h5") as st:
        record = st.provenance[PROVENANCE_KEY]
    assert record["overlap_per_trial"] == {"0": 0} and record["count"] == 2
    assert record["trial"] == 0 and not record["allowed"]


def test_overlapping_trials_are_refused(capsys, regdb, tmp_path):
    # case: explicit trials whose test identities are training identities
    root, run, _ = regdb
    result = _extract(capsys, root, run, tmp_path / "s.h5", "--trials", "0,1,3")
    assert_one_line_error_in_process(result, "trials 1 (2 of its 2 test identities), 3",
                                     "trained on", "--trials 0", "--allow-overlap")
    result = _extract(capsys, root, run, tmp_path / "s.h5", "--option", "trial=5")
    assert_one_line_error_in_process(result, "trial 5", "--allow-overlap")
    assert not (tmp_path / "s.h5").exists()


def test_allowed_overlap_warns_and_eval_warns(capsys, regdb, tmp_path):
    # case: nothing warned when a store scored a model on its own training identities
    root, run, _ = regdb
    store = tmp_path / "s.h5"
    code, _, err = _extract(capsys, root, run, store, "--trials", "1", "--allow-overlap")
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "memorisation" in warnings[0]
    with open_store(store) as st:
        record = st.provenance[PROVENANCE_KEY]
    assert record["allowed"] and record["overlap_per_trial"] == {"1": 2}
    assert sorted(map(tuple, record["overlap_identities"])) == [
        ("regdb", "regdb", "all", 1), ("regdb", "regdb", "all", 2)]
    code, _, err = reid_in_process("eval", "--store", store, "--quiet", "--json",
                                   tmp_path / "r.json", capsys=capsys)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "trained on" in warnings[0]
    assert "store trial 0: 2" in warnings[0]
    assert json.loads((tmp_path / "r.json").read_text())["training_overlap"] == {"0": 2}


def test_clean_store_evaluates_without_warning(capsys, regdb, tmp_path):
    root, run, _ = regdb
    store = tmp_path / "s.h5"
    assert _extract(capsys, root, run, store, "--trials", "0,2")[0] == 0
    code, _, err = reid_in_process("eval", "--store", store, "--quiet", "--json",
                                   tmp_path / "r.json", capsys=capsys)
    assert code == 0 and "warning" not in err, err
    assert json.loads((tmp_path / "r.json").read_text())["training_overlap"] == {"0": 0,
                                                                                 "1": 0}


def test_model_without_identity_record_keeps_all_trials(capsys, regdb, tmp_path):
    # model files that record no identity keys (not written by reid train) are not checked
    root, _, legacy = regdb
    code, _, err = _extract(capsys, root, legacy, tmp_path / "s.h5")
    assert code == 0 and "note:" not in err, err
    assert _trials(tmp_path / "s.h5") == 10


def test_allow_overlap_needs_a_model(capsys, regdb, tmp_path):
    result = reid_in_process("extract", "--dataset", "regdb", "--root", regdb[0], "--out",
                             tmp_path / "s.h5", "--allow-overlap", capsys=capsys)
    assert_one_line_error_in_process(result, "--allow-overlap", "--model")


def test_overlap_found_through_adapt_and_merge_provenance(regdb):
    # the record of an adapted (source_provenance) or merged (merged_from) store counts too
    import pandas as pd

    training = training_identities(read_model_file(regdb[1])["meta"], "m.pt")
    record = overlap_record(training, {1: {("regdb", "regdb", "all", 2)}}, allowed=True)
    records = pd.DataFrame({"dataset": ["regdb"] * 3, "domain": ["regdb"] * 3,
                            "pid": [2, 3, 2]})
    for provenance in ({"source_provenance": {PROVENANCE_KEY: record}},
                       {"merged_from": [{PROVENANCE_KEY: record}, {PROVENANCE_KEY: record}]}):
        assert rows_overlap(provenance, records, [0, 1]) == (1, True)
        assert rows_overlap(provenance, records, [1]) == (0, True)
    assert rows_overlap({"command": "x"}, records, [0]) is None


def test_trained_model_records_its_identities(capsys, tiny_synthetic_root, tmp_path):
    # a model.pt that reid train wrote carries the identity keys and the trial
    code, _, err = reid_in_process("train", "bot", "--dataset", "synthetic", "--root",
                                   tiny_synthetic_root, "--option", "name=tiny", "--preset",
                                   "tiny", "--ids-per-batch", "3", "--images-per-id", "4",
                                   "--epochs", "1", "--quiet", "--out", tmp_path / "run",
                                   capsys=capsys)
    assert code == 0, err
    training = training_identities(read_model_file(tmp_path / "run")["meta"])
    assert training is not None and len(training.keys) == 6
    assert training.dataset == "synthetic" and training.trial == 0
    assert all(key[0] == "synthetic" and isinstance(key[3], int) for key in training.keys)
