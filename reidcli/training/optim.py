"""Several optimisers stepped as one (DG-VAE: Adam for the networks, SGD for D^C)."""
from __future__ import annotations

from typing import Any

import torch


class OptimizerGroup:
    """``optimizers`` behaving as one for the training engine and ``GradScaler``.

    ``param_groups`` lists every optimiser's groups (the same dicts, so setting ``lr`` on
    them reaches the optimisers); ``state_dict()`` / ``load_state_dict()`` keep one entry
    per optimiser, in order.
    """

    def __init__(self, *optimizers: torch.optim.Optimizer):
        self.optimizers = [o for o in optimizers if o is not None]
        # GradScaler keys its per-optimiser state by id and reads .state for inf checks
        self.state: dict = {}

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [g for o in self.optimizers for g in o.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.optimizers:
            o.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None) -> None:
        for o in self.optimizers:
            o.step()

    def state_dict(self) -> dict[str, Any]:
        return {"optimizers": [o.state_dict() for o in self.optimizers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("optimizers", [])
        if len(saved) != len(self.optimizers):
            raise ValueError(f"checkpoint holds {len(saved)} optimiser states, the run "
                             f"uses {len(self.optimizers)}")
        for o, s in zip(self.optimizers, saved):
            o.load_state_dict(s)


__all__ = ["OptimizerGroup"]
