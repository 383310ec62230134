"""Atomic outputs: a file is written to a temporary path and renamed onto the output only when
it is complete, durable and verified.

Rules every output follows (docs/formats.md "Outputs"):

* **Checked up front** (:func:`check_output`): the folder exists and is writable, nothing is
  at the path unless ``force``, a *folder* at a file output path is refused even with
  ``force`` (a directory is never deleted to make room for a file), and an output that
  resolves to one of the command's inputs (same resolved path, or same inode/device) is
  refused even with ``force``.
* **One writer per output.** Before the work starts the writer takes an exclusive,
  non-blocking lock on ``<out>.lock`` (same folder; :func:`lock_output`, through the portable
  ``filelock`` package: ``flock`` on Linux/macOS, ``msvcrt.locking`` on Windows); a second
  process writing the same output is refused with one line
  (:class:`~reidcli.errors.OutputError`) instead of sharing the temporary file. The lock file
  is removed when the writer finishes, fails or is interrupted; a lock left by a killed
  process is released by the operating system, so a stale ``<out>.lock`` never blocks
  anyone. Because the lock makes the writer exclusive, its temporary file is the fixed name
  ``<out>.partial``; a leftover from a killed writer (readers refuse it: ``complete`` is
  false) is removed by the next writer holding the lock.
* **Complete means durable.** On success the temporary file is flushed and ``fsync``-ed, an
  optional ``verify(tmp)`` callback re-opens it (HDF5: format attribute and top-level
  groups; JSON: parses), then it is renamed onto the output and the folder is ``fsync``-ed.
* **Failures leave nothing.** Any error — including one raised while closing an HDF5 file —
  removes the temporary file and leaves the output path untouched. ``ENOSPC``/``EDQUOT``
  anywhere becomes one line naming "disk full".
* **Interrupts leave nothing.** Live temporary and lock paths are kept in a registry;
  :func:`cleanup_temp_files` (called by the ``reid`` command on SIGINT/SIGTERM and at exit)
  removes them.

Folders that are outputs (the synthetic dataset tree) use the separate :func:`atomic_folder`.
"""
from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from reidcli.errors import OutputError, OutputExistsError, ReidError, UsageError
from reidcli.naming import param

PARTIAL_SUFFIX = ".partial"
LOCK_SUFFIX = ".lock"
_DISK_FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_DISK_FULL_TEXTS = ("No space left on device", "Disk quota exceeded",
                    *(f"errno = {n}," for n in sorted(_DISK_FULL_ERRNOS)))
_READ_ONLY_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}

#: temporary and lock paths this process owns right now (removed on interrupt/exit)
_LIVE: dict[Path, None] = {}


def partial_path(path: str | os.PathLike) -> Path:
    """``x.h5`` → ``x.h5.partial`` (same folder, so the final rename is atomic)."""
    path = Path(path)
    return path.with_name(path.name + PARTIAL_SUFFIX)


def lock_path(path: str | os.PathLike) -> Path:
    """``x.h5`` → ``x.h5.lock``: the file a writer of ``x.h5`` holds its lock on."""
    path = Path(path)
    return path.with_name(path.name + LOCK_SUFFIX)


# -- temp-file registry ------------------------------------------------------------------------
def register_temp(path: str | os.PathLike) -> None:
    """Remember a temporary path to remove if the process is interrupted."""
    _LIVE[Path(path)] = None


def unregister_temp(path: str | os.PathLike) -> None:
    _LIVE.pop(Path(path), None)


def cleanup_temp_files() -> None:
    """Remove every registered temporary and lock path (interrupt or exit)."""
    for path in list(_LIVE):
        with contextlib.suppress(OSError):
            _remove(path)
        _LIVE.pop(path, None)


atexit.register(cleanup_temp_files)

#: SIGINT/SIGTERM received by the ``reid`` command (noted by its handlers): a KeyboardInterrupt
#: raised inside a C-level destructor/callback (h5py) can be swallowed, the note cannot
_SIGNALS: list[int] = []


