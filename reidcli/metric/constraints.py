"""Parameter constraints shared by the metric learners and the pooling methods
(:mod:`reidcli.params`), and the checks that need the training data (an output dimension
against the input's, a device against the machine).

Every count is bounded above by :data:`MAX_COUNT`: a larger value is not a bigger fit but an
overflow in numpy/torch sizes and loop counters (a traceback), so it is refused up front.
Seeds use :data:`reidcli.params.SEED` ([0, 2³²)), like every other seed of the project.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any

from reidcli.errors import ParameterError
from reidcli.naming import param
from reidcli.params import SEED, Constraint, Interval

#: the largest count accepted (iterations, batch sizes, neighbours, dimensions, chunk sizes)
MAX_COUNT = 2**31 - 1
#: a count ≥ 1
COUNT = Interval(int, 1, MAX_COUNT)
#: a count ≥ 0 (0 = off / never / all, as each parameter's help says)
COUNT_OR_ZERO = Interval(int, 0, MAX_COUNT)
#: a number of output dimensions (checked against the input's at fit: :func:`check_dim`)
DIM = COUNT

_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


@dataclasses.dataclass(frozen=True)
class Device(Constraint):
    """A torch device name: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (whether the machine
    has it is checked at fit: :func:`check_device`)."""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and _DEVICE.fullmatch(value.strip().lower()) is not None

    def convert(self, value: Any) -> Any:
        return value.strip().lower()

    def describe(self) -> str:
        return "cpu, cuda, cuda:N or auto"


DEVICE = Device()


def check_dim(owner: str, dim: int | None, limit: int, what: str, name: str = "dim") -> None:
    """ParameterError when the output dimension ``dim`` exceeds ``limit``, the dimension of
    ``what`` (``"the 48-dimensional input features"``): such a projection has at most
    ``limit`` independent directions, so the rest would be silently dropped or degenerate."""
    if dim is not None and int(dim) > int(limit):
        raise ParameterError(owner, name, dim, f"is above the dimension of {what} ({limit})",
                             f"use at most {param(name, int(limit))}")


def check_device(owner: str, device: str | None) -> str | None:
    """The device name to use (``auto`` resolved); ParameterError for a CUDA device on a
    machine without one. ``None`` stays None (the numpy path of methods that have one)."""
    if device is None:
        return None
    from reidcli.device import device_name

    name = device_name(device, owner=owner)
    if name.startswith("cuda:"):                        # torch's "invalid device ordinal" later
        import torch

        count = torch.cuda.device_count()
        if int(name.split(":", 1)[1]) >= count:
            raise ParameterError(owner, "device", device,
                                 f"names a GPU this machine does not have ({count} visible)",
                                 f"use {param('device', 'cuda')} or cuda:0 … cuda:{count - 1}")
    return name


__all__ = ["COUNT", "COUNT_OR_ZERO", "DEVICE", "DIM", "MAX_COUNT", "SEED", "Device",
           "check_device", "check_dim"]
