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


#: bytes of one block of maps converted to the GEMM dtype at a time (bounded scratch):
#: the stored float16 maps are never copied whole
BLOCK_BYTES = 4 << 20


def image_blocks(count: int, bytes_per_image: int, budget: int | None = None):
    """Slices of ``count`` consecutive images, each at most ``budget`` bytes (default
    :data:`BLOCK_BYTES`) and at least one image."""
    step = max(1, (BLOCK_BYTES if budget is None else budget) // max(1, bytes_per_image))
    for start in range(0, count, step):
        yield slice(start, min(start + step, count))


def readonly_tensor(array: np.ndarray):
    """A torch view of ``array`` (no copy, also for read-only arrays; never written)."""
    import warnings

    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)     # "array is not writable"
        return torch.from_numpy(np.ascontiguousarray(array))


def project_maps(maps: np.ndarray, projection: np.ndarray | None, positions: list[np.ndarray],
                 dtype=None) -> np.ndarray:
    """Projected maps q [n, E, S] of conv maps [n, D', H, W] (or [n, D', S]).

    Column s of q_i is R_g^T f_s with R_g = rows g·D'..(g+1)·D'−1 of R and g = g(s)
    (Eq. 8). Per block of images and area, F[block][:, :, A_g] is converted to ``dtype`` into
    a reused scratch laid out [D', b·|A_g|] (at most :data:`BLOCK_BYTES`), so one GEMM
    R_g^T [E, D'] × [D', b·|A_g|] projects the whole block; the stored maps are never
    converted whole. ``dtype`` defaults to float64 for float64 maps and float32 otherwise
    (stored maps are float16, so float32 products lose nothing; the covariance algebra
    downstream is float64). ``projection=None`` returns the raw maps [n, D', S] ("w/o R").
    """
    import torch

    maps = np.asarray(maps)
    if dtype is None:
        dtype = np.float64 if maps.dtype == np.float64 else np.float32
    dtype = np.dtype(dtype)
    n, channels = maps.shape[:2]
    flat = maps.reshape(n, channels, -1)
    if projection is None:
        return flat.astype(dtype, copy=False)
    size, rank = flat.shape[2], projection.shape[1]
    torch_dtype = torch.float64 if dtype == np.float64 else torch.float32
    proj_t = torch.from_numpy(np.ascontiguousarray(projection.T, dtype=dtype))  # R^T [E, D]
    source = readonly_tensor(flat)
    out = np.empty((n, rank, size), dtype=dtype)
    out_t = torch.from_numpy(out)
    widest = max(len(pos) for pos in positions)
    step = max(1, BLOCK_BYTES // (channels * widest * dtype.itemsize))
    scratch = torch.empty(channels * min(step, n) * widest, dtype=torch_dtype)
    product = torch.empty(rank * min(step, n) * widest, dtype=torch_dtype)
    for g, pos in enumerate(positions):
        block_t = proj_t[:, g * channels:(g + 1) * channels]           # R_g^T [E, D']
        stripe = pos[-1] - pos[0] + 1 == len(pos)
        cols = slice(int(pos[0]), int(pos[-1]) + 1) if stripe else \
            torch.from_numpy(np.asarray(pos, dtype=np.int64))
        width = len(pos)
        for start in range(0, n, step):
            b = min(step, n - start)
            part = source[start:start + b, :, cols] if stripe else \
                source[start:start + b].index_select(2, cols)          # [b, D', |A_g|]
            buf = scratch[:channels * b * width].view(channels, b, width)
            buf.copy_(part.permute(1, 0, 2))                           # convert + transpose
            res = product[:rank * b * width].view(rank, b * width)
            torch.mm(block_t, buf.view(channels, b * width), out=res)  # one GEMM per block
            if stripe:
                out_t[start:start + b, :, cols] = res.view(rank, b, width).permute(1, 0, 2)
            else:
                out_t[start:start + b].index_copy_(2, cols,
                                                   res.view(rank, b, width).permute(1, 0, 2))
    return out
