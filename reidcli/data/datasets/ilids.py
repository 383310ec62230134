"""QMUL iLIDS single-shot (datasets.md §5.13): ``Persons/PPPPNNN.jpg``; no camera labels,
so ``camid = NNN − 1`` is a pseudo camera (``x_pseudo_cam``)."""
from __future__ import annotations

import re

from reidcli.data.datasets.common import rows_to_frame, scan_folder
from reidcli.data.protocols import random_pairs, warca_protocol
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.errors import UsageError

NAME = re.compile(r"^(\d{4})(\d{3})\.jpg$")

INFO = DatasetInfo(
    name="ilids", title="QMUL iLIDS (i-LIDS MCTS, single-shot)", aliases=("qmul_ilids",),
    url="http://www.eecs.qmul.ac.uk/~jason/data/i-LIDS_Pedestrian.tgz",
    license="research use (terms of the i-LIDS / QMUL release); reidcli never downloads it",
    tree="i-LIDS_Pedestrian/Persons/  PPPPNNN.jpg (476 images, 119 ids, 2-8 each)",
    candidates=("ilids/i-LIDS_Pedestrian/Persons", "i-LIDS_Pedestrian/Persons",
                "ilids/Persons", "Persons", "."),
    cameras="pseudo",
    counts={"query": (60, 60), "gallery": (60, 60)},
    options={"protocol": "dg", "seed": 0, "test_ids": 60, "draws": 1,
             "warca_draw": "gallery_single"},
    protocol="dg (10 trials: 60 random ids, one probe and one gallery image each)",
    notes=("no camera labels: camid = image number − 1 (pseudo camera)",
           "not iLIDS-VID (video, out of scope)"),
    unconfirmed=("exact licence text of the QMUL page (treated as research-only)",))


def load_ilids(root=None, trial: int = 0, protocol: str = "dg", seed: int = 0,
               test_ids: int = 60, draws: int = 1, warca_draw: str = "gallery_single"):
    """Load one iLIDS trial (``dg`` | ``warca``)."""
    folder = resolve_dataset_dir("ilids", root)
    rows = scan_folder(folder, NAME, "ilids", lambda m, p: {
        "path": p, "pid": int(m.group(1)), "camid": int(m.group(2)) - 1,
        "frame": int(m.group(2)), "x_pseudo_cam": True})
    records = rows_to_frame(rows, "ilids")
    if protocol == "dg":
        return random_pairs(records, trial=trial, seed=seed, dataset_root=folder,
                            test_ids=test_ids, name="ilids")
    if protocol == "warca":
        return warca_protocol(records, trial=trial, seed=seed, dataset_root=folder,
                              test_ids=test_ids, draws=draws, warca_draw=warca_draw,
                              name="ilids")
    raise UsageError(f"ilids protocol {protocol!r} is unknown", "use protocol=dg or warca")


register(INFO, load_ilids, lambda p: any(NAME.match(c.name) for c in p.iterdir()
                                         if c.is_file()))
