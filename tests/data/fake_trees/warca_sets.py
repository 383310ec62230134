"""Fake CAVIAR4REID, 3DPeS and OPeRID trees (docs/datasets.md) and the WARCA-trial checks their
loader tests share."""
from __future__ import annotations

import json
from pathlib import Path

from tests.data.fake_trees import write_image

#: CAVIAR4REID person → image numbers NNN (001-010 camera 0, 011-020 camera 1); persons 2 and
#: 5 are seen by one camera only
CAVIAR_IMAGES = {1: (1, 2, 11, 12), 2: (1, 2, 3), 3: (1, 11, 12, 13), 4: (2, 5, 14, 20),
                 5: (4, 5), 6: (1, 3, 11), 7: (10, 11), 8: (1, 2, 19, 20)}

#: 3DPeS person → (camera, frame) per image; person 7 has a single image (never tests)
THREEDPES_IMAGES = {1: ((1, 120), (2, 400)), 2: ((1, 30), (3, 77), (3, 78)),
                    3: ((4, 5), (8, 9)), 4: ((2, 10), (2, 11), (5, 12), (6, 13)),
                    5: ((7, 1), (1, 2)), 6: ((3, 3), (4, 4), (5, 5)), 7: ((2, 99),),
                    8: ((6, 6), (8, 7)), 9: ((1, 1), (2, 2))}

#: OPeRID person → (sub-folder, camera, suffix) per image; person 4 has a single image
OPEREID_IMAGES = {1: (("a", 1, "png"), ("a", 2, "png"), ("b", 6, "jpg")),
                  2: (("a", 3, "png"), ("b/deep", 4, "bmp")),
                  3: (("b", 5, "jpg"), ("b", 1, "jpg"), ("a", 2, "png")),
                  4: (("a", 6, "png"),),
                  5: (("b/deep", 1, "bmp"), ("a", 4, "png")),
                  6: (("a", 2, "png"), ("a", 3, "png")),
                  7: (("b", 1, "jpg"), ("b", 6, "jpg"), ("b/deep", 2, "bmp"))}


def build_caviar4reid(root: Path, images=CAVIAR_IMAGES) -> Path:
    """``<root>/caviar4reid/CAVIARa/PPPPNNN.jpg``."""
    folder = Path(root) / "caviar4reid" / "CAVIARa"
    for pid, numbers in images.items():
        for n in numbers:
            write_image(folder / f"{pid:04d}{n:03d}.jpg")
    return folder


def build_3dpes(root: Path, images=THREEDPES_IMAGES) -> Path:
    """``<root>/3dpes/3DPeS/RGB/<pid>_<cam>_<frame>_<k>.bmp``."""
    folder = Path(root) / "3dpes" / "3DPeS" / "RGB"
    for pid, shots in images.items():
        for k, (cam, frame) in enumerate(shots):
            write_image(folder / f"{pid}_{cam}_{frame:07d}_{k}.bmp")
    return folder


def build_opereid(root: Path, images=OPEREID_IMAGES) -> Path:
    """``<root>/opereid/<sub>/<pid>_<cam>_<k>.<suffix>`` (sub-folders of any depth)."""
    folder = Path(root) / "opereid"
    for pid, shots in images.items():
        for k, (sub, cam, suffix) in enumerate(shots):
            write_image(folder / sub / f"{pid:03d}_{cam}_{k:04d}.{suffix}")
    return folder


def image_counts(images: dict) -> dict[int, int]:
    """Images per person of a fake-tree table."""
    return {pid: len(shots) for pid, shots in images.items()}


def cached_trials(folder: Path, key: str) -> list[dict]:
    """The trials a loader cached under ``key`` in ``folder``."""
    return json.loads((folder / "reidcli_splits" / f"{key}.json").read_text())["trials"]


def check_probe_single_trial(split, counts: dict[int, int], test_ids: int) -> None:
    """Assert the WARCA ``probe_single`` rule on one loaded trial: ``test_ids`` persons with ≥ 2
    images are tested, each with exactly one probe and all its other images in the gallery;
    every other person trains with all its images."""
    query_ids = split.query["pid"].tolist()
    assert len(query_ids) == len(set(query_ids)) == test_ids
    assert set(split.gallery["pid"]) == set(query_ids)
    assert all(counts[pid] >= 2 for pid in query_ids)
    gallery_per_id = split.gallery["pid"].value_counts().to_dict()
    assert gallery_per_id == {pid: counts[pid] - 1 for pid in query_ids}
    assert not set(split.query["path"]) & set(split.gallery["path"])
    train_ids = set(split.train["pid"])
    assert train_ids == set(counts) - set(query_ids)
    assert split.train["pid"].value_counts().to_dict() == {p: counts[p] for p in train_ids}


def check_single_image_never_tests(trials: list[dict], single_names: list[str]) -> None:
    """Assert that no cached trial probes or galleries a single-image person, who trains in
    every split."""
    for trial in trials:
        tested = {Path(p).name for p in trial["query"] + trial["gallery"]}
        trained = {Path(p).name for p in trial["train"]}
        assert not tested & set(single_names)
        assert set(single_names) <= trained
