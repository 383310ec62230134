"""Model numerics whose result does not depend on the number of CPU threads.

The project promises the same bytes for the same seed on the CPU whatever the thread count
(README). Some of torch's CPU kernels split a reduction by thread, so their last bits change
with the count (measured with torch 2.14, MKL 2024.2, MKL-DNN 3.12):

* BatchNorm1d on an [N, C] input: the kernel treats it as channels-last and sums the rows in
  one slice per thread, then adds the slices — the batch statistics, the output and the
  γ/β gradients differ. :class:`BatchNorm1d` hands the same numbers to the kernel as a
  [1, C, N] tensor, whose per-channel path reduces each channel in one fixed order.
* oneDNN's convolutions: the weight gradient splits its reduction over the batch between
  threads, and the forward pass of ResNet-50 (also PCB's 1×1 reduction on 6×1 stripes)
  changes with the thread count too. Inside :func:`fixed_order_convolutions` oneDNN is
  switched off, so convolutions use torch's native kernels (im2col + GEMM per image), whose
  results were the same on 1 and 2 threads. On 1 CPU thread a ResNet-50 forward pass costs
  ≈ 1.5–1.9× as long and a training step ≈ 1.7–2×; the toy backbone's about the same.
  Training and model-based adaptation run inside it on the CPU; feature extraction does
  not (it keeps oneDNN's speed).
* MKL's GEMM picks its kernels by the slice of the matrix each thread gets: the gradient of
  a classifier ``[N, K] @ [K, C]`` with 9 rows differed. :class:`Linear` runs the forward and
  backward GEMMs of a 2-D input on one thread when gradients are recorded (the classifier
  GEMMs are a small part of a step), and so does :func:`linear` (TEMP's similarities, the
  triplet loss's distances); without gradients they run unchanged.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
import torch.nn.functional as F
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
def one_thread() -> Iterator[None]:
    """torch's intra-op threads (OpenMP, MKL) set to one inside; the count restored after."""
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class _OneThreadLinear(torch.autograd.Function):
    """``x W^T + b`` for x [N, C], W [K, C], b [K] or None, its GEMMs on one thread."""

    # under autocast (``--amp bf16`` on the CPU) the backward GEMMs run in the forward's
    # autocast state, so the gradients take the dtypes the forward's GEMM had
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        with one_thread():
            return F.linear(x, weight, bias)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        gx = gw = gb = None
        with one_thread():
            if ctx.needs_input_grad[0]:
                gx = grad @ weight                                     # [N, C]
            if ctx.needs_input_grad[1]:
                gw = grad.t() @ x                                      # [K, C]
            if ctx.has_bias and ctx.needs_input_grad[2]:
                gb = grad.sum(0)                                       # [K]
        return gx, gw, gb


def linear(input: torch.Tensor, weight: torch.Tensor,
           bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear``: input [N, C], weight [K, C], bias [K] → [N, K], its GEMMs on one thread
    for a 2-D CPU input while gradients are recorded (module doc)."""
    recorded = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (input, weight, bias))
    if input.dim() != 2 or input.device.type != "cpu" or not recorded:
        return F.linear(input, weight, bias)
    return _OneThreadLinear.apply(input, weight, bias)


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters and state dict) computed by :func:`linear`;
    [N, C] → [N, K]."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return linear(input, self.weight, self.bias)


@contextlib.contextmanager
def fixed_order_convolutions(device: torch.device | str = "cpu") -> Iterator[None]:
    """Inside, convolutions on a CPU ``device`` (forward and backward passes, also a backward
    started here of a graph built before) use torch's native kernels instead of oneDNN's
    (module doc). Nothing changes on a GPU."""
    if torch.device(device).type != "cpu" or not torch.backends.mkldnn.enabled:
        yield
        return
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = True


__all__ = ["BatchNorm1d", "Linear", "fixed_order_convolutions", "linear", "one_thread"]
