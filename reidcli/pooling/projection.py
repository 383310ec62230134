"""Random orthonormal projection R and the projected maps q_i = R^T F*_i (C-DPCF paper Eq. 8)."""
from __future__ import annotations

import numpy as np

#: canonical layer order; the index seeds R (docs/methods/cdpcf.md: l = 0..3 for conv2_x..conv5_x)
LAYER_ORDER = ("conv2_x", "conv3_x", "conv4_x", "conv5_x")


def layer_index(layer: str, layers: list[str] | None = None) -> int:
    """Index of ``layer`` in conv2_x..conv5_x order (else its position in ``layers``)."""
    if layer in LAYER_ORDER:
        return LAYER_ORDER.index(layer)
    return len(LAYER_ORDER) + (layers.index(layer) if layers and layer in layers else 0)


def random_orthonormal_projection(dim: int, rank: int, seed: int, layer: int) -> np.ndarray:
    """R [dim, rank] with R^T R = I (Eq. 8).

    Gaussian Z from ``PCG64(SeedSequence([seed, 7, layer]))``, reduced QR Z = R·U, and the
    sign of column j of R set by sign(U_jj) so the result is unique for the seed.
    """
    if not 0 < rank <= dim:
        raise ValueError(f"projection rank {rank} must be in 1..{dim}")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), 7, int(layer)])))
    z = rng.standard_normal((dim, rank))
    r, u = np.linalg.qr(z, mode="reduced")
    signs = np.sign(np.diag(u))
    signs[signs == 0] = 1.0
    return r * signs[None, :]


def project_maps(maps: np.ndarray, projection: np.ndarray | None, positions: list[np.ndarray],
                 dtype=None) -> np.ndarray:
    """Projected maps q [n, E, S] of conv maps [n, D', H, W] (or [n, D', S]).

    Column s of q_i is R_g^T f_s with R_g = rows g·D'..(g+1)·D'−1 of R and g = g(s): per
    area one batched GEMM R_g^T [E, D'] × F_i[:, A_g] over the chunk, reading the stored
    layout in place (no transposed copy of the maps). ``dtype`` defaults to float64 for float64 maps and float32
    otherwise (stored maps are float16, so float32 products lose nothing; the covariance
    algebra downstream is float64). ``projection=None`` returns the raw maps [n, D', S]
    ("w/o R").
    """
    maps = np.asarray(maps)
    if dtype is None:
        dtype = np.float64 if maps.dtype == np.float64 else np.float32
    n, channels = maps.shape[:2]
    flat = maps.reshape(n, channels, -1)
    if projection is None:
        return flat.astype(dtype, copy=False)
    rank = projection.shape[1]
    proj_t = projection.astype(dtype, copy=False).T                  # R^T [E, D]
    flat = flat.astype(dtype, copy=False)
    out = np.empty((n, rank, flat.shape[2]), dtype=dtype)
    for g, pos in enumerate(positions):
        block = proj_t[:, g * channels:(g + 1) * channels]             # R_g^T [E, D']
        if len(pos) and pos[-1] - pos[0] + 1 == len(pos):              # stripe: a slice view
            cols = slice(int(pos[0]), int(pos[-1]) + 1)
            out[:, :, cols] = np.matmul(block, flat[:, :, cols])        # n GEMMs E×D'×|A_g|
        else:
            out[:, :, pos] = np.matmul(block, flat[:, :, pos])
    return out
