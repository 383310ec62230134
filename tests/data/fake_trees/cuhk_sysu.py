"""Fake CUHK-SYSU crops (docs/datasets.md): ``cuhksysu/cropped_images/p<pid>_s<scene>[_<k>].jpg``.

Content: persons ``PERSONS`` (pid → number of crops); crop k of person p is
``p{pid}_s{scene}_{k}.jpg`` with scene = 100·pid + k (torchreid-style names), plus, with
``png_names``, the other spelling ``p{pid}_n{k}.png`` for the last person.
"""
from __future__ import annotations

from pathlib import Path

from tests.data.fake_trees import write_image

#: pid → crops (real: 11,934 ids, 34,574 crops)
PERSONS = {11: 2, 205: 3, 3301: 1, 11422: 4}


def crop_names(persons=PERSONS, png_names: bool = False) -> list[str]:
    """File names the fake holds, in the order written."""
    names = []
    last = max(persons)
    for pid, count in persons.items():
        for k in range(1, count + 1):
            if png_names and pid == last:
                names.append(f"p{pid}_n{k}.png")
            else:
                names.append(f"p{pid}_s{100 * pid + k}_{k}.jpg")
    return names


def build(root: Path, folder: str = "cuhksysu", persons=PERSONS,
          png_names: bool = False) -> Path:
    """Write ``<root>/<folder>/cropped_images/`` (``folder="."``: the root itself holds
    ``cropped_images/``); returns the dataset folder."""
    dataset = Path(root) / folder if folder != "." else Path(root)
    for name in crop_names(persons, png_names):
        write_image(dataset / "cropped_images" / name, size=(6, 16))
    return dataset
