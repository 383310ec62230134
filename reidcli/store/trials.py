"""Which protocol trials of a store a command runs (docs/formats.md, "Feature store (schema 1)":
``/protocol/trial_<k>``): the ``trials`` selection and the training rows of every trial."""
from __future__ import annotations

import numpy as np

from reidcli.errors import ParameterError
from reidcli.naming import param


def parse_trials(text: str | None, num_trials: int) -> list[int]:
    """``"all"``/None → every trial; ``"0,3"`` → [0, 3]; ParameterError naming ``trials``."""
    if text is None or str(text).strip().lower() == "all":
        return list(range(num_trials))
    try:
        chosen = sorted({int(t) for t in str(text).split(",") if t.strip()})
    except ValueError:
        raise ParameterError("trial selection", "trials", text,
                             "is not 'all' or a comma list of integers",
                             f"give e.g. {param('trials', 'all')} or {param('trials', '0,3')}"
                             ) from None
    bad = [t for t in chosen if not 0 <= t < num_trials]
    if bad or not chosen:
        raise ParameterError("trial selection", "trials", text,
                             f"is outside the protocol's trials 0..{num_trials - 1}",
                             "pick trials inside that range")
    return chosen


def store_trials(store) -> list[tuple[int, np.ndarray]]:
    """``(trial, train rows)`` of every protocol trial, or ``[(0, train split rows)]``."""
    proto = store.protocol
    if proto is not None and proto.trials:
        return [(k, np.asarray(t["train_idx"], dtype=np.int64))
                for k, t in enumerate(proto.trials)]
    return [(0, np.asarray(store.split_rows("train"), dtype=np.int64))]


__all__ = ["parse_trials", "store_trials"]
