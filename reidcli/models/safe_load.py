"""Read torch files without running their code: every ``torch.load`` goes through here.

A torch file is a pickle; unpickling an arbitrary one can run arbitrary code (a ``__reduce__``
that calls ``os.system``). :func:`load_torch_file` always loads with ``weights_only=True``:
only tensors, dicts, lists, tuples, strings, numbers and None are rebuilt, and a file that
needs anything else is refused with one line that says why and how to convert it (re-save
its state dict). reidcli's own ``model.pt`` / ``checkpoint.pt`` hold only such plain types.
"""
from __future__ import annotations

import os
import pickle
import re
import warnings
from pathlib import Path
from typing import Any

from reidcli.errors import InputFileError

_ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_PROTO = 0x80   # first byte of a pickle of protocol >= 2 (legacy torch.save files too)
_GLOBAL_RE = re.compile(r"GLOBAL ([A-Za-z_][\w.]*)")

#: how to convert a file that needs pickle, said in every refusal
CONVERT = ("if you trust the file, re-save only its weights where it was made: "
           "torch.save(model.state_dict(), PATH)")


def _unsafe_global(message: str) -> str | None:
    """The first global torch's weights-only unpickler refused, if its message names one."""
    match = _GLOBAL_RE.search(message)
    return match.group(1) if match else None


def load_torch_file(path: str | os.PathLike, what: str, map_location: Any = "cpu") -> Any:
    """The object saved in the torch file ``path``, loaded with ``weights_only=True``.

    ``what`` names the file's role in messages (``"checkpoint"``, ``"initial weights"``,
    ``"model"``). Raises :class:`InputFileError` (one line) for a missing file, a folder, an
    empty, truncated or non-torch file, and a file that needs pickle to load (naming the first
    global it would have to import, when torch says which). Never unpickles arbitrary objects.
    """
    file = Path(path)
    if not file.exists():
        raise InputFileError(f"{what} {file}: no such file", "check the path")
    if file.is_dir():
        raise InputFileError(f"{what} {file} is a directory, not a torch file",
                             "give the file inside it")
    try:
        with open(file, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise InputFileError(f"{what} {file} cannot be read ({exc.strerror or exc})",
                             "check its permissions") from None
    if not head:
        raise InputFileError(f"{what} {file} is empty", "give a file written by torch.save")
    is_zip = head.startswith(_ZIP_MAGIC)
    if not is_zip and head[0] != _PICKLE_PROTO:
        raise InputFileError(f"{what} {file} is not a torch file", "give a file written by "
                             "torch.save")
    import torch

    try:
        with warnings.catch_warnings():          # torch warns about the pickle protocol
            warnings.simplefilter("ignore")
            return torch.load(file, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        text = str(exc)
        name = _unsafe_global(text)
        if name is not None:
            raise InputFileError(f"{what} {file} needs pickle to load (it holds {name}) and "
                                 "unpickling can run arbitrary code, so it is refused",
                                 CONVERT) from None
        if is_zip:
            raise InputFileError(f"{what} {file} is damaged (its pickle cannot be read)",
                                 "write it again with torch.save") from None
        raise InputFileError(f"{what} {file} is a plain pickle, not a torch file, and "
                             "unpickling can run arbitrary code, so it is refused",
                             CONVERT) from None
    except (RuntimeError, EOFError, ValueError, OSError, KeyError, IndexError) as exc:
        detail = "truncated or damaged" if is_zip else "truncated, damaged or not a torch file"
        raise InputFileError(f"{what} {file} is {detail} ({exc.__class__.__name__})",
                             "write it again with torch.save") from None


__all__ = ["load_torch_file", "CONVERT"]
