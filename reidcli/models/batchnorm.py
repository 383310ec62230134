"""A BatchNorm1d whose batch statistics and gradients do not depend on the thread count.

torch's CPU kernel treats an [N, C] input as channels-last: it sums the rows in one slice
per intra-op thread and then adds the slices, so the mean, the variance, the output and the
gradients change in the last bits with the number of threads.
:class:`BatchNorm1d` hands the kernel the same numbers as a [1, C, N] tensor instead, whose
per-channel path reduces each channel's N values in one fixed order; eval mode (the running
statistics, no reduction) runs unchanged.
"""
from __future__ import annotations

import torch
from torch import nn


class BatchNorm1d(nn.BatchNorm1d):
    """``nn.BatchNorm1d`` (same parameters, buffers and state dict) computing the batch
    statistics of a 2-D input [N, C] on CPU in a fixed order; [N, C] → [N, C]."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        batch_stats = self.training or self.running_mean is None
        if input.dim() != 2 or input.device.type != "cpu" or not batch_stats:
            return super().forward(input)
        return super().forward(input.t().unsqueeze(0)).squeeze(0).t().contiguous()


__all__ = ["BatchNorm1d"]
