"""What ``--resume`` checks before it continues a run: the checkpoint is one, of the same
method, on the same data, and the options given again either match the recorded ones or are
among the few that may change (:data:`RESUME_CHANGES`, applied and recorded).

The data a run trained on is recorded as ``{"root": absolute data root, "images": N,
"records_sha256": digest of train_records.csv}`` in ``config.json`` and in every checkpoint;
a resumed run loads its records from the recorded root (not the working directory's) and
refuses when they differ.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Mapping

from reidcli.errors import InputFileError, UsageError
from reidcli.naming import param
from reidcli.training.config import TrainConfig, validate_config

#: options that may differ when a run is resumed: the length of the run, logging and
#: checkpoint intervals, and where it runs. Everything else is the run's recorded value.
RESUME_CHANGES = ("epochs", "max_iters", "log_every", "checkpoint_every", "device", "workers")
_CHECKPOINT_KEYS = ("config", "epoch", "iteration", "model_state", "optimizer_state", "spec")


def load_checkpoint(folder: Path) -> dict[str, Any]:
    """``folder/checkpoint.pt`` loaded with ``weights_only=True`` and checked to be a
    training checkpoint (not a model file, not damaged) — one-line InputFileError else."""
    from reidcli.models.checkpoint import MODEL_FORMAT
    from reidcli.models.safe_load import load_torch_file

    path = Path(folder) / "checkpoint.pt"
    payload = load_torch_file(path, "checkpoint")
    if not isinstance(payload, dict) or payload.get("format") != MODEL_FORMAT:
        raise InputFileError(f"checkpoint {path} is not a reidcli training checkpoint",
                             "resume only run directories written by reid train")
    missing = [k for k in _CHECKPOINT_KEYS if k not in payload]
    if missing:
        what = "a model file, not a training checkpoint" if "optimizer_state" in missing \
            else f"incomplete (no {', '.join(missing)})"
        raise InputFileError(f"checkpoint {path} is {what}",
                             "resume from the checkpoint.pt that reid train wrote, or start "
                             f"over ({param('force')})")
    if not isinstance(payload["config"], dict) or not isinstance(payload["epoch"], int) \
            or not isinstance(payload["iteration"], int):
        raise InputFileError(f"checkpoint {path} is damaged (its config or epoch is missing)",
                             f"start over ({param('force')})")
    return payload


def _shown(value: Any) -> str:
    """A value as typed on the command line (lists comma-separated)."""
    value = _plain(value)
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def resumed_config(cfg: TrainConfig, checkpoint: Mapping[str, Any], run: Path,
                   given: Mapping[str, Any] | None) -> tuple[TrainConfig, dict[str, list]]:
    """The config a resumed run continues with, and the changes applied
    (``{name: [recorded, new]}``).

    ``cfg`` is the config of the resuming call (its method must be the run's; its device and
    workers are used); ``given`` holds the options given again (None: not given). A given
    option that differs from the recorded value is refused unless it is in
    :data:`RESUME_CHANGES`."""
    try:
        saved = TrainConfig.from_dict(checkpoint["config"])
    except (TypeError, ValueError) as exc:
        raise InputFileError(f"checkpoint {run / 'checkpoint.pt'} has a damaged config "
                             f"({exc})", f"start over ({param('force')})") from None
    if saved.method != cfg.method:
        raise UsageError(f"run directory {run} holds a {saved.method} run, not {cfg.method}",
                         f"resume it with reid train {saved.method}")
    recorded = saved.as_dict()
    changes = _resume_changes(recorded, given)
    if "epochs" in changes:
        _check_more_epochs(checkpoint, run, changes["epochs"][1])
    for name, (_, new) in changes.items():
        setattr(saved, name, new)
    saved.device, saved.workers = cfg.device, cfg.workers
    validate_config(saved)
    return saved, changes


def _resume_changes(recorded: Mapping[str, Any],
                    given: Mapping[str, Any] | None) -> dict[str, list]:
    """``{name: [recorded, new]}`` of the given options that differ from the recorded ones;
    UsageError naming those that differ but may not change (:data:`RESUME_CHANGES`)."""
    changes: dict[str, list] = {}
    refused: list[str] = []
    for name, value in (given or {}).items():
        if value is None or name in ("root", "method") or name not in recorded:
            continue
        old, new = _plain(recorded[name]), _plain(value)
        if old == new:
            continue
        if name in RESUME_CHANGES:
            changes[name] = [old, new]
        else:
            refused.append(name)
    if refused:
        shown = ", ".join(param(n, _shown(given[n])) for n in refused)
        was = ", ".join(f"{n}={_shown(recorded[n])}" for n in refused)
        raise UsageError(f"{shown} differ{'s' if len(refused) == 1 else ''} from the resumed "
                         f"run's recorded options ({was})",
                         "a resumed run keeps its options; drop "
                         f"{'it' if len(refused) == 1 else 'them'} (only "
                         f"{', '.join(param(n) for n in RESUME_CHANGES)} may change) or start "
                         f"a new run in another {param('out')}")
    return changes


def _check_more_epochs(checkpoint: Mapping[str, Any], run: Path, epochs: Any) -> None:
    """UsageError unless a run resumed with ``epochs`` can continue: still in its first
    phase and not past that many epochs."""
    done = int(checkpoint["epoch"]) + 1
    if int(checkpoint.get("phase", 0)) != 0 or int(epochs) < done:
        raise UsageError(f"{param('epochs', epochs)} cannot continue run "
                         f"directory {run}: it has done {done} epochs"
                         + (" and left its first phase" if checkpoint.get("phase") else ""),
                         f"give at least {param('epochs', done)}, or start a new run")


def data_root_of(root: str | os.PathLike | None) -> str:
    """The absolute data root a run reads (``root``, else $REIDCLI_DATA, else ./data)."""
    from reidcli.data.registry import data_root

    return os.path.abspath(data_root(root))


def records_digest(records, labels, root: str) -> str:
    """sha256 of the training rows (image path relative to the data ``root``, pid, camid,
    label), so the same data under the same root gives the same digest whether the root was
    given as a relative or an absolute path."""
    digest = hashlib.sha256()
    for path, pid, camid, label in zip(records["path"], records["pid"], records["camid"],
                                       labels):
        rel = os.path.relpath(os.path.abspath(str(path)), root)
        digest.update(f"{rel}\t{int(pid)}\t{int(camid)}\t{int(label)}\n".encode("utf-8"))
    return digest.hexdigest()


def check_data(recorded: Mapping[str, Any] | None, given_root: str | None, run: Path) -> None:
    """Refuse a ``root`` given with ``--resume`` that is not the run's recorded one."""
    if not recorded or given_root is None:
        return
    if data_root_of(given_root) != recorded.get("root"):
        raise UsageError(f"{param('root', given_root)} is not the data root run directory "
                         f"{run} trained on ({recorded.get('root')})",
                         f"drop {param('root')} (a resumed run reads its recorded root)")


def check_records(recorded: Mapping[str, Any] | None, images: int, digest: str,
                  run: Path) -> None:
    """Refuse to continue on training records that differ from the recorded ones."""
    if not recorded or not recorded.get("records_sha256"):
        return
    if digest != recorded["records_sha256"]:
        count = "" if images == recorded.get("images") else \
            f": {images} images now, {recorded.get('images')} recorded"
        raise UsageError(f"the training data under {recorded.get('root')} is not what run "
                         f"directory {run} trained on (its records changed{count})",
                         "restore the dataset the run was trained on, or start a new run")


__all__ = ["RESUME_CHANGES", "load_checkpoint", "resumed_config", "data_root_of",
           "records_digest", "check_data", "check_records"]
