"""PRID450S (datasets.md §5.9): cam_a/ and cam_b/ with ``img_NNNN.png`` (same number = same
person); other files in the folders (segmentation masks) are ignored."""
from __future__ import annotations

import re
from pathlib import Path

from reidcli.data.datasets.common import rows_to_frame, scan_folder
from reidcli.data.protocols import single_shot_half, warca_protocol
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.errors import UsageError

NAME = re.compile(r"^img_(\d{4})\.png$")

INFO = DatasetInfo(
    name="prid450s", title="PRID 450S",
    url="https://www.tugraz.at/institute/icg/research/team-bischof/lrs/downloads/prid450s/",
    license="research use (terms on the TU Graz page); reidcli never downloads it",
    tree="PRID450S/\n  cam_a/  img_0001.png .. img_0450.png (+ mask files, ignored)\n"
         "  cam_b/  img_0001.png .. img_0450.png",
    candidates=("prid450s", "PRID450S", "prid450s/PRID450S", "."),
    cameras="2",
    counts={"train": (450, 225), "query": (225, 225), "gallery": (225, 225)},
    options={"protocol": "half", "seed": 0, "test_ids": 225, "draws": 1,
             "warca_draw": "gallery_single"},
    protocol="half (10 seeded trials, 225 train / 225 test ids; probe cam_a)",
    unconfirmed=("names of the mask files (any file not matching img_NNNN.png is ignored)",
                 "official archive URL"))


def looks_like_prid450s(path: Path) -> bool:
    return (path / "cam_a").is_dir() and (path / "cam_b").is_dir() and \
        any(NAME.match(p.name) for p in (path / "cam_a").iterdir())


def load_prid450s(root=None, trial: int = 0, protocol: str = "half", seed: int = 0,
                  test_ids: int = 225, draws: int = 1, warca_draw: str = "gallery_single"):
    """Load one PRID450S trial."""
    folder = resolve_dataset_dir("prid450s", root)
    rows = []
    for view, camid in (("cam_a", 0), ("cam_b", 1)):
        rows += scan_folder(folder / view, NAME, "prid450s", lambda m, p, c=camid: {
            "path": p, "pid": int(m.group(1)), "camid": c}, strict=False)
    records = rows_to_frame(rows, "prid450s")
    if protocol == "half":
        return single_shot_half(records, trial=trial, seed=seed, dataset_root=folder,
                                n_test_ids=test_ids, name="prid450s", protocol="half")
    if protocol == "warca":
        return warca_protocol(records, trial=trial, seed=seed, dataset_root=folder,
                              test_ids=test_ids, draws=draws, warca_draw=warca_draw,
                              name="prid450s")
    raise UsageError(f"prid450s protocol {protocol!r} is unknown", "use protocol=half or warca")


register(INFO, load_prid450s, looks_like_prid450s)
