"""Training run directories, written like every other output (docs/formats.md, "Training run
directory").

A run is trained into a temporary folder beside the run directory ``OUT`` and renamed onto
``OUT`` only when it is complete; one process at a time writes a given ``OUT``:

* ``OUT.lock`` — the writer's lock (:mod:`reidcli.io`); a second writer is refused with one
  line and changes nothing.
* ``OUT.partial`` — the run being written. It holds the checkpoints, so a run that is
  interrupted after its first checkpoint stays there and ``--resume OUT`` continues it; one
  interrupted before its first checkpoint is removed.
* ``OUT.previous.partial`` — while a finished run replaces an older one (``--force``,
  ``--resume`` of a complete run): the old run is moved aside, the new one renamed into
  place, the old one's other files (a store extracted into the run directory, a plot) moved
  into the new one, and only then is the old run deleted. A writer that finds this folder
  (a process killed inside those renames) completes or undoes the swap first.
* ``OUT.interrupted.partial`` — an interrupted run set aside by ``--force``; deleted when the
  replacement is complete, put back if it fails.

A folder is a run directory when its ``config.json`` carries ``"format": "reidcli.run"``
(or, written by an older version, the keys ``method``, ``config``, ``provenance`` next to a
``checkpoint.pt`` or ``model.pt``); any other non-empty folder is never written into, nor
deleted. ``"status"`` is ``"running"`` while the run is written and ``"complete"`` once it
is renamed into place.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

from reidcli import io
from reidcli.errors import InputFileError, OutputError, OutputExistsError, UsageError
from reidcli.naming import param

RUN_FORMAT = "reidcli.run"
#: the files a training run writes (other files in a run directory are the user's)
RUN_FILES = ("config.json", "metrics.csv", "checkpoint.pt", "model.pt", "train_records.csv",
             "model_best.pt")
_LEGACY_KEYS = ("method", "config", "provenance")


def run_path(out: str | os.PathLike) -> Path:
    """``out`` as given, or absolute when it has no name of its own (``.``, ``..``)."""
    path = Path(out)
    return path if path.name not in ("", ".", "..") else Path(os.path.abspath(path))


def partial_dir(out: Path) -> Path:
    """``runs/x`` → ``runs/x.partial``: where the run of ``out`` is written."""
    out = run_path(out)
    return out.with_name(out.name + ".partial")


def previous_dir(out: Path) -> Path:
    out = run_path(out)
    return out.with_name(out.name + ".previous.partial")


def interrupted_dir(out: Path) -> Path:
    out = run_path(out)
    return out.with_name(out.name + ".interrupted.partial")


def read_run_config(folder: Path) -> dict | None:
    """``folder/config.json`` of a run directory, or None when ``folder`` is not one."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(config, dict):
        return None
    if config.get("format") == RUN_FORMAT:
        return config
    legacy = all(k in config for k in _LEGACY_KEYS) and any(
        (folder / name).is_file() for name in ("checkpoint.pt", "model.pt"))
    return config if legacy else None


def is_run_dir(folder: Path) -> bool:
    return folder.is_dir() and read_run_config(folder) is not None


def resumable(folder: Path) -> bool:
    """A run directory (or partial run) holding a checkpoint to continue from."""
    return folder.is_dir() and (folder / "checkpoint.pt").exists() and is_run_dir(folder)


def resume_source(out: Path) -> Path | None:
    """The folder a ``--resume out`` continues: the interrupted ``out.partial``, else ``out``
    itself when it is a run directory with a checkpoint (read-only; any rank may call it)."""
    for folder in (partial_dir(out), run_path(out)):
        if resumable(folder):
            return folder
    return None


def _entries(folder: Path) -> list[str]:
    try:
        return sorted(p.name for p in folder.iterdir())
    except OSError:
        return []