def note_signal(signum: int) -> None:
    """Record a received SIGINT/SIGTERM (called by the command's signal handlers)."""
    _SIGNALS.append(int(signum))


def clear_signals() -> None:
    _SIGNALS.clear()


def raise_if_signalled() -> None:
    """Raise KeyboardInterrupt when a signal was received but its exception got lost; no
    output is committed after an interrupt."""
    if _SIGNALS:
        raise KeyboardInterrupt(f"signal {_SIGNALS[-1]}")


#: errors raised where Python cannot propagate them (h5py closes a dataset in ``__dealloc__``
#: and flushes its chunk cache there: a full disk is then only "Exception ignored …")
_UNRAISABLE: list[BaseException] = []
_PREVIOUS_HOOK = None


_HDF5_CLOSE_FAILED: list[bool] = []


def note_hdf5_close_failed() -> None:
    """Record that an HDF5 file could not be closed (full disk): see hdf5_close_failed."""
    _HDF5_CLOSE_FAILED.append(True)


def hdf5_close_failed() -> bool:
    """Whether HDF5 holds a file it could not close; its exit handler may then crash, so the
    ``reid`` command leaves with ``os._exit`` after its error line."""
    return bool(_HDF5_CLOSE_FAILED)


def _unraisable_hook(args) -> None:
    exc = getattr(args, "exc_value", None)
    if exc is not None and (is_disk_full(exc) or any(p.name in str(exc) for p in list(_LIVE))):
        _UNRAISABLE.append(exc)            # reported by AtomicOutput.commit, not lost
        return
    (_PREVIOUS_HOOK or sys.__unraisablehook__)(args)


def _watch_unraisable() -> int:
    """Install the hook that keeps write errors raised in destructors; returns a mark."""
    global _PREVIOUS_HOOK
    if sys.unraisablehook is not _unraisable_hook:
        _PREVIOUS_HOOK = sys.unraisablehook
        sys.unraisablehook = _unraisable_hook
    return len(_UNRAISABLE)


# -- error translation -------------------------------------------------------------------------
def is_disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is ENOSPC/EDQUOT — also when HDF5
    reports it as text (``errno = 28``) in a RuntimeError."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS:
            return True
        text = str(exc)
        if any(t in text for t in _DISK_FULL_TEXTS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def output_error(exc: BaseException, what: str) -> ReidError | None:
    """The one-line error for a failure writing ``what`` (None: not a user-environment error,
    keep the original exception)."""
    if isinstance(exc, ReidError):
        return exc
    if is_disk_full(exc):
        note_hdf5_close_failed()           # HDF5 may hold buffers it can never write
        return OutputError(f"disk full while writing {what}; nothing was written",
                           "free space on that disk or write the output elsewhere")
    if isinstance(exc, OSError) and exc.errno in _READ_ONLY_ERRNOS:
        return OutputError(f"cannot write {what}: {exc.strerror}",
                           "choose a folder you can write to")
    return None


@contextlib.contextmanager
def output_errors(what: str) -> Iterator[None]:
    """Turn disk-full / read-only failures inside the block into one-line OutputErrors."""
    try:
        yield
    except ReidError:
        raise
    except Exception as exc:
        err = output_error(exc, what)
        if err is None:
            raise
        raise err from exc


# -- checks ------------------------------------------------------------------------------------
def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.resolve() == b.resolve():
            return True
    except OSError:
        pass
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_ino, sa.st_dev) == (sb.st_ino, sb.st_dev)


