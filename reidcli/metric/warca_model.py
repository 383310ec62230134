"""A fitted WARCA trial as ``reid eval`` uses it (Jose & Fleuret, ECCV 2016).

The embedding is z = W·pre(x) (primal) or z = A κ(pre(x)) with κ(x) = [k(s_1, x), …,
k(s_N, x)] over the stored support rows s_n (Eqs. 15–17); squared Euclidean distances between
embeddings rank the gallery exactly as the Mahalanobis distance with M = WᵀW (Eq. 1).
"""
from __future__ import annotations

import numpy as np

from reidcli.errors import FittedModelError
from reidcli.fitted import TrialModel
from reidcli.metric import kernels
from reidcli.metric.kernels import Kernel
from reidcli.metric.warca_kernel import KERNELS, NORMALIZE, kernel_values, preprocess

#: rows embedded per kernel block
KERNEL_BLOCK = 2048


class WARCAModel(TrialModel):
    """A fitted WARCA trial: ``transform(x [n, D]) -> [n, D']``, then squared Euclidean
    distances.

    Linear: ``WARCAModel(W=[D', D])``. Kernel: ``WARCAModel(A=[D', N], support=[N, D],
    kernel, gamma, degree, coef0)``, computed in row blocks. ``normalize`` (``none`` | ``l2``)
    is applied to x first, as at training. The parameters' dtype (float32 or float64) is the
    dtype of the computation and of the embeddings.
    """

    metric = "sqeuclidean"

    def __init__(self, W=None, A=None, support=None, kernel: str = "none",
                 gamma: float | None = None, degree: int = 3, coef0: float = 0.0,
                 normalize: str = "none", device: str | None = None):
        if kernel not in KERNELS or normalize not in NORMALIZE:
            raise FittedModelError(f"warca model: kernel {kernel!r} / normalize {normalize!r} "
                                   f"unknown (kernels: {', '.join(KERNELS)}; normalize: "
                                   f"{', '.join(NORMALIZE)})", "re-fit the model")
        self.normalize = normalize
        if kernel == "none":
            if W is None or np.ndim(W) != 2:
                raise FittedModelError("warca linear model needs W [D', D]", "re-fit the model")
            self.W, self.A, self.support = np.asarray(W), None, None
        else:
            if A is None or support is None or np.ndim(A) != 2 or np.ndim(support) != 2 \
                    or np.shape(A)[1] != np.shape(support)[0]:
                raise FittedModelError("warca kernel model needs A [D', N] and support [N, D]",
                                       "re-fit the model")
            self.W, self.A, self.support = None, np.asarray(A), np.asarray(support)
        gamma = None if gamma is None or not np.isfinite(gamma) else float(gamma)
        if kernel in kernels.GAMMA_KERNELS and gamma is None:
            raise FittedModelError(f"warca {kernel} model lacks gamma", "re-fit the model")
        #: the resolved kernel (None for the primal W)
        self.kernel = None if kernel == "none" else Kernel(kernel, gamma or 1.0, int(degree),
                                                           float(coef0))
        self.device = device or "cpu"

    @property
    def input_dim(self) -> int:  # type: ignore[override]
        return int((self.W if self.W is not None else self.support).shape[1])

    @property
    def output_dim(self) -> int:
        return int((self.W if self.W is not None else self.A).shape[0])

    def _torch_device(self):
        import torch
        dev = torch.device(self.device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            dev = torch.device("cpu")
        return torch, dev

    def transform(self, features) -> np.ndarray:
        """[n, D] → [n, D'] in the parameters' dtype (float32 or float64)."""
        x = preprocess(self.check_input(features), self.normalize)
        torch, dev = self._torch_device()
        params = self.W if self.W is not None else self.A
        dt = torch.float64 if params.dtype == np.float64 else torch.float32
        P = torch.as_tensor(params, dtype=dt, device=dev)
        if self.W is not None:
            out = torch.as_tensor(np.ascontiguousarray(x), dtype=dt, device=dev) @ P.T
            return out.cpu().numpy()
        sup = torch.as_tensor(self.support, dtype=dt, device=dev)
        out = np.empty((len(x), P.shape[0]), dtype=params.dtype if dt == torch.float64
                       else np.float32)
        for s in range(0, len(x), KERNEL_BLOCK):
            xb = torch.as_tensor(np.ascontiguousarray(x[s:s + KERNEL_BLOCK]), dtype=dt,
                                 device=dev)
            kernels.check_kernel_input(self.kernel.name, xb, "features")
            out[s:s + KERNEL_BLOCK] = (kernel_values(self.kernel, xb, sup) @ P.T).cpu().numpy()
        return out
