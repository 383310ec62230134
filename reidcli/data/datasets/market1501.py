"""Market-1501 (docs/datasets.md): Market layout, 6 cameras, junk ``-1`` dropped by default."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from reidcli.data.datasets.market_folder import MARKET_NAME, load_market_layout, parse_market_folder
from reidcli.data.records import normalize_frame
from reidcli.data.splits import check_trial
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir

INFO = DatasetInfo(
    name="market1501",
    title="Market-1501",
    aliases=("market",),
    url="http://www.liangzheng.com.cn/Project/project_reid.html "
        "(mirror: https://zheng-lab.cecs.anu.edu.au/Project/project_reid.html), "
        "archive Market-1501-v15.09.15.zip",
    license="research use only; redistribution forbidden by the readme — reidcli never downloads it",
    tree="Market-1501-v15.09.15/\n  bounding_box_train/  (12,936 jpg)\n"
         "  bounding_box_test/   (19,732 jpg incl. 0000_* distractors and -1_* junk)\n"
         "  query/               (3,368 jpg)\n  gt_bbox/  gt_query/  readme.txt\n"
         "  images/              (optional Market-1501+500k distractors)",
    candidates=("market1501/Market-1501-v15.09.15", "Market-1501-v15.09.15", "market1501", "."),
    cameras="6",
    counts={"train": (12936, 751), "query": (3368, 750), "gallery": (15913, 751)},
    options={"keep_junk": False, "with_500k": False},
    notes=("gallery ids include pid 0 (distractors)",),
)


def _looks_like_market(path: Path) -> bool:
    return (path / "bounding_box_train").is_dir() or (path / "bounding_box_test").is_dir()


def load_market1501(root=None, trial: int = 0, keep_junk: bool = False,
                    with_500k: bool = False):
    """Load Market-1501 from the data root; see docs/datasets.md."""
    check_trial("market1501", trial, 1, "standard split")
    folder = resolve_dataset_dir("market1501", root)
    split = load_market_layout(folder, dataset="market1501", pattern=MARKET_NAME,
                               cam_range=(1, 6), max_pid=1501, keep_junk=keep_junk,
                               options={"keep_junk": keep_junk, "with_500k": with_500k})
    if with_500k:
        extra = parse_market_folder(folder / "images", "gallery", dataset="market1501",
                                    pattern=MARKET_NAME, cam_range=(1, 6), keep_junk=keep_junk)
        split.gallery = normalize_frame(pd.concat([split.gallery, extra], ignore_index=True))
    return split


register(INFO, load_market1501, _looks_like_market)