def check_output(path: str | os.PathLike, force: bool = False, option: str = "out",
                 inputs: Iterable[str | os.PathLike | None] = ()) -> Path:
    """Validate a file output path before any work is done.

    Refuses (one-line errors): a folder at the path (even with ``force``), the path being
    one of ``inputs`` (even with ``force``), an existing file unless ``force``, a missing or
    non-writable parent folder. ``option`` is the parameter that names the output (``out``);
    messages name it with :func:`reidcli.naming.param` (the flag under the CLI)."""
    path = Path(path)
    what = f"{param(option)} {path}"
    if path.is_dir():
        raise UsageError(f"{what} is a folder",
                         "give a file path (an existing folder is never replaced by a file)")
    for src in inputs or ():
        if src is not None and _same_file(path, Path(src)):
            raise UsageError(f"{what} is the input {src}",
                             "write the output to another path (the input would be replaced)")
    _check_replaceable(path, what, force)
    return path


def _check_replaceable(path: Path, what: str, force: bool) -> None:
    """An existing ``path`` needs ``force``; its folder must exist and be writable."""
    if path.exists() and not force:
        raise OutputExistsError(f"{what} already exists", f"allow overwriting ({param('force')})")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{what}: folder {parent} does not exist", "create it first")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{what}: folder {parent} is not writable",
                          "choose a folder you can write to")


