"""Camera-biased toy conv maps for tests and demos (docs/methods/cdpcf.md).

Maps are D' = 16 channels on a 12 × 4 grid (S = 48), two cameras, one image per camera per
person. Each person has two part vectors; camera 0 shows them on rows (0, 4), camera 1 on rows
(3, 7) — the same stripes of a G = 3 grid but different rows, which only camera-specific maps
can follow. ``biased=False`` puts camera 1's parts on rows (0, 4) too (the control).
"""
from __future__ import annotations

import dataclasses

import numpy as np

CHANNELS, HEIGHT, WIDTH = 16, 12, 4
PART_ROWS = {0: (0, 4), 1: (3, 7)}
CONTROL_ROWS = {0: (0, 4), 1: (0, 4)}


@dataclasses.dataclass
class ToyMaps:
    """maps float32 [N, 16, 12, 4]; pids, camids int64 [N] (person-major, camera 0 first)."""

    maps: np.ndarray
    pids: np.ndarray
    camids: np.ndarray

    def read(self, layer: str, rows: np.ndarray) -> np.ndarray:
        """A :data:`reidcli.pooling.cdpcf.MapReader` over the in-memory maps (any layer)."""
        return self.maps[np.asarray(rows, dtype=np.int64)]


def toy_conv_maps(num_persons: int, seed: int, *, biased: bool = True,
                  first_pid: int = 1) -> ToyMaps:
    """Render ``num_persons`` persons × 2 cameras with ``Generator(PCG64(seed))`` (§8.1).

    Image (p, c): row clutter r_h = 0.7·ε_h shared by the row's 4 columns; part j's row gets
    a_{p,j} + 0.8·η instead; F[:, h, w] = 0.5 + r_h + 0.3·ξ_{h,w}.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    rows_of = PART_ROWS if biased else CONTROL_ROWS
    parts = rng.standard_normal((num_persons, 2, CHANNELS))              # a_{p,j}
    n = 2 * num_persons
    rows = 0.7 * rng.standard_normal((n, HEIGHT, CHANNELS))              # r_h per image
    noise = rng.standard_normal((n, 2, CHANNELS))                         # η per part
    pids = np.repeat(np.arange(first_pid, first_pid + num_persons), 2)
    camids = np.tile(np.array([0, 1]), num_persons)
    for i in range(n):
        p, c = i // 2, i % 2
        for j, h in enumerate(rows_of[c]):
            rows[i, h] = parts[p, j] + 0.8 * noise[i, j]
    xi = 0.3 * rng.standard_normal((n, CHANNELS, HEIGHT, WIDTH))
    maps = 0.5 + rows.transpose(0, 2, 1)[:, :, :, None] + xi
    return ToyMaps(maps.astype(np.float32), pids.astype(np.int64), camids.astype(np.int64))


def toy_problem(seed: int, *, biased: bool = True, train_persons: int = 150,
                test_persons: int = 100) -> tuple[ToyMaps, ToyMaps]:
    """(train, test) of §8.1: 150 training persons from ``seed``, 100 others from seed+1000."""
    train = toy_conv_maps(train_persons, seed, biased=biased, first_pid=1)
    test = toy_conv_maps(test_persons, seed + 1000, biased=biased, first_pid=10_001)
    return train, test


def write_toy_images(folder, pids: np.ndarray, camids: np.ndarray,
                     size: tuple[int, int] = (24, 8)) -> list[str]:
    """One small PNG per (pid, camid) in ``folder`` (``<pid>_c<cam>.png``, [h, w, 3] uint8):
    a camera-specific background (camera 0 reddish, camera 1 bluish) with a person-coloured
    middle band, so per-camera average images differ. Returns the paths."""
    from pathlib import Path

    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for p, c in zip(pids, camids):
        img = np.empty((*size, 3), np.uint8)
        img[:] = (200, 60, 60) if c % 2 == 0 else (60, 60, 200)
        img[size[0] // 3:2 * size[0] // 3] = ((37 * p) % 256, (91 * p) % 256, 128)
        path = folder / f"{p:04d}_c{c}.png"
        Image.fromarray(img).save(path)
        paths.append(str(path))
    return paths


def write_toy_store(path, *, seed: int = 0, persons: int = 120, trials: int = 3,
                    biased: bool = True, layers: tuple[str, ...] = ("conv4_x", "conv5_x"),
                    image_dir=None, force: bool = False):
    """A conv-map feature store of toy maps with half/half single-shot trials.

    Every person has one image per camera; each layer holds the same maps (scaled per layer so
    layers differ). Trial k splits the persons in half with ``PCG64([seed, k])``: training
    rows = both images of the train half, query = camera-0 images of the test half, gallery =
    camera-1 images. Image paths are placeholders (``toy/…``) unless ``image_dir`` is given,
    where :func:`write_toy_images` writes real ones. Returns the path.
    """
    import pandas as pd

    from reidcli.data.records import normalize_frame
    from reidcli.store import StoreWriter

    toy = toy_conv_maps(persons, seed, biased=biased)
    n = len(toy.pids)
    paths = [f"toy/{p:04d}_c{c}.png" for p, c in zip(toy.pids, toy.camids)] \
        if image_dir is None else write_toy_images(image_dir, toy.pids, toy.camids)
    records = normalize_frame(pd.DataFrame({
        "path": paths,
        "pid": toy.pids, "camid": toy.camids,
        "split": np.where(toy.camids == 0, "query", "gallery"), "dataset": "toy"}))
    protocol = []
    ids = np.unique(toy.pids)
    for k in range(trials):
        rng = np.random.Generator(np.random.PCG64([seed, k]))
        test_ids = np.sort(rng.permutation(ids)[:len(ids) // 2])
        train_ids = np.setdiff1d(ids, test_ids)
        is_test = np.isin(toy.pids, test_ids)
        protocol.append({
            "train_idx": np.flatnonzero(~is_test), "train_pids": train_ids,
            "test_pids": test_ids, "query_idx": np.flatnonzero(is_test & (toy.camids == 0)),
            "gallery_idx": np.flatnonzero(is_test & (toy.camids == 1))})
    with StoreWriter(path, records, dataset="toy", force=force,
                     provenance={"command": "write_toy_store", "seed": seed}) as writer:
        for i, layer in enumerate(layers):
            writer.add_convmap(layer, toy.maps.shape[1:], dtype="float32")
            writer.append_convmap(layer, toy.maps * (1.0 + i))
        stripes = toy.maps.reshape(n, CHANNELS, 3, HEIGHT // 3, WIDTH).mean(axis=(3, 4))
        writer.set_feature("pcb_g", stripes.transpose(0, 2, 1).reshape(n, -1), metric="cosine")
        writer.write_protocol("single_shot_half", protocol, eval_rule="market")
    return path
