"""Atomic outputs: write ``<out>.partial`` and ``os.replace`` it at the end.

A crash or Ctrl-C never leaves a half-written file at the output path. Existing outputs are
refused unless ``force=True``.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

from reidcli.errors import OutputExistsError, UsageError
from reidcli.naming import param

PARTIAL_SUFFIX = ".partial"


def partial_path(path: str | os.PathLike) -> Path:
    """``x.h5`` → ``x.h5.partial`` (same folder, so the final rename is atomic)."""
    path = Path(path)
    return path.with_name(path.name + PARTIAL_SUFFIX)


def check_output(path: str | os.PathLike, force: bool = False, option: str = "out") -> Path:
    """Validate an output path: parent folder exists and the file is absent unless ``force``.

    ``option`` is the parameter that names the output (``out``); messages name it with
    :func:`reidcli.naming.param` (the flag under the CLI)."""
    path = Path(path)
    what = f"{param(option)} {path}"
    if path.exists() and not force:
        raise OutputExistsError(f"{what} already exists", f"allow overwriting ({param('force')})")
    if path.exists() and path.is_dir() and not path.suffix == "":
        raise UsageError(f"{what} is a folder", "give a file path")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{what}: folder {parent} does not exist", "create it first")
    return path


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, force: bool = False,
                  option: str = "out") -> Iterator[Path]:
    """Yield a temporary path; on success move it onto ``path``, on any error remove it.

    Works for files and folders (a folder is replaced whole).
    """
    final = check_output(path, force=force, option=option)
    tmp = partial_path(final)
    _remove(tmp)
    try:
        yield tmp
    except BaseException:
        _remove(tmp)
        raise
    if not tmp.exists():
        raise RuntimeError(f"atomic_output: nothing was written to {tmp}")
    if final.exists() and final.is_dir() and not final.is_symlink():
        shutil.rmtree(final)
    os.replace(tmp, final)


def write_json_atomic(path: str | os.PathLike, obj: Any, force: bool = True,
                      option: str = "json") -> Path:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_output(path, force=force, option=option) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, default=_json_default) + "\n")
    return Path(path)


def _json_default(obj: Any) -> Any:
    import numpy as np
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
