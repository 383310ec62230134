"""Fault cases of `reid store merge` (issue 28): shards of different models, settings or
datasets were joined into one store (or blamed on "an incomplete shard"); each is now one
line naming the differing shard and attribute, and nothing is written."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reidcli.data.records import normalize_frame
from reidcli.provenance import make_provenance
from reidcli.store import StoreWriter, shard_rows
from reidcli.store.records_io import records_digest
from tests.faults.helpers import (assert_nothing_written, assert_one_line_error_in_process,
                                  files, reid_in_process)

N = 10


def _records(dataset="synthetic", seed=0):
    rng = np.random.default_rng(seed)
    return normalize_frame(pd.DataFrame({
        "path": [f"{dataset}/{i:03d}.jpg" for i in range(N)], "pid": rng.integers(1, 4, N),
        "camid": rng.integers(0, 2, N), "split": ["query"] * 3 + ["gallery"] * (N - 3),
        "dataset": dataset}))


def _shard(tmp_path, i, *, dataset="synthetic", seed=0, model=b"model-A", flip=False,
           input_size="256x128", feat_flip=None, name=None):
    """Shard i of 2 as `reid extract --model M --shard i/2` writes it: the model file hashed
    in the provenance, the extraction settings in the root and feature attributes."""
    rec = _records(dataset, seed)
    model_path = tmp_path / f"{model.decode()}.pt"
    model_path.write_bytes(model)
    rows = shard_rows(N, (i, 2))
    prov = make_provenance(command=["reid", "extract"], inputs=[model_path],
                           features=["emb"], maps=[], protocol="standard",
                           model={"kind": "bot"})
    path = tmp_path / (name or f"{dataset}-{model.decode()}-{int(flip)}-{i}.h5")
    with StoreWriter(path, rec.iloc[rows].reset_index(drop=True), dataset=dataset,
                     provenance=prov, shard=(i, 2),
                     shard_source={"num_rows": N, "records_sha256": records_digest(rec)},
                     attrs={"default_feature": "emb", "source_checkpoint": str(model_path),
                            "model_kind": "bot", "input_size": input_size,
                            "flip": flip}) as w:
        w.set_feature("emb", np.ones((rows.stop - rows.start, 4), np.float32),
                      attrs={"flip": flip if feat_flip is None else feat_flip})
    return path


@pytest.mark.parametrize("other, needle", [
    (dict(model=b"model-B"), "model file (sha256)"),               # two different models
    (dict(flip=True), "flip"),                                     # with and without --flip
    (dict(input_size="384x128"), "input_size"),
    (dict(dataset="market1501", seed=1), "dataset"),               # two datasets
    (dict(seed=2), "source record table"),      # same dataset name, other record table
])
def test_shards_of_different_extractions_are_refused(capsys, tmp_path, other, needle):
    # cases: shards of two models / with and without --flip merged into one store whose
    # attributes named one of them; shards of two datasets were blamed on an incomplete shard
    first = _shard(tmp_path, 0)
    second = _shard(tmp_path, 1, **other)
    before = files(tmp_path)
    result = reid_in_process("store", "merge", "--out", tmp_path / "m.h5", first, second,
                             capsys=capsys)
    line = assert_one_line_error_in_process(result, second.name, first.name, needle)
    assert "incomplete" not in line
    assert_nothing_written(tmp_path, before)


def test_shards_of_one_extraction_still_merge(capsys, tmp_path):
    # the model file copied elsewhere (same digest) is the same model
    first = _shard(tmp_path, 0)
    (tmp_path / "copy").mkdir()
    second = _shard(tmp_path / "copy", 1)
    result = reid_in_process("store", "merge", "--out", tmp_path / "m.h5", second, first,
                             capsys=capsys)
    assert result[0] == 0, result[2]
    from reidcli.store import open_store
    with open_store(tmp_path / "m.h5") as st:
        assert st.num_rows == N and st.attrs["flip"] == 0
