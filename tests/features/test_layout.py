"""Store rows and protocol trials from dataset trials."""
from __future__ import annotations

import pandas as pd

from reidcli.data.records import DatasetSplit, normalize_frame
from reidcli.features.layout import layout_from_splits


def _frame(paths, pids, cams, split):
    return normalize_frame(pd.DataFrame({"path": paths, "pid": pids, "camid": cams,
                                         "split": split, "dataset": "viper"}))


def test_union_rows_sorted_and_trial_indices():
    # two single-shot trials over 4 people: roles swap between trials
    t0 = DatasetSplit("viper", train=_frame(["a0", "a1", "b0", "b1"], [0, 1, 0, 1], [0, 0, 1, 1],
                                            "train"),
                      query=_frame(["a2", "a3"], [2, 3], [0, 0], "query"),
                      gallery=_frame(["b2", "b3"], [2, 3], [1, 1], "gallery"),
                      eval_rule="market", protocol="half", num_trials=2)
    t1 = DatasetSplit("viper", train=_frame(["a2", "a3", "b2", "b3"], [2, 3, 2, 3], [0, 0, 1, 1],
                                            "train"),
                      query=_frame(["a0", "a1"], [0, 1], [0, 0], "query"),
                      gallery=_frame(["b0", "b1"], [0, 1], [1, 1], "gallery"),
                      eval_rule="market", protocol="half", num_trials=2)
    layout = layout_from_splits("viper", [t0, t1])
    paths = layout.records["path"].tolist()
    assert paths == sorted(paths) and len(paths) == 8
    assert layout.records.set_index("path").loc["a2", "split"] == "query"   # first trial's role
    for split, trial in zip((t0, t1), layout.trials):
        for role, part in (("train", split.train), ("query", split.query),
                           ("gallery", split.gallery)):
            got = [paths[i] for i in trial[f"{role}_idx"]]
            assert got == part["path"].tolist()
    assert layout.trials[1]["test_pids"].tolist() == [0, 1]
    assert layout.trials[0]["train_pids"].tolist() == [0, 1]
    assert layout.protocol == "half" and layout.options["num_trials"] == 2
