"""Batch-norm adaptation of a backbone (TENT convention; docs/methods/dart3.md).

:class:`BatchNormAdaptation` puts a model in the state test-time adaptation needs: every
module in eval mode (dropout off), every parameter frozen except the affine γ (weight) and
β (bias) of every BatchNorm layer, and the BN layers either

* ``"batch"``: normalising with the current batch's statistics without reading or updating
  the running statistics (``training=True``, ``track_running_stats=False``; the buffers stay
  bit-identical), or
* ``"running"``: normalising with their running statistics (eval mode; TEMP's convention).

It keeps the initial γ/β for episodic resets and the anti-forgetting term of TEMP.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

BN_TYPES = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


class BatchNormAdaptation:
    """Configure ``module`` for BN adaptation in ``mode`` (``batch`` | ``running``).

    ``params`` are the trainable BN affine tensors, ``names`` their ``named_parameters``
    names (e.g. ``backbone.layer1.0.bn1.weight``).
    """

    def __init__(self, module: nn.Module, mode: str = "batch"):
        if mode not in ("batch", "running"):
            raise ValueError(f"BN mode {mode!r}")
        self.module, self.mode = module, mode
        module.eval()
        for p in module.parameters():
            p.requires_grad_(False)
        self.layers = [(name, m) for name, m in module.named_modules() if isinstance(m, BN_TYPES)]
        self._tracking = {name: m.track_running_stats for name, m in self.layers}
        self.names: list[str] = []
        self.params: list[nn.Parameter] = []
        for name, m in self.layers:
            if mode == "batch":
                m.train()
                m.track_running_stats = False         # batch statistics; buffers untouched
            for pname in ("weight", "bias"):
                p = getattr(m, pname, None)
                if isinstance(p, nn.Parameter):
                    p.requires_grad_(True)
                    self.names.append(f"{name}.{pname}" if name else pname)
                    self.params.append(p)
        self.initial = [p.detach().clone() for p in self.params]

    @torch.no_grad()
    def reset(self) -> None:
        """Restore the initial γ/β (episodic mode, a new stream)."""
        for p, p0 in zip(self.params, self.initial):
            p.copy_(p0)

    def drift_penalty(self) -> torch.Tensor:
        """Σ ‖θ_BN − θ_BN,0‖² over the affine parameters (TEMP's anti-forgetting term)."""
        return sum(((p - p0) ** 2).sum() for p, p0 in zip(self.params, self.initial))

    def arrays(self) -> dict[str, np.ndarray]:
        """Current γ/β as float32 arrays by parameter name."""
        return {n: p.detach().float().cpu().numpy() for n, p in zip(self.names, self.params)}

    def restore_modes(self) -> None:
        """Undo the BN configuration (eval mode, running statistics tracked as before)."""
        for name, m in self.layers:
            m.track_running_stats = self._tracking[name]
        self.module.eval()


__all__ = ["BatchNormAdaptation", "BN_TYPES"]