def _remove_tree(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


class RunDirectory:
    """The run directory ``out`` while one training run writes it (main process only).

    ``RunDirectory(out, force=, resume=)`` checks ``out``, takes its lock, repairs a swap that
    a killed process left, and prepares :attr:`work`, the folder every file of the run is
    written to; :attr:`source` is the folder to resume from (None for a fresh run). Call
    :meth:`checkpointed` after each checkpoint, :meth:`commit` when the run is complete
    (renames it onto ``out``), :meth:`abort` on failure (removes what is not resumable).
    """

    def __init__(self, out: str | os.PathLike, *, force: bool = False, resume: bool = False):
        self.final = run_path(out)
        self.what = f"run directory {self.final}"
        self.work = partial_dir(self.final)
        self.source: Path | None = None
        self._lock: io.OutputLock | None = None
        self._created = False          # self.work made by this process
        self._saved = False            # a checkpoint written to self.work by this process
        self._set_aside: Path | None = None
        self._copy_from: Path | None = None
        if self.final.exists() and not self.final.is_dir():
            raise UsageError(f"{param('out')} {self.final} is a file",
                             "give a folder path for the run directory")
        parent = self.final.parent if str(self.final.parent) else Path(".")
        if resume and not parent.is_dir():
            raise InputFileError(f"{self.what} has no checkpoint.pt to resume from (no such "
                                 "folder)", "give the run directory of an interrupted training "
                                 "run")
        with io.output_errors(self.what):
            if parent.exists() and not parent.is_dir():
                raise UsageError(f"{self.what}: {parent} is a file, not a folder",
                                 f"choose another {param('out')}")
            parent.mkdir(parents=True, exist_ok=True)
            if not os.access(parent, os.W_OK | os.X_OK):
                raise OutputError(f"{self.what}: folder {parent} is not writable",
                                     "choose a folder you can write to")
            self._lock = io.lock_output(self.final, self.what)
        try:
            with io.output_errors(self.what):
                self._repair_swap()
                self._check_final()
                if resume:
                    self._prepare_resume()
                else:
                    self._prepare_fresh(force)
        except BaseException:
            self.abort()
            raise

    # -- set-up ---------------------------------------------------------------------------
    def _repair_swap(self) -> None:
        """Finish (or undo) a replacement that a killed process left half done."""
        previous = previous_dir(self.final)
        if not previous.exists():
            return
        if not self.final.exists():
            done = read_run_config(self.work) or {}
            if done.get("status") == "complete":          # the new run was complete: finish
                os.replace(self.work, self.final)
            else:                                         # undo: the old run back in place
                os.replace(previous, self.final)
                io.fsync_dir(self.final.parent)
                return
        self._carry_over(previous)
        _remove_tree(previous)
        io.fsync_dir(self.final.parent)

    def _check_final(self) -> None:
        config = self.final / "config.json"
        if config.is_file() and read_run_config(self.final) is None and any(
                (self.final / n).is_file() for n in ("checkpoint.pt", "model.pt")):
            raise InputFileError(f"{config} is damaged or not a run's config, so {self.final} "
                                 "is not taken for a training run",
                                 "restore config.json, or move the folder away and train "
                                 "again")
        if self.final.is_dir() and _entries(self.final) and not is_run_dir(self.final):
            shown = ", ".join(_entries(self.final)[:3])
            raise UsageError(f"{param('out')} {self.final} is a folder that is not a reidcli "
                             f"training run (it holds {shown}"
                             f"{', …' if len(_entries(self.final)) > 3 else ''})",
                             f"choose another {param('out')}; a training run never writes "
                             "into or deletes a folder it did not create")

    def _prepare_fresh(self, force: bool) -> None:
        if is_run_dir(self.final) and not force:
            raise OutputExistsError(f"{self.what} already holds a training run",
                                    f"start over ({param('force')}) or continue it "
                                    f"({param('resume')})")
        if resumable(self.work):
            if not force:
                raise OutputExistsError(f"{self.what} has an interrupted training run "
                                        f"({self.work.name})",
                                        f"start over ({param('force')}) or continue it "
                                        f"({param('resume')})")
            aside = interrupted_dir(self.final)
            _remove_tree(aside)
            os.replace(self.work, aside)
            self._set_aside = aside
        elif self.work.exists():                       # killed before its first checkpoint
            _remove_tree(self.work)
        self._make_work()

    def _prepare_resume(self) -> None:
        if resumable(self.work):
            self.source = self.work                    # continue the interrupted run in place
            return
        if self.work.exists():
            _remove_tree(self.work)
        if not resumable(self.final):
            raise InputFileError(f"{self.what} has no checkpoint.pt to resume from",
                                 "give the run directory of an interrupted training run")
        self.source = self.final                       # copied into work by copy_source()
        self._copy_from = self.final

    def copy_source(self) -> None:
        """Copy a complete run's files into :attr:`work` before continuing it there (call
        after the checkpoint was checked: a refused resume writes nothing)."""
        if self._copy_from is None:
            return
        with io.output_errors(self.what):
            self._make_work()
            for name in RUN_FILES:
                if name != "model.pt" and (self._copy_from / name).is_file():
                    shutil.copy2(self._copy_from / name, self.work / name)
        self._copy_from = None

    def _make_work(self) -> None:
        self.work.mkdir()
        self._created = True
        io.register_temp(self.work)        # an interrupt before the first checkpoint: removed

    # -- progress -------------------------------------------------------------------------
    def checkpointed(self) -> None:
        """A checkpoint is in :attr:`work`: from now on an interrupted run is kept there
        (resumable), no longer removed."""
        self._saved = True
        io.unregister_temp(self.work)

    @property
    def kept(self) -> bool:
        """After :meth:`abort`: the interrupted run stays resumable in :attr:`work`."""
        return self._saved and self.work.is_dir()

    def commit(self) -> Path:
        """Rename the complete run onto ``out`` (an older run there is replaced only now, its
        other files carried over); release the lock."""
        with io.output_errors(self.what):
            io.unregister_temp(self.work)
            io.fsync_dir(self.work)
            parent = self.final.parent if str(self.final.parent) else Path(".")
            if self.final.exists():
                previous = previous_dir(self.final)
                _remove_tree(previous)
                os.replace(self.final, previous)
                os.replace(self.work, self.final)
                io.fsync_dir(parent)
                self._carry_over(previous)
                _remove_tree(previous)
            else:
                os.replace(self.work, self.final)
                io.fsync_dir(parent)
            if self._set_aside is not None:
                _remove_tree(self._set_aside)
                self._set_aside = None
        self._release()
        return self.final

    def _carry_over(self, previous: Path) -> None:
        """Move the entries of the replaced run that a run does not write (the user's files)
        into the new run directory."""
        for name in _entries(previous):
            if name not in RUN_FILES and not (self.final / name).exists():
                os.replace(previous / name, self.final / name)

    def abort(self) -> None:
        """After a failure: remove :attr:`work` unless it holds a checkpoint to resume from
        (then it stays, and ``--resume`` continues it); put a set-aside interrupted run back;
        release the lock."""
        try:
            if self._created and not self._saved:
                io.unregister_temp(self.work)
                with contextlib.suppress(OSError):
                    _remove_tree(self.work)
                if self._set_aside is not None and not self.work.exists():
                    with contextlib.suppress(OSError):
                        os.replace(self._set_aside, self.work)
                    self._set_aside = None
        finally:
            self._release()

    def _release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()


__all__ = ["RunDirectory", "RUN_FILES", "RUN_FORMAT", "read_run_config", "is_run_dir",
           "resumable", "resume_source", "partial_dir"]
