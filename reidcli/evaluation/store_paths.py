"""The store paths of ``reid eval --store`` (repeated, or quoted glob patterns), without
importing the evaluation engine (the command starts hashing them for provenance first)."""
from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any, Sequence

from reidcli.errors import UsageError
from reidcli.naming import param


def expand_store_patterns(patterns: Sequence[str | Path]) -> list[Path]:
    """Store paths of ``patterns`` in order: an existing path or one without glob characters
    is kept as is; a glob pattern (``runs/regdb_t*/store.h5``) gives its matches in sorted
    order. A pattern matching nothing, or one store named twice, is an error."""
    stores: list[Path] = []
    for pattern in patterns:
        text = str(pattern)
        if Path(text).exists() or not glob.has_magic(text):
            stores.append(Path(text))
            continue
        matches = sorted(glob.glob(text))
        if not matches:
            raise UsageError(f"{param('store', repr(text))} matches no file",
                             "check the pattern (quote it so that reid expands it)")
        stores.extend(Path(m) for m in matches)
    seen: dict[Any, Path] = {}
    for path in stores:
        key = file_key(path)
        if key in seen:
            also = "the same file as" if Path(seen[key]).resolve() != path.resolve() \
                else "also as"
            raise UsageError(f"store {path} is given twice ({also} {seen[key]})",
                             f"give each store once ({param('store')}); a second name of one "
                             "file (hard link, symlink) would count its numbers twice")
        seen[key] = path
    return stores


def file_key(path: Path) -> Any:
    """What identifies a file whatever its name: ``(device, inode)`` (hard links and
    symlinks share it); the resolved path where it cannot be read."""
    try:
        st = os.stat(path)
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        return ("path", path.resolve() if path.exists() else path)
