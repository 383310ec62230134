"""Learning-rate schedules stepped per epoch."""
from __future__ import annotations

from typing import Sequence


def step_factor(epoch: int, steps: Sequence[int], gamma: float = 0.1) -> float:
    """γ^(number of steps ≤ epoch): PCB's ×0.1 from epoch 40 (docs/methods/pcb.md), BoT's 40/70."""
    return float(gamma) ** sum(1 for s in steps if epoch >= int(s))


def warmup_step_factor(epoch: int, steps: Sequence[int], gamma: float = 0.1,
                       warmup_epochs: int = 0, warmup_factor: float = 0.1) -> float:
    """BoT: linear warm-up from ``warmup_factor`` at epoch 0 to 1 at ``warmup_epochs``, then
    steps (docs/methods/bot.md: factor·(1−a) + a with a = epoch / warmup_epochs)."""
    factor = step_factor(epoch, steps, gamma)
    if warmup_epochs > 0 and epoch < warmup_epochs:
        a = epoch / warmup_epochs
        factor *= warmup_factor * (1.0 - a) + a
    return factor


__all__ = ["step_factor", "warmup_step_factor"]
