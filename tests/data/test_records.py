"""The unified record table: validation, identity keys, label encoding."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reidcli.data.records import (RECORD_COLUMNS, DatasetSplit, ReidRecord, encode_identities,
                                  frame_to_records, identity_keys, records_to_frame,
                                  validate_frame)
from reidcli.errors import InputFileError


def test_record_defaults_and_frozen_extra():
    rec = ReidRecord(path="/a.jpg", pid=3, camid=0, split="train", dataset="market1501",
                     extra={"sequence": 1})
    assert rec.domain == "market1501" and rec.modality == "visible" and rec.frame is None
    with pytest.raises(TypeError):
        rec.extra["sequence"] = 2
    with pytest.raises(ValueError, match="split"):
        ReidRecord(path="/a.jpg", pid=3, camid=0, split="test")
    with pytest.raises(ValueError, match="modality"):
        ReidRecord(path="/a.jpg", pid=3, camid=0, split="train", modality="thermal")


def test_frame_columns_and_round_trip():
    recs = [ReidRecord("/a.jpg", 1, 0, "train", dataset="d", frame=5, extra={"bbox": 3}),
            ReidRecord("/b.jpg", -1, 1, "gallery", dataset="d")]
    frame = records_to_frame(recs)
    assert list(frame.columns) == list(RECORD_COLUMNS) + ["x_bbox"]
    assert frame["pid"].dtype == np.int64 and str(frame["frame"].dtype) == "Int64"
    assert pd.isna(frame["frame"][1])
    back = frame_to_records(frame)
    assert back[0] == recs[0] and back[1].frame is None and dict(back[1].extra) == {}


def test_validate_rejects_bad_values():
    good = pd.DataFrame({"path": ["a"], "pid": [1], "camid": [0], "split": ["query"]})
    assert validate_frame(good)["modality"].tolist() == ["visible"]
    with pytest.raises(InputFileError, match="lacks the record column"):
        validate_frame(good.drop(columns="camid"), source="labels.csv")
    with pytest.raises(InputFileError, match="split holds"):
        validate_frame(good.assign(split="test"))
    with pytest.raises(InputFileError, match="non-integer"):
        validate_frame(good.assign(pid=[1.5]))
    with pytest.raises(InputFileError, match="negative camid"):
        validate_frame(good.assign(camid=[-1]))
    with pytest.raises(InputFileError, match="x_pid_scope"):
        validate_frame(good.assign(x_pid_scope=["everything"]))


def test_identity_key_includes_dataset_domain_and_scope():
    frame = validate_frame(pd.DataFrame({
        "path": list("abcd"), "pid": [1, 1, 1, 1], "camid": [0, 0, 0, 0],
        "split": ["train"] * 4, "dataset": ["synthetic", "synthetic", "msmt17", "msmt17"],
        "domain": ["synthetic/d0", "synthetic/d1", "msmt17", "msmt17"],
        "x_pid_scope": [None, None, "train", "test"]}))
    keys = identity_keys(frame)
    assert len(set(keys)) == 4            # the same bare pid is four different people
    labels, classes = encode_identities(frame)
    assert sorted(labels.tolist()) == [0, 1, 2, 3]
    assert classes == sorted(classes)     # labels follow the sorted identity keys
    assert classes[labels[0]] == ("synthetic", "synthetic/d0", "all", 1)


def test_dataset_split_all_records():
    recs = records_to_frame([ReidRecord("/a.jpg", 1, 0, "train"),
                             ReidRecord("/b.jpg", 2, 1, "query")])
    split = DatasetSplit(name="x", train=recs[recs.split == "train"],
                         query=recs[recs.split == "query"], gallery=recs.iloc[:0])
    assert split.all_records()["split"].tolist() == ["train", "query"]
