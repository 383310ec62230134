"""Provenance of every output: command, seed, versions and input hashes."""
from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

_HASH_CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_HASH_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def sha256_listing(folder: str | os.PathLike) -> str:
    """Hex sha256 of a folder's sorted (relative path, size) listing.

    Hashing every image of a dataset would take minutes; the listing identifies a copy.
    """
    folder = Path(folder)
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*"), key=lambda q: str(q.relative_to(folder)).encode()):
        if p.is_file():
            h.update(f"{p.relative_to(folder).as_posix()}\t{p.stat().st_size}\n".encode())
    return h.hexdigest()


def describe_input(path: str | os.PathLike) -> dict[str, str]:
    """``{"path", "sha256"}`` for a file, ``{"path", "listing_sha256"}`` for a folder."""
    path = Path(path)
    if path.is_dir():
        return {"path": str(path), "listing_sha256": sha256_listing(path)}
    return {"path": str(path), "sha256": sha256_file(path)}


class InputDigests:
    """:func:`describe_input` of every path, computed on a background thread from the moment
    this is made (hashing reads the files at disk / page-cache speed and releases the GIL, so
    it overlaps a command's own work), e.g. ``reid eval`` hashing its store while it scores it.
    :meth:`result` waits for the thread and returns exactly what ``[describe_input(p) for p in
    paths]`` returns, or raises what it raised."""

    def __init__(self, paths: Iterable[str | os.PathLike]):
        import threading

        self.paths = [Path(p) for p in paths]
        self._described: list[dict[str, str]] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="reid-input-digests",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._described = [describe_input(p) for p in self.paths]
        except BaseException as exc:          # re-raised by result(), in the caller's thread
            self._error = exc

    def result(self) -> list[dict[str, str]]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return [dict(d) for d in self._described]


#: the packages whose installed versions every provenance record lists
VERSIONED_PACKAGES = ("reidcli", "numpy", "scipy", "h5py", "pandas", "torch", "torchvision")


def versions() -> dict[str, str]:
    """Versions of Python, the platform, reidcli and the numeric libraries, as
    ``importlib.metadata`` gives them: the version in the package's ``NAME-VERSION.dist-info``
    folder name, else a loaded module's ``__version__``, else ``importlib.metadata`` itself
    (whose import alone costs ~10 ms a command)."""
    out = {"python": platform.python_version(), "platform": _platform()}
    installed = _dist_info_versions()
    for pkg in VERSIONED_PACKAGES:
        version = installed.get(pkg) or getattr(sys.modules.get(pkg), "__version__", None)
        if version is None:
            import importlib.metadata as md
            try:
                version = md.version(pkg)
            except md.PackageNotFoundError:
                continue
        out[pkg] = str(version)
    return out


@functools.lru_cache(maxsize=1)
def _dist_info_versions() -> dict[str, str]:
    """``{name: version}`` of the ``NAME-VERSION.dist-info`` folders on ``sys.path`` (the
    first one of a name wins, as imports find them); listed once per process."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info"):
                dist, _, version = name[:-len(".dist-info")].partition("-")
                found.setdefault(dist.lower(), version)
    return found


def _platform() -> str:
    """``platform.platform()`` without its ``uname -p`` subprocess on glibc Linux (the same
    string: system-release-machine-with-glibcX.Y)."""
    libc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    if sys.platform != "linux" or not libc or not libc.startswith("glibc "):
        return platform.platform()
    uname = os.uname()
    return f"{uname.sysname}-{uname.release}-{uname.machine}-with-{libc.replace(' ', '')}"


def make_provenance(command: str | Iterable[str] | None = None, seed: int | None = None,
                    inputs: Iterable[str | os.PathLike] | InputDigests = (),
                    model: Any = None, **extra: Any) -> dict[str, Any]:
    """Provenance record stored with every output (as JSON in an attribute).

    ``command`` defaults to the current ``sys.argv``. ``inputs``: paths, hashed here, or an
    :class:`InputDigests` started earlier (the same record, hashed while the command ran).
    """
    if command is None:
        command = [Path(sys.argv[0]).name, *sys.argv[1:]]
    if not isinstance(command, str):
        command = shlex.join(list(command))
    prov = {
        "command": command,
        "seed": seed,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "inputs": inputs.result() if isinstance(inputs, InputDigests)
        else [describe_input(p) for p in inputs],
        "model": model,
        "versions": versions(),
    }
    prov.update(extra)
    return prov


def provenance_json(prov: dict[str, Any]) -> str:
    return json.dumps(prov, sort_keys=True, default=str)


def write_header(attrs: Any, *, format: str, provenance: Mapping[str, Any] | None,
                 **fields: Any) -> None:
    """The header attributes of a reidcli HDF5 output, written into ``attrs`` (an h5py
    ``AttributeManager``): ``format``, ``created`` (UTC, seconds), ``reidcli_version``,
    ``provenance`` (JSON; made with :func:`make_provenance` when None) and ``fields`` (e.g.
    ``schema``)."""
    from reidcli import __version__

    attrs["format"] = format
    for key, value in fields.items():
        attrs[key] = value
    attrs["created"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    attrs["reidcli_version"] = __version__
    attrs["provenance"] = provenance_json(dict(provenance if provenance is not None
                                               else make_provenance()))