# -- primitives ----------------------------------------------------------------------------------
def _remove(path: Path) -> None:
    """Remove a file (or, for the folder API only, a folder tree)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _remove_file(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def fsync_file(path: str | os.PathLike) -> None:
    """Flush a written file's data to the disk."""
    # Windows flushes only through a handle opened for writing
    fd = os.open(path, os.O_RDWR if os.name == "nt" else os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a rename in folder ``path`` durable (no-op where folders cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EBADF):     # file systems without folder fsync
            return
        raise
    finally:
        os.close(fd)


class OutputLock:
    """The exclusive, non-blocking lock of one output: a lock held on ``<path>.lock`` through
    the ``filelock`` package (``flock`` on Linux/macOS, ``msvcrt.locking`` on Windows).

    Taken by :func:`lock_output` (raises :class:`~reidcli.errors.OutputError` at once when
    another process holds it); :meth:`release` (or leaving a ``with`` block) removes the lock
    file and releases the lock. The operating system releases the lock of a process that
    dies, so a ``<path>.lock`` left by a killed writer never blocks the next one.
    """

    def __init__(self, path: Path, lock, file: Path):
        self.path = path                    #: the output it protects
        self.file = file                    #: ``<path>.lock``
        self._lock = lock

    @property
    def held(self) -> bool:
        return self._lock is not None

    def release(self) -> None:
        """Remove the lock file, then release the lock (idempotent)."""
        lock, self._lock = self._lock, None
        if lock is None:
            return
        try:
            # removed while still held, so no other writer can hold a lock on this file:
            # one that opened it before the removal finds it unlinked and retries
            # (filelock checks the link count); Windows cannot remove an open file, and
            # filelock removes it there after the release
            with contextlib.suppress(OSError):
                self.file.unlink()
        finally:
            unregister_temp(self.file)
            lock.release(force=True)

    def __enter__(self) -> "OutputLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def lock_output(path: str | os.PathLike, what: str | None = None) -> OutputLock:
    """Take the lock of output ``path`` (a file or a folder): ``<path>.lock`` beside it.

    Non-blocking: when another process holds it, raise OutputError ("``what`` is being
    written by another process") at once. ``what`` names the output in messages (default:
    the path). Use as ``with lock_output(p): …`` or call ``.release()``; the lock path is
    registered with the interrupt clean-up (:func:`cleanup_temp_files`)."""
    from filelock import FileLock, Timeout

    final = Path(path)
    what = what or str(final)
    file = lock_path(final)
    for _ in range(20):
        lock = FileLock(str(file), timeout=0, thread_local=False)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            # a writer that is finishing removes the file while holding it: the lock taken
            # on the removed file is dropped by filelock; retry on a fresh file, refuse while
            # a live lock file is held
            if file.exists():
                raise OutputError(f"{what} is being written by another process",
                                  "wait for it to finish, or choose another output path") from None
            continue
        if file.exists():
            register_temp(file)
            return OutputLock(final, lock, file)
        lock.release(force=True)            # removed between our open and lock: retry
    raise OutputError(f"{what}: could not lock {file}", "retry")


def _acquire_lock(final: Path, what: str) -> tuple[OutputLock, Path]:
    """:func:`lock_output` as ``(lock, lock file)`` (the older internal spelling)."""
    lock = lock_output(final, what)
    return lock, lock.file


def _release_lock(lock: OutputLock | None, file: Path | None = None) -> None:
    """Release a lock taken by :func:`_acquire_lock` (``file`` is kept for old callers)."""
    if lock is not None:
        lock.release()
    elif file is not None:
        unregister_temp(file)


class AtomicOutput:
    """One atomic file output (the object behind :func:`atomic_output`, for writers that keep
    the output open across calls, e.g. :class:`reidcli.store.writer.StoreWriter`).

    Construction checks the path (:func:`check_output`), takes the lock and reserves
    :attr:`tmp`; write to ``tmp``, then call :meth:`commit` (flush, verify, rename) or
    :meth:`abort` (remove). ``verify(tmp)`` raises when the written file is not valid.
    """

    def __init__(self, path: str | os.PathLike, *, force: bool = False, option: str = "out",
                 inputs: Iterable[str | os.PathLike | None] = (),
                 verify: Callable[[Path], None] | None = None):
        self.final = check_output(path, force=force, option=option, inputs=inputs)
        self.what = f"{param(option)} {self.final}"
        self.verify = verify
        self._fd: OutputLock | None = None
        self._lock: Path | None = None
        self.tmp = partial_path(self.final)
        with output_errors(self.what):
            self._fd, self._lock = _acquire_lock(self.final, self.what)
            try:
                _remove_file(self.tmp)       # left by a killed writer; we hold the lock
            except BaseException:
                self._release()
                raise
        register_temp(self.tmp)
        self._mark = _watch_unraisable()
        self.done = False

    def raise_swallowed(self) -> None:
        """Raise a write error that was only reported in a destructor since construction."""
        lost = [e for e in _UNRAISABLE[self._mark:]
                if is_disk_full(e) or self.tmp.name in str(e)]
        if lost:
            raise lost[0]

    def _release(self) -> None:
        fd, lock, self._fd, self._lock = self._fd, self._lock, None, None
        _release_lock(fd, lock)

    def commit(self) -> Path:
        """fsync the temporary file, verify it, rename it onto the output, fsync the folder.
        On any failure nothing is left at the output path or the temporary path."""
        if self.done:
            return self.final
        replaced = False
        try:
            with output_errors(self.what):
                self.raise_swallowed()
                raise_if_signalled()
                if not self.tmp.is_file():
                    raise RuntimeError(f"atomic output: no file was written to {self.tmp}")
                fsync_file(self.tmp)
                self.raise_swallowed()
                if self.verify is not None:
                    try:
                        self.verify(self.tmp)
                    except Exception as exc:
                        if is_disk_full(exc):
                            raise
                        raise OutputError(f"{self.what} did not re-open after writing "
                                          f"({type(exc).__name__}: {exc}); nothing was written",
                                          "check the disk, then run the command again") from exc
                os.replace(self.tmp, self.final)
                replaced = True
                fsync_dir(self.final.parent)
        except BaseException:
            # after the rename the output is the complete, verified new file: an interrupt or
            # a failing folder fsync is reported, but the file stays (removing it would leave
            # nothing where the user's file was)
            if not replaced:
                self.abort()
            else:
                unregister_temp(self.tmp)
                self.done = True
                self._release()
            raise
        unregister_temp(self.tmp)
        self.done = True
        self._release()
        return self.final

    def abort(self) -> None:
        """Remove the temporary file and release the lock."""
        try:
            _remove_file(self.tmp)
        finally:
            unregister_temp(self.tmp)
            self.done = True
            self._release()


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, force: bool = False, option: str = "out", *,
                  inputs: Iterable[str | os.PathLike | None] = (),
                  verify: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """Yield a temporary file path; on success make it durable, verify it (``verify(tmp)``)
    and move it onto ``path``; on any error (or interrupt) remove it. Files only — see
    :func:`atomic_folder` for folder outputs."""
    out = AtomicOutput(path, force=force, option=option, inputs=inputs, verify=verify)
    try:
        yield out.tmp
    except BaseException as exc:
        out.abort()
        err = output_error(exc, out.what) if isinstance(exc, Exception) else None
        if err is None or err is exc:
            raise
        raise err from exc
    out.commit()


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike, *, force: bool = False,
                  option: str = "out") -> Iterator[Path]:
    """Build a folder output in ``<path>.partial`` and rename it onto ``path``.

    The explicit folder API: with ``force`` an existing folder at ``path`` is replaced whole
    (callers use it only for folders they own, e.g. a synthetic dataset tree). An existing
    *file* at ``path`` is refused."""
    final = Path(path)
    what = f"{param(option)} {final}"
    if final.exists() and not final.is_dir():
        raise UsageError(f"{what} is a file", "give a folder path")
    _check_replaceable(final, what, force)
    with output_errors(what):
        fd, lock = _acquire_lock(final, what)
    tmp = partial_path(final)
    try:
        _remove(tmp)
        register_temp(tmp)
        try:
            yield tmp
            with output_errors(what):
                if not tmp.is_dir():
                    raise RuntimeError(f"atomic_folder: nothing was written to {tmp}")
                old = None
                if final.exists():
                    old = final.with_name(f"{final.name}.{os.getpid()}.old{PARTIAL_SUFFIX}")
                    register_temp(old)
                    os.replace(final, old)
                os.replace(tmp, final)
                fsync_dir(final.parent if str(final.parent) else Path("."))
                if old is not None:
                    _remove(old)
                    unregister_temp(old)
        except BaseException as exc:
            _remove(tmp)
            err = output_error(exc, what) if isinstance(exc, Exception) else None
            if err is None or err is exc:
                raise
            raise err from exc
    finally:
        unregister_temp(tmp)
        _release_lock(fd, lock)


