"""Fake Person30K copy in reidcli's manifest contract (docs/datasets.md):
``person30k/manifest.csv`` (``path,pid,camid,site,scenario,subset``, paths relative to the
manifest) plus the listed images. Rows are deliberately not in path order."""
from __future__ import annotations

from pathlib import Path

from tests.data.fake_trees import write_image

#: (subset, site, scenario, pid, camid, file tag) in manifest order
ROWS = (
    ("train", "s01", "supermarket", 1, 1, "a"),
    ("train", "s01", "supermarket", 1, 0, "a"),
    ("train", "s02", "supermarket", 2, 3, "a"),
    ("test_a", "s01", "supermarket", 10, 0, "b"),     # listed before ..._a: query is _a
    ("test_a", "s01", "supermarket", 10, 0, "a"),
    ("test_a", "s01", "supermarket", 10, 2, "a"),
    ("test_a", "s02", "supermarket", 11, 5, "a"),     # one camera only → gallery only
    ("test_a", "s01", "supermarket", 0, 0, "a"),      # distractors in two cameras
    ("test_a", "s01", "supermarket", 0, 2, "a"),
    ("test_b", "s03", "supermarket", 20, 1, "a"),
    ("test_b", "s03", "supermarket", 20, 2, "a"),
    ("test_c", "m01", "mall", 30, 7, "a"),            # no pid in two cameras
)
HEADER = "path,pid,camid,site,scenario,subset"


def relpath(subset: str, site: str, pid: int, camid: int, tag: str) -> str:
    return f"images/{subset}/{site}/{pid:05d}_c{camid}_{tag}.jpg"


def build(root: Path, folder_name: str = "person30k") -> Path:
    folder = Path(root) / folder_name
    lines = [HEADER]
    for subset, site, scenario, pid, camid, tag in ROWS:
        rel = relpath(subset, site, pid, camid, tag)
        write_image(folder / rel)
        lines.append(f"{rel},{pid},{camid},{site},{scenario},{subset}")
    (folder / "manifest.csv").write_text("\n".join(lines) + "\n")
    return folder
