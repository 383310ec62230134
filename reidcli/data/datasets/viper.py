"""VIPeR (datasets.md §5.7): cam_a/ and cam_b/ with ``NNN_A.bmp`` (pair index, view angle).

The pair index starts at 000, while pid 0 means "distractor" in reidcli (§1), so records
carry ``pid = NNN + 1`` and the file's own number in ``x_native_pid``.
"""
from __future__ import annotations

import re
from pathlib import Path

from reidcli.data.datasets.common import rows_to_frame, scan_folder
from reidcli.data.protocols import single_shot_half, warca_protocol
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.errors import UsageError

NAME = re.compile(r"^(\d{3})_(\d+)\.bmp$")
VIEWS = {"cam_a": 0, "cam_b": 1}

INFO = DatasetInfo(
    name="viper", title="VIPeR (Viewpoint Invariant Pedestrian Recognition)",
    url="http://users.soe.ucsc.edu/~manduchi/VIPeR.v1.0.zip "
        "(page https://vision.soe.ucsc.edu/node/178)",
    license="research use (terms on the project page); reidcli never downloads it",
    tree="VIPeR/\n  cam_a/  NNN_A.bmp (632, 48×128)\n  cam_b/  NNN_A.bmp (632)",
    candidates=("viper/VIPeR", "VIPeR", "VIPeR.v1.0", "viper", "."),
    cameras="2",
    counts={"train": (632, 316), "query": (316, 316), "gallery": (316, 316)},
    options={"protocol": "half", "probe_cam": "a", "seed": 0, "test_ids": 316, "draws": 1,
             "warca_draw": "gallery_single"},
    protocol="half (10 seeded trials, 316 train / 316 test ids)",
    notes=("pid = pair index + 1 (pid 0 is reserved for distractors); x_native_pid keeps NNN",
           "probe_cam=b swaps the views (torchreid's splits 10-19)"),
    unconfirmed=("exact licence text of the VIPeR page (treated as research-only)",))


def looks_like_viper(path: Path) -> bool:
    return (path / "cam_a").is_dir() and (path / "cam_b").is_dir()


def read_viper(folder: Path):
    """All 1,264 images as one record table (split column unused)."""
    rows = []
    for view, camid in VIEWS.items():
        rows += scan_folder(folder / view, NAME, "viper", lambda m, p, c=camid: {
            "path": p, "pid": int(m.group(1)) + 1, "camid": c, "x_native_pid": int(m.group(1)),
            "x_angle": int(m.group(2))})
    return rows_to_frame(rows, "viper")


def load_viper(root=None, trial: int = 0, protocol: str = "half", probe_cam: str = "a",
               seed: int = 0, test_ids: int = 316, draws: int = 1,
               warca_draw: str = "gallery_single"):
    """Load one VIPeR trial (``half``: C-DPCF/DG; ``warca``: WARCA's draws)."""
    folder = resolve_dataset_dir("viper", root)
    records = read_viper(folder)
    if probe_cam not in ("a", "b"):
        raise UsageError(f"viper option probe_cam={probe_cam!r}", "use probe_cam=a or b")
    if protocol == "half":
        p, g = (0, 1) if probe_cam == "a" else (1, 0)
        return single_shot_half(records, trial=trial, seed=seed, dataset_root=folder,
                                n_test_ids=test_ids, probe_cam=p, gallery_cam=g,
                                name="viper", protocol="half")
    if protocol == "warca":
        return warca_protocol(records, trial=trial, seed=seed, dataset_root=folder,
                              test_ids=test_ids, draws=draws, warca_draw=warca_draw,
                              name="viper")
    raise UsageError(f"viper protocol {protocol!r} is unknown", "use protocol=half or warca")


register(INFO, load_viper, looks_like_viper)
