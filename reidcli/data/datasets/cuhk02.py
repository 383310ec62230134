"""CUHK02 (datasets.md §5.6): ``Dataset/P1..P5/{cam1,cam2}/*.png``; pid = pair·10000 + the
first ``_`` token of the name, camid = 2·(pair − 1) + (cam − 1) (10 views)."""
from __future__ import annotations

import re


from reidcli.data.datasets.common import require_dir, rows_to_frame, scan_folder
from reidcli.data.records import DatasetSplit, empty_frame, normalize_frame
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.errors import UsageError

NAME = re.compile(r"^(\d+)_.*\.png$")
PAIRS = (1, 2, 3, 4, 5)

INFO = DatasetInfo(
    name="cuhk02", title="CUHK02",
    url="http://www.ee.cuhk.edu.hk/~xgwang/CUHK_identification.html (on request)",
    license="access on request to the authors; no redistribution — reidcli never downloads it",
    tree="cuhk02/Dataset/\n  P1/ cam1/ cam2/  (971 ids)\n  P2/ (306)  P3/ (107)  P4/ (193)  "
         "P5/ (239)\n  names <id>_<...>.png, 2 per id per camera, 160×60",
    candidates=("cuhk02/Dataset", "Dataset", "cuhk02", "."),
    cameras="10 (2 per pair)",
    counts={"train": (6308, 1577), "query": (478, 239), "gallery": (478, 239)},
    options={"protocol": "p5_test"},
    protocol="p5_test (P1-P4 train; P5 cam1 → query, cam2 → gallery)",
    notes=("pids are unique only within a pair folder: pid = pair·10000 + id",),
    unconfirmed=("total image count 7,264 (the Person30K paper says 7,267)",))


def load_cuhk02(root=None, trial: int = 0, protocol: str = "p5_test") -> DatasetSplit:
    """Load CUHK02 (``p5_test`` or ``all_train`` for the DG Mixed A sources)."""
    folder = resolve_dataset_dir("cuhk02", root)
    rows = []
    for pair in PAIRS:
        require_dir(folder / f"P{pair}", "cuhk02")
        for cam in (1, 2):
            rows += scan_folder(folder / f"P{pair}" / f"cam{cam}", NAME, "cuhk02",
                                lambda m, p, a=pair, c=cam: {
                                    "path": p, "pid": a * 10000 + int(m.group(1)),
                                    "camid": 2 * (a - 1) + (c - 1), "x_pair": a})
    records = rows_to_frame(rows, "cuhk02")
    if protocol == "all_train":
        return DatasetSplit(name="cuhk02", train=records, query=empty_frame(),
                            gallery=empty_frame(), protocol=protocol,
                            options={"protocol": protocol})
    if protocol != "p5_test":
        raise UsageError(f"cuhk02 protocol {protocol!r} is unknown",
                         "use protocol=p5_test or all_train")
    pair = records["x_pair"].to_numpy()
    cam = records["camid"].to_numpy()

    def part(mask, split):
        frame = records[mask].copy()
        frame["split"] = split
        return normalize_frame(frame.reset_index(drop=True))
    return DatasetSplit(name="cuhk02", train=part(pair < 5, "train"),
                        query=part((pair == 5) & (cam == 8), "query"),
                        gallery=part((pair == 5) & (cam == 9), "gallery"),
                        protocol=protocol, options={"protocol": protocol})


register(INFO, load_cuhk02, lambda p: (p / "P1").is_dir() and (p / "P5").is_dir())
