"""What every dataset whose only protocol is ``warca`` (CAVIAR4REID, 3DPeS, OpeReid) shares:
its default options, its ``reid data info`` notes and its loader (docs/datasets.md). The
trial builders themselves live in :mod:`reidcli.data.trials`.

Nothing here is registered: the module holds helpers only.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pandas as pd

from reidcli.data.records import DatasetSplit
from reidcli.data.registry import resolve_dataset_dir
from reidcli.data.trials import WARCA_DRAWS_PER_SPLIT, Pool, check_choice, check_seed, load_warca


def warca_only_options(test_ids: int) -> dict[str, Any]:
    """Default options of a dataset whose only protocol is ``warca`` (same-camera matches
    kept: these sets come without reliable camera labels)."""
    return {"protocol": "warca", "seed": 0, "test_ids": test_ids,
            "draws": WARCA_DRAWS_PER_SPLIT, "warca_draw": "probe_single",
            "same_camera": "keep"}


def warca_only_notes(test_ids: int) -> tuple[str, str]:
    """The ``reid data info`` notes every warca-only dataset shares: its options and how
    ``test_ids`` scales the test set."""
    return (f"protocol=warca: test_ids (P={test_ids}) per split, draws per split (trial t = "
            "split t // draws, draw t % draws), warca_draw=probe_single|gallery_single, "
            "same_camera=keep|drop",
            "test_ids=N scales the test set (e.g. for a partial copy)")


def load_warca_only(dataset: str, read: Callable[[Path], pd.DataFrame], root, trial: int, *,
                    protocol: Any, seed: Any, test_ids: Any, draws: Any, warca_draw: Any,
                    same_camera: Any) -> DatasetSplit:
    """Trial ``trial`` of a dataset whose only protocol is ``warca`` (CAVIAR4REID, 3DPeS,
    OpeReid): resolve its folder, ``read`` all its images, draw the WARCA trials."""
    protocol = check_choice(dataset, "protocol", protocol, ("warca",))
    seed = check_seed(dataset, seed)
    folder = resolve_dataset_dir(dataset, root)
    pool = Pool.of(dataset, folder, read(folder))
    return load_warca(pool, trial, seed=seed, test_ids=test_ids, draws=draws,
                      warca_draw=warca_draw, same_camera=same_camera,
                      options={"protocol": protocol, "seed": seed})
