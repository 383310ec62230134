"""PRID2011 single-shot (datasets.md §5.10): ``single_shot/cam_a/person_NNNN.png`` (385) and
``cam_b/person_NNNN.png`` (749); persons 0001-0200 appear in both views."""
from __future__ import annotations

import re
from pathlib import Path

from reidcli.data.datasets.common import rows_to_frame, scan_folder
from reidcli.data.protocols import single_shot_half
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.errors import UsageError

NAME = re.compile(r"^person_(\d{4})\.png$")

INFO = DatasetInfo(
    name="prid2011", title="PRID 2011 (single-shot)", aliases=("prid",),
    url="https://www.tugraz.at/institute/icg/research/team-bischof/lrs/downloads/PRID11/",
    license="research use (terms on the TU Graz page); reidcli never downloads it",
    tree="prid_2011/single_shot/\n  cam_a/  person_0001.png .. person_0385.png\n"
         "  cam_b/  person_0001.png .. person_0749.png\n  (0001-0200 are seen by both)",
    candidates=("prid2011/prid_2011/single_shot", "prid_2011/single_shot",
                "prid2011/single_shot", "single_shot", "."),
    cameras="2",
    counts={"query": (100, 100), "gallery": (649, 649)},
    options={"protocol": "dg", "seed": 0, "test_ids": 100, "shared_ids": 200},
    protocol="dg (10 trials: 100 of the 200 shared persons; gallery adds cam_b persons "
             "0201-0749)",
    notes=("persons above 0200 differ between the views although numbers repeat: their pid "
           "is 10000·(view+1) + number (x_native_pid keeps the number)",
           "cam_a persons 0201-0385 are never used"),
    unconfirmed=("exact licence text of the PRID page (treated as research-only)",))


def _pid(number: int, camid: int, shared_ids: int) -> int:
    """Persons 1..shared_ids are the same in both views; above, each view has its own."""
    return number if number <= shared_ids else 10000 * (camid + 1) + number


def load_prid2011(root=None, trial: int = 0, protocol: str = "dg", seed: int = 0,
                  test_ids: int = 100, shared_ids: int = 200):
    """Load one PRID2011 trial (``dg``: test only; ``half``: 100 train / 100 test)."""
    folder = resolve_dataset_dir("prid2011", root)
    rows = []
    for view, camid in (("cam_a", 0), ("cam_b", 1)):
        rows += scan_folder(folder / view, NAME, "prid2011", lambda m, p, c=camid: {
            "path": p, "camid": c, "x_native_pid": int(m.group(1)),
            "pid": _pid(int(m.group(1)), c, shared_ids)})
    records = rows_to_frame(rows, "prid2011")
    if protocol not in ("dg", "half"):
        raise UsageError(f"prid2011 protocol {protocol!r} is unknown", "use protocol=dg or half")
    return single_shot_half(records, trial=trial, seed=seed, dataset_root=folder,
                            n_test_ids=test_ids, with_train=protocol == "half",
                            unpaired_in_gallery=True, name="prid2011", protocol=protocol)


register(INFO, load_prid2011, lambda p: (p / "cam_a").is_dir() and (p / "cam_b").is_dir()
         and any(NAME.match(c.name) for c in (p / "cam_a").iterdir()))
