"""``reid train --config RUN/config.json``: the options of a recorded run, read back and
checked, to train it again (or longer) into a new run directory (docs/training.md).

Options given again override the recorded ones; everything else is the run's, so the same
config on the same data gives the same weights bit for bit on CPU."""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from reidcli.errors import InputFileError, ReidError
from reidcli.training.config import TrainConfig, config_names, make_config, method_info
from reidcli.training.run_dir import RUN_FORMAT

#: recorded fields that are not options of a new run (the method is the command; the batch of
#: a P×K method follows from P and K)
_NOT_OPTIONS = ("method",)


@dataclasses.dataclass
class RecordedRun:
    """A run's ``config.json``: its method, options (``TrainConfig`` fields) and data root."""

    path: Path
    method: str
    options: dict[str, Any]
    data_root: str | None

    def config(self, given: dict[str, Any], override_batch: bool) -> TrainConfig:
        """The recorded options ← ``given`` (None values: not given) as a checked config.
        ``override_batch``: the batch is given (P×K methods: P is then derived from it)."""
        values = dict(self.options)
        if "batch" in method_info(self.method).extras:     # derived (e.g. P × K)
            values.pop("batch_size")                   # P × K, derived
            if override_batch:
                values.pop("p")
        values.update({k: v for k, v in given.items() if v is not None})
        preset = values.pop("preset", None)
        return make_config(self.method, preset=preset, **values)


def read_recorded_run(path: str | os.PathLike) -> RecordedRun:
    """The run of ``path`` (a ``config.json`` written by ``reid train``, or its run directory),
    checked: its format, method, option names and values. One-line InputFileError naming
    the file otherwise."""
    from reidcli import registry

    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    todo = "give the config.json that reid train wrote in a run directory"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputFileError(f"{path} cannot be read ({exc.strerror or exc})", todo) from None
    except (ValueError, UnicodeDecodeError):
        raise InputFileError(f"{path} is not JSON", todo) from None
    if not isinstance(record, dict) or record.get("format") != RUN_FORMAT \
            or not isinstance(record.get("config"), dict):
        raise InputFileError(f"{path} is not the config.json of a reid train run", todo)
    options = dict(record["config"])
    method = record.get("method")
    methods = [m.name for m in registry.methods("train-net")]
    if method not in methods or options.get("method", method) != method:
        raise InputFileError(f"{path} records method {method!r}, not one reid train runs",
                             f"{todo} (methods: {', '.join(methods)})")
    known = {"method", *config_names(method)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputFileError(f"{path} records unknown option {unknown[0]!r}",
                             f"{todo} by this version of reidcli")
    for name in _NOT_OPTIONS:
        options.pop(name, None)
    if isinstance(options.get("input_size"), list):
        options["input_size"] = tuple(options["input_size"])
    data = record.get("data") if isinstance(record.get("data"), dict) else {}
    run = RecordedRun(path, method, options, data.get("root") or options.get("root"))
    try:
        run.config({}, override_batch=False)            # the recorded values, checked
    except ReidError as exc:
        raise InputFileError(f"{path} records an invalid option ({exc.what})", todo) from None
    return run


__all__ = ["RecordedRun", "read_recorded_run"]
