"""A two-modality toy for DG-VAE tests: the CPU sanity scenario of docs/methods/dgvae.md.

Each identity is a fixed random binary pattern (an 8×4 grid with P(1) = 0.5, drawn from
``pattern_seed``) upsampled 4× to 32×16. Every image circularly shifts it by −2..2 rows and
−1..1 columns and adds Gaussian pixel noise (σ = 0.05):

* **visible**: pattern pixels take a foreground colour ~U(0.3, 1)³, the others a background
  colour ~U(0, 0.3)³, both drawn per image;
* **infrared**: grey copied into 3 channels with **inverted polarity**: pattern pixels
  lo ~U(0.1, 0.3), background hi ~U(0.7, 0.9) — raw pixels are anti-correlated across the
  modalities, so raw-pixel retrieval is a modality-confounded baseline.

Values lie in roughly [0, 1]; there is no ImageNet normalisation. Test-closed data: the same
``pattern_seed`` with another ``seed``; test-open data: another ``pattern_seed`` (new
identities, labelled 0.. again).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from reidcli.errors import ParameterError

IMAGE_SIZE = (32, 16)
PATTERN_GRID = (8, 4)
NOISE_STD = 0.05
MAX_SHIFT = (2, 1)


@dataclasses.dataclass
class ViToy:
    """``images`` float32 [N, 3, 32, 16], ``labels`` int64 [N] (0-based identities),
    ``infrared`` bool [N]."""

    images: torch.Tensor
    labels: torch.Tensor
    infrared: torch.Tensor

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, rows) -> "ViToy":
        """The images at ``rows`` (an index array or tensor), in that order."""
        rows = torch.as_tensor(np.asarray(rows), dtype=torch.long)
        return ViToy(self.images[rows], self.labels[rows], self.infrared[rows])


def identity_patterns(num_ids: int, pattern_seed: int) -> np.ndarray:
    """bool [num_ids, 32, 16]: each identity's 8×4 Bernoulli(0.5) grid upsampled 4×."""
    rng = np.random.default_rng(pattern_seed)
    grid = rng.random((num_ids, *PATTERN_GRID)) < 0.5
    scale = (IMAGE_SIZE[0] // PATTERN_GRID[0], IMAGE_SIZE[1] // PATTERN_GRID[1])
    return np.kron(grid, np.ones(scale, dtype=bool)).astype(bool)


def _render(pattern: np.ndarray, infrared: bool, rng: np.random.Generator) -> np.ndarray:
    """One image float32 [3, 32, 16] of ``pattern`` [32, 16]."""
    shifted = np.roll(pattern, (int(rng.integers(-MAX_SHIFT[0], MAX_SHIFT[0] + 1)),
                                int(rng.integers(-MAX_SHIFT[1], MAX_SHIFT[1] + 1))), axis=(0, 1))
    if infrared:
        lo, hi = rng.uniform(0.1, 0.3), rng.uniform(0.7, 0.9)
        grey = np.where(shifted, lo, hi) + rng.normal(0.0, NOISE_STD, shifted.shape)
        image = np.repeat(grey[None], 3, axis=0)
    else:
        fg, bg = rng.uniform(0.3, 1.0, 3), rng.uniform(0.0, 0.3, 3)
        image = np.where(shifted[None], fg[:, None, None], bg[:, None, None])
        image = image + rng.normal(0.0, NOISE_STD, image.shape)
    return image.astype(np.float32)


def make_vi_toy(num_ids: int = 8, per_id: int = 8, pattern_seed: int = 0,
                seed: int = 0) -> ViToy:
    """``per_id`` visible and ``per_id`` infrared images of each of ``num_ids`` identities.

    Rows: all visible images (identity 0's first, …), then all infrared ones in the same
    order. ``pattern_seed`` fixes the identities, ``seed`` the per-image draws."""
    if num_ids < 1 or per_id < 1:
        raise ParameterError("vi toy", "num_ids" if num_ids < 1 else "per_id",
                             num_ids if num_ids < 1 else per_id, "must be ≥ 1")
    patterns = identity_patterns(num_ids, pattern_seed)
    rng = np.random.default_rng(seed)
    images, labels, infrared = [], [], []
    for is_ir in (False, True):
        for pid in range(num_ids):
            for _ in range(per_id):
                images.append(_render(patterns[pid], is_ir, rng))
                labels.append(pid)
                infrared.append(is_ir)
    return ViToy(images=torch.from_numpy(np.stack(images)),
                 labels=torch.tensor(labels, dtype=torch.int64),
                 infrared=torch.tensor(infrared, dtype=torch.bool))


def vi_toy_batch(toy: ViToy, p: int = 4, k: int = 2,
                 rng: np.random.Generator | None = None) -> ViToy:
    """A cross-modality P×K batch of ``toy``: ``p`` identities drawn without replacement,
    ``k`` visible and ``k`` infrared images of each (without replacement when the identity
    has ≥ k in that modality). Rows: the visible half first (identity by identity), then the
    infrared half in the same identity order."""
    rng = np.random.default_rng(0) if rng is None else rng
    labels = toy.labels.numpy()
    infrared = toy.infrared.numpy()
    ids = np.unique(labels)
    if p > len(ids):
        raise ParameterError("vi toy batch", "p", p, f"exceeds the {len(ids)} identities")
    chosen = rng.choice(ids, size=p, replace=False)
    rows = []
    for is_ir in (False, True):
        for pid in chosen:
            pool = np.flatnonzero((labels == pid) & (infrared == is_ir))
            if len(pool) == 0:
                raise ParameterError("vi toy batch", "toy", f"identity {pid}",
                                     f"has no {'infrared' if is_ir else 'visible'} image")
            rows.extend(rng.choice(pool, size=k, replace=len(pool) < k))
    return toy.subset(rows)


__all__ = ["ViToy", "make_vi_toy", "vi_toy_batch", "identity_patterns", "IMAGE_SIZE"]
