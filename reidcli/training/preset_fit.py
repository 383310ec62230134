"""A preset's batch, capped to a training set too small for it.

``--preset tiny`` declares the batch of the CPU-scale runs the recipes make (PCB: 32 images;
BoT: P = 8 identities × K = 4). On a smaller training set — the `tiny` synthetic
dataset has 6 identities and 24 training images — such a batch cannot be filled, so the
preset's value (and only a preset's value: an option given explicitly is kept and refused by
the sampler) is lowered to what the data holds: PCB's batch to the number of images, P to the
number of identities (K kept). Where the data fills the preset's batch nothing changes.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from reidcli.naming import param


def fit_preset_batch(cfg, labels, world: int, echo: Callable[[str], None]):
    """``cfg`` with its preset's batch capped to ``labels`` (one identity label per training
    image, [N]); one line through ``echo`` when it is. Unchanged for no preset, several
    processes (``world`` > 1), or a batch that differs from the preset's (given explicitly)."""
    from reidcli.training.config import method_info

    if cfg.preset is None or world != 1:
        return cfg
    preset = method_info(cfg.method).extras.get("presets", {}).get(cfg.preset, {})
    labels = np.asarray(labels).reshape(-1)
    if cfg.method == "pcb" and "batch_size" in preset:
        n = len(labels)
        if cfg.batch_size == preset["batch_size"] and n < cfg.batch_size:
            echo(f"preset {cfg.preset}: {param('batch_size', cfg.batch_size)} lowered to the "
                 f"{n} training images")
            return dataclasses.replace(cfg, batch_size=n)
    elif cfg.method == "bot" and "p" in preset:
        ids = len(np.unique(labels))
        if cfg.p == preset["p"] and cfg.batch_size == preset["p"] * cfg.k and ids < cfg.p:
            echo(f"preset {cfg.preset}: P={cfg.p} identities per batch lowered to the {ids} "
                 f"training identities ({param('batch_size', ids * cfg.k)})")
            return dataclasses.replace(cfg, p=ids, batch_size=ids * cfg.k)
    return cfg
