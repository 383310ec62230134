"""Where a stage runs and at which precision: one device resolution for training,
extraction, adaptation and evaluation, and the mixed-precision / memory-format choices
the torch stages share.

``device_name`` does not import torch when the machine certainly has no NVIDIA GPU (importing
it costs seconds and ~0.5 GB of RSS, which CPU evaluation never needs).
"""
from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any

from reidcli.errors import ParameterError
from reidcli.naming import param

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: values of an ``amp`` parameter
AMP_CHOICES = ("off", "auto", "bf16", "fp16")
#: values of a ``channels_last`` parameter
CHANNELS_LAST_CHOICES = ("auto", "on", "off")
_CUDA_INDEX = re.compile(r"cuda:\d+")


def no_nvidia_driver() -> bool:
    """True when this (Linux) machine certainly has no usable NVIDIA GPU, so ``auto`` can pick
    the CPU without importing torch."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return True
    if not sys.platform.startswith("linux"):
        return False
    return not (os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl"))


def device_name(device: str | None = "auto", local_rank: int | None = None, *,
                owner: str = "device selection") -> str:
    """``auto`` → ``cuda`` when torch sees a GPU, else ``cpu``; ``cpu``, ``cuda`` and
    ``cuda:N`` are checked and kept. Under ``torchrun`` pass ``local_rank``: a bare ``cuda``
    (also from ``auto``) becomes ``cuda:<local_rank>``.

    :class:`~reidcli.errors.ParameterError` (parameter ``device``) for another value or for
    CUDA on a machine without a GPU.
    """
    name = (device or "auto").lower()
    if name not in ("auto", "cpu", "cuda") and not _CUDA_INDEX.fullmatch(name):
        raise ParameterError(owner, "device", device, "is not auto, cpu, cuda or cuda:N",
                             "use auto, cpu or cuda")
    if name == "cpu" or (name == "auto" and no_nvidia_driver()):
        return "cpu"
    try:
        import torch
        has_cuda = torch.cuda.is_available()
    except ImportError:  # pragma: no cover - torch is a dependency
        has_cuda = False
    if name == "auto":
        if not has_cuda:
            return "cpu"
        name = "cuda"
    elif not has_cuda:
        raise ParameterError(owner, "device", device, "needs a CUDA GPU, and torch sees none "
                             "on this machine", f"use {param('device', 'cpu')} (or auto)")
    if name == "cuda" and local_rank is not None:
        name = f"cuda:{local_rank}"
    return name


def resolve_device(device: str | None = "auto", local_rank: int | None = None, *,
                   owner: str = "device selection") -> "torch.device":
    """:func:`device_name` as a ``torch.device``."""
    import torch

    return torch.device(device_name(device, local_rank, owner=owner))


def amp_dtype(amp: str, device: "torch.device", *,
              owner: str = "mixed precision") -> "torch.dtype | None":
    """Autocast dtype for the ``amp`` setting on ``device`` (None = fp32).

    On CPU only an explicit ``bf16`` turns autocast on (2.6-3x faster extraction on 2 cores,
    benchmarks/extract_speed.py); ``auto`` stays fp32 there so default runs keep fp32 numbers,
    and ``fp16`` is refused (CPU fp16 kernels are slower than fp32). On CUDA ``auto`` is bf16
    where supported, else fp16.
    """
    import torch

    if amp not in AMP_CHOICES:
        raise ParameterError(owner, "amp", amp, f"is not one of {', '.join(AMP_CHOICES)}",
                             "use off, auto, bf16 or fp16")
    if amp == "off":
        return None
    if device.type != "cuda":
        if amp == "fp16":
            raise ParameterError(owner, "amp", amp, "needs a CUDA device",
                                 f"use {param('amp', 'bf16')} on CPU")
        return torch.bfloat16 if amp == "bf16" else None
    if amp == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[amp]


def autocast(device: "torch.device", dtype: "torch.dtype | None") -> Any:
    """``torch.autocast`` context for :func:`amp_dtype`'s result (a no-op for None)."""
    import torch

    return torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None)


def use_channels_last(setting: str, device: "torch.device") -> bool:
    """Whether to run convolutions in channels_last memory format: ``on``, ``off``, or
    ``auto`` = on CUDA only."""
    if setting not in CHANNELS_LAST_CHOICES:
        raise ParameterError("memory format", "channels_last", setting,
                             f"is not one of {', '.join(CHANNELS_LAST_CHOICES)}",
                             "use auto, on or off")
    return setting == "on" or (setting == "auto" and device.type == "cuda")


__all__ = ["AMP_CHOICES", "CHANNELS_LAST_CHOICES", "amp_dtype", "autocast", "device_name",
           "no_nvidia_driver", "resolve_device", "use_channels_last"]
