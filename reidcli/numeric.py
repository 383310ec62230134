"""Small numeric helpers shared by every stage (one implementation each)."""
from __future__ import annotations

import numpy as np

#: norms below this are treated as zero (the row stays zero)
NORM_EPS = 1e-12


def l2_normalize_rows(x: np.ndarray, eps: float = NORM_EPS) -> np.ndarray:
    """Rows of x [n, D] scaled to unit L2 norm; rows with norm ≤ ``eps`` stay (near) zero.

    The result keeps a float32 input's dtype (norms are summed in float64 and rounded once);
    anything else comes back as float64.
    """
    x = np.asarray(x)
    if x.dtype != np.float32:
        x = x.astype(np.float64, copy=False)
    norms = np.sqrt(np.einsum("ij,ij->i", x, x, dtype=np.float64))
    return x / np.maximum(norms, eps)[:, None].astype(x.dtype)