def write_json_atomic(path: str | os.PathLike, obj: Any, force: bool = True,
                      option: str = "json", inputs: Iterable[str | os.PathLike | None] = ()
                      ) -> Path:
    """Write ``obj`` as indented JSON, atomically (verified to parse before the rename)."""
    text = json.dumps(obj, indent=2, default=_json_default) + "\n"
    with atomic_output(path, force=force, option=option, inputs=inputs,
                       verify=verify_json) as tmp:
        write_text_durable(tmp, text)
    return Path(path)


def write_text_durable(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` and flush it (errors at close are raised, not lost)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def verify_json(path: Path) -> None:
    """The file parses as JSON."""
    json.loads(Path(path).read_text(encoding="utf-8"))


def verify_hdf5(*groups: str, format: str | None = None) -> Callable[[Path], None]:
    """A ``verify`` callback: the file opens with h5py, has a ``format`` attribute (equal to
    ``format`` when given) and the top-level ``groups``."""
    def verify(path: Path) -> None:
        import h5py

        # locking=False: a child forked while the file was open for writing (a DataLoader
        # worker) shares its HDF5 file lock; this process wrote the file, so no lock needed
        try:
            h5 = h5py.File(path, "r", locking=False)
        except TypeError:                   # h5py < 3.5
            h5 = h5py.File(path, "r")
        with h5:
            fmt = h5.attrs.get("format")
            if fmt is None:
                raise ValueError("no format attribute")
            if isinstance(fmt, bytes):
                fmt = fmt.decode()
            if format is not None and fmt != format:
                raise ValueError(f"format {fmt!r}, expected {format!r}")
            missing = [g for g in groups if g not in h5]
            if missing:
                raise ValueError(f"missing groups {', '.join(missing)}")
    return verify


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
