"""Small numeric helpers shared by every stage (one implementation each)."""
from __future__ import annotations

import numpy as np

#: norms below this are treated as zero (the row stays zero)
NORM_EPS = 1e-12
#: rows per pass of the normalisation (bounded float64 norm scratch)
_NORM_BLOCK_ELEMENTS = 1 << 22


def l2_normalize_rows(x: np.ndarray, eps: float = NORM_EPS, *,
                      inplace: bool = False) -> np.ndarray:
    """Rows of x [n, D] scaled to unit L2 norm; rows with norm ≤ ``eps`` stay (near) zero.

    The result keeps a float32 input's dtype (norms are summed in float64 and rounded once);
    anything else comes back as float64. ``inplace``: a writeable float32 or float64 ``x`` is
    scaled in place and returned (no second copy of the set); otherwise the result is one new
    array. Rows are scaled one block at a time (bounded float64 norm scratch).
    """
    x = np.asarray(x)
    dtype = np.float32 if x.dtype == np.float32 else np.float64
    x = x.astype(dtype, copy=False)
    out = x if inplace and x.flags.writeable else np.empty_like(x)
    step = max(1, _NORM_BLOCK_ELEMENTS // max(x.shape[1], 1))
    for start in range(0, len(x), step):
        block = x[start:start + step]
        norms = np.sqrt(np.einsum("ij,ij->i", block, block, dtype=np.float64))
        np.divide(block, np.maximum(norms, eps).astype(dtype)[:, None],
                  out=out[start:start + step])
    return out


def distinct(values) -> np.ndarray:
    """The sorted distinct values of a 1-D array: ``np.unique(values)``, without its
    masked-array check (which imports ``numpy.ma``, ~10 ms, on the first call of a command)."""
    values = np.sort(np.asarray(values).reshape(-1))
    if len(values) < 2:
        return values
    return values[np.concatenate(([True], values[1:] != values[:-1]))]
