"""Model numerics whose result does not depend on the number of CPU threads.

The project promises the same bytes for the same seed on the CPU whatever the thread count
(README). Two of torch's CPU kernels split a reduction by thread, so their last bits change
with the count (measured with torch 2.14, MKL-DNN 3.12):

* BatchNorm1d on an [N, C] input: the kernel treats it as channels-last and sums the rows in
  one slice per thread, then adds the slices — the batch statistics, the output and the
  γ/β gradients differ. :class:`BatchNorm1d` hands the same numbers to the kernel as a
  [1, C, N] tensor, whose per-channel path reduces each channel in one fixed order.
* oneDNN's convolution weight gradient splits the reduction over the batch between threads.
  :func:`fixed_order_backward` runs a backward pass with oneDNN switched off, so
  convolutions use torch's native kernels (im2col + one GEMM per image, added in image
  order); the forward pass keeps oneDNN. On 1 CPU thread a ResNet-50 training step costs
  ≈ 1.7× as long; the toy backbone's about the same.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import nn


class BatchNorm1d(nn.BatchNorm1d):
    """``nn.BatchNorm1d`` (same parameters, buffers and state dict) whose reductions over the
    rows of a 2-D input [N, C] on CPU (batch statistics, gradients) run in a fixed order;
    [N, C] → [N, C]. An eval-mode forward without gradients (feature extraction), which
    reduces nothing, runs unchanged."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        reduces = self.training or self.running_mean is None or (
            torch.is_grad_enabled()
            and any(t is not None and t.requires_grad for t in (input, self.weight, self.bias)))
        if input.dim() != 2 or input.device.type != "cpu" or not reduces:
            return super().forward(input)
        return super().forward(input.t().unsqueeze(0)).squeeze(0).t().contiguous()


@contextlib.contextmanager
def fixed_order_backward(device: torch.device | str = "cpu") -> Iterator[None]:
    """Run ``loss.backward()`` (or ``torch.autograd.grad``) inside this on a CPU ``device``:
    convolution gradients from torch's native kernels instead of oneDNN's (module doc).
    Nothing changes on a GPU."""
    if torch.device(device).type != "cpu" or not torch.backends.mkldnn.enabled:
        yield
        return
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = True


__all__ = ["BatchNorm1d", "fixed_order_backward"]
