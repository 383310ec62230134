"""DukeMTMC-reID (docs/datasets.md): Market layout, Duke file names, 8 cameras, no junk."""
from __future__ import annotations

from pathlib import Path

from reidcli.data.datasets.market_folder import DUKE_NAME, load_market_layout
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import check_trial

INFO = DatasetInfo(
    name="dukemtmc",
    title="DukeMTMC-reID",
    aliases=("dukemtmcreid", "duke", "dukemtmc-reid"),
    url="none: withdrawn by Duke University in 2019 (privacy); no official source exists "
        "(formerly http://vision.cs.duke.edu/DukeMTMC/)",
    license="withdrawn dataset; reidcli only parses copies users already hold",
    tree="DukeMTMC-reID/\n  bounding_box_train/ (16,522 jpg)\n  bounding_box_test/ (17,661 jpg)\n"
         "  query/ (2,228 jpg)",
    candidates=("dukemtmc-reid/DukeMTMC-reID", "DukeMTMC-reID", "dukemtmc", "."),
    cameras="8",
    counts={"train": (16522, 702), "query": (2228, 702), "gallery": (17661, 1110)},
    options={},
)


def _looks_like_duke(path: Path) -> bool:
    return (path / "bounding_box_train").is_dir() or (path / "bounding_box_test").is_dir()


def load_dukemtmc(root=None, trial: int = 0):
    """Load DukeMTMC-reID from the data root; see docs/datasets.md."""
    check_trial("dukemtmc", trial, 1, "standard split")
    folder = resolve_dataset_dir("dukemtmc", root)
    return load_market_layout(folder, dataset="dukemtmc", pattern=DUKE_NAME, cam_range=(1, 8))


register(INFO, load_dukemtmc, _looks_like_duke)
