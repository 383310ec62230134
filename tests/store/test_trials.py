"""Which trials of a store a command runs (reidcli.store.trials)."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.errors import UsageError
from reidcli.store.trials import parse_trials


def test_parse_trials():
    assert parse_trials("all", 3) == [0, 1, 2]
    assert parse_trials(None, 2) == [0, 1]
    assert parse_trials("2,0", 3) == [0, 2]
    for bad in ("3", "x", ""):
        with pytest.raises(UsageError, match="parameter trials="):
            parse_trials(bad, 3)
    assert np.array_equal(parse_trials("0", 1), [0])
